//! Operator commands against a running stack: `likes-local reconcile` runs one whole
//! reconciliation now, with a progress display, and prints its drift report.
//!
//! A stack started by `likes-local run` leaves a note of where it runs (its AWS endpoint and
//! the reconcile function's resolved environment) in `target/likes-local/stack.json`; the
//! command reads it. Against LocalStack or AWS (`AWS_ENDPOINT_URL` set and no note) the
//! reconcile function's variables come from the environment instead.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use likes_core::clock::rfc3339;
use likes_reconcile::{Progress, ReconcileConfig, Reconciler, Step};
use serde::{Deserialize, Serialize};

use crate::aws::{emulator_sdk_config, s3_client};
use crate::stack::Stack;

/// The logical id whose environment the command runs with.
const RECONCILE_FUNCTION: &str = "ReconcileFunction";
/// How long the command waits for a run to finish.
const RUN_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Where a running local stack is, for commands run beside it.
#[derive(Debug, Serialize, Deserialize)]
pub struct StackNote {
    pub endpoint_url: String,
    pub reconcile_environment: BTreeMap<String, String>,
}

pub fn note_path() -> PathBuf {
    crate::repo_root().join("target/likes-local/stack.json")
}

impl StackNote {
    /// Writes the note of a stack that has just started.
    pub fn write(stack: &Stack) -> Result<PathBuf, String> {
        let note = Self {
            endpoint_url: stack.aws.endpoint_url.clone(),
            reconcile_environment: stack
                .function_environment(RECONCILE_FUNCTION)
                .map_err(|e| e.to_string())?,
        };
        let path = note_path();
        std::fs::create_dir_all(path.parent().expect("a parent folder"))
            .and_then(|()| {
                std::fs::write(&path, serde_json::to_vec_pretty(&note).expect("serializes"))
            })
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(path)
    }

