//! The Reactions table's rows (a reaction, its stream image, the liked-items index, the
//! pulse's probe) and the RateLimits table's token bucket.

use std::collections::BTreeMap;

use likes_core::ReactionState;
use serde::{Deserialize, Serialize};

use super::Attribute;

/// The key of a Reactions row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactionKey {
    pub user_id: String,
    pub item_id: String,
}

/// A Reactions row as the write decision reads it. The idempotency records are attributes
/// named after their key (`k#h`, `v#h`, `p#h`), so they ride in `others` with the rest.
#[derive(Debug, Clone, Deserialize)]
pub struct ReactionItem {
    pub state: ReactionState,
    pub op_id: u64,
    pub updated_at: i64,
    #[serde(flatten)]
    pub others: BTreeMap<String, Attribute>,
}

/// A reaction's image in a stream record: every attribute may be missing (moto's keys-only
/// INSERT, a REMOVE's absent new image, a probe row).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReactionImage {
    pub state: Option<ReactionState>,
    pub op_id: Option<u64>,
    pub updated_at: Option<i64>,
    pub created_at: Option<i64>,
    /// Set while the row is LIKE: when it was liked.
    pub liked_at: Option<i64>,
    /// The moderation job that wrote the row last, with its reason; a write of the user's
    /// own removes both.
    pub retraction: Option<String>,
    pub reason: Option<String>,
    /// `retracted` or `removed` (`likes_core::moderation::Cause`).
    pub cause: Option<String>,
    pub retracted_in: Option<u64>,
}

/// A row of the liked-items index (only LIKE rows carry `liked_at`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LikedRow {
    pub user_id: String,
    pub item_id: String,
    pub liked_at: i64,
}

/// A user's state on one item, as a browse page reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct StateRow {
    pub item_id: String,
    pub state: ReactionState,
}

/// A pulse probe on the Reactions table: never a reaction.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRow<'a> {
    pub user_id: &'a str,
    pub item_id: &'a str,
    pub probed_at: i64,
}

/// A user's token bucket (`likes_core::limit`): when it is full again, on its rate's clock;
/// and a moderator's suspension of their writes. A row a suspension created has no bucket.
#[derive(Debug, Clone, Deserialize)]
pub struct BucketRow {
    pub tat: Option<i64>,
    pub rate: Option<u32>,
    pub suspended: Option<super::Suspension>,
}
