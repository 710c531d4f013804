//! Event source mappings for DynamoDB streams, run locally with AWS semantics: what Lambda's
//! pollers do in the cloud, for every function event of `Type: DynamoDB` in the template.
//!
//! Per stream shard one batch is in flight (ParallelizationFactor 1), records in shard
//! order. A batch is sent when `BatchSize` records are buffered or the batching window since
//! the first buffered record elapsed (and never above Lambda's 6 MB payload). The invocation
//! goes through JSON exactly as Lambda's does: the Lambda DynamoDB event (no shard id in it,
//! as on AWS), deserialized by the function, its answer serialized and read back. A function
//! error retries the whole batch from its first record; `batchItemFailures` checkpoints
//! before the lowest failed record and retries from it; retries are bounded by
//! `MaximumRetryAttempts`, records by `MaximumRecordAgeInSeconds`, after which the batch's
//! metadata (`DDBStreamBatchInfo`) goes to the on-failure destination and the poller moves on.
//!
//! Each mapping runs on a thread of its own with a current-thread runtime, like a function
//! instance in its own process: the function's clients, connections and in-flight work
//! belong to it alone, and stop with it when the stack is dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_config::retry::RetryConfig;
use aws_config::SdkConfig;
use aws_lambda_events::event::dynamodb::{Event, TimeWindowEvent};
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use aws_smithy_types::date_time::Format;
use aws_smithy_types::DateTime;
use base64::Engine;
use lambda_runtime::LambdaEvent;
use likes_aggregator::{Aggregator, AggregatorConfig, Publisher, PublisherConfig};
use serde_json::{json, Value};
use serde_yaml::Value as Yaml;
use tokio::sync::Notify;

use crate::faults::{
    CountWriteFaults, CounterCells, Counters, EventLogFaults, FaultContext, Faults, InvocationSlot,
    Recut,
};
use crate::resources::Resources;
use crate::template::{get_att, Template};

/// How often an idle shard is read (Lambda polls a shard about four times a second).
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Pause after a failed stream read before the iterator is acquired again.
const READ_ERROR_PAUSE: Duration = Duration::from_millis(200);
/// How often the stream's shard list is read again (splits open child shards).
const SHARD_DISCOVERY_INTERVAL: Duration = Duration::from_secs(5);
/// GetRecords takes at most 1,000 records.
const READ_LIMIT: i32 = 1000;
/// Lambda's synchronous invocation payload limit.
const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;
/// Backoff before retry n: 100 ms, doubling, at most this.
const MAX_RETRY_BACKOFF: Duration = Duration::from_millis(500);
/// SAM's default function timeout.
const DEFAULT_TIMEOUT_SECONDS: u64 = 3;
/// Lambda's defaults for a DynamoDB stream mapping.
const DEFAULT_BATCH_SIZE: usize = 100;
const MAX_BATCH_SIZE: usize = 10_000;
/// Attempts at sending a batch's metadata to the on-failure destination.
const DESTINATION_ATTEMPTS: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartingPosition {
    TrimHorizon,
    Latest,
}

/// Where a batch's metadata goes once retries or record age are exhausted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnFailureQueue {
    pub url: String,
    pub arn: String,
}

/// One `Type: DynamoDB` event of a function, as the template declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingConfig {
    /// The function's logical id and the event's name.
    pub function: String,
    pub event: String,
    /// The function's binary (`Metadata.BuildProperties.Binary`).
    pub binary: String,
    pub function_arn: String,
    pub stream_arn: String,
    pub starting_position: StartingPosition,
    pub batch_size: usize,
    pub batching_window: Duration,
    /// `None`: retry until the records expire (`-1` or absent).
    pub maximum_retry_attempts: Option<u32>,
    /// `None`: records never expire (`-1` or absent).
    pub maximum_record_age: Option<Duration>,
    pub report_batch_item_failures: bool,
    pub on_failure: Option<OnFailureQueue>,
    pub enabled: bool,
    pub function_timeout: Duration,
    /// The function's environment, resolved against the local resources.
    pub environment: BTreeMap<String, String>,
}

impl MappingConfig {
    /// The mappings of every `Type: DynamoDB` event in the template.
    pub fn all(
        template: &Template,
        resources: &Resources,
        prefix: &str,
        environment_overrides: &BTreeMap<String, String>,
    ) -> Result<Vec<Self>, MappingError> {
        let mut mappings = Vec::new();
        for (function, resource) in template.resources_of("AWS::Serverless::Function") {
            let Some(events) = resource["Properties"]["Events"].as_mapping() else {
                continue;
            };
            for (event, spec) in events {
                if spec["Type"].as_str() != Some("DynamoDB") {
                    continue;
                }
                let event = event.as_str().unwrap_or_default().to_owned();
                let error = |message: String| MappingError {
                    function: function.clone(),
                    event: event.clone(),
                    message,
                };
                mappings.push(
                    Self::parse(
                        template,
                        resources,
                        prefix,
                        &function,
                        &event,
                        spec,
                        environment_overrides,
                    )
                    .map_err(error)?,
                );
            }
        }
        Ok(mappings)
    }

