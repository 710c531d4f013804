//! One reconciliation run, as a small persisted state machine that any invocation advances:
//! start the export of the Reactions table at cut T → wait for it → wait until the pipeline
//! has applied every flip before T (and within the export's uncertainty after it) → recount,
//! compare, correct → report. Each step is a conditional write on the run state, so a run
//! survives the invocation that started it, and two overlapping invocations never both
//! start or compare one cut.

mod clean;
mod compare;
mod config;
mod exports;
mod handler;
mod progress;
mod repair;
mod reports;

use std::time::Duration;

use likes_core::clock::{now_ms, rfc3339};
use likes_core::ItemId;
use likes_store::pruning::PruningStore;
use likes_store::reconciliation::{Phase, ReconciliationStore, RunState};
use likes_store::{FreshnessStore, LeaderboardStore, LikersStore, ModerationStore, ReactionsStore};

use crate::athena::AthenaJudge;
use crate::export::{ExportReader, TableExports};
use crate::ReconcileError;

use compare::{Compared, Judging};
pub use config::{ReconcileConfig, RecountEngine};
pub use progress::{Progress, Step};

/// How often a waiting invocation asks again whether the export is complete.
const EXPORT_POLL: Duration = Duration::from_secs(10);
/// How often a waiting invocation asks again whether Athena's recount is done.
const QUERY_POLL: Duration = Duration::from_secs(2);
/// A scheduled invocation stops waiting this long before its deadline.
const DEADLINE_MARGIN_MS: i64 = 30_000;
/// Attempts of one cut (a new export each), and compare leases, before the cut is given up.
pub const MAX_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone)]
pub struct Reconciler {
    config: ReconcileConfig,
    exports: TableExports,
    s3: aws_sdk_s3::Client,
    store: ReconciliationStore,
    pruning: PruningStore,
    freshness: FreshnessStore,
    likers: LikersStore,
    leaderboard: LeaderboardStore,
    reactions: ReactionsStore,
    moderation: ModerationStore,
    reader: ExportReader,
    athena: Option<AthenaJudge>,
}

impl Reconciler {
    /// `athena` is used only when the config's engine may recount in Athena.
    pub fn new(
        config: ReconcileConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        s3: aws_sdk_s3::Client,
        athena: aws_sdk_athena::Client,
    ) -> Self {
        Self {
            athena: config
                .engine
                .athena()
                .map(|athena_config| AthenaJudge::new(athena, s3.clone(), athena_config.clone())),
            store: ReconciliationStore::new(dynamodb.clone(), config.counts_table.clone()),
            pruning: PruningStore::new(dynamodb.clone(), config.counts_table.clone()),
            freshness: FreshnessStore::new(dynamodb.clone(), config.counts_table.clone()),
            likers: LikersStore::new(dynamodb.clone(), config.likers_table.clone()),
            reactions: ReactionsStore::new(dynamodb.clone(), config.reactions_table.clone()),
            moderation: ModerationStore::new(dynamodb.clone(), config.moderation_table.clone()),
            leaderboard: LeaderboardStore::new(dynamodb.clone(), config.leaderboard_table.clone())
                .with_board_shards(config.leaderboard_shards),
            reader: ExportReader::new(s3.clone()),
            exports: TableExports::new(
                dynamodb,
                config.export_bucket.clone(),
                config.export_prefix.clone(),
            ),
            config,
            s3,
        }
    }

