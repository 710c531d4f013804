//! The reconcile function as Lambda runs it: one scheduled invocation advances the run until
//! shortly before its deadline and answers where it stands.

use super::{Reconciler, Step, DEADLINE_MARGIN_MS};
use crate::ReconcileError;

impl Reconciler {
    /// One scheduled invocation, as Lambda runs it: advance the run until shortly before the
    /// deadline, report where it stands.
    pub async fn handle(
        &self,
        event: lambda_runtime::LambdaEvent<serde_json::Value>,
    ) -> Result<serde_json::Value, lambda_runtime::Error> {
        let deadline_ms =
            i64::try_from(event.context.deadline).unwrap_or(i64::MAX) - DEADLINE_MARGIN_MS;
        let step = match self.advance(deadline_ms, &mut |_| {}).await {
            Ok(step) => step,
            // Reported, alarmed and out of the way of the next cut: not an invocation error
            // for Lambda to retry.
            Err(ReconcileError::GivenUp { cut_ms, reason }) => {
                return Ok(
                    serde_json::json!({"step": "given_up", "cut_ms": cut_ms, "reason": reason}),
                )
            }
            Err(err) => return Err(err.into()),
        };
        tracing::info!(?step, "reconcile invocation ends");
        Ok(match step {
            Step::Idle => serde_json::json!({"step": "idle"}),
            Step::WaitingForExport { cut_ms } => {
                serde_json::json!({"step": "waiting_for_export", "cut_ms": cut_ms})
            }
            Step::WaitingForPipeline { cut_ms, as_of_ms } => serde_json::json!({
                "step": "waiting_for_pipeline", "cut_ms": cut_ms, "as_of_ms": as_of_ms
            }),
            Step::WaitingForRecount { cut_ms } => {
                serde_json::json!({"step": "waiting_for_recount", "cut_ms": cut_ms})
            }
            Step::Comparing {
                cut_ms,
                items_done,
                items_total,
            } => serde_json::json!({
                "step": "comparing", "cut_ms": cut_ms,
                "items_done": items_done, "items_total": items_total
            }),
            Step::Reconciled(report) => serde_json::json!({"step": "reconciled", "report": report}),
        })
    }
}
