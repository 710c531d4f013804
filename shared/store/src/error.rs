use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::types::CancellationReason;

/// A store call whose I/O failed, in terms a caller can act on. What a call came to in the
/// domain's terms (a replay, a stale version) is its `Ok` value, never one of these.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// DynamoDB throttled the request after the SDK's bounded retries: retry later.
    #[error("{operation} was throttled by DynamoDB")]
    Throttled { operation: &'static str },
    /// Any other failure of an AWS call, surfaced with its whole chain of causes.
    #[error("{operation} failed: {}", DisplayErrorContext(&**source))]
    Aws {
        operation: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored row this code cannot read: a bug or a foreign writer, never the client's fault.
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
    /// The SDK refused to build a request this code assembled: a bug, never the client's.
    #[error("could not build a request: {0}")]
    Request(String),
}

/// The error codes DynamoDB uses for "slow down". Matched on the modeled code, not on text.
const THROTTLE_CODES: [&str; 3] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
];

/// A conditional write's outcome: `Ok(true)` when it was applied, `Ok(false)` when DynamoDB
/// refused it on its condition (what the condition guards is already there), the error
/// otherwise. Matched on the modeled error code, which every operation's error shares.
pub(crate) fn condition_held<O, E, R>(
    operation: &'static str,
    result: Result<O, SdkError<E, R>>,
) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(false),
        Err(err) => Err(StoreError::aws(operation, err)),
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

impl StoreError {
    pub(crate) fn aws<E, R>(operation: &'static str, err: SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        if err
            .code()
            .is_some_and(|code| THROTTLE_CODES.contains(&code))
        {
            return Self::Throttled { operation };
        }
        Self::Aws {
            operation,
            source: Box::new(err),
        }
    }
}
