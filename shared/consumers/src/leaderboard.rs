//! The leaderboard's consumer of the Kinesis event log, and the scheduled refresher of its
//! materialized boards.
//!
//! Per invocation of the consumer (one shard's records, in order): finish the intent a
//! crashed attempt left, skip the records the shard's progress already covers, claim each
//! scoring event for its record (an event on the log twice scores once), freeze each run's
//! net deltas per board and item as the shard's next intent, apply it (one conditional ADD
//! per score row however many events it holds) and move the progress.
//!
//! The refresher ticks once a second: when some shard's progress moved, it re-ranks the
//! boards those shards scored on from their board shards and stores each top, with the
//! `as_of` it read before the scores.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use aws_lambda_events::event::kinesis::{KinesisEvent, KinesisEventRecord};
use aws_lambda_events::event::streams::{KinesisBatchItemFailure, KinesisEventResponse};
use lambda_runtime::LambdaEvent;
use likes_core::leaderboard::{
    board_as_of, expired_log_shards, score_deltas, sequence_after, LogProgress, Window,
    MAX_RUN_EPOCHS,
};
use likes_core::pipeline::{LogRecord, ReactionEvent};
use likes_core::reconcile::Period;
use likes_store::leaderboard::{intent_bytes, Owned, MAX_INTENT_BYTES};
use likes_store::metrics::Report;
use likes_store::{LeaderboardStore, StoreError};
use serde_json::Value;
use tracing::Instrument;

use crate::log_shards::LogShards;
use crate::ticker::run_invocation;
use crate::ConfigError;

#[derive(Debug, Clone)]
pub struct LeaderboardConfig {
    pub leaderboard_table: String,
    /// The shards each board's score rows spread over.
    pub board_shards: u32,
    /// Reconciliation's epochs, which all-time score rows keep subtotals by.
    pub period: Period,
}

impl LeaderboardConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let seconds = |name| ConfigError::whole(&lookup, name).map(|n| n as i64 * 1000);
        Ok(Self {
            leaderboard_table: ConfigError::var(&lookup, "LEADERBOARD_TABLE")?,
            board_shards: ConfigError::whole(&lookup, "LEADERBOARD_SHARDS")? as u32,
            period: Period {
                length_ms: seconds("RECONCILE_EPOCH_SECONDS")?,
                uncertainty_ms: seconds("EXPORT_UNCERTAINTY_SECONDS")?,
            },
        })
    }
}

#[derive(Debug, Clone)]
pub struct Leaderboard {
    store: LeaderboardStore,
    period: Period,
}

/// What one invocation did.
#[derive(Debug, Default)]
struct Applied {
    /// Events this invocation scored (its records' own claims).
    scored: usize,
    /// The first record not applied, if the invocation stopped early.
    failed_at: Option<usize>,
}

