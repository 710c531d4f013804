use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{BuildError, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::types::CancellationReason;
use likes_aws::{AwsError, Failure};

/// A store call whose I/O failed, in terms a caller can act on. What a call came to in the
/// domain's terms (a replay, a stale version) is its `Ok` value, never one of these.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A DynamoDB call failed after the SDK's bounded retries, classified: throttled,
    /// retryable or final.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// A stored row this code cannot read: a bug or a foreign writer, never the client's fault.
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
    /// A row that does not convert to or from its type.
    #[error("a row does not convert: {0}")]
    Row(#[from] serde_dynamo::Error),
    /// A stored id that is not one: a bug or a foreign writer.
    #[error("a stored id is not valid: {0}")]
    Id(#[from] likes_core::ValidationError),
    /// The SDK refused to build a request this code assembled: a bug, never the client's.
    #[error("could not build a request: {0}")]
    Request(#[from] BuildError),
    /// A call needs a table its store was built without: a function deployed without it.
    #[error("this store was built without the {0} table")]
    Unconfigured(&'static str),
    /// A task a call fanned its work out to panicked or was cancelled.
    #[error("a task of the call failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl StoreError {
    /// What the caller may do: only a failed AWS call can go better if tried again.
    pub fn failure(&self) -> Failure {
        match self {
            Self::Aws(err) => err.failure(),
            _ => Failure::Final,
        }
    }

    pub fn is_throttled(&self) -> bool {
        self.failure() == Failure::Throttled
    }

    pub(crate) fn aws<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        Self::Aws(AwsError::new(operation, err))
    }
}

/// A conditional write's outcome: `Ok(true)` when it was applied, `Ok(false)` when DynamoDB
/// refused it on its condition (what the condition guards is already there), the error
/// otherwise. Matched on the modeled error code, which every operation's error shares.
pub(crate) fn condition_held<O, E>(
    operation: &'static str,
    result: Result<O, SdkError<E, HttpResponse>>,
) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(false),
        Err(err) => Err(StoreError::aws(operation, err)),
    }
}

/// A shard's progress write, made on condition no other consumer moved the progress since
/// it was read (a shard has one consumer at a time): refused, it is an error the batch fails
/// on, and the retry reads the progress afresh.
pub(crate) fn progress_moved<O, E>(
    shard: &str,
    result: Result<O, SdkError<E, HttpResponse>>,
) -> Result<(), StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if condition_held("UpdateItem", result)? {
        Ok(())
    } else {
        Err(StoreError::Corrupt(format!(
            "shard {shard}'s progress moved under its consumer"
        )))
    }
}

pub(crate) type TransactionError = SdkError<TransactWriteItemsError, HttpResponse>;

/// A cancelled transaction: DynamoDB's reasons, one per action in action order, and the
/// error itself, for a caller that surfaces it.
pub(crate) type Cancelled = (Vec<CancellationReason>, TransactionError);

/// A transaction's outcome: `Ok(None)` when it committed, `Ok(Some(_))` when DynamoDB
/// cancelled it, the error for any other failure.
pub(crate) fn cancelled(
    operation: &'static str,
    result: Result<TransactWriteItemsOutput, TransactionError>,
) -> Result<Option<Cancelled>, StoreError> {
    let err = match result {
        Ok(_) => return Ok(None),
        Err(err) => err,
    };
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
            Ok(Some((cancelled.cancellation_reasons().to_vec(), err)))
        }
        _ => Err(StoreError::aws(operation, err)),
    }
}
