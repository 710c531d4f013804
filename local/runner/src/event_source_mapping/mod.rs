//! Event source mappings for DynamoDB streams and Kinesis streams, run locally with AWS
//! semantics: what Lambda's pollers do in the cloud, for every function event of
//! `Type: DynamoDB` or `Type: Kinesis` in the template, each mapping with checkpoints of its
//! own (two functions on one stream are two mappings).
//!
//! moto keeps one shard per table; AWS spreads a table's keys over several. Each stream
//! shard is read once and its records split by partition key into N virtual shards
//! (`LIKES_STREAM_SHARDS`), all records of one key on one virtual shard in stream order, and
//! each virtual shard is what Lambda makes of an AWS shard: one batch in flight
//! (ParallelizationFactor 1), a function instance of its own, its own checkpoint, retries and
//! on-failure messages, its own tumbling windows. Virtual shards run concurrently.
//!
//! A batch is sent when `BatchSize` records are buffered or the batching window since the
//! first buffered record elapsed (and never above Lambda's 6 MB payload). The invocation
//! goes through JSON exactly as Lambda's does: the Lambda DynamoDB event (no shard id in it,
//! as on AWS) or, under `TumblingWindowInSeconds`, the time window event (window, state and
//! shard id), deserialized by the function, its answer serialized and read back. A function
//! error retries the whole batch from its first record; `batchItemFailures` checkpoints
//! before the lowest failed record and retries from it; retries are bounded by
//! `MaximumRetryAttempts`, records by `MaximumRecordAgeInSeconds`, after which the batch's
//! metadata (`DDBStreamBatchInfo`) goes to the on-failure destination and the shard moves on.
//!
//! A Kinesis mapping is the same poller over the Kinesis API (ListShards, GetShardIterator,
//! GetRecords): each Kinesis shard is one shard of the mapping, never split, its records
//! handed over as the Lambda Kinesis event (base64 data, `eventID` `<shard id>:<sequence
//! number>`), its failures retried, checkpointed and given up (`KinesisBatchInfo`) alike.

mod described;
mod destination;
mod invoke;
mod mapping;
mod reader;
mod record;
mod retry;
mod shard;
mod stream;
mod supervisor;
mod window;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_lambda_events::event::dynamodb::TimeWindowEvent;
use tokio_util::sync::CancellationToken;

use crate::faults::{CounterCells, Counters, Faults};
use invoke::StreamFunction;

pub use described::streams_client;
pub use mapping::{MappingConfig, MappingError, OnFailureQueue, StartingPosition, StreamSource};
pub use reader::virtual_shard_id;
pub use record::SequenceNumber;
pub use window::Bounds;

/// How often a virtual shard with nothing to deliver looks at its buffer again (in memory).
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How often an idle stream shard is read, as Lambda polls: a DynamoDB stream shard about
/// four times a second, a Kinesis shard once a second. A settle asks for a read at once.
const DYNAMODB_READ_INTERVAL: Duration = Duration::from_millis(250);
const KINESIS_READ_INTERVAL: Duration = Duration::from_secs(1);
/// Invocations kept for [`Pipeline::deliveries`].
const DELIVERY_LOG: usize = 10_000;

/// How far one stream shard (a real one, as the stream lists it) was read.
#[derive(Debug, Clone, Default)]
pub struct StreamShardProgress {
    /// When the last read began that reached the shard's end: every record in it before
    /// that instant was routed to its virtual shard.
    pub tip_read_at: Option<Instant>,
    /// The same instant in epoch seconds, as tumbling windows are measured.
    pub read_through_secs: f64,
    pub records_read: u64,
    /// A closed shard read to its end.
    pub finished: bool,
    pub last_error: Option<String>,
}

/// How far one virtual shard is, as [`Pipeline::settle`] reads it.
#[derive(Debug, Clone, Default)]
pub struct ShardProgress {
    /// n, as fault switches name the shard.
    pub index: usize,
    pub stream_shard: String,
    /// Records the reader handed to this shard, and those the checkpoint moved past
    /// (applied or given up on).
    pub routed: u64,
    pub acknowledged: u64,
    /// The last record the checkpoint moved past.
    pub checkpoint: Option<String>,
    pub in_flight: bool,
    pub invocations: u64,
    pub records_delivered: u64,
    /// The tumbling window whose final invocation is still to come, `[start, end)`.
    pub open_window: Option<(i64, i64)>,
    /// Its stream shard was read to its end and every record acknowledged.
    pub finished: bool,
    pub last_error: Option<String>,
}

impl ShardProgress {
    /// Every record routed here is acknowledged and no invocation is running. A window's
    /// final invocation may still be to come: it carries no records.
    fn done(&self) -> bool {
        self.acknowledged >= self.routed && !self.in_flight
    }
}