impl Leaderboard {
    pub fn new(config: LeaderboardConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            store: LeaderboardStore::new(dynamodb, config.leaderboard_table)
                .with_board_shards(config.board_shards),
            period: config.period,
        }
    }

    /// Applies the batch's events. A failed write, or an event that cannot be read, is a
    /// `batchItemFailures` entry: at the unreadable record (the records before it are
    /// applied), else at the first record, whose retry skips what the progress covers.
    pub async fn handle(
        &self,
        event: LambdaEvent<KinesisEvent>,
    ) -> Result<KinesisEventResponse, lambda_runtime::Error> {
        let records = event.payload.records;
        let span = tracing::info_span!("leaderboard", records = records.len());
        // Boxed: the future nests the store's streams of calls deeper than rustc lays out.
        let applied = match Box::pin(self.apply(&records)).instrument(span).await {
            Ok(applied) => applied,
            Err(err) => {
                tracing::error!(error = %err, "the batch could not be applied; Lambda retries it");
                Applied {
                    scored: 0,
                    failed_at: Some(0),
                }
            }
        };
        let mut response = KinesisEventResponse::default();
        if let Some(at) = applied.failed_at {
            let mut failure = KinesisBatchItemFailure::default();
            failure.item_identifier = Some(records[at].kinesis.sequence_number.clone());
            response.batch_item_failures.push(failure);
        }
        Report::new("Likes/Leaderboard")
            .value("RecordsReceived", "Count", records.len() as f64)
            .value("EventsApplied", "Count", applied.scored as f64)
            .value(
                "BatchFailures",
                "Count",
                applied.failed_at.is_some() as u64 as f64,
            )
            .emit();
        Ok(response)
    }

    async fn apply(&self, records: &[KinesisEventRecord]) -> Result<Applied, StoreError> {
        let Some(first) = records.first() else {
            return Ok(Applied::default());
        };
        let shard = shard_of(first);
        let state = self.store.shard_state(shard).await?;
        let mut through = state.through_seq;
        let mut intents = state.intents;
        if let Some(intent) = state.pending {
            self.store
                .complete(shard, &intent, through.as_deref())
                .await?;
            through = Some(intent.last_seq);
            intents = intent.n;
        }

        let mut events: Vec<(&KinesisEventRecord, ReactionEvent)> = Vec::new();
        let mut failed_at = None;
        // The last record read, event or heartbeat: the progress moves to it.
        let mut last_read = None;
        for (at, record) in records.iter().enumerate() {
            let seq = &record.kinesis.sequence_number;
            if through.as_deref().is_some_and(|t| !sequence_after(seq, t)) {
                continue;
            }
            match LogRecord::parse(&record.kinesis.data) {
                Ok(read) => {
                    last_read = Some(record);
                    events.extend(read.event().map(|event| (record, event)));
                }
                Err(err) => {
                    tracing::error!(sequence_number = %seq, error = %err, "unreadable event; Lambda retries from it");
                    failed_at = Some(at);
                    break;
                }
            }
        }
        let mut scored = 0;
        for run in runs(&events, self.period) {
            let (last, _) = run.last().expect("runs are never empty");
            let last_seq = last.kinesis.sequence_number.clone();
            let arrival = last
                .kinesis
                .approximate_arrival_timestamp
                .timestamp_millis();
            let owners: Vec<String> = run
                .iter()
                .map(|(record, _)| format!("{shard}:{}", record.kinesis.sequence_number))
                .collect();
            let scoring: Vec<Owned> = run
                .iter()
                .zip(&owners)
                .filter(|((_, event), _)| event.like_delta != 0)
                .map(|((_, event), by)| Owned { event, by })
                .collect();
            let mine = self
                .store
                .claim(&scoring, likes_core::clock::now_ms())
                .await?;
            let owned: Vec<&ReactionEvent> = scoring
                .iter()
                .zip(&mine)
                .filter(|(_, mine)| **mine)
                .map(|(owned, _)| owned.event)
                .collect();
            scored += owned.len();
            let deltas = score_deltas(owned, self.period);
            if deltas.is_empty() {
                self.store
                    .advance(shard, through.as_deref(), &last_seq, arrival, intents)
                    .await?;
            } else {
                let intent = self
                    .store
                    .begin(shard, intents + 1, &deltas, &last_seq, arrival)
                    .await?;
                self.store
                    .complete(shard, &intent, through.as_deref())
                    .await?;
                intents = intent.n;
            }
            through = Some(last_seq);
        }
        // Heartbeats after the last event score nothing; the progress moves over them.
        if let Some(last) = last_read {
            let last_seq = &last.kinesis.sequence_number;
            if through
                .as_deref()
                .is_none_or(|t| sequence_after(last_seq, t))
            {
                let arrival = last
                    .kinesis
                    .approximate_arrival_timestamp
                    .timestamp_millis();
                self.store
                    .advance(shard, through.as_deref(), last_seq, arrival, intents)
                    .await?;
            }
        }
        Ok(Applied { scored, failed_at })
    }
}

/// `events` cut into runs whose intents fit one item ([`MAX_INTENT_BYTES`]) and span at most
/// [`MAX_RUN_EPOCHS`] epochs.
fn runs<R>(events: &[(R, ReactionEvent)], period: Period) -> Vec<&[(R, ReactionEvent)]> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    let mut epochs = BTreeSet::new();
    for (at, (_, event)) in events.iter().enumerate() {
        let more = intent_bytes(event);
        let epoch = period.epoch(event.event_time_ms);
        let new_epoch = !epochs.contains(&epoch);
        if at > start
            && (bytes + more > MAX_INTENT_BYTES || (new_epoch && epochs.len() == MAX_RUN_EPOCHS))
        {
            runs.push(&events[start..at]);
            (start, bytes) = (at, 0);
            epochs.clear();
        }
        bytes += more;
        epochs.insert(epoch);
    }
    if start < events.len() {
        runs.push(&events[start..]);
    }
    runs
}

/// The Kinesis shard a record came from: its event id is `<shard id>:<sequence number>`.
fn shard_of(record: &KinesisEventRecord) -> &str {
    record
        .event_id
        .as_deref()
        .and_then(|id| id.split_once(':'))
        .map_or("", |(shard, _)| shard)
}