    fn read() -> Option<Self> {
        let text = std::fs::read(note_path()).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

/// The exit status of `likes-local reconcile` when no cut can be exported yet.
pub const NOT_YET_STATUS: u8 = 3;
/// How long `--wait` waits for the first cut PITR can export.
const WAIT_FOR_CUT: Duration = Duration::from_secs(20 * 60);

/// Why a reconciliation did not end in a report, in one line.
#[derive(Debug)]
pub enum Refused {
    /// No cut can be exported yet (a table younger than PITR's lag): nothing was started.
    NotYet(String),
    Failed(String),
}

/// Runs one reconciliation of the cut at or before `at_ms` (the latest PITR can export when
/// `None`) to its end; the drift report, or why it could not finish. With `wait`, a cut PITR
/// cannot serve yet is waited for.
pub async fn reconcile(
    at_ms: Option<i64>,
    wait: bool,
) -> Result<likes_reconcile::DriftReport, Refused> {
    use Refused::Failed;
    let (sdk, environment) = match (StackNote::read(), std::env::var("AWS_ENDPOINT_URL")) {
        (Some(note), _) => (
            emulator_sdk_config(&note.endpoint_url).await,
            note.reconcile_environment,
        ),
        (None, Ok(_)) => (
            aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await,
            std::env::vars().collect(),
        ),
        (None, Err(_)) => {
            return Err(Failed(format!(
                "no running local stack ({} is missing: start one with `make run`) and no \
                 AWS_ENDPOINT_URL",
                note_path().display()
            )))
        }
    };
    let config = ReconcileConfig::from_lookup(|name| environment.get(name).cloned())
        .map_err(|e| Failed(e.to_string()))?;
    let reconciler = Reconciler::new(
        config,
        aws_sdk_dynamodb::Client::new(&sdk),
        s3_client(&sdk),
        aws_sdk_athena::Client::new(&sdk),
    );
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .expect("a valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    let mut show = |progress: Progress| {
        bar.set_message(match progress {
            Progress::EarlierRunReconciled(report) => {
                // Above the spinner, and printed when it is hidden too (not a terminal).
                bar.suspend(|| {
                    println!(
                        "finished the run of an earlier cut first: {}",
                        report.summary()
                    )
                });
                return;
            }
            Progress::EarlierRunGivenUp { cut_ms, reason } => {
                bar.suspend(|| {
                    println!(
                        "gave up the run of an earlier cut ({}) first: {reason}",
                        rfc3339(cut_ms)
                    )
                });
                return;
            }
            Progress::WaitingForRestorable {
                cut_ms,
                servable_at_ms,
            } => format!(
                "waiting for point-in-time recovery to reach cut {}: restorable from {}",
                rfc3339(cut_ms),
                rfc3339(servable_at_ms)
            ),
            Progress::Exporting { cut_ms } => {
                format!("exporting the Reactions table at {}", rfc3339(cut_ms))
            }
            Progress::Recounting => "recounting the export".to_owned(),
            Progress::Reading(read) => format!(
                "reading the export: {}/{} data files, {} rows",
                read.files_done, read.files_total, read.rows_read
            ),
            Progress::Comparing {
                items_done,
                items_total,
            } => format!("comparing: {items_done}/{items_total} items"),
            Progress::ReadingCounts => "scanning the Counts table".to_owned(),
            Progress::Cleaning {
                through_ms,
                rows_done,
            } => format!(
                "dropping subtotals before {}: {rows_done} count rows",
                rfc3339(through_ms)
            ),
            Progress::RepairingLeaderboard => {
                "checking the all-time leaderboard against the export".to_owned()
            }
            Progress::RepairingLikers => "checking the likers lists against the export".to_owned(),
            Progress::Reporting => "writing the drift report".to_owned(),
        })
    };
    let wait_for_cut = if wait { WAIT_FOR_CUT } else { Duration::ZERO };
    let deadline = likes_core::clock::now_ms() + (RUN_TIMEOUT + wait_for_cut).as_millis() as i64;
    let step = reconciler.run_at(at_ms, wait, deadline, &mut show).await;
    bar.finish_and_clear();
    let step = match step {
        Ok(step) => step,
        Err(err @ likes_reconcile::ReconcileError::NotYetRestorable { .. }) => {
            return Err(Refused::NotYet(format!(
                "{err}; `make reconcile WAIT=1` waits for it"
            )))
        }
        Err(err) => return Err(Failed(format!("{err}; {}", what_to_do(&err)))),
    };
    match step {
        Step::Reconciled(report) => Ok(*report),
        Step::Idle => Err(Failed(
            "another invocation holds the run; try again when it ends".into(),
        )),
        Step::WaitingForExport { cut_ms } => Err(Failed(format!(
            "the export at {} did not complete within {RUN_TIMEOUT:?}; run again to go on",
            rfc3339(cut_ms)
        ))),
        Step::WaitingForPipeline { cut_ms, as_of_ms } => Err(Failed(format!(
            "as_of ({}) did not pass the cut {} within {RUN_TIMEOUT:?}: is a stream shard \
             stalled, or the pulse not running? (operations runbook)",
            as_of_ms.map_or("none".into(), rfc3339),
            rfc3339(cut_ms)
        ))),
        Step::WaitingForRecount { cut_ms } => Err(Failed(format!(
            "Athena's recount of the export at {} did not finish within {RUN_TIMEOUT:?}; run \
             again to go on",
            rfc3339(cut_ms)
        ))),
        Step::Comparing {
            cut_ms,
            items_done,
            items_total,
        } => Err(Failed(format!(
            "the compare of the cut {} paused at {RUN_TIMEOUT:?} after {items_done} of \
             {items_total} items; run again to go on from there",
            rfc3339(cut_ms)
        ))),
    }
}

/// What an operator does about a run that stopped with `err`.
fn what_to_do(err: &likes_reconcile::ReconcileError) -> &'static str {
    use likes_reconcile::ReconcileError as E;
    match err {
        E::Config(_) => "fix the reconcile function's environment",
        E::LaterCutReconciled { .. } | E::BeyondHorizon { .. } => {
            "ask for a later cut with --at, or leave it out for the latest"
        }
        E::CutNotExportable { .. } => {
            "ask for a cut inside the table's point-in-time recovery window"
        }
        E::GivenUp { .. } | E::Overdue { .. } => {
            "its report is under reports/ in the export bucket; the next cut proceeds"
        }
        E::NotYetRestorable { .. } => "`make reconcile WAIT=1` waits for it",
        _ => {
            "run it again once the cause is fixed (a failed attempt starts the cut over from a \
             new export; the third gives the cut up)"
        }
    }
}