/// One invocation as the function received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The virtual shard: the event's `shardId` for a time window event.
    pub shard_id: String,
    pub records: usize,
    pub window: Option<Bounds>,
    pub is_final_invoke_for_window: bool,
    pub state: HashMap<String, String>,
}

impl Delivery {
    /// A time window event, read as the function reads it.
    fn of_window(event: &TimeWindowEvent, bounds: Bounds) -> Self {
        let properties = &event.time_window_properties;
        Self {
            shard_id: properties.shard_id.clone().unwrap_or_default(),
            records: event.dynamo_db_event.records.len(),
            window: Some(bounds),
            is_final_invoke_for_window: properties.is_final_invoke_for_window,
            state: properties.state.clone(),
        }
    }

    fn plain(shard_id: &str, records: usize) -> Self {
        Self {
            shard_id: shard_id.to_owned(),
            records,
            window: None,
            is_final_invoke_for_window: false,
            state: HashMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error("the pipeline did not settle within {timeout:?}: held back by stalled or failing shards {held:?}; shards {shards:?}, counters {counters:?}, enabled {enabled}")]
    Timeout {
        timeout: Duration,
        /// Shards a fault stalls or fails that still hold records.
        held: Vec<String>,
        shards: BTreeMap<String, ShardProgress>,
        counters: Counters,
        enabled: bool,
    },
    #[error("the pipeline stopped: {0}")]
    Stopped(String),
}

#[derive(Debug, Default)]
struct Progress {
    streams: BTreeMap<String, StreamShardProgress>,
    shards: BTreeMap<String, ShardProgress>,
}

/// What a mapping's tasks and the tests share.
#[derive(Debug)]
struct Shared {
    config: MappingConfig,
    virtual_shards: usize,
    faults: Arc<Faults>,
    counters: Arc<CounterCells>,
    enabled: AtomicBool,
    stop: CancellationToken,
    progress: Mutex<Progress>,
    deliveries: Mutex<VecDeque<Delivery>>,
    /// Why the mapping's thread ended early, if it did.
    failure: Mutex<Option<String>>,
    /// Wakes every idle stream reader for a read now.
    read_now: tokio::sync::Notify,
}

impl Shared {
    fn with_progress<T>(&self, f: impl FnOnce(&mut Progress) -> T) -> T {
        f(&mut self.progress.lock().expect("shard progress"))
    }

    fn stream_progress(&self, shard: &str, update: impl FnOnce(&mut StreamShardProgress)) {
        self.with_progress(|p| update(p.streams.entry(shard.to_owned()).or_default()));
    }

    fn shard_progress(&self, shard: &str, update: impl FnOnce(&mut ShardProgress)) {
        self.with_progress(|p| update(p.shards.entry(shard.to_owned()).or_default()));
    }

    /// The time up to which every record of `stream_shard` has been read. A shard read to
    /// its closed end will never hold another, so it is read through every instant and its
    /// open windows end on time, which lets its children start.
    fn read_through_secs(&self, stream_shard: &str) -> f64 {
        self.with_progress(|p| {
            p.streams.get(stream_shard).map_or(0.0, |s| {
                if s.finished {
                    epoch_now()
                } else {
                    s.read_through_secs
                }
            })
        })
    }

    /// A stream shard read to its end whose virtual shards acknowledged all of it.
    fn stream_shard_done(&self, stream_shard: &str) -> bool {
        self.with_progress(|p| {
            p.streams.get(stream_shard).is_some_and(|s| s.finished)
                && p.shards
                    .values()
                    .filter(|v| v.stream_shard == stream_shard)
                    .all(|v| v.finished)
        })
    }

    fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    fn record_delivery(&self, delivery: Delivery) {
        let mut log = self.deliveries.lock().expect("delivery log");
        if log.len() == DELIVERY_LOG {
            log.pop_front();
        }
        log.push_back(delivery);
    }

    fn fail(&self, message: String) {
        tracing::error!(mapping = %self.config.event, %message, "event source mapping stopped");
        *self.failure.lock().expect("failure") = Some(message);
    }
}

/// Seconds since the epoch, as stream records and windows are stamped.
fn epoch_now() -> f64 {
    likes_core::clock::now_ms() as f64 / 1000.0
}

/// A running event source mapping: its configuration, fault switches and counters.
/// Dropping it stops its poller.
#[derive(Debug)]
pub struct Pipeline {
    shared: Arc<Shared>,
}

impl Pipeline {
    /// Starts the mapping's poller on a thread of its own, splitting each DynamoDB stream
    /// shard into `virtual_shards` shards (a Kinesis shard is never split).
    pub fn start(
        config: MappingConfig,
        virtual_shards: usize,
        sdk: &SdkConfig,
    ) -> Result<Self, MappingError> {
        let error = |config: &MappingConfig, message: String| MappingError {
            function: config.function.clone(),
            event: config.event.clone(),
            message,
        };
        let function = StreamFunction::for_handler(&config, sdk)
            .map_err(|err| error(&config, err.to_string()))?;
        let shared = Arc::new(Shared {
            enabled: AtomicBool::new(config.enabled),
            virtual_shards: match config.source {
                StreamSource::DynamoDb { .. } => virtual_shards.max(1),
                StreamSource::Kinesis => 1,
            },
            config,
            faults: Arc::default(),
            counters: Arc::default(),
            stop: CancellationToken::new(),
            progress: Mutex::default(),
            deliveries: Mutex::default(),
            failure: Mutex::default(),
            read_now: tokio::sync::Notify::new(),
        });
        let thread_shared = shared.clone();
        let sdk = sdk.clone();
        std::thread::Builder::new()
            .name(format!("esm-{}", shared.config.function))
            .spawn(move || supervisor::run_mapping(thread_shared, function, sdk))
            .map_err(|err| {
                error(
                    &shared.config,
                    format!("cannot start the poller thread: {err}"),
                )
            })?;
        Ok(Self { shared })
    }

