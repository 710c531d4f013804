//! Where an invocation left a run, and what a run is doing as it goes.

use crate::export::ReadProgress;
use crate::report::DriftReport;

/// Where an invocation left the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing to do: the latest cut is reconciled, or another invocation is comparing it.
    Idle,
    /// The export is not complete yet.
    WaitingForExport {
        cut_ms: i64,
    },
    /// The pipeline has not applied every flip up to the cut's uncertainty yet.
    WaitingForPipeline {
        cut_ms: i64,
        as_of_ms: Option<i64>,
    },
    /// Athena is still recounting the export.
    WaitingForRecount {
        cut_ms: i64,
    },
    /// The compare ran out of the invocation's time: the next goes on from where it stopped.
    Comparing {
        cut_ms: i64,
        items_done: u64,
        items_total: u64,
    },
    Reconciled(Box<DriftReport>),
}

/// What a run is doing, for a progress display (and a bench's phase timings): each step
/// reports once as it begins, the long ones again as they go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// PITR cannot serve the cut yet (its latest restorable time is behind it).
    WaitingForRestorable {
        cut_ms: i64,
        servable_at_ms: i64,
    },
    Exporting {
        cut_ms: i64,
    },
    /// The export is complete and the pipeline past the cut: it is recounted next, in the
    /// function or by Athena.
    Recounting,
    Reading(ReadProgress),
    /// The recount is done; the Counts table is scanned next.
    ReadingCounts,
    Comparing {
        items_done: u64,
        items_total: u64,
    },
    /// A cleaning pass drops subtotals before `through_ms` from the count rows: after a
    /// run, those before its cut; when no run completed for half the horizon, those before
    /// the horizon.
    Cleaning {
        through_ms: i64,
        rows_done: u64,
    },
    /// The all-time leaderboard is checked against the recount and repaired.
    RepairingLeaderboard,
    /// The likers lists are checked against the export and repaired.
    RepairingLikers,
    /// The drift report is written.
    Reporting,
    /// An operator's run found the run of an earlier cut still going and finished it first:
    /// its report.
    EarlierRunReconciled(Box<DriftReport>),
    /// An operator's run found the run of an earlier cut still going, and it was given up.
    EarlierRunGivenUp {
        cut_ms: i64,
        reason: String,
    },
}
