//! A cut given up: the run done with why, its report where drift reports go, a metric for
//! the alarm; and every run's report written to S3.

use likes_aws::AwsError;
use likes_core::clock::rfc3339;
use likes_store::reconciliation::{Phase, RunState};

use super::{Reconciler, RecountEngine};
use crate::report::DriftReport;
use crate::ReconcileError;

impl Reconciler {
    /// Gives the run's cut up: the run is done with why, a report of it goes where drift
    /// reports go, and a metric feeds the alarm. The error to surface: why it was given up,
    /// or what failed while giving it up.
    pub(super) async fn give_up(&self, state: &RunState, reason: String) -> ReconcileError {
        tracing::error!(cut_ms = state.cut_ms, %reason, "reconciliation gives the cut up");
        match self.store.abandon(state, &reason).await {
            Ok(true) => {}
            Ok(false) => {
                return ReconcileError::GivenUp {
                    cut_ms: state.cut_ms,
                    reason: format!("{reason} (another invocation moved the run on)"),
                }
            }
            Err(err) => return err.into(),
        }
        let report = DriftReport {
            run_id: state.run_id(),
            cut_ms: state.cut_ms,
            cut: rfc3339(state.cut_ms),
            recounted_by: self.recounted_by(state).to_owned(),
            given_up: Some(reason.clone()),
            ..DriftReport::default()
        };
        report.emit();
        let reason = match self.put_report(&report).await {
            Ok(_) => reason,
            Err(err) => format!("{reason} (and its report could not be written: {err})"),
        };
        ReconcileError::GivenUp {
            cut_ms: state.cut_ms,
            reason,
        }
    }

    /// Where the run's export was to be recounted. By size, a run given up has chosen Athena
    /// once it asked for the read models' exports; otherwise it says `auto` (the run state
    /// keeps no choice of its own: the export's manifest makes it).
    pub(super) fn recounted_by(&self, state: &RunState) -> &'static str {
        match self.config.engine {
            RecountEngine::Function => "function",
            RecountEngine::Athena(_) => "athena",
            RecountEngine::BySize { .. } => match &state.phase {
                Phase::Comparing {
                    derived: Some(_), ..
                } => "athena",
                _ => "auto",
            },
        }
    }

    /// Writes a run's report to `<report prefix><cut>.json`; its key.
    pub(super) async fn put_report(&self, report: &DriftReport) -> Result<String, ReconcileError> {
        let key = format!("{}{}.json", self.config.report_prefix, report.cut_ms);
        self.s3
            .put_object()
            .bucket(&self.config.export_bucket)
            .key(&key)
            .content_type("application/json")
            .body(
                serde_json::to_vec_pretty(report)
                    .expect("reports serialize")
                    .into(),
            )
            .send()
            .await
            .map_err(|err| AwsError::new("PutObject", err))?;
        Ok(key)
    }
}
