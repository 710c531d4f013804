//! The exports a run reads: the Reactions table's at the cut, the read models' after it,
//! asked for within each table's point-in-time recovery window.

use likes_aws::AwsError;
use likes_core::clock::{now_ms, rfc3339};
use likes_core::leaderboard::{Board, Window};
use likes_core::ItemId;
use likes_store::reconciliation::{DerivedExports, RunState};

use crate::athena::{AthenaJudge, JudgedExports};
use crate::export::{Asked, Export, ExportState, RecoveryWindow};
use crate::{ReconcileError, Unexportable};

use super::{Ready, Reconciler, Step, EXPORT_POLL, QUERY_POLL};

impl Reconciler {
    /// Athena mode: the read models' exports the run is judged over, taken at one moment
    /// the pipeline had passed the cut (the Counts and Likers tables; the Leaderboard table
    /// too when its board had), and that moment. Each is asked for once PITR can serve that
    /// moment, and waited for.
    pub(super) async fn derived_exports(
        &self,
        athena: &AthenaJudge,
        state: &RunState,
        derived: Option<&DerivedExports>,
        deadline_ms: i64,
    ) -> Result<Ready<(i64, Vec<(String, Export)>)>, ReconcileError> {
        let Some(derived) = derived else {
            let needed = state.cut_ms + self.config.period.uncertainty_ms;
            let board_as_of = self
                .leaderboard
                .board(&Board::global(Window::All), 0)
                .await?
                .as_of_ms;
            let board_passed = board_as_of.is_some_and(|a| a >= needed);
            // The board passes a cut a refresh or so after the counts: it is waited for up
            // to an epoch, then left out (`leaderboard_behind`) so it never holds counts up.
            if !board_passed && now_ms() < needed + self.config.period.length_ms {
                if now_ms() + (QUERY_POLL.as_millis() as i64) < deadline_ms {
                    tokio::time::sleep(QUERY_POLL).await;
                    return Ok(Ready::Wait(None));
                }
                return Ok(Ready::Wait(Some(Step::WaitingForPipeline {
                    cut_ms: state.cut_ms,
                    as_of_ms: board_as_of,
                })));
            }
            let mut tables = vec![
                athena.config().counts_table_arn.clone(),
                athena.config().likers_table_arn.clone(),
            ];
            if board_passed {
                tables.push(athena.config().leaderboard_table_arn.clone());
            }
            self.store.derive(state.cut_ms, now_ms(), &tables).await?;
            return Ok(Ready::Wait(None));
        };
        let wait = |waiting: String| -> Result<Ready<_>, ReconcileError> {
            self.within_deadline(state, || waiting)?;
            Ok(Ready::Wait(
                (now_ms() + EXPORT_POLL.as_millis() as i64 >= deadline_ms).then_some(
                    Step::WaitingForExport {
                        cut_ms: state.cut_ms,
                    },
                ),
            ))
        };
        let export_of = |table: &str| {
            let prefix = format!("{table}/export/");
            derived
                .exports
                .iter()
                .find(move |arn| arn.starts_with(&prefix))
        };
        for table in &derived.tables {
            if export_of(table).is_some() {
                continue;
            }
            let window = self.recovery_window(table).await?;
            if window.latest_ms < derived.at_ms {
                let ready = wait(format!(
                    "{table} is restorable only up to {}",
                    rfc3339(window.latest_ms)
                ))?;
                if matches!(ready, Ready::Wait(None)) {
                    tokio::time::sleep(EXPORT_POLL / 10).await;
                }
                return Ok(ready);
            }
            let arn = self.start_export(table, derived.at_ms, state).await?;
            self.store.derived_export(state.cut_ms, &arn).await?;
            return Ok(Ready::Wait(None));
        }
        let mut exports = Vec::new();
        for table in &derived.tables {
            let arn = export_of(table).expect("every table's export was asked for");
            let Some(manifest) = self.export_complete(arn).await? else {
                let ready = wait(format!("export {arn} not complete"))?;
                if matches!(ready, Ready::Wait(None)) {
                    tokio::time::sleep(EXPORT_POLL).await;
                }
                return Ok(ready);
            };
            // The manifest the check just read: no second DescribeExport.
            let export = self
                .reader
                .open(&self.config.export_bucket, &manifest)
                .await?;
            exports.push((table.clone(), export));
        }
        Ok(Ready::Now((derived.at_ms, exports)))
    }