#[derive(Debug, Clone)]
pub struct RefresherConfig {
    pub leaderboard_table: String,
    /// The event log, whose shards `as_of` follows through reshards.
    pub events_stream_arn: String,
    pub board_shards: u32,
    /// How long one invocation keeps ticking.
    pub run_for: Duration,
    pub tick: Duration,
    /// A log shard whose consumer applied nothing that arrived in this long gets a
    /// heartbeat (and no second one within it), so the boards' `as_of` moves through a quiet
    /// spell.
    pub heartbeat_after: Duration,
}

impl RefresherConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let whole = |name| ConfigError::whole(&lookup, name).map(|n| n as u64);
        Ok(Self {
            leaderboard_table: ConfigError::var(&lookup, "LEADERBOARD_TABLE")?,
            events_stream_arn: ConfigError::var(&lookup, "EVENTS_STREAM_ARN")?,
            board_shards: whole("LEADERBOARD_SHARDS")? as u32,
            run_for: Duration::from_secs(whole("REFRESH_SECONDS")?),
            tick: Duration::from_millis(whole("REFRESH_TICK_MS")?),
            heartbeat_after: Duration::from_secs(whole("HEARTBEAT_AFTER_SECONDS")?),
        })
    }
}

/// Why a refresh tick failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Log(#[from] likes_aws::AwsError),
}

/// What one refresh tick did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshReport {
    pub boards_refreshed: usize,
    pub as_of_ms: Option<i64>,
    pub heartbeats: usize,
    /// Log shards whose progress went because they expired from the log.
    pub log_shards_retired: usize,
}

/// A log shard's progress as the last tick read it: its last record and intents applied.
type Seen = BTreeMap<String, (Option<String>, u64)>;

/// The scheduled refresher of the materialized boards.
#[derive(Debug)]
pub struct BoardRefresher {
    config: RefresherConfig,
    store: LeaderboardStore,
    log_shards: LogShards,
    /// Each shard's progress at the last tick; `None` before this invocation's first.
    seen: Mutex<Option<Seen>>,
    /// When this invocation last put a heartbeat on each shard.
    heartbeats: Mutex<BTreeMap<String, i64>>,
}

impl BoardRefresher {
    pub fn new(
        config: RefresherConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        kinesis: aws_sdk_kinesis::Client,
    ) -> Self {
        Self {
            store: LeaderboardStore::new(dynamodb, config.leaderboard_table.clone())
                .with_board_shards(config.board_shards),
            log_shards: LogShards::new(kinesis, config.events_stream_arn.clone()),
            config,
            seen: Mutex::new(None),
            heartbeats: Mutex::new(BTreeMap::new()),
        }
    }

