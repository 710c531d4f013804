//! One reconciliation run, as a small persisted state machine that any invocation advances:
//! start the export of the Reactions table at cut T → wait for it → wait until the pipeline
//! has applied every flip before T (and within the export's uncertainty after it) → recount,
//! compare, correct → report. Each step is a conditional write on the run state, so a run
//! survives the invocation that started it, and two overlapping invocations never both
//! start or compare one cut.

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::operation::export_table_to_point_in_time::ExportTableToPointInTimeError;
use aws_sdk_dynamodb::types::{ExportFormat, ExportStatus};
use likes_core::clock::{now_ms, rfc3339};
use likes_core::pipeline::Counts;
use likes_core::reconcile::{judge, Period, Verdict};
use likes_store::reconciliation::{reconciled_attributes, Phase, ReconciliationStore, RunState};
use likes_store::FreshnessStore;

use crate::athena::{AthenaConfig, AthenaRecount};
use crate::export::{Export, ExportReader, ReadProgress, Recount};
use crate::report::DriftReport;
use crate::ReconcileError;

/// How often a waiting invocation asks again whether the export is complete.
const EXPORT_POLL: Duration = Duration::from_secs(10);
/// How often a waiting invocation asks again whether Athena's recount is done.
const QUERY_POLL: Duration = Duration::from_secs(2);
/// Items (and count rows) between two progress reports of the compare and cleanup steps.
const PROGRESS_EVERY: usize = 100;
/// A scheduled invocation stops waiting this long before its deadline.
const DEADLINE_MARGIN_MS: i64 = 30_000;

