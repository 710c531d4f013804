//! The one place errors become HTTP: RFC 9457 problem+json with the right status.

use lambda_http::http::header::{HeaderName, CONTENT_TYPE, ETAG, RETRY_AFTER};
use lambda_http::{Body, Response};
use likes_aws::Failure;
use likes_core::{ProblemType, ReactionState, ValidationError, WriteLimit};
use likes_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error("no authenticated user: the request carries no JWT subject claim")]
    Unauthorized,
    /// A valid token without the scope the route needs.
    #[error("this route needs a token with the {0} scope")]
    Forbidden(&'static str),
    /// Only the item's owner may read or change this; the caller is not it.
    #[error("only the item's owner may {0}")]
    NotOwner(&'static str),
    /// A dislike of an item whose namespace takes none; nothing was written.
    #[error("the namespace {0} takes no dislikes; nothing was written (LIKE and NONE are taken)")]
    DislikesDisabled(String),
    /// A moderator removed the item: nothing is written to it or read of it.
    #[error("a moderator removed this item: it takes no reactions and shows no count or likers")]
    ItemRemoved,
    /// A moderator suspended the caller's writes; nothing was written.
    #[error("a moderator suspended your reactions; nothing was written")]
    Suspended,
    #[error("the content type {0:?} is not JSON")]
    UnsupportedMediaType(String),
    /// The caller has no such resource (another user's is none of theirs either).
    #[error("{0}")]
    NotFound(&'static str),
    /// `If-Match` named a version that is no longer current.
    #[error("the reaction is at version {current}, not the one If-Match named")]
    PreconditionFailed { current: u64 },
    /// The idempotency key was used for a request to set another state.
    #[error("the idempotency key was used for a request to set {original}")]
    KeyReused { original: ReactionState },
    /// The caller blocks as many users as a user may; nothing was written.
    #[error(
        "a user blocks at most {} users; unblock one first",
        likes_core::privacy::MAX_BLOCKS
    )]
    TooManyBlocks,
    /// The caller is past the write limit; nothing was written.
    #[error(
        "writes are limited to {} a second per user, with bursts of up to {}; retry in {retry_after_s} s",
        limit.rate_per_second(),
        limit.burst()
    )]
    RateLimited {
        limit: WriteLimit,
        retry_after_s: u64,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A function deployed without a variable its endpoint needs.
    #[error("the function is not configured with {0}")]
    Config(&'static str),
}

impl ApiError {
    fn problem_type(&self) -> ProblemType {
        match self {
            Self::Validation(err) => err.problem_type(),
            Self::Unauthorized => ProblemType::Unauthorized,
            Self::Forbidden(_) | Self::NotOwner(_) => ProblemType::Forbidden,
            Self::DislikesDisabled(_) => ProblemType::DislikesDisabled,
            Self::Suspended => ProblemType::Suspended,
            Self::ItemRemoved => ProblemType::ItemRemoved,
            Self::UnsupportedMediaType(_) => ProblemType::UnsupportedMediaType,
            Self::NotFound(_) => ProblemType::NotFound,
            Self::PreconditionFailed { .. } => ProblemType::PreconditionFailed,
            Self::KeyReused { .. } => ProblemType::IdempotencyKeyReused,
            Self::TooManyBlocks => ProblemType::TooManyBlocks,
            Self::RateLimited { .. } => ProblemType::RateLimited,
            // DynamoDB throttling, a timeout or a 5xx is the service's trouble, not the
            // caller's rate, and may pass: 503. Anything final is a 500.
            Self::Store(err) if err.failure() != Failure::Final => ProblemType::Unavailable,
            Self::Store(_) | Self::Config(_) => ProblemType::Internal,
        }
    }

    /// The problem+json response. Server-side failures are logged here with their cause and
    /// answered with a generic detail: the cause is for operators, not for clients.
    pub fn into_response(self) -> Response<Body> {
        let problem = self.problem_type();
        let detail = if problem.status() >= 500 {
            tracing::error!(error = %self, "request failed");
            "The request could not be completed; it is safe to retry it with the same Idempotency-Key."
                .to_owned()
        } else {
            self.to_string()
        };
        let body = serde_json::json!({
            "type": problem.uri(),
            "title": problem.title(),
            "status": problem.status(),
            "detail": detail,
        });
        let mut response = Response::builder()
            .status(problem.status())
            .header(CONTENT_TYPE, "application/problem+json");
        match self {
            Self::PreconditionFailed { current } => {
                response = response.header(ETAG, crate::edge::etag(current));
            }
            Self::Store(err) if err.failure() != Failure::Final => {
                response = response.header(RETRY_AFTER, "1");
            }
            Self::RateLimited {
                limit,
                retry_after_s,
            } => {
                response = response
                    .header(RETRY_AFTER, retry_after_s)
                    .header(
                        HeaderName::from_static(crate::edge::RATELIMIT_POLICY),
                        limit.policy_field(),
                    )
                    .header(
                        HeaderName::from_static(crate::edge::RATELIMIT),
                        WriteLimit::exhausted_field(retry_after_s),
                    );
            }
            _ => {}
        }
        response
            .body(Body::Text(body.to_string()))
            .expect("static headers are valid")
    }
}
