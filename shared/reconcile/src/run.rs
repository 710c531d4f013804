//! One reconciliation run, as a small persisted state machine that any invocation advances:
//! start the export of the Reactions table at cut T → wait for it → wait until the pipeline
//! has applied every flip before T (and within the export's uncertainty after it) → recount,
//! compare, correct → report. Each step is a conditional write on the run state, so a run
//! survives the invocation that started it, and two overlapping invocations never both
//! start or compare one cut.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use likes_aws::AwsError;
use likes_core::clock::{now_ms, rfc3339};
use likes_core::config::ConfigError;
use likes_core::leaderboard::Window;
use likes_core::likers::{repair, LikerChange, LikerUpdate};
use likes_core::pipeline::Counts;
use likes_core::reconcile::{judge, CountRowState, Period, Verdict};
use likes_core::ItemId;
use likes_store::pruning::{PruningStore, SegmentCursor};
use likes_store::reconciliation::{
    reconciled_attributes, DerivedExports, Phase, ReconciliationStore, RunState, SCAN_SEGMENTS,
};
use likes_store::{FreshnessStore, LeaderboardStore, LikersStore, StoreError};

use crate::athena::{
    AthenaConfig, AthenaJudge, Judged, JudgedExports, JudgedLine, Judgement, ResultLines,
};
use crate::export::{
    Asked, Export, ExportReader, ExportState, ExportedLikes, ReadProgress, Recount, RecoveryWindow,
    TableExports, UnknownStateRow, FOREIGN_REPORTED,
};
use crate::report::{DriftReport, GivenUp};
use crate::ReconcileError;

/// How often a waiting invocation asks again whether the export is complete.
const EXPORT_POLL: Duration = Duration::from_secs(10);
/// How often a waiting invocation asks again whether Athena's recount is done.
const QUERY_POLL: Duration = Duration::from_secs(2);
/// Items (and count rows) between two progress reports of the compare and cleanup steps.
const PROGRESS_EVERY: u64 = 100;
/// A scheduled invocation stops waiting this long before its deadline.
const DEADLINE_MARGIN_MS: i64 = 30_000;
/// Attempts of one cut (a new export each), and compare leases, before the cut is given up.
pub const MAX_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    pub reactions_table_arn: String,
    pub counts_table: String,
    /// The likers lists, repaired from the same export.
    pub likers_table: String,
    pub leaderboard_table: String,
    /// The shards each board's score rows spread over.
    pub leaderboard_shards: u32,
    pub export_bucket: String,
    /// Exports go under `<prefix>AWSDynamoDB/<export id>/`.
    pub export_prefix: String,
    /// Drift reports go to `<prefix><cut>.json`.
    pub report_prefix: String,
    pub period: Period,
    /// How long the compare step's lease lasts: the function's timeout.
    pub lease: Duration,
    /// Subtotals of epochs this far behind now are pruned whether or not a run completed;
    /// a run not done within half of it is given up (well inside the export bucket's
    /// lifecycle too, so an export is never read after it expired).
    pub horizon: Duration,
    pub engine: RecountEngine,
}

/// Where the export is recounted: in the function, which reads every data file (up to some
/// 10^9 rows in one run), or by Athena over the same files (platform size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecountEngine {
    Function,
    Athena(AthenaConfig),
}