#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    pub reactions_table_arn: String,
    pub counts_table: String,
    pub export_bucket: String,
    /// Exports go under `<prefix>AWSDynamoDB/<export id>/`.
    pub export_prefix: String,
    /// Drift reports go to `<prefix><cut>.json`.
    pub report_prefix: String,
    pub period: Period,
    /// How long the compare step's lease lasts: the function's timeout.
    pub lease: Duration,
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
        let var = |name: &'static str| lookup(name).ok_or(ReconcileError::MissingVariable(name));
        let seconds = |name: &'static str, max: i64| -> Result<i64, ReconcileError> {
            let value = var(name)?;
            value
                .parse()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or(ReconcileError::Range { name, max, value })
        };
        Ok(Self {
            reactions_table_arn: var("REACTIONS_TABLE_ARN")?,
            counts_table: var("COUNTS_TABLE")?,
            export_bucket: var("EXPORT_BUCKET")?,
            export_prefix: var("EXPORT_PREFIX")?,
            report_prefix: var("REPORT_PREFIX")?,
            period: Period {
                length_ms: seconds("RECONCILE_EPOCH_SECONDS", 24 * 3600)? * 1000,
                uncertainty_ms: seconds("EXPORT_UNCERTAINTY_SECONDS", 3600)? * 1000,
            },
            lease: Duration::from_secs(seconds("RECONCILE_LEASE_SECONDS", 3600)? as u64),
            engine: match var("RECOUNT_ENGINE")?.as_str() {
                "function" => RecountEngine::Function,
                "athena" => RecountEngine::Athena(AthenaConfig {
                    workgroup: var("ATHENA_WORKGROUP")?,
                    database: var("GLUE_DATABASE")?,
                }),
                other => return Err(ReconcileError::Engine(other.to_owned())),
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
    Reconciled(Box<DriftReport>),
}

/// What a run is doing, for a progress display (and a bench's phase timings): each step
/// reports once as it begins, the long ones again as they go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
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
    /// Reconciled subtotals are dropped from the count rows read.
    Cleaning {
        rows_done: u64,
        rows_total: u64,
    },
    /// The drift report is written.
    Reporting,
}

#[derive(Debug, Clone)]
pub struct Reconciler {
    config: ReconcileConfig,
    dynamodb: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
    store: ReconciliationStore,
    freshness: FreshnessStore,
    reader: ExportReader,
    athena: Option<AthenaRecount>,
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
                RecountEngine::Athena(athena_config) => Some(AthenaRecount::new(
                    athena,
                    s3.clone(),
                    athena_config.clone(),
                )),
            },
            store: ReconciliationStore::new(dynamodb.clone(), config.counts_table.clone()),
            freshness: FreshnessStore::new(dynamodb.clone(), config.counts_table.clone()),
            reader: ExportReader::new(s3.clone()),
            config,
            dynamodb,
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
        let latest = self.config.period.latest_cut(now_ms());
        let state = self.store.state().await?;
        let due = state
            .as_ref()
            .is_none_or(|s| s.phase == Phase::Done && s.cut_ms < latest);
        if due && !self.store.begin(latest, now_ms()).await? {
            return Ok(Step::Idle);
        }
        self.drive(deadline_ms, progress).await
    }

    /// An operator's run: reconciles the cut at or before `at_ms` now, waiting for each step
    /// until `deadline_ms`. A run of another cut still going is finished first; a cut already
    /// reconciled is compared again (which corrects nothing twice).
    pub async fn run_at(
        &self,
        at_ms: i64,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Step, ReconcileError> {
        let cut = self.config.period.cut_at(at_ms);
        loop {
            let state = self.store.state().await?;
            let started = match &state {
                None => self.store.begin(cut, now_ms()).await?,
                Some(s) if s.phase == Phase::Done && s.cut_ms < cut => {
                    self.store.begin(cut, now_ms()).await?
                }
                Some(s) if s.phase == Phase::Done && s.cut_ms == cut => {
                    self.store.reopen(cut).await?
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
                continue;
            }
            let step = self.drive(deadline_ms, progress).await?;
            let finished_other = matches!(&step, Step::Reconciled(report) if report.cut_ms != cut);
            match step {
                _ if finished_other => continue,
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

    /// Advances the run in the state row as far as it goes before `deadline_ms`.
    async fn drive(
        &self,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Step, ReconcileError> {
        loop {
            let Some(state) = self.store.state().await? else {
                return Ok(Step::Idle);
            };
            match &state.phase {
                Phase::Done => return Ok(Step::Idle),
                Phase::Exporting { export_arn: None } => {
                    progress(Progress::Exporting {
                        cut_ms: state.cut_ms,
                    });
                    let arn = self.start_export(&state).await?;
                    self.store.exporting(state.cut_ms, &arn).await?;
                }
                Phase::Exporting {
                    export_arn: Some(arn),
                } => {
                    if !self.export_complete(arn).await? {
                        if now_ms() + EXPORT_POLL.as_millis() as i64 >= deadline_ms {
                            return Ok(Step::WaitingForExport {
                                cut_ms: state.cut_ms,
                            });
                        }
                        tokio::time::sleep(EXPORT_POLL).await;
                        continue;
                    }
                    self.store.comparing(state.cut_ms).await?;
                }
                Phase::Comparing { export_arn } => {
                    let needed = state.cut_ms + self.config.period.uncertainty_ms;
                    let as_of = self.freshness.as_of().await;
                    if as_of.is_none_or(|a| a < needed) {
                        return Ok(Step::WaitingForPipeline {
                            cut_ms: state.cut_ms,
                            as_of_ms: as_of,
                        });
                    }
                    progress(Progress::Recounting);
                    let export = self.open_export(export_arn).await?;
                    let recounted = match &self.athena {
                        None => None,
                        Some(athena) => match athena.poll(&state.run_id(), &export).await? {
                            Some(recount) => Some(recount),
                            None if now_ms() + (QUERY_POLL.as_millis() as i64) < deadline_ms => {
                                tokio::time::sleep(QUERY_POLL).await;
                                continue;
                            }
                            None => {
                                return Ok(Step::WaitingForRecount {
                                    cut_ms: state.cut_ms,
                                })
                            }
                        },
                    };
                    let now = now_ms();
                    let lease_until = now + self.config.lease.as_millis() as i64;
                    if !self.store.lease(state.cut_ms, now, lease_until).await? {
                        return Ok(Step::Idle);
                    }
                    let recount = match recounted {
                        Some(recount) => recount,
                        None => {
                            self.reader
                                .recount(&export, |read| progress(Progress::Reading(read)))
                                .await?
                        }
                    };
                    let report = self.compare(&state, export_arn, recount, progress).await?;
                    if let Some(athena) = &self.athena {
                        athena.drop_table(&state.run_id(), &export).await?;
                    }
                    return Ok(Step::Reconciled(Box::new(report)));
                }
            }
        }
    }

    /// Starts (or, with the same client token, finds again) the export at the run's cut.
    async fn start_export(&self, state: &RunState) -> Result<String, ReconcileError> {
        let cut = aws_sdk_dynamodb::primitives::DateTime::from_millis(state.cut_ms);
        let output = self
            .dynamodb
            .export_table_to_point_in_time()
            .table_arn(&self.config.reactions_table_arn)
            .export_time(cut)
            .s3_bucket(&self.config.export_bucket)
            .s3_prefix(&self.config.export_prefix)
            .export_format(ExportFormat::DynamodbJson)
            // Idempotent for 8 hours: an invocation that died after asking gets the same export.
            .client_token(export_token(&self.config.reactions_table_arn, state.cut_ms))
            .send()
            .await;
        let output = match output {
            Ok(output) => output,
            // A cut before the table's recovery window (a table younger than the cut, say)
            // can never be exported: the run is given up, so the next cut is not blocked.
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(ExportTableToPointInTimeError::InvalidExportTimeException(_))
                ) =>
            {
                let reason = DisplayErrorContext(err).to_string();
                self.store.abandon(state.cut_ms, &reason).await?;
                return Err(ReconcileError::CutNotExportable {
                    cut_ms: state.cut_ms,
                    reason,
                });
            }
            Err(err) => {
                return Err(ReconcileError::Aws {
                    operation: "ExportTableToPointInTime",
                    message: DisplayErrorContext(err).to_string(),
                })
            }
        };
        output
            .export_description
            .and_then(|d| d.export_arn)
            .ok_or_else(|| ReconcileError::Aws {
                operation: "ExportTableToPointInTime",
                message: "no export ARN in the answer".into(),
            })
    }

    async fn export_complete(&self, arn: &str) -> Result<bool, ReconcileError> {
        let description = self.describe_export(arn).await?;
        match description.export_status {
            Some(ExportStatus::Completed) => Ok(true),
            Some(ExportStatus::InProgress) | None => Ok(false),
            Some(other) => Err(ReconcileError::ExportFailed {
                arn: arn.to_owned(),
                status: other.as_str().to_owned(),
                message: description.failure_message.unwrap_or_default(),
            }),
        }
    }

    async fn describe_export(
        &self,
        arn: &str,
    ) -> Result<aws_sdk_dynamodb::types::ExportDescription, ReconcileError> {
        self.dynamodb
            .describe_export()
            .export_arn(arn)
            .send()
            .await
            .map_err(|err| ReconcileError::Aws {
                operation: "DescribeExport",
                message: DisplayErrorContext(err).to_string(),
            })?
            .export_description
            .ok_or_else(|| ReconcileError::Aws {
                operation: "DescribeExport",
                message: format!("no description of {arn}"),
            })
    }

    /// A complete export's manifests, read and checked.
    async fn open_export(&self, export_arn: &str) -> Result<Export, ReconcileError> {
        let description = self.describe_export(export_arn).await?;
        let manifest = description
            .export_manifest
            .ok_or_else(|| ReconcileError::Aws {
                operation: "DescribeExport",
                message: format!("{export_arn} names no manifest"),
            })?;
        self.reader
            .open(&self.config.export_bucket, &manifest)
            .await
    }

    /// Compares every item of the recount with what was applied before the cut, corrects,
    /// cleans reconciled subtotals, reports.
    async fn compare(
        &self,
        state: &RunState,
        export_arn: &str,
        recount: Recount,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<DriftReport, ReconcileError> {
        let started = now_ms();
        progress(Progress::ReadingCounts);
        let rows = self.store.count_rows().await?;
        let cut = self.config.period.epoch(state.cut_ms);
        let run_id = state.run_id();
        let mut report = DriftReport {
            run_id: run_id.clone(),
            cut_ms: state.cut_ms,
            cut: rfc3339(state.cut_ms),
            export_arn: export_arn.to_owned(),
            recounted_by: match self.config.engine {
                RecountEngine::Function => "function",
                RecountEngine::Athena(_) => "athena",
            },
            rows_read: recount.rows_read,
            probe_rows: recount.probes,
            foreign_rows: recount.foreign_rows,
            ..DriftReport::default()
        };
        let items: BTreeSet<_> = recount
            .per_item
            .keys()
            .chain(rows.keys())
            .cloned()
            .collect();
        let total = items.len() as u64;
        progress(Progress::Comparing {
            items_done: 0,
            items_total: total,
        });
        for (done, item) in items.iter().enumerate() {
            let states: Vec<_> = rows
                .get(item)
                .map(|rows| rows.iter().map(|(_, row)| row.clone()).collect())
                .unwrap_or_default();
            let counted = recount
                .per_item
                .get(item)
                .copied()
                .unwrap_or(Counts::default());
            let verdict = judge(counted, &states, cut);
            let written = match verdict {
                Verdict::Correct(delta) | Verdict::Clamped(delta) => {
                    self.store.correct(item, delta, cut, &run_id).await?
                }
                Verdict::InSync | Verdict::Deferred => false,
            };
            report.record(item, verdict, written);
            if (done + 1) % PROGRESS_EVERY == 0 || done as u64 + 1 == total {
                progress(Progress::Comparing {
                    items_done: done as u64 + 1,
                    items_total: total,
                });
            }
        }
        let rows_total = rows.values().map(|rows| rows.len() as u64).sum();
        progress(Progress::Cleaning {
            rows_done: 0,
            rows_total,
        });
        for (done, (key, row)) in rows.values().flatten().enumerate() {
            self.store
                .drop_reconciled(key, &reconciled_attributes(row, cut))
                .await?;
            if (done + 1) % PROGRESS_EVERY == 0 || done as u64 + 1 == rows_total {
                progress(Progress::Cleaning {
                    rows_done: done as u64 + 1,
                    rows_total,
                });
            }
        }
        progress(Progress::Reporting);
        report.duration_ms = now_ms() - started;
        let key = format!("{}{}.json", self.config.report_prefix, state.cut_ms);
        self.s3
            .put_object()
            .bucket(&self.config.export_bucket)
            .key(&key)
            .content_type("application/json")
            .body(
                serde_json::to_vec_pretty(&report)
                    .expect("reports serialize")
                    .into(),
            )
            .send()
            .await
            .map_err(|err| ReconcileError::Aws {
                operation: "PutObject",
                message: DisplayErrorContext(err).to_string(),
            })?;
        report.emit();
        self.store.done(state.cut_ms, &key).await?;
        Ok(report)
    }
}

/// The export's client token: one per table and cut (a token is the account's, not the
/// table's, and must not be reused with other parameters).
fn export_token(table_arn: &str, cut_ms: i64) -> String {
    use md5::{Digest, Md5};
    let digest = Md5::digest(format!("{table_arn}#{cut_ms}").as_bytes());
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
        let step = self.advance(deadline_ms, &mut |_| {}).await?;
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
            Step::Reconciled(report) => serde_json::json!({"step": "reconciled", "report": report}),
        })
    }
}

/// The whole of the reconcile function's `main`.
pub async fn run() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = ReconcileConfig::from_env()?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let reconciler = Reconciler::new(
        config,
        aws_sdk_dynamodb::Client::new(&sdk),
        aws_sdk_s3::Client::new(&sdk),
        aws_sdk_athena::Client::new(&sdk),
    );
    let reconciler = &reconciler;
    lambda_runtime::run(lambda_runtime::service_fn(move |event| async move {
        reconciler.handle(event).await
    }))
    .await
}
