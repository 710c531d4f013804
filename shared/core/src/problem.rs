//! RFC 9457 problem types: every error a client can see, with its status and title.

/// One kind of problem. `type` is a relative URI reference, resolved against the API's base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemType {
    Validation,
    Unauthorized,
    /// A valid token without the scope the route needs.
    Forbidden,
    /// The user's writes are suspended by a moderator.
    Suspended,
    NotFound,
    PreconditionFailed,
    /// A moderator removed the item.
    ItemRemoved,
    PayloadTooLarge,
    UnsupportedMediaType,
    IdempotencyKeyReused,
    TooManyBlocks,
    /// A dislike of an item whose namespace takes none.
    DislikesDisabled,
    RateLimited,
    Internal,
    Unavailable,
}

impl ProblemType {
    pub fn status(self) -> u16 {
        match self {
            Self::Validation => 400,
            Self::Unauthorized => 401,
            Self::Forbidden | Self::Suspended => 403,
            Self::NotFound => 404,
            Self::PreconditionFailed => 412,
            Self::ItemRemoved => 410,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::IdempotencyKeyReused => 422,
            Self::TooManyBlocks | Self::DislikesDisabled => 409,
            Self::RateLimited => 429,
            Self::Internal => 500,
            Self::Unavailable => 503,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::Validation => "The request is not valid",
            Self::Unauthorized => "A valid bearer token is required",
            Self::Forbidden => "The token does not grant this",
            Self::Suspended => "Your reactions are suspended by a moderator",
            Self::NotFound => "No such resource of the caller",
            Self::PreconditionFailed => "The reaction changed since that version",
            Self::ItemRemoved => "The item was removed",
            Self::PayloadTooLarge => "The request body is too large",
            Self::UnsupportedMediaType => "The request body must be JSON",
            Self::IdempotencyKeyReused => "The Idempotency-Key was used for another request",
            Self::TooManyBlocks => "The caller blocks as many users as a user may",
            Self::DislikesDisabled => "This item's namespace takes no dislikes",
            Self::RateLimited => "Too many writes, slow down",
            Self::Internal => "Internal error",
            Self::Unavailable => "The service is unavailable, retry later",
        }
    }

    /// The `type` member: a stable, relative URI reference.
    pub fn uri(self) -> &'static str {
        match self {
            Self::Validation => "/problems/validation",
            Self::Unauthorized => "/problems/unauthorized",
            Self::Forbidden => "/problems/forbidden",
            Self::Suspended => "/problems/suspended",
            Self::NotFound => "/problems/not-found",
            Self::PreconditionFailed => "/problems/precondition-failed",
            Self::ItemRemoved => "/problems/item-removed",
            Self::PayloadTooLarge => "/problems/payload-too-large",
            Self::UnsupportedMediaType => "/problems/unsupported-media-type",
            Self::IdempotencyKeyReused => "/problems/idempotency-key-reused",
            Self::TooManyBlocks => "/problems/too-many-blocks",
            Self::DislikesDisabled => "/problems/dislikes-disabled",
            Self::RateLimited => "/problems/rate-limited",
            Self::Internal => "/problems/internal",
            Self::Unavailable => "/problems/unavailable",
        }
    }
}