impl ReconcileConfig {
    pub fn from_env() -> Result<Self, ReconcileError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ReconcileError> {
        let var = |name: &'static str| ConfigError::var(&lookup, name);
        let seconds = |name: &'static str| -> Result<i64, ReconcileError> {
            Ok(ConfigError::in_range(name, var(name)?)? as i64)
        };
        Ok(Self {
            reactions_table_arn: var("REACTIONS_TABLE_ARN")?,
            counts_table: var("COUNTS_TABLE")?,
            likers_table: var("LIKERS_TABLE")?,
            leaderboard_table: var("LEADERBOARD_TABLE")?,
            leaderboard_shards: ConfigError::in_range(
                "LEADERBOARD_SHARDS",
                var("LEADERBOARD_SHARDS")?,
            )? as u32,
            export_bucket: var("EXPORT_BUCKET")?,
            export_prefix: var("EXPORT_PREFIX")?,
            report_prefix: var("REPORT_PREFIX")?,
            period: Period {
                length_ms: seconds("RECONCILE_EPOCH_SECONDS")? * 1000,
                uncertainty_ms: seconds("EXPORT_UNCERTAINTY_SECONDS")? * 1000,
            },
            lease: Duration::from_secs(seconds("RECONCILE_LEASE_SECONDS")? as u64),
            horizon: Duration::from_secs(seconds("RECONCILE_HORIZON_SECONDS")? as u64),
            engine: match var("RECOUNT_ENGINE")?.as_str() {
                "function" => RecountEngine::Function,
                "athena" => RecountEngine::Athena(AthenaConfig {
                    workgroup: var("ATHENA_WORKGROUP")?,
                    database: var("GLUE_DATABASE")?,
                    counts_table_arn: var("COUNTS_TABLE_ARN")?,
                    leaderboard_table_arn: var("LEADERBOARD_TABLE_ARN")?,
                    likers_table_arn: var("LIKERS_TABLE_ARN")?,
                }),
                other => {
                    return Err(ConfigError::Choice {
                        name: "RECOUNT_ENGINE",
                        allowed: &["function", "athena"],
                        value: other.to_owned(),
                    }
                    .into())
                }
            },
        })
    }
}

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
    reader: ExportReader,
    athena: Option<AthenaJudge>,
}

