//! The scheduled refresher of the leaderboard's materialized boards. It ticks once a
//! second: when some shard's progress moved, it re-ranks the namespace boards those shards
//! scored on from their board shards, then the global boards of the same windows from the
//! namespaces' tops, and stores each top with the `as_of` it read before the scores.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use lambda_runtime::LambdaEvent;
use likes_core::leaderboard::{board_as_of, expired_log_shards, Board, LogProgress, Window};
use likes_core::namespace::Namespace;
use likes_store::leaderboard::{ShardProgress, SCORED_KEPT_MS};
use likes_store::metrics::Report;
use likes_store::{LeaderboardStore, StoreError};
use serde_json::Value;

use crate::log_shards::LogShards;
use crate::ticker::run_invocation;
use crate::ConfigError;

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
    /// Intents left pending on those shards, given up with them.
    pub intents_abandoned: usize,
}

/// The shards' progress as a tick read it (each shard's last record and intents applied),
/// and when.
#[derive(Debug)]
struct Seen {
    at_ms: i64,
    shards: BTreeMap<String, (Option<String>, u64)>,
}

/// The scheduled refresher of the materialized boards.
#[derive(Debug)]
pub struct BoardRefresher {
    config: RefresherConfig,
    store: LeaderboardStore,
    log_shards: LogShards,
    /// Each shard's progress at the last tick; `None` before this invocation's first.
    seen: Mutex<Option<Seen>>,
    /// The namespaces known to have boards, read once per container and added to.
    namespaces: tokio::sync::Mutex<Option<BTreeSet<Namespace>>>,
    /// When this invocation last put a heartbeat on each shard.
    heartbeats: Mutex<BTreeMap<String, i64>>,
    /// When the log was created, read once per container: the start of a shard nobody has
    /// read yet and whose ancestors have no progress.
    log_created_ms: tokio::sync::OnceCell<i64>,
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
            namespaces: tokio::sync::Mutex::new(None),
            heartbeats: Mutex::new(BTreeMap::new()),
            log_created_ms: tokio::sync::OnceCell::new(),
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

    /// The namespace boards shards scored on since the last tick (by the intents each
    /// applied since), whether any shard moved without scoring, and whether the progress
    /// cannot name every board scored since: no tick yet, one too long ago for the progress
    /// rows to still name what was scored before it, or a shard that dropped some.
    fn scored_since_last_tick(
        &self,
        progress: &[ShardProgress],
        started_ms: i64,
    ) -> (BTreeSet<Board>, bool, bool) {
        let seen = self.seen.lock().expect("seen progress");
        let seen = seen
            .as_ref()
            .filter(|seen| started_ms - seen.at_ms < SCORED_KEPT_MS / 2);
        let mut boards = BTreeSet::new();
        let mut moved = false;
        let mut everything = seen.is_none();
        for shard in progress {
            let before = seen.and_then(|seen| seen.shards.get(&shard.shard));
            match before {
                Some((through, intents)) if *intents == shard.intents => {
                    moved |= *through != shard.through_seq;
                }
                _ => {
                    let since = before.map_or(0, |(_, intents)| *intents);
                    everything |= shard.scored_dropped > since;
                    boards.extend(
                        shard
                            .scored
                            .iter()
                            .filter(|(_, n)| *n > since)
                            .map(|(board, _)| board.clone()),
                    );
                }
            }
        }
        (boards, moved, everything)
    }

    /// Notes the namespaces of `boards` not yet known to have boards, so the global boards
    /// rank from their tops; every namespace known to have boards. One noted by another
    /// container (two invocations overlapping) joins this one's at its next invocation's
    /// first tick, a minute at most, which re-ranks every namespace's boards.
    async fn register(
        &self,
        boards: &BTreeSet<Board>,
    ) -> Result<BTreeSet<Namespace>, RefreshError> {
        let mut known = self.namespaces.lock().await;
        let known = match &mut *known {
            Some(known) => known,
            None => known.insert(self.store.namespaces().await?),
        };
        let new: BTreeSet<Namespace> = boards
            .iter()
            .filter_map(|board| board.namespace.clone())
            .filter(|namespace| !known.contains(namespace))
            .collect();
        self.store.register_namespaces(&new).await?;
        known.extend(new);
        Ok(known.clone())
    }

