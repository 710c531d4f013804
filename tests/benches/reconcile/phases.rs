//! One reconciliation run, timed by phase from the run's own progress reports: each phase
//! lasts from the first report of its step to the first report of the next.

use std::time::{Duration, Instant};

use likes_reconcile::{DriftReport, Progress, Reconciler, Step};

/// The steps a run reports, in the order it takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Recounting,
    ReadingCounts,
    Comparing,
    RepairingLeaderboard,
    RepairingLikers,
    Cleaning,
    Reporting,
}

fn mark(progress: &Progress) -> Option<Mark> {
    match progress {
        Progress::Recounting => Some(Mark::Recounting),
        Progress::ReadingCounts => Some(Mark::ReadingCounts),
        Progress::Comparing { .. } => Some(Mark::Comparing),
        Progress::RepairingLeaderboard => Some(Mark::RepairingLeaderboard),
        Progress::RepairingLikers => Some(Mark::RepairingLikers),
        Progress::Cleaning { .. } => Some(Mark::Cleaning),
        Progress::Reporting => Some(Mark::Reporting),
        Progress::WaitingForRestorable { .. }
        | Progress::Exporting { .. }
        | Progress::Reading(_)
        | Progress::EarlierRunReconciled(_)
        | Progress::EarlierRunGivenUp { .. } => None,
    }
}

/// How long each phase of the run took.
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    /// Start of the run to the export complete and the pipeline past the cut.
    pub export_wait: Duration,
    /// Manifests and data files read from S3, every row parsed and recounted.
    pub recount: Duration,
    /// The Counts table's parallel Scan.
    pub counts_scan: Duration,
    /// Every item judged, corrections written.
    pub compare: Duration,
    /// Every all-time score row read and judged against the recount, repairs written.
    pub leaderboard: Duration,
    /// Every liked entry scanned and judged against the export, repairs written.
    pub likers: Duration,
    /// Reconciled subtotals dropped (one REMOVE update per count row that has some).
    pub cleanup: Duration,
    /// The drift report put to S3, the run marked done.
    pub report: Duration,
}

impl Phases {
    pub fn total(&self) -> Duration {
        self.export_wait + self.after_export()
    }

    /// Everything the reconciler does itself once the export is there.
    pub fn after_export(&self) -> Duration {
        self.recount
            + self.counts_scan
            + self.compare
            + self.leaderboard
            + self.likers
            + self.cleanup
            + self.report
    }
}

/// Runs reconciliation at the cut `at_ms` to the end (panics past `deadline_ms` or on
/// anything but a finished run).
pub async fn run(reconciler: &Reconciler, at_ms: i64, deadline_ms: i64) -> (DriftReport, Phases) {
    let started = Instant::now();
    let mut marks: Vec<(Mark, Instant)> = Vec::new();
    let mut record = |progress: Progress| {
        if let Some(mark) = mark(&progress) {
            if marks.last().is_none_or(|(last, _)| *last != mark) {
                marks.push((mark, Instant::now()));
            }
        }
    };
    let step = reconciler
        .run_at(Some(at_ms), true, deadline_ms, &mut record)
        .await
        .expect("the run finishes");
    let ended = Instant::now();
    let report = match step {
        Step::Reconciled(report) => *report,
        other => panic!("the run stopped at {other:?}"),
    };
    let at = |wanted: Mark| {
        marks
            .iter()
            .find(|(mark, _)| *mark == wanted)
            .map(|(_, at)| *at)
            .unwrap_or_else(|| panic!("the run never reported {wanted:?}: {marks:?}"))
    };
    let phases = Phases {
        export_wait: at(Mark::Recounting) - started,
        recount: at(Mark::ReadingCounts) - at(Mark::Recounting),
        counts_scan: at(Mark::Comparing) - at(Mark::ReadingCounts),
        compare: at(Mark::RepairingLeaderboard) - at(Mark::Comparing),
        leaderboard: at(Mark::RepairingLikers) - at(Mark::RepairingLeaderboard),
        likers: at(Mark::Reporting) - at(Mark::RepairingLikers),
        report: at(Mark::Cleaning) - at(Mark::Reporting),
        cleanup: ended - at(Mark::Cleaning),
    };
    (report, phases)
}
