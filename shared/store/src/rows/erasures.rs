//! The Erasures table's rows: jobs, the guard, and their stream images.

use likes_core::JobStatus;
use serde::{Deserialize, Serialize};

/// The key of an Erasures row: a job's id, or the guard's `#active`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureKey {
    pub user_id: String,
    pub erasure_id: String,
}

/// An erasure job (`likes_core::erasure`): its progress and the keys its next slice deletes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasureRow {
    pub user_id: String,
    pub erasure_id: String,
    pub status: JobStatus,
    pub step: u64,
    pub reactions_erased: u64,
    #[serde(default)]
    pub planned: Vec<String>,
    pub created_at: i64,
    /// Epoch seconds, for the table's TTL; set when the job is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// A user's guard row `#active`: it exists exactly while a job of theirs runs, and names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasureGuardRow {
    pub user_id: String,
    pub erasure_id: String,
    pub active_id: String,
}

/// An Erasures stream image: the guard's image, and moto's keys-only INSERT, carry no status
/// or step.
#[derive(Debug, Clone, Deserialize)]
pub struct ErasureImage {
    pub user_id: String,
    pub erasure_id: String,
    pub status: Option<JobStatus>,
    pub step: Option<u64>,
}