    pub fn config(&self) -> &MappingConfig {
        &self.shared.config
    }

    /// The mapping's fault switches (test builds only).
    #[cfg(any(test, feature = "faults"))]
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    pub fn counters(&self) -> Counters {
        self.shared.counters.snapshot()
    }

    /// How many virtual shards each stream shard is split into.
    pub fn virtual_shards(&self) -> usize {
        self.shared.virtual_shards
    }

    /// The virtual shard index (as fault switches take it) of a partition key value.
    pub fn shard_index(&self, partition_key: &str) -> usize {
        record::shard_of_key(partition_key.as_bytes(), self.shared.virtual_shards)
    }

    /// Every virtual shard by its id (`<stream shard>-v<n>`).
    pub fn shards(&self) -> BTreeMap<String, ShardProgress> {
        self.shared.with_progress(|p| p.shards.clone())
    }

    /// Every stream shard as the stream lists it.
    pub fn stream_shards(&self) -> BTreeMap<String, StreamShardProgress> {
        self.shared.with_progress(|p| p.streams.clone())
    }

    /// The invocations made so far (the last 10,000), in order.
    pub fn deliveries(&self) -> Vec<Delivery> {
        let log = self.shared.deliveries.lock().expect("delivery log");
        log.iter().cloned().collect()
    }

    /// Disables the mapping (`Enabled: false`): records are read, none delivered.
    pub fn pause(&self) {
        self.shared.enabled.store(false, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        self.shared.enabled.store(true, Ordering::SeqCst);
    }

    /// Waits until every virtual shard acknowledged every record in the stream now (applied,
    /// or given up on) with no batch in flight; returns the counters then. A shard a fault stalls or fails keeps it from
    /// settling: the timeout error names it.
    pub async fn settle(&self, timeout: Duration) -> Result<Counters, SettleError> {
        self.settle_where(timeout, |_| true).await
    }

    /// As [`Pipeline::settle`], for the shards no fault stalls or fails: the others' records
    /// are applied while those wait.
    pub async fn settle_running(&self, timeout: Duration) -> Result<Counters, SettleError> {
        let faults = self.shared.faults.clone();
        self.settle_where(timeout, move |shard| {
            !faults.holds_back(shard.index, &shard.stream_shard)
        })
        .await
    }

    /// Waits until every stream shard was read to its tip since now: what the stream holds
    /// now is with the virtual shards, delivered or, on a paused mapping, held for when it
    /// resumes.
    pub async fn read_through(&self, timeout: Duration) -> Result<Counters, SettleError> {
        self.settle_where(timeout, |_| false).await
    }

    async fn settle_where(
        &self,
        timeout: Duration,
        counted: impl Fn(&ShardProgress) -> bool,
    ) -> Result<Counters, SettleError> {
        let since = Instant::now();
        // The stream as it is now is read at once, not at the next idle poll.
        self.shared.read_now.notify_waiters();
        loop {
            if let Some(failure) = self.shared.failure.lock().expect("failure").clone() {
                return Err(SettleError::Stopped(failure));
            }
            let (streams, shards) = self
                .shared
                .with_progress(|p| (p.streams.clone(), p.shards.clone()));
            let read = !streams.is_empty()
                && streams
                    .values()
                    .all(|s| s.finished || s.tip_read_at.is_some_and(|at| at >= since));
            if read
                && shards
                    .values()
                    .filter(|s| counted(s))
                    .all(ShardProgress::done)
            {
                return Ok(self.counters());
            }
            if since.elapsed() > timeout {
                let faults = &self.shared.faults;
                let held = shards
                    .iter()
                    .filter(|(_, s)| faults.holds_back(s.index, &s.stream_shard) && !s.done())
                    .map(|(id, _)| id.clone())
                    .collect();
                return Err(SettleError::Timeout {
                    timeout,
                    held,
                    shards,
                    counters: self.counters(),
                    enabled: self.shared.is_enabled(),
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}
