//! Account erasure: a job that removes every Reactions row of one user, one paced slice at a
//! time (the sweep of [`crate::jobs`]). The job's rows and its stream trigger are the
//! store's and the eraser's.

use crate::jobs::{JobId, JobStatus};

/// The sort key of a user's guard row, which names the running job: `#` sorts before every
/// digit, and no job id starts with it.
pub const ACTIVE_GUARD: &str = "#active";

/// A job as its row holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasureJob {
    pub id: JobId,
    pub status: JobStatus,
    /// Bumped by every checkpoint; a checkpoint applies only at the step it read, so a
    /// retried or duplicate slice never commits twice.
    pub step: u64,
    /// Rows removed by committed slices.
    pub reactions_erased: u64,
    /// The keys (item ids) the next slice deletes, in key order; empty: the next slice starts
    /// a sweep from the start of the user's partition.
    pub planned: Vec<String>,
}