    fn parse(
        template: &Template,
        resources: &Resources,
        prefix: &str,
        function: &str,
        event: &str,
        spec: &Yaml,
        environment_overrides: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let props = &spec["Properties"];
        // What AWS offers but the local mapping does not emulate is refused, not ignored:
        // the tests would otherwise prove semantics the cloud does not have.
        for unsupported in ["FilterCriteria"] {
            if !props[unsupported].is_null() {
                return Err(format!("{unsupported} is not emulated locally"));
            }
        }
        if props["ParallelizationFactor"].as_u64().unwrap_or(1) != 1 {
            return Err("only ParallelizationFactor 1 is emulated locally".into());
        }
        if props["BisectBatchOnFunctionError"].as_bool() == Some(true) {
            return Err("BisectBatchOnFunctionError is not emulated locally".into());
        }
        let stream_arn = resources
            .resolve(template, &props["Stream"])
            .ok_or("Stream does not resolve to a local table's stream")?;
        let starting_position = match props["StartingPosition"].as_str() {
            Some("TRIM_HORIZON") => StartingPosition::TrimHorizon,
            Some("LATEST") => StartingPosition::Latest,
            other => {
                return Err(format!(
                    "StartingPosition {other:?} is not TRIM_HORIZON or LATEST"
                ))
            }
        };
        let batch_size = match props["BatchSize"].as_u64() {
            None => DEFAULT_BATCH_SIZE,
            Some(n) if (1..=MAX_BATCH_SIZE as u64).contains(&n) => n as usize,
            Some(n) => return Err(format!("BatchSize {n} is outside 1..={MAX_BATCH_SIZE}")),
        };
        let batching_window = Duration::from_secs(
            props["MaximumBatchingWindowInSeconds"]
                .as_u64()
                .unwrap_or(0),
        );
        let maximum_retry_attempts = props["MaximumRetryAttempts"]
            .as_i64()
            .filter(|n| *n >= 0)
            .map(|n| n as u32);
        let maximum_record_age = props["MaximumRecordAgeInSeconds"]
            .as_i64()
            .filter(|n| *n >= 0)
            .map(|n| Duration::from_secs(n as u64));
        let report_batch_item_failures = props["FunctionResponseTypes"]
            .as_sequence()
            .into_iter()
            .flatten()
            .any(|t| t.as_str() == Some("ReportBatchItemFailures"));
        let on_failure = match &props["DestinationConfig"]["OnFailure"] {
            Yaml::Null => None,
            destination => {
                if destination["Type"].as_str().is_some_and(|t| t != "SQS") {
                    return Err("only an SQS on-failure destination is emulated locally".into());
                }
                let (queue, _) = get_att(&destination["Destination"])
                    .ok_or("DestinationConfig.OnFailure.Destination is not a !GetAtt of a queue")?;
                let url = resources
                    .name(&queue)
                    .ok_or_else(|| format!("on-failure queue {queue} was not created locally"))?;
                let arn = resources
                    .attribute(&queue, "Arn")
                    .ok_or_else(|| format!("on-failure queue {queue} has no ARN"))?;
                Some(OnFailureQueue {
                    url: url.to_owned(),
                    arn: arn.to_owned(),
                })
            }
        };
        let environment =
            resources.function_environment(template, function, environment_overrides)?;
        let (region, account) = arn_region_account(&stream_arn);
        Ok(Self {
            function: function.to_owned(),
            event: event.to_owned(),
            binary: template.binary(function).map_err(|e| e.to_string())?,
            function_arn: format!("arn:aws:lambda:{region}:{account}:function:{prefix}-{function}"),
            stream_arn,
            starting_position,
            batch_size,
            batching_window,
            maximum_retry_attempts,
            maximum_record_age,
            report_batch_item_failures,
            on_failure,
            enabled: props["Enabled"].as_bool().unwrap_or(true),
            function_timeout: Duration::from_secs(
                template
                    .function_property(function, "Timeout")
                    .and_then(Yaml::as_u64)
                    .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            ),
            environment,
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{function} event {event}: {message}")]
pub struct MappingError {
    pub function: String,
    pub event: String,
    pub message: String,
}

fn arn_region_account(arn: &str) -> (String, String) {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let part = |i: usize| parts.get(i).copied().unwrap_or_default().to_owned();
    (part(3), part(4))
}

/// How far one stream shard is, as [`Pipeline::settle`] reads it.
#[derive(Debug, Clone, Default)]
pub struct ShardProgress {
    /// The last record the checkpoint moved past.
    pub checkpoint: Option<String>,
    /// Records read but not yet acknowledged.
    pub buffered: usize,
    pub in_flight: bool,
    /// When the last read began that found nothing new while nothing was pending: every
    /// record in the stream before that instant is acknowledged.
    pub caught_up_at: Option<Instant>,
    /// A closed shard read to its end.
    pub finished: bool,
    pub last_error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error("the pipeline did not settle within {timeout:?}: shards {shards:?}, counters {counters:?}, enabled {enabled}")]
    Timeout {
        timeout: Duration,
        shards: BTreeMap<String, ShardProgress>,
        counters: Counters,
        enabled: bool,
    },
    #[error("the pipeline stopped: {0}")]
    Stopped(String),
}

/// What a mapping's thread and the tests share.
#[derive(Debug)]
struct Shared {
    config: MappingConfig,
    faults: Arc<Faults>,
    counters: Arc<CounterCells>,
    enabled: AtomicBool,
    stopping: AtomicBool,
    stop: Notify,
    shards: Mutex<BTreeMap<String, ShardProgress>>,
    /// Why the mapping's thread ended early, if it did.
    failure: Mutex<Option<String>>,
}

impl Shared {
    fn progress(&self, shard: &str, update: impl FnOnce(&mut ShardProgress)) {
        update(
            self.shards
                .lock()
                .expect("shard progress")
                .entry(shard.to_owned())
                .or_default(),
        );
    }

    fn fail(&self, message: String) {
        tracing::error!(mapping = %self.config.event, %message, "event source mapping stopped");
        *self.failure.lock().expect("failure") = Some(message);
    }
}

/// A running event source mapping: its configuration, fault switches and counters.
/// Dropping it stops its poller.
#[derive(Debug)]
pub struct Pipeline {
    shared: Arc<Shared>,
}

impl Pipeline {
    /// Starts the mapping's poller on a thread of its own.
    pub fn start(config: MappingConfig, sdk: &SdkConfig) -> Result<Self, MappingError> {
        let function = StreamFunction::for_binary(&config).map_err(|message| MappingError {
            function: config.function.clone(),
            event: config.event.clone(),
            message,
        })?;
        let shared = Arc::new(Shared {
            enabled: AtomicBool::new(config.enabled),
            config,
            faults: Arc::default(),
            counters: Arc::default(),
            stopping: AtomicBool::new(false),
            stop: Notify::new(),
            shards: Mutex::default(),
            failure: Mutex::default(),
        });
        let thread_shared = shared.clone();
        let sdk = sdk.clone();
        std::thread::Builder::new()
            .name(format!("esm-{}", shared.config.function))
            .spawn(move || run_mapping(thread_shared, function, sdk))
            .map_err(|err| MappingError {
                function: shared.config.function.clone(),
                event: shared.config.event.clone(),
                message: format!("cannot start the poller thread: {err}"),
            })?;
        Ok(Self { shared })
    }

    pub fn config(&self) -> &MappingConfig {
        &self.shared.config
    }

    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    pub fn counters(&self) -> Counters {
        self.shared.counters.snapshot()
    }

    pub fn shards(&self) -> BTreeMap<String, ShardProgress> {
        self.shared.shards.lock().expect("shard progress").clone()
    }

    /// Disables the mapping (`Enabled: false`): records are read, none delivered.
    pub fn pause(&self) {
        self.shared.enabled.store(false, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        self.shared.enabled.store(true, Ordering::SeqCst);
    }

    /// Waits until the mapping has acknowledged every record in the stream now (applied, or
    /// given up on) with no batch in flight; returns the counters then.
    pub async fn settle(&self, timeout: Duration) -> Result<Counters, SettleError> {
        let since = Instant::now();
        loop {
            if let Some(failure) = self.shared.failure.lock().expect("failure").clone() {
                return Err(SettleError::Stopped(failure));
            }
            let shards = self.shards();
            let settled = !shards.is_empty()
                && shards.values().all(|p| {
                    p.finished || (p.caught_up_at.is_some_and(|at| at >= since) && !p.in_flight)
                });
            if settled {
                return Ok(self.counters());
            }
            if since.elapsed() > timeout {
                return Err(SettleError::Timeout {
                    timeout,
                    shards,
                    counters: self.counters(),
                    enabled: self.shared.enabled.load(Ordering::SeqCst),
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.stop.notify_waiters();
        self.shared.stop.notify_one();
    }
}

/// The mapping's thread: its own runtime; ends when the pipeline is dropped.
fn run_mapping(shared: Arc<Shared>, function: StreamFunction, sdk: SdkConfig) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return shared.fail(format!("cannot build a runtime: {err}")),
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let stopped = async {
            while !shared.stopping.load(Ordering::SeqCst) {
                shared.stop.notified().await;
            }
        };
        tokio::select! {
            () = stopped => {}
            () = supervise(shared.clone(), function, sdk) => {}
        }
    });
}

/// Lists the stream's shards and polls each one (a child only once its parent is done).
async fn supervise(shared: Arc<Shared>, function: StreamFunction, sdk: SdkConfig) {
    // The poller handles a failed read itself (moto answers a stale iterator with a 500 the
    // SDK would retry in vain): re-acquiring the iterator is the only useful retry.
    let streams = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(&sdk)
            .retry_config(RetryConfig::disabled())
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let mut started = BTreeSet::new();
    loop {
        match list_shards(&streams, &shared.config.stream_arn).await {
            Ok(shards) => {
                let listed: BTreeSet<&String> = shards.iter().map(|(id, _)| id).collect();
                let progress = shared.shards.lock().expect("shard progress").clone();
                for (shard, parent) in &shards {
                    let parent_done = parent.as_ref().is_none_or(|p| {
                        !listed.contains(p) || progress.get(p).is_some_and(|p| p.finished)
                    });
                    if started.contains(shard) || !parent_done {
                        continue;
                    }
                    started.insert(shard.clone());
                    shared.progress(shard, |_| {});
                    let poller = ShardPoller::new(
                        shared.clone(),
                        shard.clone(),
                        function.instance(&shared, &sdk, shard),
                        streams.clone(),
                        sqs.clone(),
                    );
                    tokio::task::spawn_local(poller.run());
                }
            }
            Err(err) => tracing::warn!(error = %err, "could not list the stream's shards"),
        }
        tokio::time::sleep(SHARD_DISCOVERY_INTERVAL).await;
    }
}

/// Every shard of the stream with its parent.
async fn list_shards(
    client: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
) -> Result<Vec<(String, Option<String>)>, String> {
    let mut shards = Vec::new();
    let mut start = None;
    loop {
        let output = client
            .describe_stream()
            .stream_arn(stream_arn)
            .set_exclusive_start_shard_id(start.take())
            .send()
            .await
            .map_err(|e| DisplayErrorContext(e).to_string())?;
        let Some(description) = output.stream_description else {
            return Ok(shards);
        };
        for shard in description.shards.unwrap_or_default() {
            if let Some(id) = shard.shard_id {
                shards.push((id, shard.parent_shard_id));
            }
        }
        match description.last_evaluated_shard_id {
            Some(last) => start = Some(last),
            None => return Ok(shards),
        }
    }
}

/// A stream sequence number: decimal digits, compared as numbers (never as strings: they
/// differ in length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceNumber(String);

impl SequenceNumber {
    pub fn new(raw: &str) -> Self {
        let trimmed = raw.trim_start_matches('0');
        Self(if trimmed.is_empty() { "0" } else { trimmed }.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Ord for SequenceNumber {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for SequenceNumber {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A stream record read and not yet acknowledged, already in Lambda's event shape.
#[derive(Debug, Clone)]
struct BufferedRecord {
    sequence_number: SequenceNumber,
    /// As the stream spells it, for `batchItemFailures` and the DLQ message.
    raw_sequence_number: String,
    lambda: Value,
    json_bytes: usize,
    created_at_secs: f64,
    arrived: Instant,
}

/// A failed batch waiting for its retry.
#[derive(Debug, Clone)]
struct Retry {
    /// The batch's first record: the count of attempts starts again when it moves on.
    head: SequenceNumber,
    failed_attempts: u32,
    len: usize,
}

enum Outcome {
    Success,
    /// Checkpoint before this index of the batch and retry from it.
    PartialFailure(usize),
    FunctionError(String),
}

enum GiveUp {
    RetryAttemptsExhausted(u32),
    RecordAgeExceeded,
}

/// Polls one stream shard and invokes the function with its batches.
struct ShardPoller {
    shared: Arc<Shared>,
    shard_id: String,
    function: FunctionInstance,
    streams: aws_sdk_dynamodbstreams::Client,
    sqs: aws_sdk_sqs::Client,
    iterator: Option<String>,
    /// The last record read from the shard.
    tail: Option<String>,
    closed: bool,
    buffer: VecDeque<BufferedRecord>,
    retry: Option<Retry>,
    /// A batch that succeeded and will be delivered again (a duplicate-delivery fault).
    duplicate: Option<usize>,
}

impl ShardPoller {
    fn new(
        shared: Arc<Shared>,
        shard_id: String,
        function: FunctionInstance,
        streams: aws_sdk_dynamodbstreams::Client,
        sqs: aws_sdk_sqs::Client,
    ) -> Self {
        Self {
            shared,
            shard_id,
            function,
            streams,
            sqs,
            iterator: None,
            tail: None,
            closed: false,
            buffer: VecDeque::new(),
            retry: None,
            duplicate: None,
        }
    }

    fn config(&self) -> &MappingConfig {
        &self.shared.config
    }

    fn counters(&self) -> &CounterCells {
        &self.shared.counters
    }

    async fn run(mut self) {
        loop {
            let read_started = Instant::now();
            let read = if self.buffer.len() < self.config().batch_size {
                Some(self.read().await)
            } else {
                None
            };
            let caught_up = read == Some(Some(0)) && self.buffer.is_empty();
            let buffered = self.buffer.len();
            self.shared.progress(&self.shard_id, |p| {
                p.buffered = buffered;
                if caught_up {
                    p.caught_up_at = Some(read_started);
                } else if buffered > 0 {
                    p.caught_up_at = None;
                }
            });
            if self.closed && self.buffer.is_empty() {
                self.shared.progress(&self.shard_id, |p| p.finished = true);
                return;
            }
            if self.shared.enabled.load(Ordering::SeqCst) {
                if let Some(expired) = self.expired_records() {
                    self.give_up(expired, GiveUp::RecordAgeExceeded).await;
                    continue;
                }
                if let Some(len) = self.next_batch_len() {
                    self.deliver(len).await;
                    continue;
                }
            }
            let pause = if matches!(read, Some(None)) {
                READ_ERROR_PAUSE
            } else {
                POLL_INTERVAL
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// One GetRecords; the number of records read, `None` when the read failed.
    async fn read(&mut self) -> Option<usize> {
        if self.closed {
            return Some(0);
        }
        let mut iterator = match self.iterator.take() {
            Some(iterator) => iterator,
            None => match self.acquire_iterator().await {
                Ok(iterator) => iterator,
                Err(err) => return self.read_failed(err),
            },
        };
        if self.shared.faults.take_stale_iterator() {
            // Same shape, unknown to the stream: what an expired iterator looks like.
            iterator = format!("{}expired", iterator.trim_end_matches('='));
        }
        let output = match self
            .streams
            .get_records()
            .shard_iterator(iterator)
            .limit(READ_LIMIT)
            .send()
            .await
        {
            Ok(output) => output,
            // A stale or expired iterator (moto: HTTP 500): acquire a new one after the last
            // record read, so nothing is skipped or read twice.
            Err(err) => return self.read_failed(DisplayErrorContext(err).to_string()),
        };
        let arrived = Instant::now();
        let mut read = 0;
        for record in output.records.unwrap_or_default() {
            match lambda_record(&record, &self.config().stream_arn) {
                Ok((raw, lambda, created_at_secs)) => {
                    let json_bytes = lambda.to_string().len();
                    self.tail = Some(raw.clone());
                    self.buffer.push_back(BufferedRecord {
                        sequence_number: SequenceNumber::new(&raw),
                        raw_sequence_number: raw,
                        lambda,
                        json_bytes,
                        created_at_secs,
                        arrived,
                    });
                    read += 1;
                }
                Err(err) => {
                    // Never skip a record silently: stop reading here and try again.
                    return self.read_failed(format!("unreadable stream record: {err}"));
                }
            }
        }
        match output.next_shard_iterator {
            Some(next) => self.iterator = Some(next),
            None => self.closed = true,
        }
        Some(read)
    }

    fn read_failed(&mut self, error: String) -> Option<usize> {
        CounterCells::add(&self.counters().stream_read_errors, 1);
        tracing::debug!(shard = %self.shard_id, %error, "stream read failed; re-acquiring the iterator");
        self.iterator = None;
        self.shared
            .progress(&self.shard_id, |p| p.last_error = Some(error));
        None
    }

    async fn acquire_iterator(&self) -> Result<String, String> {
        let request = self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.config().stream_arn)
            .shard_id(&self.shard_id);
        let request = match (&self.tail, self.config().starting_position) {
            (Some(tail), _) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(tail),
            (None, StartingPosition::TrimHorizon) => {
                request.shard_iterator_type(ShardIteratorType::TrimHorizon)
            }
            (None, StartingPosition::Latest) => {
                request.shard_iterator_type(ShardIteratorType::Latest)
            }
        };
        request
            .send()
            .await
            .map_err(|e| DisplayErrorContext(e).to_string())?
            .shard_iterator
            .ok_or_else(|| "GetShardIterator returned no iterator".to_owned())
    }

    /// Reads until `len` records are buffered or the shard has no more for now.
    async fn read_until(&mut self, len: usize) {
        while self.buffer.len() < len && !self.closed {
            match self.read().await {
                Some(0) => return,
                Some(_) => {}
                None => tokio::time::sleep(READ_ERROR_PAUSE).await,
            }
        }
    }

    /// The leading records older than `MaximumRecordAgeInSeconds`, if any.
    fn expired_records(&self) -> Option<usize> {
        let max_age = self.config().maximum_record_age?;
        let now = now_secs() + self.shared.faults.record_age_offset().as_secs_f64();
        let expired = self
            .buffer
            .iter()
            .take_while(|r| now - r.created_at_secs > max_age.as_secs_f64())
            .count();
        (expired > 0).then_some(expired)
    }

    /// How many records the next invocation holds, if one is due.
    fn next_batch_len(&self) -> Option<usize> {
        let head = self.buffer.front()?;
        let due = if let Some(retry) = &self.retry {
            Some(retry.len)
        } else if let Some(len) = self.duplicate {
            Some(len)
        } else {
            let cap = self
                .shared
                .faults
                .batch_cap()
                .map_or(self.config().batch_size, |cap| {
                    cap.min(self.config().batch_size)
                });
            if self.buffer.len() >= cap || head.arrived.elapsed() >= self.config().batching_window {
                Some(self.buffer.len().min(cap))
            } else {
                None
            }
        }?;
        // Lambda cuts a batch early rather than exceed the invocation payload limit.
        let mut bytes = 0;
        let fits = self
            .buffer
            .iter()
            .take(due)
            .take_while(|r| {
                bytes += r.json_bytes + 1;
                bytes <= MAX_PAYLOAD_BYTES
            })
            .count();
        Some(fits.clamp(1, due.min(self.buffer.len())))
    }

    async fn deliver(&mut self, len: usize) {
        let is_retry = self.retry.is_some();
        let is_duplicate = self.duplicate.take().is_some();
        let counters = self.counters();
        CounterCells::add(&counters.invocations, 1);
        CounterCells::add(&counters.records_delivered, len as u64);
        if is_retry {
            CounterCells::add(&counters.retries, 1);
        }
        if is_duplicate {
            CounterCells::add(&counters.duplicate_deliveries, 1);
        }
        let payload = json!({
            "Records": self.buffer.iter().take(len).map(|r| &r.lambda).collect::<Vec<_>>(),
        });
        self.shared.progress(&self.shard_id, |p| p.in_flight = true);
        let outcome = self.invoke(&payload, len).await;
        self.shared
            .progress(&self.shard_id, |p| p.in_flight = false);
        match outcome {
            Outcome::Success => {
                self.retry = None;
                if self.shared.faults.take_duplicate() {
                    // As if the checkpoint were lost: the same records go again.
                    self.duplicate = Some(len);
                } else {
                    self.acknowledge(len);
                }
            }
            Outcome::PartialFailure(at) => {
                CounterCells::add(&self.counters().partial_failures, 1);
                self.acknowledge(at);
                self.failed(len - at).await;
            }
            Outcome::FunctionError(reason) => {
                CounterCells::add(&self.counters().function_errors, 1);
                tracing::debug!(shard = %self.shard_id, %reason, "function error; the batch is retried");
                self.failed(len).await;
            }
        }
    }

    /// Invokes the function with one batch, as Lambda does: JSON in, JSON out.
    async fn invoke(&self, payload: &Value, len: usize) -> Outcome {
        if self.shared.faults.take_invocation_failure() {
            return Outcome::FunctionError("the invocation failed (injected fault)".into());
        }
        let payload = serde_json::to_vec(payload).expect("the event serializes");
        let live = self.function.invocation.begin();
        let answer = tokio::select! {
            biased;
            () = live.died() => None,
            answer = tokio::time::timeout(
                self.config().function_timeout,
                self.function.invoke(&payload, self.config()),
            ) => Some(answer),
        };
        let died = live.is_dead();
        self.function.invocation.end();
        if died {
            CounterCells::add(&self.counters().crashes, 1);
            return Outcome::FunctionError(
                "the invocation crashed after a committed chunk (injected fault)".into(),
            );
        }
        match answer {
            None => Outcome::FunctionError("the invocation died".into()),
            Some(Err(_)) => Outcome::FunctionError(format!(
                "Task timed out after {:?}",
                self.config().function_timeout
            )),
            Some(Ok(Err(error))) => Outcome::FunctionError(error),
            Some(Ok(Ok(response))) => self.read_response(&response, len),
        }
    }

    /// The answer under `ReportBatchItemFailures`: success, or a checkpoint before the lowest
    /// failed record. An identifier that is empty or not in the batch fails the whole batch,
    /// as on AWS.
    fn read_response(&self, response: &[u8], len: usize) -> Outcome {
        if !self.config().report_batch_item_failures {
            return Outcome::Success;
        }
        let Ok(response) = serde_json::from_slice::<Value>(response) else {
            return Outcome::FunctionError("the response is not JSON".into());
        };
        let failures = match &response["batchItemFailures"] {
            Value::Null => return Outcome::Success,
            Value::Array(failures) if failures.is_empty() => return Outcome::Success,
            Value::Array(failures) => failures,
            other => return Outcome::FunctionError(format!("batchItemFailures is {other}")),
        };
        let mut lowest = None;
        for failure in failures {
            let Some(id) = failure["itemIdentifier"]
                .as_str()
                .filter(|id| !id.is_empty())
            else {
                return Outcome::FunctionError(format!("invalid batch item failure {failure}"));
            };
            let id = SequenceNumber::new(id);
            let Some(at) = self
                .buffer
                .iter()
                .take(len)
                .position(|r| r.sequence_number == id)
            else {
                return Outcome::FunctionError(format!(
                    "batch item failure {} is not in the batch",
                    id.as_str()
                ));
            };
            lowest = Some(lowest.map_or(at, |l: usize| l.min(at)));
        }
        Outcome::PartialFailure(lowest.unwrap_or(0))
    }

    /// The checkpoint moves past the first `n` buffered records.
    fn acknowledge(&mut self, n: usize) {
        let mut last = None;
        for _ in 0..n {
            last = self.buffer.pop_front().map(|r| r.raw_sequence_number);
        }
        if let Some(last) = last {
            CounterCells::add(&self.counters().records_acknowledged, n as u64);
            self.shared
                .progress(&self.shard_id, |p| p.checkpoint = Some(last));
        }
    }

    /// After a failed attempt of the first `len` buffered records: retry them (cut as a
    /// fault may ask), or give up once `MaximumRetryAttempts` retries failed.
    async fn failed(&mut self, len: usize) {
        let Some(head) = self.buffer.front().map(|r| r.sequence_number.clone()) else {
            return;
        };
        let failed_attempts = match &self.retry {
            Some(retry) if retry.head == head => retry.failed_attempts + 1,
            _ => 1,
        };
        if self
            .config()
            .maximum_retry_attempts
            .is_some_and(|max| failed_attempts > max)
        {
            self.give_up(len, GiveUp::RetryAttemptsExhausted(failed_attempts))
                .await;
            return;
        }
        let len = match self.shared.faults.take_recut() {
            None => len,
            Some(Recut::Shorter(fewer)) => len.saturating_sub(fewer).max(1),
            Some(Recut::Longer(more)) => {
                let wanted = (len + more).min(self.config().batch_size);
                self.read_until(wanted).await;
                wanted.min(self.buffer.len())
            }
        };
        self.retry = Some(Retry {
            head,
            failed_attempts,
            len,
        });
        let backoff = Duration::from_millis(100 << (failed_attempts - 1).min(8));
        tokio::time::sleep(backoff.min(MAX_RETRY_BACKOFF)).await;
    }

    /// Sends the metadata of the first `len` buffered records to the on-failure destination
    /// and moves past them (AWS discards them when there is none).
    async fn give_up(&mut self, len: usize, why: GiveUp) {
        let records: Vec<&BufferedRecord> = self.buffer.iter().take(len).collect();
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return;
        };
        let (condition, invoke_count) = match why {
            GiveUp::RetryAttemptsExhausted(attempts) => ("RetryAttemptsExhausted", attempts),
            GiveUp::RecordAgeExceeded => ("RecordAgeExceeded", 0),
        };
        tracing::warn!(
            shard = %self.shard_id,
            condition,
            records = len,
            "giving up on a batch; its metadata goes to the on-failure destination"
        );
        let message = json!({
            "requestContext": {
                "requestId": request_id(),
                "functionArn": self.config().function_arn,
                "condition": condition,
                "approximateInvokeCount": invoke_count,
            },
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "version": "1.0",
            "timestamp": iso_time(now_secs()),
            "DDBStreamBatchInfo": {
                "shardId": self.shard_id,
                "startSequenceNumber": first.raw_sequence_number,
                "endSequenceNumber": last.raw_sequence_number,
                "approximateArrivalOfFirstRecord": iso_time(first.created_at_secs),
                "approximateArrivalOfLastRecord": iso_time(last.created_at_secs),
                "batchSize": len,
                "streamArn": self.config().stream_arn,
            },
        });
        if let Some(queue) = &self.config().on_failure {
            let mut sent = false;
            for attempt in 1..=DESTINATION_ATTEMPTS {
                match self
                    .sqs
                    .send_message()
                    .queue_url(&queue.url)
                    .message_body(message.to_string())
                    .send()
                    .await
                {
                    Ok(_) => {
                        sent = true;
                        break;
                    }
                    Err(err) => {
                        tracing::warn!(attempt, error = %DisplayErrorContext(err), "could not send to the on-failure destination");
                        tokio::time::sleep(READ_ERROR_PAUSE).await;
                    }
                }
            }
            if !sent {
                tracing::error!(%message, "the on-failure destination refused the batch metadata");
            }
        }
        CounterCells::add(&self.counters().dlq_batches, 1);
        CounterCells::add(&self.counters().dlq_records, len as u64);
        // Whatever was pending for these records (a retry, a duplicate) goes with them.
        self.retry = None;
        self.duplicate = None;
        self.acknowledge(len);
    }
}

/// The functions a stream event can invoke locally, by their binary.
#[derive(Debug, Clone)]
enum StreamFunction {
    Aggregator(AggregatorConfig),
    Publisher(PublisherConfig),
}

impl StreamFunction {
    fn for_binary(config: &MappingConfig) -> Result<Self, String> {
        match config.binary.as_str() {
            "aggregator" => {
                AggregatorConfig::from_lookup(|name| config.environment.get(name).cloned())
                    .map(Self::Aggregator)
                    .map_err(|e| e.to_string())
            }
            "publisher" => {
                PublisherConfig::from_lookup(|name| config.environment.get(name).cloned())
                    .map(Self::Publisher)
                    .map_err(|e| e.to_string())
            }
            other => Err(format!(
                "no local handler for stream function binary {other:?}"
            )),
        }
    }

    /// One function instance (one per shard, as Lambda runs one per shard): its own SDK
    /// clients, carrying the mapping's fault interceptors.
    fn instance(&self, shared: &Arc<Shared>, sdk: &SdkConfig, shard_id: &str) -> FunctionInstance {
        let invocation = Arc::new(InvocationSlot::default());
        let context = FaultContext {
            faults: shared.faults.clone(),
            counters: shared.counters.clone(),
            invocation: invocation.clone(),
        };
        let handler = match self {
            Self::Aggregator(config) => {
                let dynamodb = aws_sdk_dynamodb::Client::from_conf(
                    aws_sdk_dynamodb::config::Builder::from(sdk)
                        .interceptor(CountWriteFaults(context))
                        .build(),
                );
                Handler::Aggregator(Aggregator::new(config.clone(), dynamodb))
            }
            Self::Publisher(config) => {
                let kinesis = aws_sdk_kinesis::Client::from_conf(
                    aws_sdk_kinesis::config::Builder::from(sdk)
                        .interceptor(EventLogFaults(context))
                        .build(),
                );
                Handler::Publisher(Publisher::new(config.clone(), kinesis))
            }
        };
        FunctionInstance {
            handler,
            invocation,
            shard_id: shard_id.to_owned(),
        }
    }
}

enum Handler {
    Aggregator(Aggregator),
    Publisher(Publisher),
}

struct FunctionInstance {
    handler: Handler,
    invocation: Arc<InvocationSlot>,
    shard_id: String,
}

impl FunctionInstance {
    /// The event bytes in, the response bytes out; `Err` is a function error.
    async fn invoke(&self, payload: &[u8], config: &MappingConfig) -> Result<Vec<u8>, String> {
        let mut context = lambda_runtime::Context::default();
        context.request_id = request_id();
        context.invoked_function_arn = config.function_arn.clone();
        context.deadline =
            (now_secs() * 1000.0) as u64 + config.function_timeout.as_millis() as u64;
        match &self.handler {
            Handler::Aggregator(aggregator) => {
                // The mapping's tumbling window: the event names the shard.
                let mut event: Value = serde_json::from_slice(payload)
                    .map_err(|e| format!("the runtime could not deserialize the event: {e}"))?;
                let now = iso_time(now_secs());
                event["shardId"] = json!(self.shard_id);
                event["window"] = json!({"start": now, "end": now});
                event["state"] = json!({});
                event["isFinalInvokeForWindow"] = json!(false);
                event["isWindowTerminatedEarly"] = json!(false);
                let event: TimeWindowEvent = serde_json::from_value(event)
                    .map_err(|e| format!("the runtime could not deserialize the event: {e}"))?;
                let response = aggregator
                    .handle(LambdaEvent::new(event, context))
                    .await
                    .map_err(|e| e.to_string())?;
                serde_json::to_vec(&response).map_err(|e| e.to_string())
            }
            Handler::Publisher(publisher) => {
                let event: Event = serde_json::from_slice(payload)
                    .map_err(|e| format!("the runtime could not deserialize the event: {e}"))?;
                let response = publisher
                    .handle(LambdaEvent::new(event, context))
                    .await
                    .map_err(|e| e.to_string())?;
                serde_json::to_vec(&response).map_err(|e| e.to_string())
            }
        }
    }
}

/// A stream record as Lambda hands it to the function: `eventSourceARN` added,
/// `ApproximateCreationDateTime` in epoch seconds, and no shard id anywhere.
/// Returns the sequence number, the record, and its creation time.
fn lambda_record(record: &Record, stream_arn: &str) -> Result<(String, Value, f64), String> {
    let stream = record.dynamodb.as_ref().ok_or("no dynamodb member")?;
    let sequence_number = stream.sequence_number.clone().ok_or("no SequenceNumber")?;
    let created = stream
        .approximate_creation_date_time
        .map(|t| t.as_secs_f64())
        .unwrap_or_else(now_secs);
    let mut change = json!({
        "ApproximateCreationDateTime": created,
        "Keys": image(stream.keys.as_ref()),
        "SequenceNumber": sequence_number,
        "SizeBytes": stream.size_bytes.unwrap_or_default(),
        "StreamViewType": stream.stream_view_type.as_ref().map(|t| t.as_str()),
    });
    if let Some(new) = &stream.new_image {
        change["NewImage"] = image(Some(new));
    }
    if let Some(old) = &stream.old_image {
        change["OldImage"] = image(Some(old));
    }
    let mut lambda = json!({
        "eventID": record.event_id.as_deref().ok_or("no eventID")?,
        "eventName": record.event_name.as_ref().map(|n| n.as_str()).ok_or("no eventName")?,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": record.aws_region.as_deref().unwrap_or_else(|| arn_region(stream_arn)),
        "dynamodb": change,
        "eventSourceARN": stream_arn,
    });
    if let Some(identity) = &record.user_identity {
        // TTL deletions: {"type": "Service", "principalId": "dynamodb.amazonaws.com"}.
        lambda["userIdentity"] = json!({
            "type": identity.r#type,
            "principalId": identity.principal_id,
        });
    }
    Ok((sequence_number, lambda, created))
}

fn arn_region(arn: &str) -> &str {
    arn.split(':').nth(3).unwrap_or_default()
}

fn image(attributes: Option<&HashMap<String, AttributeValue>>) -> Value {
    Value::Object(
        attributes
            .into_iter()
            .flatten()
            .map(|(name, value)| (name.clone(), attribute(value)))
            .collect(),
    )
}

/// DynamoDB JSON, as the stream and Lambda spell it.
fn attribute(value: &AttributeValue) -> Value {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::B(b) => json!({ "B": b64(b.as_ref()) }),
        AttributeValue::Ss(ss) => json!({ "SS": ss }),
        AttributeValue::Ns(ns) => json!({ "NS": ns }),
        AttributeValue::Bs(bs) => {
            json!({ "BS": bs.iter().map(|b| b64(b.as_ref())).collect::<Vec<_>>() })
        }
        AttributeValue::M(m) => json!({ "M": image(Some(m)) }),
        AttributeValue::L(l) => json!({ "L": l.iter().map(attribute).collect::<Vec<_>>() }),
        AttributeValue::Null(is_null) => json!({ "NULL": is_null }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        // A type newer than this SDK: pass nothing rather than a wrong value.
        _ => json!({ "NULL": true }),
    }
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

fn iso_time(epoch_secs: f64) -> String {
    DateTime::from_secs_f64(epoch_secs)
        .fmt(Format::DateTime)
        .unwrap_or_default()
}

/// A request id, unique enough for logs and DLQ messages.
pub(crate) fn request_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (nanos >> 32) as u32,
        (nanos >> 16) as u16,
        (nanos & 0xfff) as u16,
        (n & 0xfff) as u16,
        (std::process::id() as u64) << 16 | (n & 0xffff),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        let small = SequenceNumber::new("999");
        let large = SequenceNumber::new("1000");
        assert!(small < large, "as strings \"999\" > \"1000\"");
        assert_eq!(SequenceNumber::new("007"), SequenceNumber::new("7"));
        assert!(
            SequenceNumber::new("1100000000017454423010")
                > SequenceNumber::new("1100000000017454423009")
        );
    }

    #[test]
    fn lambda_records_carry_no_shard_id_and_epoch_seconds() {
        let record = Record::builder()
            .event_id("3c2b4ad1c4d52a4f3c8e5f6a7b8c9d0e")
            .event_name(aws_sdk_dynamodbstreams::types::OperationType::Insert)
            .aws_region("us-east-1")
            .dynamodb(
                aws_sdk_dynamodbstreams::types::StreamRecord::builder()
                    .approximate_creation_date_time(DateTime::from_secs_f64(1_700_000_000.25))
                    .keys("user_id", AttributeValue::S("u1".into()))
                    .new_image("state", AttributeValue::S("LIKE".into()))
                    .new_image("op_id", AttributeValue::N("1".into()))
                    .sequence_number("1100000000017454423009")
                    .size_bytes(42)
                    .stream_view_type(
                        aws_sdk_dynamodbstreams::types::StreamViewType::NewAndOldImages,
                    )
                    .build(),
            )
            .build();
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2024";
        let (seq, lambda, created) = lambda_record(&record, arn).unwrap();
        assert_eq!(seq, "1100000000017454423009");
        assert_eq!(created, 1_700_000_000.25);
        assert_eq!(lambda["eventVersion"], "1.1");
        assert_eq!(lambda["eventSourceARN"], arn);
        assert_eq!(
            lambda["dynamodb"]["ApproximateCreationDateTime"],
            1_700_000_000.25
        );
        assert_eq!(lambda["dynamodb"]["NewImage"]["op_id"], json!({"N": "1"}));
        assert!(lambda["dynamodb"].get("OldImage").is_none());
        assert!(!lambda.to_string().contains("shardId"));
        let event: Event = serde_json::from_value(json!({ "Records": [lambda] })).unwrap();
        assert_eq!(
            event.records[0].event_id,
            "3c2b4ad1c4d52a4f3c8e5f6a7b8c9d0e"
        );
    }

    #[test]
    fn the_template_mapping_is_read_with_its_properties() {
        let template = Template::parse(
            r#"
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Queue:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: aggregator } }
    Properties:
      Timeout: 60
      Environment: { Variables: { COUNT_SHARDS: "4" } }
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 1000
            MaximumBatchingWindowInSeconds: 1
            FunctionResponseTypes: [ReportBatchItemFailures]
            MaximumRetryAttempts: 10
            MaximumRecordAgeInSeconds: -1
            DestinationConfig: { OnFailure: { Type: SQS, Destination: !GetAtt Queue.Arn } }
"#,
        )
        .unwrap();
        let mut resources = Resources::default();
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/p-Table/stream/x";
        resources
            .attributes
            .insert("Table.StreamArn".into(), arn.into());
        resources
            .attributes
            .insert("Queue.Arn".into(), "arn:q".into());
        resources.names.insert("Queue".into(), "url:q".into());
        let mappings = MappingConfig::all(&template, &resources, "p", &BTreeMap::new()).unwrap();
        assert_eq!(mappings.len(), 1);
        let m = &mappings[0];
        assert_eq!(
            (m.batch_size, m.batching_window),
            (1000, Duration::from_secs(1))
        );
        assert_eq!(m.maximum_retry_attempts, Some(10));
        assert_eq!(m.maximum_record_age, None);
        assert!(m.report_batch_item_failures);
        assert_eq!(m.on_failure.as_ref().unwrap().url, "url:q");
        assert_eq!(m.function_timeout, Duration::from_secs(60));
        assert_eq!(
            m.function_arn,
            "arn:aws:lambda:us-east-1:123456789012:function:p-Fn"
        );
        assert_eq!(m.environment["COUNT_SHARDS"], "4");
    }
}
