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
use likes_reconcile::{Progress, ReconcileConfig, Reconciler, Step};
use serde::{Deserialize, Serialize};

use crate::stack::{emulator_sdk_config, s3_client, Stack};

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

/// Runs one reconciliation of the cut at or before `at_ms` to its end; the drift report, or
/// why it could not finish.
pub async fn reconcile(at_ms: i64) -> Result<likes_reconcile::DriftReport, String> {
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
            return Err(format!(
                "no running local stack ({} is missing: start one with `make run`) and no \
                 AWS_ENDPOINT_URL",
                note_path().display()
            ))
        }
    };
    let config = ReconcileConfig::from_lookup(|name| environment.get(name).cloned())
        .map_err(|e| e.to_string())?;
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
            Progress::Exporting { cut_ms } => format!("exporting the Reactions table at {cut_ms}"),
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
                rows_done,
                rows_total,
            } => format!("dropping reconciled subtotals: {rows_done}/{rows_total} count rows"),
            Progress::Reporting => "writing the drift report".to_owned(),
        })
    };
    let deadline = likes_core::clock::now_ms() + RUN_TIMEOUT.as_millis() as i64;
    let step = reconciler
        .run_at(at_ms, deadline, &mut show)
        .await
        .map_err(|e| e.to_string());
    bar.finish_and_clear();
    match step? {
        Step::Reconciled(report) => Ok(*report),
        Step::Idle => Err("another invocation holds the run; try again when it ends".into()),
        Step::WaitingForExport { cut_ms } => Err(format!(
            "the export at {cut_ms} did not complete within {RUN_TIMEOUT:?}"
        )),
        Step::WaitingForPipeline { cut_ms, as_of_ms } => Err(format!(
            "as_of ({as_of_ms:?}) did not pass the cut {cut_ms} within {RUN_TIMEOUT:?}: is a \
             stream shard stalled, or the pulse not running?"
        )),
        Step::WaitingForRecount { cut_ms } => Err(format!(
            "Athena's recount of the export at {cut_ms} did not finish within {RUN_TIMEOUT:?}"
        )),
    }
}
