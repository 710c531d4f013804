//! The domain core of Likes: reaction states and their transitions, validation of what
//! clients send, idempotency records, signed cursors, who sees whose likes, and problem
//! types. Pure functions,
//! no AWS types: the adapters and the HTTP edge build on this.

pub mod backoff;
pub mod clock;
pub mod config;
pub mod cursor;
pub mod erasure;
pub mod ids;
pub mod jobs;
pub mod leaderboard;
pub mod likers;
pub mod limit;
pub mod live;
pub mod moderation;
pub mod namespace;
pub mod page;
pub mod pipeline;
pub mod privacy;
pub mod problem;
pub mod reaction;
pub mod reconcile;
pub mod write;

pub use cursor::{BlocksCursor, CursorKey, LikedCursor, LikersCursor};
pub use erasure::ErasureJob;
pub use ids::{IdempotencyKey, ItemId, KeyHash, UserId};
pub use jobs::{JobId, JobStatus};
pub use limit::{Admission, WriteLimit};
pub use privacy::{BlockOutcome, LikesVisibility, PrivacySettings};
pub use problem::ProblemType;
pub use reaction::{Delta, ReactionState, Transition};
pub use write::{
    Clause, CountStatus, IdempotencyRecord, ReactionChange, ReactionRow, WriteOutcome, WriteRequest,
};

/// An optional body field that may be left out but not sent as `null`: with
/// `#[serde(default, deserialize_with = "present")]`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Input a client can correct. Every variant is a 4xx at the edge, and nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("item_id {0:?} is not 1-128 characters of [A-Za-z0-9_.:-]")]
    ItemId(String),
    #[error("namespace {0:?} is not 1-64 characters of [A-Za-z0-9_.-]")]
    Namespace(String),
    #[error("{0:?} is not a job id this service issued")]
    JobId(String),
    #[error("state {0:?} is not one of LIKE, DISLIKE, NONE")]
    UnknownState(String),
    #[error("the Idempotency-Key header is required on this endpoint")]
    MissingIdempotencyKey,
    #[error("the Idempotency-Key header must be 1-255 characters long")]
    IdempotencyKeyLength,
    #[error("the Idempotency-Key header must be printable ASCII")]
    IdempotencyKeyCharacters,
    #[error("If-Match must be one strong entity tag such as \"3\", or *")]
    IfMatch,
    #[error("the token's subject claim is not a usable user id")]
    UserId,
    #[error("user_id {0:?} is not 1-128 bytes without control characters")]
    UserIdParameter(String),
    #[error("reason must be 1-200 characters without control characters, got {0}")]
    Reason(usize),
    #[error("likes_visibility {0:?} is not one of public, private")]
    LikesVisibility(String),
    #[error("a user cannot block themselves")]
    BlockSelf,
    #[error("the cursor is not one this list issued (another user's or item's, or changed)")]
    Cursor,
    #[error("limit {0:?} is not a whole number from 1 to 100")]
    Limit(String),
    #[error("window {0:?} is not one of hour, day, week, all")]
    Window(String),
    #[error("the board over every namespace has no {0} window (day or all); name a namespace")]
    GlobalWindow(&'static str),
    #[error("the namespace {namespace} keeps no {window} board (see its leaderboard_windows)")]
    WindowNotKept {
        namespace: String,
        window: &'static str,
    },
    #[error("the request body is not valid: {0}")]
    Body(String),
    #[error("the request body is larger than {0} bytes")]
    BodyTooLarge(usize),
    #[error("item_ids must hold 1 to {max} ids, got {got}")]
    BatchSize { max: usize, got: usize },
    #[error("the cursor signing key must be at least 16 bytes")]
    WeakCursorKey,
    #[error(
        "a write limit needs a rate and a burst of at least 1, got {rate_per_second}/s and {burst}"
    )]
    WriteLimit { rate_per_second: u32, burst: u32 },
}

impl ValidationError {
    /// The problem type a client sees for this error.
    pub fn problem_type(&self) -> ProblemType {
        match self {
            Self::BodyTooLarge(_) => ProblemType::PayloadTooLarge,
            Self::WeakCursorKey | Self::WriteLimit { .. } => ProblemType::Internal,
            _ => ProblemType::Validation,
        }
    }
}