    /// One scheduled invocation: starts the latest cut's run when the last one is done, and
    /// advances the current run as far as it can before `deadline_ms`.
    pub async fn advance(
        &self,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Step, ReconcileError> {
        // Cleaning first, with half the time: the horizon must hold whatever the run does.
        let now = now_ms();
        self.clean(now + (deadline_ms - now) / 2, progress).await?;
        // Only a finished run (or none) makes way for a new cut: the recovery window is asked
        // then, not on every invocation of a run that is still going.
        let state = self.store.state().await?;
        if state.as_ref().is_none_or(|s| s.phase == Phase::Done) {
            let window = self
                .recovery_window(&self.config.reactions_table_arn)
                .await?;
            match self.servable_cut(&window) {
                // A table younger than PITR's lag: nothing to start yet, nothing written.
                Err(_) => {}
                Ok(latest) if state.as_ref().is_none_or(|s| s.cut_ms < latest) => {
                    if !self.store.begin(latest, now_ms()).await? {
                        return Ok(Step::Idle);
                    }
                }
                Ok(_) => {}
            }
        }
        let step = self.drive(deadline_ms, progress).await?;
        if matches!(step, Step::Reconciled(_)) {
            self.clean(deadline_ms, progress).await?;
        }
        Ok(step)
    }

    /// An operator's run: reconciles the cut at or before `at_ms` (the latest cut PITR can
    /// serve when `None`) now, waiting for each step until `deadline_ms`. A run of another cut
    /// still going is finished first; a cut already reconciled is compared again (which
    /// corrects nothing twice). A cut PITR cannot serve yet is waited for, until the deadline,
    /// when `wait_for_cut`, else refused at once with when it can be; nothing is written.
    pub async fn run_at(
        &self,
        at_ms: Option<i64>,
        wait_for_cut: bool,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Step, ReconcileError> {
        let cut = loop {
            let window = self
                .recovery_window(&self.config.reactions_table_arn)
                .await?;
            let servable = match at_ms {
                None => self.servable_cut(&window),
                Some(at) => self.exportable(&window, self.config.period.cut_at(at)),
            };
            match servable {
                Ok(cut) => {
                    let cleaned = self.pruning.state(0).await?.map_or(i64::MIN, |p| p.cleaned);
                    if self.config.period.epoch(cut) < cleaned {
                        return Err(ReconcileError::BeyondHorizon {
                            cut_ms: cut,
                            cleaned_ms: cleaned * self.config.period.length_ms,
                        });
                    }
                    break cut;
                }
                // The time is an estimate: the window itself is asked again until the deadline.
                Err(ReconcileError::NotYetRestorable {
                    cut_ms,
                    servable_at_ms,
                }) if wait_for_cut && now_ms() < deadline_ms => {
                    progress(Progress::WaitingForRestorable {
                        cut_ms,
                        servable_at_ms,
                    });
                    tokio::time::sleep(EXPORT_POLL / 10).await;
                }
                Err(err) => return Err(err),
            }
        };
        let mut races_lost = 0;
        loop {
            let state = self.store.state().await?;
            let started = match &state {
                None => self.store.begin(cut, now_ms()).await?,
                Some(s) if s.phase == Phase::Done && s.cut_ms < cut => {
                    self.store.begin(cut, now_ms()).await?
                }
                // A cut given up has no export to compare again: it starts over.
                Some(s) if s.phase == Phase::Done && s.cut_ms == cut && s.abandoned.is_some() => {
                    self.store.begin(cut, now_ms()).await?
                }
                Some(s) if s.phase == Phase::Done && s.cut_ms == cut => {
                    self.store.reopen(cut, now_ms()).await?
                }
                Some(s) if s.phase == Phase::Done => {
                    return Err(ReconcileError::LaterCutReconciled {
                        asked: cut,
                        reconciled: s.cut_ms,
                    })
                }
                Some(_) => true,
            };
            if !started {
                // Another invocation changed the run between the read and the write.
                races_lost += 1;
                if races_lost > MAX_ATTEMPTS {
                    return Ok(Step::Idle);
                }
                continue;
            }
            let step = match self.drive(deadline_ms, progress).await {
                // A run of another cut that was still going, given up: this one goes on.
                Err(ReconcileError::GivenUp { cut_ms, reason }) if cut_ms != cut => {
                    progress(Progress::EarlierRunGivenUp { cut_ms, reason });
                    continue;
                }
                step => step?,
            };
            match step {
                Step::Reconciled(report) if report.cut_ms != cut => {
                    progress(Progress::EarlierRunReconciled(report));
                    continue;
                }
                Step::Reconciled(report) => {
                    // The operator's run leaves the rows clean, as far as the deadline allows.
                    self.clean(deadline_ms, progress).await?;
                    return Ok(Step::Reconciled(report));
                }
                Step::WaitingForPipeline { .. }
                | Step::WaitingForExport { .. }
                | Step::WaitingForRecount { .. }
                    if now_ms() < deadline_ms =>
                {
                    tokio::time::sleep(EXPORT_POLL / 10).await;
                }
                step => return Ok(step),
            }
        }
    }

    /// Advances the run in the state row as far as it goes before `deadline_ms`. A step that
    /// fails starts the cut again from a new export, [`MAX_ATTEMPTS`] times at most; then, or
    /// at once when the cut can never be exported, the cut is given up with a report, and the
    /// next one proceeds.
    async fn drive(
        &self,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Step, ReconcileError> {
        loop {
            let Some(state) = self.store.state().await? else {
                return Ok(Step::Idle);
            };
            match self.step(&state, deadline_ms, progress).await {
                Ok(Some(step)) => return Ok(step),
                Ok(None) => {}
                Err(err @ ReconcileError::GivenUp { .. }) => return Err(err),
                Err(
                    err
                    @ (ReconcileError::CutNotExportable { .. } | ReconcileError::Overdue { .. }),
                ) => return Err(self.give_up(&state, err.to_string()).await),
                Err(err) => {
                    let reason = err.to_string();
                    return Err(match self.store.retry(state.cut_ms, &reason).await {
                        Ok(Some(attempts)) if attempts >= MAX_ATTEMPTS => {
                            self.give_up(&state, reason).await
                        }
                        Ok(_) => err,
                        Err(store) => store.into(),
                    });
                }
            }
        }
    }

    /// One step of the run in `state`: `Some` where the invocation stops, `None` to go on.
    async fn step(
        &self,
        state: &RunState,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Option<Step>, ReconcileError> {
        {
            match &state.phase {
                Phase::Done => return Ok(Some(Step::Idle)),
                Phase::Exporting { export_arn: None } => {
                    progress(Progress::Exporting {
                        cut_ms: state.cut_ms,
                    });
                    let arn = self
                        .start_export(&self.config.reactions_table_arn, state.cut_ms, state)
                        .await?;
                    self.store.exporting(state.cut_ms, &arn).await?;
                }
                Phase::Exporting {
                    export_arn: Some(arn),
                } => {
                    if self.export_complete(arn).await?.is_none() {
                        self.within_deadline(state, || format!("export {arn} not complete"))?;
                        if now_ms() + EXPORT_POLL.as_millis() as i64 >= deadline_ms {
                            return Ok(Some(Step::WaitingForExport {
                                cut_ms: state.cut_ms,
                            }));
                        }
                        tokio::time::sleep(EXPORT_POLL).await;
                        return Ok(None);
                    }
                    self.store.comparing(state.cut_ms).await?;
                }
                Phase::Comparing {
                    export_arn,
                    derived,
                } => {
                    let needed = state.cut_ms + self.config.period.uncertainty_ms;
                    let as_of = self.freshness.as_of().await;
                    if as_of.is_none_or(|a| a < needed) {
                        self.within_deadline(state, || {
                            format!(
                                "as_of {} has not passed the cut",
                                as_of.map_or("unknown".into(), rfc3339)
                            )
                        })?;
                        return Ok(Some(Step::WaitingForPipeline {
                            cut_ms: state.cut_ms,
                            as_of_ms: as_of,
                        }));
                    }
                    progress(Progress::Recounting);
                    let export = self.open_export(export_arn).await?;
                    // By size, the choice is the export's: every invocation of the run reads
                    // the same manifest, so every one makes the same choice.
                    let athena = self
                        .athena
                        .as_ref()
                        .filter(|_| self.config.engine.in_athena(export.summary.item_count));
                    let derived = match athena {
                        None => None,
                        Some(athena) => {
                            match self
                                .derived_exports(athena, state, derived.as_ref(), deadline_ms)
                                .await?
                            {
                                Ready::Now(derived) => Some((athena, derived)),
                                Ready::Wait(step) => return Ok(step),
                            }
                        }
                    };
                    // Athena lists the reactions to removed items in its judgement.
                    let removed: Vec<ItemId> = match derived {
                        None => Vec::new(),
                        Some(_) => {
                            let mut removed: Vec<ItemId> = self
                                .moderation
                                .removals()
                                .await?
                                .into_iter()
                                .map(|(item, _)| item)
                                .collect();
                            removed.sort();
                            removed
                        }
                    };
                    let in_athena = derived.as_ref().map(|(athena, (at_ms, exports))| {
                        (
                            *athena,
                            self.judged_exports(state, *at_ms, &export, exports, &removed),
                        )
                    });
                    let judged = match &in_athena {
                        None => None,
                        Some((athena, inputs)) => match athena.poll(&state.run_id(), inputs).await?
                        {
                            Some(judged) => Some(judged),
                            None if now_ms() + (QUERY_POLL.as_millis() as i64) < deadline_ms => {
                                tokio::time::sleep(QUERY_POLL).await;
                                return Ok(None);
                            }
                            None => {
                                return Ok(Some(Step::WaitingForRecount {
                                    cut_ms: state.cut_ms,
                                }))
                            }
                        },
                    };
                    // A compare that never returns (its invocation died before it could
                    // pause) is counted by its lease, so it cannot hold the cut for ever
                    // either; one that pauses gives its lease back and goes on next time,
                    // as long as the run is within its deadline.
                    if state.leases >= MAX_ATTEMPTS {
                        let reason = format!(
                            "the compare died in {} invocations without pausing",
                            state.leases
                        );
                        return Err(self.give_up(state, reason).await);
                    }
                    if state.paused.is_some() {
                        self.within_deadline(state, || "a paused compare".to_owned())?;
                    }
                    let now = now_ms();
                    let lease_until = now + self.config.lease.as_millis() as i64;
                    if !self.store.lease(state.cut_ms, now, lease_until).await? {
                        return Ok(Some(Step::Idle));
                    }
                    let judging = match (&in_athena, judged) {
                        (Some((athena, _)), Some(judged)) => Judging::InAthena { athena, judged },
                        _ => Judging::InFunction(
                            self.reader
                                .recount_with_likes(&export, |read| {
                                    progress(Progress::Reading(read))
                                })
                                .await?,
                        ),
                    };
                    let report = match self
                        .compare(state, &export, export_arn, judging, deadline_ms, progress)
                        .await?
                    {
                        Compared::Done(report) => report,
                        Compared::Paused {
                            items_done,
                            items_total,
                        } => {
                            return Ok(Some(Step::Comparing {
                                cut_ms: state.cut_ms,
                                items_done,
                                items_total,
                            }))
                        }
                    };
                    if let Some((athena, inputs)) = &in_athena {
                        athena.drop_tables(&state.run_id(), inputs).await?;
                    }
                    return Ok(Some(Step::Reconciled(report)));
                }
            }
        }
        Ok(None)
    }

    /// An error when the run has gone on past its deadline (half the horizon).
    fn within_deadline(
        &self,
        state: &RunState,
        waiting: impl FnOnce() -> String,
    ) -> Result<(), ReconcileError> {
        let deadline_ms = self.config.horizon.as_millis() as i64 / 2;
        if now_ms() - state.started_at_ms <= deadline_ms {
            return Ok(());
        }
        Err(ReconcileError::Overdue {
            cut_ms: state.cut_ms,
            deadline_ms,
            waiting: waiting(),
        })
    }
}

/// A step's outcome once it has what it waits for, or where the invocation goes next: `None`
/// round again (the run state changed), or the step it stops at.
enum Ready<T> {
    Now(T),
    Wait(Option<Step>),
}