impl Reconciler {
    /// `athena` is used only when the config's engine is Athena.
    pub fn new(
        config: ReconcileConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        s3: aws_sdk_s3::Client,
        athena: aws_sdk_athena::Client,
    ) -> Self {
        Self {
            athena: match &config.engine {
                RecountEngine::Function => None,
                RecountEngine::Athena(athena_config) => {
                    Some(AthenaJudge::new(athena, s3.clone(), athena_config.clone()))
                }
            },
            store: ReconciliationStore::new(dynamodb.clone(), config.counts_table.clone()),
            pruning: PruningStore::new(dynamodb.clone(), config.counts_table.clone()),
            freshness: FreshnessStore::new(dynamodb.clone(), config.counts_table.clone()),
            likers: LikersStore::new(dynamodb.clone(), config.likers_table.clone()),
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
                    let derived = match &self.athena {
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
                    let in_athena = derived.as_ref().map(|(athena, (at_ms, exports))| {
                        (
                            *athena,
                            self.judged_exports(state, *at_ms, &export, exports),
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

    /// Athena mode: the read models' exports the run is judged over, taken at one moment
    /// the pipeline had passed the cut (the Counts and Likers tables; the Leaderboard table
    /// too when its board had), and that moment. Each is asked for once PITR can serve that
    /// moment, and waited for.
    async fn derived_exports(
        &self,
        athena: &AthenaJudge,
        state: &RunState,
        derived: Option<&DerivedExports>,
        deadline_ms: i64,
    ) -> Result<Ready<(i64, Vec<(String, Export)>)>, ReconcileError> {
        let Some(derived) = derived else {
            let needed = state.cut_ms + self.config.period.uncertainty_ms;
            let board_as_of = self.leaderboard.board(&Window::All, 0).await?.as_of_ms;
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
            if self.export_complete(arn).await?.is_none() {
                let ready = wait(format!("export {arn} not complete"))?;
                if matches!(ready, Ready::Wait(None)) {
                    tokio::time::sleep(EXPORT_POLL).await;
                }
                return Ok(ready);
            }
            exports.push((table.clone(), self.open_export(arn).await?));
        }
        Ok(Ready::Now((derived.at_ms, exports)))
    }

    /// What Athena judges: the run's export of the Reactions table and the read models'.
    fn judged_exports<'a>(
        &self,
        state: &RunState,
        at_ms: i64,
        reactions: &'a Export,
        derived: &'a [(String, Export)],
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
        }
    }

    /// Goes on with the cleaning pass in progress, then starts the one a completed run asked
    /// for (through its cut) or, when no pass finished for half the horizon, one through the
    /// horizon: a pass over the Counts table dropping subtotals and near-cut
    /// counts before its epoch, a Scan page at a time in each segment, its cursors kept in
    /// the table, so any invocation goes on where the last stopped, until `until_ms`.
    async fn clean(
        &self,
        until_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<(), ReconcileError> {
        let period = self.config.period;
        let horizon_ms = self.config.horizon.as_millis() as i64;
        let segments = SCAN_SEGMENTS as usize;
        // A pass, then perhaps the one a run asked for meanwhile: a few rounds at most.
        for _ in 0..3 {
            let mut state = match self.pruning.state(segments).await? {
                // A pass still going goes on to its end: restarting it would never finish one.
                Some(state) if !state.done => state,
                last => {
                    let (cleaned, wanted) =
                        last.map_or((i64::MIN, i64::MIN), |s| (s.cleaned, s.wanted));
                    // Rows keep at most one and a half horizons of epochs: a pass through
                    // the horizon starts once the last one is half a horizon old.
                    let horizon = period.epoch(now_ms() - horizon_ms);
                    let horizon_due = cleaned < period.epoch(now_ms() - horizon_ms * 3 / 2);
                    let through = match (wanted > cleaned, horizon_due) {
                        (true, true) => wanted.max(horizon),
                        (true, false) => wanted,
                        (false, true) => horizon,
                        (false, false) => return Ok(()),
                    };
                    // The log shards retired by now: no row can take their intent numbers
                    // after, so once the pass is done no row keeps them.
                    let retiring = self.leaderboard.retired().await?;
                    self.pruning.begin(through, segments, &retiring).await?;
                    continue;
                }
            };
            let mut rows_done = 0;
            for (segment, cursor) in state.segments.iter_mut().enumerate() {
                while *cursor != SegmentCursor::Done {
                    if now_ms() >= until_ms {
                        return Ok(());
                    }
                    let start = match cursor {
                        SegmentCursor::At(key) => Some(key.clone()),
                        _ => None,
                    };
                    let (rows, next) = self.store.scan_page(segment as i32, start).await?;
                    for (_, key, row) in &rows {
                        self.store
                            .drop_reconciled(key, &reconciled_attributes(row, state.through))
                            .await?;
                    }
                    rows_done += rows.len() as u64;
                    progress(Progress::Cleaning {
                        through_ms: state.through * period.length_ms,
                        rows_done,
                    });
                    *cursor = next.map_or(SegmentCursor::Done, SegmentCursor::At);
                    if !self.pruning.advance(state.through, segment, cursor).await? {
                        // Another invocation moved the pass on: it goes on from there.
                        return Ok(());
                    }
                }
            }
            let (mut shard, mut cursor) = state.board;
            while cursor != SegmentCursor::Done {
                if now_ms() >= until_ms {
                    return Ok(());
                }
                let start = match cursor {
                    SegmentCursor::At(key) => Some(key),
                    _ => None,
                };
                let (rows, next) = self.leaderboard.all_time_page(shard, start).await?;
                for row in &rows {
                    let mut dropped = reconciled_attributes(&row.state, state.through);
                    dropped.extend(row.retired_attributes(&state.retiring));
                    self.leaderboard
                        .drop_reconciled(&row.item_id, &dropped)
                        .await?;
                }
                rows_done += rows.len() as u64;
                progress(Progress::Cleaning {
                    through_ms: state.through * period.length_ms,
                    rows_done,
                });
                cursor = match next {
                    Some(key) => SegmentCursor::At(key),
                    None if shard + 1 < self.leaderboard.board_shards() => {
                        shard += 1;
                        SegmentCursor::Start
                    }
                    None => SegmentCursor::Done,
                };
                if !self
                    .pruning
                    .advance_board(state.through, shard, &cursor)
                    .await?
                {
                    return Ok(());
                }
            }
            self.pruning.finish(state.through).await?;
            self.leaderboard.forget_retired(&state.retiring).await?;
        }
        Ok(())
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

    /// Gives the run's cut up: the run is done with why, a report of it goes where drift
    /// reports go, and a metric feeds the alarm. The error to surface: why it was given up,
    /// or what failed while giving it up.
    async fn give_up(&self, state: &RunState, reason: String) -> ReconcileError {
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
            recounted_by: self.recounted_by().to_owned(),
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

    fn recounted_by(&self) -> &'static str {
        match self.config.engine {
            RecountEngine::Function => "function",
            RecountEngine::Athena(_) => "athena",
        }
    }

    /// A table's point-in-time recovery window.
    async fn recovery_window(&self, table_arn: &str) -> Result<RecoveryWindow, ReconcileError> {
        Ok(self.exports.recovery_window(table_arn).await?)
    }

    /// The latest cut whose uncertainty has passed and that PITR can serve now.
    fn servable_cut(&self, window: &RecoveryWindow) -> Result<i64, ReconcileError> {
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
    fn exportable(&self, window: &RecoveryWindow, cut: i64) -> Result<i64, ReconcileError> {
        if cut < window.earliest_ms {
            return Err(ReconcileError::CutNotExportable {
                cut_ms: cut,
                reason: format!(
                    "it is before the table's earliest restorable time {}",
                    rfc3339(window.earliest_ms)
                ),
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
    async fn start_export(
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
                reason: err.to_string(),
            }),
        }
    }

    /// The export's manifest-summary key once it is complete, `None` while it runs.
    async fn export_complete(&self, arn: &str) -> Result<Option<String>, ReconcileError> {
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
    async fn open_export(&self, export_arn: &str) -> Result<Export, ReconcileError> {
        let manifest = self.export_complete(export_arn).await?.ok_or_else(|| {
            AwsError::unusable("DescribeExport", format!("{export_arn} is not complete"))
        })?;
        self.reader
            .open(&self.config.export_bucket, &manifest)
            .await
    }

    /// Compares every item of the recount with what was applied before the cut, in item
    /// order, and corrects; then repairs the leaderboard and the likers lists, reports and
    /// starts the pass that drops the subtotals before the cut. A compare paused by an
    /// earlier invocation goes on after the item it stopped at, with its tally. Past
    /// `deadline_ms` (after at least one item, so every invocation makes progress) it pauses
    /// again.
    async fn compare(
        &self,
        state: &RunState,
        export: &Export,
        export_arn: &str,
        judging: Judging<'_>,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Compared, ReconcileError> {
        let started = now_ms();
        let mut fresh = DriftReport {
            run_id: state.run_id(),
            cut_ms: state.cut_ms,
            cut: rfc3339(state.cut_ms),
            export_arn: export_arn.to_owned(),
            recounted_by: self.recounted_by().to_owned(),
            cuts_given_up: state
                .given_up
                .iter()
                .map(|cut| GivenUp {
                    cut_ms: cut.cut,
                    cut: rfc3339(cut.cut),
                    reason: cut.reason.clone(),
                })
                .collect(),
            cuts_given_up_dropped: state.given_up_dropped,
            ..DriftReport::default()
        };
        // Athena's census is in its result, read as the compare goes.
        if let Judging::InFunction(recount) = &judging {
            fresh.rows_read = recount.rows_read;
            fresh.probe_rows = recount.probes;
            fresh.foreign_rows = recount.foreign_rows;
            fresh.unknown_state_rows = recount.unknown_state_rows;
            fresh.unknown_states = recount.unknown_states.clone();
        }
        let (report, after) = match &state.paused {
            None => (fresh, None),
            Some(pause) => {
                let tally: DriftReport = serde_json::from_str(&pause.tally).map_err(|err| {
                    ReconcileError::Store(StoreError::Corrupt(format!(
                        "a paused compare's tally: {err}"
                    )))
                })?;
                (tally, Some(&pause.through))
            }
        };
        let mut comparison = Comparison {
            state,
            after,
            report,
            started,
            deadline_ms,
        };
        let likes = match judging {
            Judging::InFunction(recount) => {
                if let Some(paused) = self
                    .compare_recount(&mut comparison, &recount, progress)
                    .await?
                {
                    return Ok(paused);
                }
                let report = &mut comparison.report;
                self.repair_leaderboard(state, &recount.per_item, deadline_ms, report, progress)
                    .await?;
                Some((recount.likes.unwrap_or_default(), recount.unreadable_likes))
            }
            Judging::InAthena { athena, judged } => {
                let mut lines = athena.lines(&judged.counts, Judgement::Counts).await?;
                if let Some(paused) = self
                    .compare_judged(&mut comparison, export, &mut lines, progress)
                    .await?
                {
                    return Ok(paused);
                }
                let report = &mut comparison.report;
                progress(Progress::RepairingLeaderboard);
                match &judged.scores {
                    None => report.leaderboard_behind = true,
                    Some(scores) => {
                        let mut lines = athena.lines(scores, Judgement::Scores).await?;
                        self.repair_scores(state, &mut lines, deadline_ms, report)
                            .await?;
                    }
                }
                progress(Progress::RepairingLikers);
                let mut lines = athena.lines(&judged.likers, Judgement::Likers).await?;
                self.repair_judged_likers(&mut lines, deadline_ms, report)
                    .await?;
                None
            }
        };
        let mut report = comparison.report;
        if let Some(likes) = likes {
            self.repair_likers(state, likes, deadline_ms, &mut report, progress)
                .await?;
        }
        progress(Progress::Reporting);
        report.duration_ms += now_ms() - started;
        let key = self.put_report(&report).await?;
        report.emit();
        self.store.done(state.cut_ms, &key).await?;
        // Subtotals before the cut are dropped by a cleaning pass that resumes across
        // invocations, not here: the compare writes only corrections.
        self.pruning
            .want(self.config.period.epoch(state.cut_ms))
            .await?;
        Ok(Compared::Done(Box::new(report)))
    }

    /// The in-function compare: every item of the recount and of a Scan of the count rows,
    /// in item order, after the checkpoint; `Some` when it paused at the deadline.
    async fn compare_recount(
        &self,
        comparison: &mut Comparison<'_>,
        recount: &Recount,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Option<Compared>, ReconcileError> {
        let Comparison { state, after, .. } = *comparison;
        progress(Progress::ReadingCounts);
        let rows = self.store.count_rows().await?;
        let cut = self.config.period.epoch(state.cut_ms);
        let items: BTreeSet<_> = recount
            .per_item
            .keys()
            .chain(rows.keys())
            .filter(|item| after.is_none_or(|after| *item > after))
            .cloned()
            .collect();
        let total = comparison.report.items_checked + items.len() as u64;
        progress(Progress::Comparing {
            items_done: comparison.report.items_checked,
            items_total: total,
        });
        for (judged_here, item) in items.iter().enumerate() {
            if judged_here > 0 && now_ms() >= comparison.deadline_ms {
                let last = items
                    .range(..item)
                    .next_back()
                    .expect("this invocation judged the item before this one");
                return self.pause(comparison, last, total).await.map(Some);
            }
            let states: Vec<_> = rows
                .get(item)
                .map(|rows| rows.iter().map(|(_, row)| row.clone()).collect())
                .unwrap_or_default();
            let counted = recount
                .per_item
                .get(item)
                .copied()
                .unwrap_or(Counts::default());
            self.judge_item(state, item, counted, &states, cut, &mut comparison.report)
                .await?;
            every_so_often(progress, comparison.report.items_checked, total);
        }
        Ok(None)
    }

    /// The compare in Athena mode: the census and totals of Athena's judgement (tallied once,
    /// by the invocation that begins the compare), then each drifted item after `after`, in
    /// item order, judged again from its live count rows; `Some` when it paused at the
    /// deadline. The export must be read whole: the census's rows add up to its item count.
    async fn compare_judged(
        &self,
        comparison: &mut Comparison<'_>,
        export: &Export,
        lines: &mut ResultLines,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Option<Compared>, ReconcileError> {
        let Comparison { state, after, .. } = *comparison;
        let cut = self.config.period.epoch(state.cut_ms);
        let fresh = after.is_none();
        let mut rows_read = None;
        let mut total = 0;
        let mut drifts_begun = false;
        let mut last: Option<ItemId> = None;
        while let Some(line) = lines.next().await? {
            let (item, recount) = match line {
                JudgedLine::Total { kind, n } => {
                    match kind.as_str() {
                        "rows" => rows_read = Some(n),
                        "in_sync" | "deferred" | "drifted" => total += n,
                        _ => {}
                    }
                    if fresh {
                        comparison.report.tally(&kind, n);
                    }
                    continue;
                }
                JudgedLine::Unknown { item_id, rows } => {
                    if fresh {
                        comparison.report.unknown_state_rows += rows;
                        if comparison.report.unknown_states.len() < FOREIGN_REPORTED {
                            comparison.report.unknown_states.push(UnknownStateRow {
                                item_id,
                                user_id: None,
                                state: None,
                                rows,
                            });
                        }
                    }
                    continue;
                }
                JudgedLine::Drift { item, recount } => (item, recount),
                // Only a likers result has these.
                JudgedLine::Liker { .. } => continue,
            };
            if !drifts_begun {
                drifts_begun = true;
                check_rows_read(export, rows_read)?;
                progress(Progress::Comparing {
                    items_done: comparison.report.items_checked,
                    items_total: total,
                });
            }
            if after.is_some_and(|after| item <= *after) {
                continue;
            }
            if let Some(last) = &last {
                if now_ms() >= comparison.deadline_ms {
                    return self.pause(comparison, last, total).await.map(Some);
                }
            }
            let live = self.store.item_rows(&item).await?;
            self.judge_item(state, &item, recount, &live, cut, &mut comparison.report)
                .await?;
            every_so_often(progress, comparison.report.items_checked, total);
            last = Some(item);
        }
        check_rows_read(export, rows_read)?;
        Ok(None)
    }

    /// Judges one item's count rows against its recount, corrects a drift once per cut, and
    /// tallies the verdict.
    async fn judge_item(
        &self,
        state: &RunState,
        item: &ItemId,
        recount: Counts,
        rows: &[CountRowState],
        cut: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let verdict = judge(recount, rows, cut);
        let written = match verdict {
            Verdict::Correct(delta) | Verdict::Clamped(delta) => {
                self.store
                    .correct(item, delta, cut, &state.run_id())
                    .await?
            }
            Verdict::InSync | Verdict::Deferred => false,
        };
        report.record(item, verdict, written);
        Ok(())
    }

    /// Records where the compare stopped (`last`, the item it judged last) and its tally, for
    /// the next invocation to go on from.
    async fn pause(
        &self,
        comparison: &mut Comparison<'_>,
        last: &ItemId,
        items_total: u64,
    ) -> Result<Compared, ReconcileError> {
        let report = &mut comparison.report;
        report.duration_ms += now_ms() - comparison.started;
        let tally = serde_json::to_string(&report).expect("reports serialize");
        self.store
            .pause(comparison.state.cut_ms, last, &tally)
            .await?;
        Ok(Compared::Paused {
            items_done: report.items_checked,
            items_total,
        })
    }

    /// Repairs the all-time leaderboard from the recount, as the counts are: every score row
    /// is read (each board shard a page at a time) and judged by [`judge`] on its subtotals,
    /// then every item the recount holds likes of and no row lists; a drift is added to the
    /// score once per cut, attributed to the epoch before it. Only once the boards' `as_of`
    /// has passed the cut's uncertainty (else `leaderboard_behind`, and the next run
    /// repairs). Past `deadline_ms` it stops where it is (`leaderboard_incomplete`); the
    /// board is re-ranked when a score changed.
    async fn repair_leaderboard(
        &self,
        state: &RunState,
        recount: &BTreeMap<ItemId, Counts>,
        deadline_ms: i64,
        report: &mut DriftReport,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<(), ReconcileError> {
        progress(Progress::RepairingLeaderboard);
        let started_ms = now_ms();
        let as_of = self.leaderboard.board(&Window::All, 0).await?.as_of_ms;
        if as_of.is_none_or(|a| a < state.cut_ms + self.config.period.uncertainty_ms) {
            report.leaderboard_behind = true;
            return Ok(());
        }
        let cut = self.config.period.epoch(state.cut_ms);
        let out_of_time = || now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2;
        let mut unlisted: BTreeMap<&str, u64> = recount
            .iter()
            .filter(|(_, counts)| counts.like_count > 0)
            .map(|(item, counts)| (item.as_str(), counts.like_count))
            .collect();
        let (rows, whole) = self.leaderboard.all_time_rows(out_of_time).await?;
        report.leaderboard_incomplete = !whole;
        let mut judged: Vec<_> = rows
            .into_iter()
            .map(|(item, row)| {
                let likes = unlisted.remove(item.as_str()).unwrap_or(0);
                (item, likes, vec![row])
            })
            .collect();
        // Likes no score row lists are known only once every row was read.
        if !report.leaderboard_incomplete {
            judged.extend(
                unlisted
                    .into_iter()
                    .map(|(item, likes)| (item.to_owned(), likes, Vec::new())),
            );
        }
        for (item, likes, rows) in judged {
            if out_of_time() {
                report.leaderboard_incomplete = true;
                break;
            }
            self.judge_score(&item, likes, &rows, cut, report).await?;
        }
        self.rerank(as_of, started_ms, report).await
    }

    /// Athena mode's repair of the all-time leaderboard: Athena's totals, then each item
    /// whose score drifted, judged again from its live score row. Past `deadline_ms` it stops
    /// where it is (`leaderboard_incomplete`); what it corrected stays in sync, so the next
    /// run's judgement no longer lists it.
    async fn repair_scores(
        &self,
        state: &RunState,
        lines: &mut ResultLines,
        deadline_ms: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let started_ms = now_ms();
        let as_of = self.leaderboard.board(&Window::All, 0).await?.as_of_ms;
        let cut = self.config.period.epoch(state.cut_ms);
        while let Some(line) = lines.next().await? {
            match line {
                JudgedLine::Total { kind, n } => match kind.as_str() {
                    "in_sync" => report.leaderboard_checked += n,
                    "deferred" => {
                        report.leaderboard_checked += n;
                        report.leaderboard_deferred += n;
                    }
                    _ => {}
                },
                JudgedLine::Unknown { .. } | JudgedLine::Liker { .. } => {}
                JudgedLine::Drift { item, recount } => {
                    if now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2 {
                        report.leaderboard_incomplete = true;
                        break;
                    }
                    let rows: Vec<_> = self
                        .leaderboard
                        .all_time_row(item.as_str())
                        .await?
                        .into_iter()
                        .collect();
                    self.judge_score(item.as_str(), recount.like_count, &rows, cut, report)
                        .await?;
                }
            }
        }
        self.rerank(as_of, started_ms, report).await
    }

    /// Judges one item's all-time score row against its recounted likes, corrects a drift
    /// once per cut, and tallies it.
    async fn judge_score(
        &self,
        item: &str,
        likes: u64,
        rows: &[CountRowState],
        cut: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let recounted = Counts {
            like_count: likes,
            dislike_count: 0,
        };
        report.leaderboard_checked += 1;
        match judge(recounted, rows, cut) {
            Verdict::InSync => {}
            Verdict::Deferred => report.leaderboard_deferred += 1,
            Verdict::Correct(delta) | Verdict::Clamped(delta) => {
                if self
                    .leaderboard
                    .correct_all_time(item, delta.like, cut)
                    .await?
                {
                    report.leaderboard_corrected += 1;
                }
            }
        }
        Ok(())
    }

    /// Re-ranks the all-time board when the repair changed a score.
    async fn rerank(
        &self,
        as_of: Option<i64>,
        started_ms: i64,
        report: &DriftReport,
    ) -> Result<(), ReconcileError> {
        if report.leaderboard_corrected > 0 {
            self.leaderboard
                .refresh(&[Window::All], as_of, started_ms)
                .await?;
        }
        Ok(())
    }

    /// Repairs the likers lists from the export's `likes`: every liked entry is read (a Scan,
    /// a page at a time) and judged against the export by [`repair`], then every exported
    /// like no entry lists is added. Each write is the pipeline's own conditional one, at a
    /// flip's order, so it never overwrites a flip applied after the cut. It is not
    /// checkpointed: past `deadline_ms` it stops where it is (`likers_incomplete` in the
    /// report), so the counts' run still finishes, and the next run repairs again.
    async fn repair_likers(
        &self,
        state: &RunState,
        (mut likes, unreadable): (ExportedLikes, u64),
        deadline_ms: i64,
        report: &mut DriftReport,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<(), ReconcileError> {
        progress(Progress::RepairingLikers);
        report.likers_unreadable = unreadable;
        // The compare may pause at the deadline; the repair is given the time after it.
        let out_of_time = || now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2;
        let settled_before = state.cut_ms - self.config.period.uncertainty_ms;
        let now = now_ms();
        let mut updates = Vec::new();
        let mut start = None;
        loop {
            let (entries, next) = self.likers.liked_page(start).await?;
            for (item, user, listed) in entries {
                let exported = likes.remove(&(item.clone(), user.clone()));
                updates.extend(repair(
                    &item,
                    &user,
                    Some(listed),
                    exported,
                    settled_before,
                    now,
                ));
            }
            match next {
                Some(_) if out_of_time() => {
                    report.likers_incomplete = true;
                    break;
                }
                Some(next) => start = Some(next),
                None => break,
            }
        }
        // Likes no entry listed are known only once every entry was read.
        if !report.likers_incomplete {
            updates.extend(
                likes
                    .into_iter()
                    .filter_map(|((item, user), at)| repair(&item, &user, None, Some(at), 0, now)),
            );
        }
        for update in &updates {
            if out_of_time() {
                report.likers_incomplete = true;
                break;
            }
            self.apply_liker(update, report).await?;
        }
        Ok(())
    }

    /// Athena mode's repair of the likers lists: each (item, user) pair Athena found out of
    /// step with the export, decided by [`repair`] and written as the in-function repair
    /// writes it. Past `deadline_ms` it stops where it is (`likers_incomplete`); what it
    /// repaired is in step, so the next run's judgement no longer lists it.
    async fn repair_judged_likers(
        &self,
        lines: &mut ResultLines,
        deadline_ms: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let settled_before = report.cut_ms - self.config.period.uncertainty_ms;
        let now = now_ms();
        while let Some(line) = lines.next().await? {
            match line {
                JudgedLine::Total { kind, n } if kind == "unreadable" => {
                    report.likers_unreadable = n;
                }
                JudgedLine::Liker {
                    item,
                    user_id,
                    listed,
                    exported,
                } => {
                    if now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2 {
                        report.likers_incomplete = true;
                        break;
                    }
                    if let Some(update) =
                        repair(&item, &user_id, listed, exported, settled_before, now)
                    {
                        self.apply_liker(&update, report).await?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Writes one likers repair (the pipeline's own conditional write) and tallies it.
    async fn apply_liker(
        &self,
        update: &LikerUpdate,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        if self.likers.apply(update).await? {
            match update.change {
                LikerChange::Liked { .. } => report.likers_added += 1,
                LikerChange::Unliked { .. } => report.likers_removed += 1,
            }
        }
        Ok(())
    }

    /// Writes a run's report to `<report prefix><cut>.json`; its key.
    async fn put_report(&self, report: &DriftReport) -> Result<String, ReconcileError> {
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

/// How a compare ended: the whole run compared and reported, or paused at the deadline.
/// A step's outcome once it has what it waits for, or where the invocation goes next: `None`
/// round again (the run state changed), or the step it stops at.
enum Ready<T> {
    Now(T),
    Wait(Option<Step>),
}

/// Where the compare's judgements come from: the in-function recount, judged here against a
/// Scan of the count rows, or Athena's judgements over the exports.
enum Judging<'a> {
    InFunction(Recount),
    InAthena {
        athena: &'a AthenaJudge,
        judged: Judged,
    },
}

/// A compare in progress: its run, the item a paused compare judged last, and its report so
/// far.
struct Comparison<'a> {
    state: &'a RunState,
    after: Option<&'a ItemId>,
    report: DriftReport,
    started: i64,
    deadline_ms: i64,
}

enum Compared {
    Done(Box<DriftReport>),
    Paused { items_done: u64, items_total: u64 },
}

/// Reports the compare's progress every [`PROGRESS_EVERY`] items, and at its last.
fn every_so_often(progress: &mut (dyn FnMut(Progress) + Send), items_done: u64, items_total: u64) {
    if items_done % PROGRESS_EVERY == 0 || items_done == items_total {
        progress(Progress::Comparing {
            items_done,
            items_total,
        });
    }
}

/// An error unless Athena's census (`rows`) adds up to the export's item count.
fn check_rows_read(export: &Export, rows_read: Option<u64>) -> Result<(), ReconcileError> {
    let expected = export.summary.item_count;
    match rows_read {
        Some(read) if read == expected => Ok(()),
        read => Err(ReconcileError::ItemCount {
            key: export.summary_key.clone(),
            expected,
            read: read.unwrap_or(0),
        }),
    }
}

/// The export's client token: one per table, run and attempt (a token is the account's, not
/// the table's, and must not be reused with other parameters). Every invocation of one
/// attempt asks with the same token, so one that died after asking gets the same export; a
/// failed export is asked for again under the next attempt's, and a cut started over (a
/// given-up cut run again) under its new start's.
fn export_token(table_arn: &str, run: &RunState) -> String {
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
