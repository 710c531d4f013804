//! The Moderation table's rows (PK `key`): retraction jobs, each user's guard naming their
//! running one, and actions without a job; their stream images; and the suspension a
//! moderator puts on a user's RateLimits row.

use likes_core::moderation::ModerationAction;
use likes_core::JobStatus;
use serde::{Deserialize, Serialize};

/// The key prefixes of the Moderation table.
pub const RETRACTION_PREFIX: &str = "r#";
pub const GUARD_PREFIX: &str = "u#";
pub const ACTION_PREFIX: &str = "a#";
pub const REMOVED_PREFIX: &str = "i#";

/// The key of a Moderation row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModerationKey {
    pub key: String,
}

/// A retraction job (`likes_core::moderation::RetractionJob`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RetractionRow {
    pub key: String,
    pub action: ModerationAction,
    /// Absent on an item's removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    pub reason: String,
    pub suspend: bool,
    pub by: String,
    pub created_at: i64,
    pub status: JobStatus,
    pub step: u64,
    pub reactions_retracted: u64,
    #[serde(default)]
    pub planned: Vec<String>,
    /// Epoch seconds, for the table's TTL; set when the job is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// A user's guard `u#<user>`, which exists exactly while a retraction of theirs runs, or a
/// removed item's mark `i#<item>`, kept for good: each names its job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModerationGuardRow {
    pub key: String,
    pub active_id: String,
}

/// An action that starts no job (lifting a suspension), kept for the event log and expired
/// by TTL.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionRow {
    pub key: String,
    pub action: ModerationAction,
    pub user_id: String,
    pub by: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A Moderation stream image: a job's, an action's or a guard's. The fields a guard lacks
/// are optional.
#[derive(Debug, Clone, Deserialize)]
pub struct ModerationImage {
    pub key: String,
    pub action: Option<ModerationAction>,
    pub user_id: Option<String>,
    pub by: Option<String>,
    pub created_at: Option<i64>,
    pub status: Option<JobStatus>,
    pub step: Option<u64>,
}

/// A suspension on a user's RateLimits row: who suspended them, why, when, by which job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    pub by: String,
    pub reason: String,
    pub at: i64,
    pub retraction: String,
}