    /// One scheduled invocation: ticks until `run_for` has passed (or the deadline nears).
    /// Fails only when no tick succeeded, so a broken refresher shows in the function's
    /// errors.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
        *self.seen.lock().expect("seen progress") = None;
        run_invocation(
            "refresh",
            "Likes/Leaderboard",
            (self.config.run_for, self.config.tick),
            event,
            |report: &RefreshReport| report.as_of_ms,
            // Boxed: the tick's future nests deeper than rustc lays out inline.
            || Box::pin(self.tick()),
        )
        .await
    }

    /// Reads every shard's progress; when some shard applied an intent since the last tick
    /// (or this is the invocation's first), re-ranks `all`, today's board and the days the
    /// shards scored on; when shards only moved over records that score nothing, moves the
    /// `as_of` of `all` and today's board without ranking again (no score changed). `as_of`
    /// is the lowest progress of the shards not done with ([`board_as_of`]), read before any
    /// score. Then puts a heartbeat on each open shard that applied nothing for
    /// `heartbeat_after`, and retires the shards that have expired from the log
    /// ([`expired_log_shards`]).
    pub async fn tick(&self) -> Result<RefreshReport, RefreshError> {
        let started_ms = likes_core::clock::now_ms();
        let progress = self.store.progress().await?;
        let shards = self.log_shards.list().await?;
        let logged: Vec<_> = progress
            .iter()
            .map(|p| LogProgress {
                shard_id: p.shard.clone(),
                through_seq: p.through_seq.clone(),
                applied_through_ms: p.applied_through_ms,
            })
            .collect();
        let as_of_ms = board_as_of(&shards, &logged);
        let today = Window::day_of(started_ms);
        let mut boards = BTreeSet::new();
        let mut moved = false;
        {
            let seen = self.seen.lock().expect("seen progress");
            for shard in &progress {
                match seen.as_ref().map(|seen| seen.get(&shard.shard)) {
                    Some(Some((through, intents))) if *intents == shard.intents => {
                        moved |= *through != shard.through_seq;
                    }
                    _ => {
                        boards.insert(Window::All);
                        boards.insert(today.clone());
                        boards.extend(shard.windows.iter().cloned());
                    }
                }
            }
        }
        self.store.refresh(&boards, as_of_ms, started_ms).await?;
        if let (true, true, Some(as_of_ms)) = (boards.is_empty(), moved, as_of_ms) {
            self.store
                .touch(&[Window::All, today], as_of_ms, started_ms)
                .await?;
        }
        *self.seen.lock().expect("seen progress") = Some(
            progress
                .iter()
                .map(|p| (p.shard.clone(), (p.through_seq.clone(), p.intents)))
                .collect(),
        );
        let quiet_since = started_ms - self.config.heartbeat_after.as_millis() as i64;
        let quiet: Vec<_> = {
            let put = self.heartbeats.lock().expect("heartbeats");
            shards
                .iter()
                .filter(|shard| shard.ending_sequence_number.is_none())
                .filter(|shard| {
                    progress
                        .iter()
                        .any(|p| p.shard == shard.shard_id && p.applied_through_ms < quiet_since)
                })
                .filter(|shard| put.get(&shard.shard_id).is_none_or(|at| *at < quiet_since))
                .collect()
        };
        for shard in &quiet {
            self.log_shards.put_heartbeat(shard, started_ms).await?;
            self.heartbeats
                .lock()
                .expect("heartbeats")
                .insert(shard.shard_id.clone(), started_ms);
        }
        let mut retired = 0;
        for shard in expired_log_shards(&shards, &logged, started_ms) {
            // Refused: an intent of it is pending, or its progress moved; the next tick
            // decides again.
            if self
                .store
                .retire(&shard.shard_id, shard.through_seq.as_deref())
                .await?
            {
                retired += 1;
            }
        }
        let report = RefreshReport {
            boards_refreshed: boards.len(),
            as_of_ms,
            heartbeats: quiet.len(),
            log_shards_retired: retired,
        };
        Report::new("Likes/Leaderboard")
            .value("BoardsRefreshed", "Count", report.boards_refreshed as f64)
            .value("HeartbeatsPut", "Count", report.heartbeats as f64)
            .value(
                "LogShardsRetired",
                "Count",
                report.log_shards_retired as f64,
            )
            .emit();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use likes_core::ReactionState::{Like, None as Neutral};

    const PERIOD: Period = Period {
        length_ms: 300_000,
        uncertainty_ms: 60_000,
    };

    fn event(user: usize, item: &str) -> ReactionEvent {
        ReactionEvent {
            event_id: format!("u{user}#{item}#1"),
            user_id: format!("u{user}"),
            item_id: item.into(),
            op_id: 1,
            old_state: Neutral,
            new_state: Like,
            like_delta: 1,
            dislike_delta: 0,
            event_time_ms: 1_796_119_200_000,
            source_sequence_number: user.to_string(),
            row_created_ms: 1_796_119_100_000,
        }
    }

    #[test]
    fn runs_cut_where_an_intent_would_outgrow_its_row_and_keep_every_event_in_order() {
        let long = "i".repeat(128);
        let events: Vec<((), ReactionEvent)> = (0..5_000).map(|u| ((), event(u, &long))).collect();
        let cut = runs(&events, PERIOD);
        let per_run = MAX_INTENT_BYTES / intent_bytes(&events[0].1);
        assert_eq!(cut[0].len(), per_run);
        assert!(cut.iter().all(|run| {
            run.iter().map(|(_, e)| intent_bytes(e)).sum::<usize>() <= MAX_INTENT_BYTES
        }));
        let rejoined: Vec<&str> = cut
            .iter()
            .flat_map(|run| run.iter().map(|(_, e)| e.user_id.as_str()))
            .collect();
        let all: Vec<&str> = events.iter().map(|(_, e)| e.user_id.as_str()).collect();
        assert_eq!(rejoined, all);
        assert!(runs::<()>(&[], PERIOD).is_empty());
        // A short batch is one run.
        assert_eq!(runs(&events[..10], PERIOD).len(), 1);
    }

    #[test]
    fn runs_cut_before_they_span_more_epochs_than_a_score_row_update_may_name() {
        // A replay of old events: one event per epoch.
        let events: Vec<((), ReactionEvent)> = (0..40)
            .map(|n| {
                let mut event = event(n, "game:1");
                event.event_time_ms = n as i64 * PERIOD.length_ms;
                ((), event)
            })
            .collect();
        let cut = runs(&events, PERIOD);
        assert_eq!(
            cut.iter().map(|run| run.len()).collect::<Vec<_>>(),
            [MAX_RUN_EPOCHS, MAX_RUN_EPOCHS, 40 - 2 * MAX_RUN_EPOCHS]
        );
    }
}
