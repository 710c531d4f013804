//! What every AWS adapter of Likes shares: a call that failed, kept whole (its source and
//! the operation it was) and classified the way the SDK's own retry classifier classifies
//! it, so a caller decides from [`Failure`] whether to slow down, retry, or give up.

pub mod keys;

use std::error::Error;
use std::fmt;

use aws_runtime::retries::classifiers::{THROTTLING_ERRORS, TRANSIENT_ERRORS};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// What a failed call allows its caller to do next. The SDK has already retried the call
/// within its own bounds; this is what is left when it gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The service asked to slow down (a throttled key, shard or account limit): retry later.
    Throttled,
    /// A timeout, a connection that failed, a 5xx: the same call may succeed if tried again.
    Retryable,
    /// The same call fails the same way again (access denied, no such resource, a request
    /// the service refuses): retrying does not help.
    Final,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Throttled => "throttled",
            Self::Retryable => "retryable",
            Self::Final => "final",
        })
    }
}

/// One AWS call that failed: which operation, what its caller may do, and the whole error
/// the SDK returned (or what the adapter found wrong in a successful answer).
#[derive(Debug, thiserror::Error)]
#[error("{operation} failed ({failure}): {}", DisplayErrorContext(&**.source))]
pub struct AwsError {
    operation: &'static str,
    failure: Failure,
    #[source]
    source: Box<dyn Error + Send + Sync>,
}

/// An answer the service gave that the adapter cannot use: a field AWS documents as always
/// present was absent, say.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnusableAnswer(pub String);

/// Work the service left undone after the adapter's own bounded retries (unprocessed items
/// of a batch, refused records of a put): the way AWS reports throttling inside a batch.
#[derive(Debug, thiserror::Error)]
#[error("{left} of {total} entries were still unprocessed after {attempts} attempts")]
pub struct Unprocessed {
    pub left: usize,
    pub total: usize,
    pub attempts: u32,
}

impl AwsError {
    /// The SDK's error for `operation`, classified by its error code (the SDK's own lists of
    /// throttling and transient codes), then by its HTTP status and kind of failure.
    pub fn new<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + Error + Send + Sync + 'static,
    {
        let failure = classify(&err);
        Self {
            operation,
            failure,
            source: Box::new(err),
        }
    }

    /// A batch the service kept refusing parts of: throttled.
    pub fn unprocessed(operation: &'static str, unprocessed: Unprocessed) -> Self {
        Self {
            operation,
            failure: Failure::Throttled,
            source: Box::new(unprocessed),
        }
    }

    /// An answer whose body broke off before its end (a connection that failed mid-read):
    /// retryable, as the call itself was served.
    pub fn broken_body(
        operation: &'static str,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            operation,
            failure: Failure::Retryable,
            source: Box::new(source),
        }
    }

    /// A successful call whose answer cannot be used: final, as asking again gets the same.
    pub fn unusable(operation: &'static str, what: impl Into<String>) -> Self {
        Self {
            operation,
            failure: Failure::Final,
            source: Box::new(UnusableAnswer(what.into())),
        }
    }

    /// The same failure counted as throttling: contention the adapter retried within its
    /// own bounds (transactions that kept conflicting) is the caller's cue to slow down.
    pub fn as_throttled(self) -> Self {
        Self {
            failure: Failure::Throttled,
            ..self
        }
    }

    pub fn operation(&self) -> &'static str {
        self.operation
    }

    pub fn failure(&self) -> Failure {
        self.failure
    }

    pub fn is_throttled(&self) -> bool {
        self.failure == Failure::Throttled
    }
}

fn classify<E>(err: &SdkError<E, HttpResponse>) -> Failure
where
    E: ProvideErrorMetadata,
{
    match err {
        SdkError::ServiceError(service) => {
            let code = service.err().code();
            if code.is_some_and(|code| THROTTLING_ERRORS.contains(&code)) {
                Failure::Throttled
            } else if code.is_some_and(|code| TRANSIENT_ERRORS.contains(&code))
                || service.raw().status().is_server_error()
            {
                Failure::Retryable
            } else {
                Failure::Final
            }
        }
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Failure::Retryable
        }
        // A request the SDK could not build fails the same way every time.
        _ => Failure::Final,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    /// A service error as the SDK hands it over: its code, and the HTTP status it came with.
    fn service(code: &str, status: u16) -> SdkError<ErrorMetadata, HttpResponse> {
        let err = ErrorMetadata::builder().code(code).message("m").build();
        let raw = HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::empty());
        SdkError::service_error(err, raw)
    }

    #[test]
    fn failures_are_classified_by_code_then_status() {
        let failure = |code, status| AwsError::new("Op", service(code, status)).failure();
        assert_eq!(
            failure("ProvisionedThroughputExceededException", 400),
            Failure::Throttled
        );
        assert_eq!(failure("ThrottlingException", 400), Failure::Throttled);
        assert_eq!(failure("SlowDown", 503), Failure::Throttled);
        assert_eq!(failure("LimitExceededException", 429), Failure::Throttled);
        assert_eq!(failure("RequestTimeout", 400), Failure::Retryable);
        assert_eq!(failure("InternalServerError", 500), Failure::Retryable);
        assert_eq!(failure("ServiceUnavailable", 503), Failure::Retryable);
        assert_eq!(failure("AccessDeniedException", 400), Failure::Final);
        assert_eq!(failure("ResourceNotFoundException", 400), Failure::Final);
    }

    #[test]
    fn failures_outside_the_service_are_retryable_unless_the_request_was_never_built() {
        let timeout: SdkError<ErrorMetadata, HttpResponse> =
            SdkError::timeout_error(UnusableAnswer("slow".into()));
        assert_eq!(AwsError::new("Op", timeout).failure(), Failure::Retryable);
        let unbuilt: SdkError<ErrorMetadata, HttpResponse> =
            SdkError::construction_failure(UnusableAnswer("no key".into()));
        assert_eq!(AwsError::new("Op", unbuilt).failure(), Failure::Final);
    }

    #[test]
    fn the_message_names_the_operation_the_failure_and_the_whole_cause() {
        let err = AwsError::new("PutRecords", service("ThrottlingException", 400));
        let text = err.to_string();
        assert!(
            text.starts_with("PutRecords failed (throttled): "),
            "{text}"
        );
        assert!(text.contains("ThrottlingException"), "{text}");
        assert!(err.source().is_some());
        let left = Unprocessed {
            left: 3,
            total: 25,
            attempts: 4,
        };
        let err = AwsError::unprocessed("BatchWriteItem", left);
        assert!(err.is_throttled());
        let text = err.to_string();
        assert!(
            text.starts_with("BatchWriteItem failed (throttled): 3 of 25 entries were still unprocessed after 4 attempts"),
            "{text}"
        );
    }
}