    /// What Athena judges: the run's export of the Reactions table and the read models', and
    /// the items removed so far.
    pub(super) fn judged_exports<'a>(
        &self,
        state: &RunState,
        at_ms: i64,
        reactions: &'a Export,
        derived: &'a [(String, Export)],
        removed: &'a [ItemId],
    ) -> JudgedExports<'a> {
        let athena = self.athena.as_ref().map(AthenaJudge::config);
        let of = |table: Option<&String>| {
            derived
                .iter()
                .find(|(t, _)| Some(t) == table)
                .map(|(_, export)| export)
        };
        let period = self.config.period;
        JudgedExports {
            reactions,
            counts: of(athena.map(|a| &a.counts_table_arn))
                .expect("the Counts table is always exported"),
            board: of(athena.map(|a| &a.leaderboard_table_arn)),
            likers: of(athena.map(|a| &a.likers_table_arn))
                .expect("the Likers table is always exported"),
            settled_before_ms: state.cut_ms - period.uncertainty_ms,
            cut_epoch: period.epoch(state.cut_ms),
            // A flip is attributed by its commit time, which is before the exports' moment;
            // one epoch more covers a clock that ran ahead.
            last_epoch: period.epoch(at_ms) + 1,
            removed,
        }
    }

    /// A table's point-in-time recovery window.
    pub(super) async fn recovery_window(
        &self,
        table_arn: &str,
    ) -> Result<RecoveryWindow, ReconcileError> {
        Ok(self.exports.recovery_window(table_arn).await?)
    }

    /// The latest cut whose uncertainty has passed and that PITR can serve now.
    pub(super) fn servable_cut(&self, window: &RecoveryWindow) -> Result<i64, ReconcileError> {
        let period = self.config.period;
        let cut = period
            .latest_cut(now_ms())
            .min(period.cut_at(window.latest_ms));
        if cut >= window.earliest_ms {
            return Ok(cut);
        }
        // The first cut inside the window, and when PITR will serve it.
        let first = period.cut_at(window.earliest_ms - 1) + period.length_ms;
        Err(ReconcileError::NotYetRestorable {
            cut_ms: first,
            servable_at_ms: (first + window.lag_ms).max(first + period.uncertainty_ms),
        })
    }

    /// `cut` itself, if PITR can serve it.
    pub(super) fn exportable(
        &self,
        window: &RecoveryWindow,
        cut: i64,
    ) -> Result<i64, ReconcileError> {
        if cut < window.earliest_ms {
            return Err(ReconcileError::CutNotExportable {
                cut_ms: cut,
                reason: Unexportable::BeforeEarliest {
                    earliest_ms: window.earliest_ms,
                },
            });
        }
        if cut > window.latest_ms || cut > self.config.period.latest_cut(now_ms()) {
            return Err(ReconcileError::NotYetRestorable {
                cut_ms: cut,
                servable_at_ms: (cut + window.lag_ms).max(cut + self.config.period.uncertainty_ms),
            });
        }
        Ok(cut)
    }

    /// Starts (or, with the same client token, finds again) the run's export of a table at
    /// `at_ms`: the Reactions table at the cut, a read model's after it.
    pub(super) async fn start_export(
        &self,
        table_arn: &str,
        at_ms: i64,
        state: &RunState,
    ) -> Result<String, ReconcileError> {
        match self
            .exports
            .ask(table_arn, at_ms, &export_token(table_arn, state))
            .await?
        {
            Asked::Export(arn) => Ok(arn),
            // A cut outside the table's recovery window can never be exported: the run is
            // given up, so the next cut is not blocked.
            Asked::OutsideWindow(err) => Err(ReconcileError::CutNotExportable {
                cut_ms: state.cut_ms,
                reason: Unexportable::Refused(err),
            }),
        }
    }

    /// The export's manifest-summary key once it is complete, `None` while it runs.
    pub(super) async fn export_complete(
        &self,
        arn: &str,
    ) -> Result<Option<String>, ReconcileError> {
        match self.exports.state(arn).await? {
            ExportState::InProgress => Ok(None),
            ExportState::Completed { manifest } => Ok(Some(manifest)),
            ExportState::Failed { status, message } => Err(ReconcileError::ExportFailed {
                arn: arn.to_owned(),
                status,
                message,
            }),
        }
    }

    /// A complete export's manifests, read and checked.
    pub(super) async fn open_export(&self, export_arn: &str) -> Result<Export, ReconcileError> {
        let manifest = self.export_complete(export_arn).await?.ok_or_else(|| {
            AwsError::unusable("DescribeExport", format!("{export_arn} is not complete"))
        })?;
        self.reader
            .open(&self.config.export_bucket, &manifest)
            .await
    }
}

/// The export's client token: one per table, run and attempt (a token is the account's, not
/// the table's, and must not be reused with other parameters). Every invocation of one
/// attempt asks with the same token, so one that died after asking gets the same export; a
/// failed export is asked for again under the next attempt's, and a cut started over (a
/// given-up cut run again) under its new start's.
pub(super) fn export_token(table_arn: &str, run: &RunState) -> String {
    use md5::{Digest, Md5};
    let digest = Md5::digest(
        format!(
            "{table_arn}#{}#{}#{}",
            run.cut_ms, run.started_at_ms, run.attempts
        )
        .as_bytes(),
    );
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