    /// Reads every shard's progress; when some shard applied an intent since the last tick,
    /// re-ranks the namespace boards its intents scored on since, then the global boards of
    /// their all-time and day windows. On the invocation's first tick, or when the last
    /// was too long ago (or a shard dropped boards it scored on) for the progress to name
    /// every board scored since, it re-ranks every known namespace's current boards too.
    /// When shards only moved over records that score nothing, it moves the `as_of` of the
    /// global `all` and today's board without ranking again (no score changed). `as_of`
    /// is the lowest progress of the shards not done with, or the start of one not read yet
    /// ([`board_as_of`]), read before any score. Then puts a heartbeat on each open shard
    /// that applied nothing for `heartbeat_after` (or nothing at all), and retires the shards
    /// that have expired from the log ([`expired_log_shards`]), giving up an intent one left
    /// pending.
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
        let log_created_ms = *self
            .log_created_ms
            .get_or_try_init(|| self.log_shards.created_ms())
            .await?;
        let as_of_ms = board_as_of(&shards, &logged, log_created_ms);
        let today = Window::day_of(started_ms);
        let (mut boards, moved, everything) = self.scored_since_last_tick(&progress, started_ms);
        if everything {
            let namespaces = self.store.namespaces().await?;
            for namespace in &namespaces {
                for window in [
                    Window::All,
                    today.clone(),
                    Window::hour_of(started_ms),
                    Window::week_of(started_ms),
                ] {
                    boards.insert(Board {
                        namespace: Some(namespace.clone()),
                        window,
                    });
                }
            }
            *self.namespaces.lock().await = Some(namespaces);
        }
        let namespaces = self.register(&boards).await?;
        let global: Vec<Board> = boards
            .iter()
            .filter(|board| matches!(board.window, Window::All | Window::Day(_)))
            .map(|board| Board::global(board.window.clone()))
            .collect();
        boards.extend(global);
        if everything {
            boards.insert(Board::global(Window::All));
            boards.insert(Board::global(today.clone()));
        }
        self.store
            .refresh(&boards, &namespaces, as_of_ms, started_ms)
            .await?;
        if let (true, true, Some(as_of_ms)) = (boards.is_empty(), moved, as_of_ms) {
            self.store
                .touch(&[Window::All, today], as_of_ms, started_ms)
                .await?;
        }
        *self.seen.lock().expect("seen progress") = Some(Seen {
            at_ms: started_ms,
            shards: progress
                .iter()
                .map(|p| (p.shard.clone(), (p.through_seq.clone(), p.intents)))
                .collect(),
        });
        let quiet_since = started_ms - self.config.heartbeat_after.as_millis() as i64;
        let quiet: Vec<_> = {
            let put = self.heartbeats.lock().expect("heartbeats");
            shards
                .iter()
                .filter(|shard| shard.ending_sequence_number.is_none())
                // A shard without progress (a child of a reshard, a shard that carried
                // nothing) holds `as_of` at its start until its consumer applies a record.
                .filter(|shard| {
                    progress
                        .iter()
                        .find(|p| p.shard == shard.shard_id)
                        .is_none_or(|p| p.applied_through_ms < quiet_since)
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
        let (mut retired, mut abandoned) = (0, 0);
        for shard in expired_log_shards(&shards, &logged, started_ms) {
            let id = shard.shard_id.as_str();
            let through = shard.through_seq.as_deref();
            let intents = progress
                .iter()
                .find(|p| p.shard == id)
                .map_or(0, |p| p.intents);
            if self.store.retire(id, through, intents).await? {
                retired += 1;
                continue;
            }
            // Refused: an intent of it is pending, or its progress moved. No record of an
            // expired shard is delivered again, so no consumer will finish a pending intent:
            // it is given up with the shard, or its head would refuse the retirement on
            // every tick for ever. Where the progress moved, the next tick decides again.
            let state = self.store.shard_state(id).await?;
            let Some(intent) = state
                .pending
                .filter(|_| state.through_seq.as_deref() == through)
            else {
                continue;
            };
            if self.store.abandon(id, through, intent.n).await? {
                tracing::error!(
                    shard = id,
                    intent = intent.n,
                    score_rows = intent.rows.len(),
                    "an intent left pending on a log shard that expired is given up; reconciliation repairs the all-time board"
                );
                retired += 1;
                abandoned += 1;
            }
        }
        let report = RefreshReport {
            boards_refreshed: boards.len(),
            as_of_ms,
            heartbeats: quiet.len(),
            log_shards_retired: retired,
            intents_abandoned: abandoned,
        };
        Report::new("Likes/Leaderboard")
            .value("BoardsRefreshed", "Count", report.boards_refreshed as f64)
            .value("HeartbeatsPut", "Count", report.heartbeats as f64)
            .value(
                "LogShardsRetired",
                "Count",
                report.log_shards_retired as f64,
            )
            .value(
                "LeaderboardIntentsAbandoned",
                "Count",
                report.intents_abandoned as f64,
            )
            .emit();
        Ok(report)
    }
}
