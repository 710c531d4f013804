//! Fault injection for the local event source mappings, and what tests can count.
//!
//! Two kinds of faults, switched at runtime by tests through [`Faults`]:
//!
//! - **Lambda-side** ones the poller plays itself: a batch delivered twice, a retry cut longer
//!   or shorter than the attempt that failed, an invocation that fails or dies part-way.
//! - **AWS-side** ones played by smithy interceptors on the SDK clients the poller builds for
//!   the function ([`CountWriteFaults`] on DynamoDB, [`EventLogFaults`] on Kinesis): a
//!   throttled `TransactWriteItems`, a refused `PutRecords`, and the "crash" of an invocation
//!   right after its k-th transaction succeeded. The function's code is the code Lambda runs,
//!   untouched; it sees real error responses, classified by the SDK as it would classify
//!   DynamoDB's and Kinesis's own.
//!
//! A faked response must never hide a write that happened: the interceptor turns the request
//! into a harmless read (`ListTables`, `ListStreams`) before it is signed and sent, then puts
//! the error response in place of that read's answer.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextMut, BeforeSerializationInterceptorContextRef,
    BeforeTransmitInterceptorContextMut, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::{HttpResponse, Metadata};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use tokio::sync::Notify;

/// How a retry is cut compared with the attempt that failed (AWS may do either: records
/// arrived meanwhile, or the payload limit cut it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recut {
    /// This many records fewer (at least one record is still delivered).
    Shorter(usize),
    /// This many records more, as far as the stream has them and the batch size allows.
    Longer(usize),
}

/// The fault switches of one event source mapping. Most switches are one-shot: they count
/// down as faults are played, so a test arms exactly the faults it wants; the per-shard
/// ones (a stalled shard, a failing shard) hold until switched off. A shard is named by its
/// index n among the mapping's virtual shards (`Pipeline::shard_index` of a key).
#[derive(Debug, Default)]
pub struct Faults {
    switches: Mutex<Switches>,
}

#[derive(Debug, Default, Clone)]
struct Switches {
    duplicate_batches: u32,
    recuts: VecDeque<Recut>,
    batch_cap: Option<usize>,
    /// Crashes to play, in order: after how many committed chunks of an invocation.
    crashes: VecDeque<usize>,
    failing_invocations: u32,
    kinesis_put_failures: u32,
    throttled_transactions: u32,
    throttle_cancellations: u32,
    /// Throttles wait until the invocation committed this many chunks.
    throttle_after_chunks: usize,
    record_age_offset: Duration,
    stale_iterators: u32,
    stalled_shards: BTreeSet<usize>,
    failing_shards: BTreeSet<usize>,
}

impl Faults {
    /// The next `n` batches that succeed are delivered again, the very same records, as when
    /// Lambda loses a checkpoint; the second delivery's answer decides what happens next.
    pub fn duplicate_next_batches(&self, n: u32) {
        self.with(|s| s.duplicate_batches += n);
    }

    /// The next retries, one per entry in order, are cut differently from the attempt that
    /// failed (a retry starts where AWS starts it: the batch's first record, or the lowest
    /// record reported in `batchItemFailures`).
    pub fn recut_next_retries(&self, recuts: impl IntoIterator<Item = Recut>) {
        self.with(|s| s.recuts.extend(recuts));
    }

    /// Deliveries hold at most `records` records (as when the 6 MB payload limit cuts a batch
    /// early) until set back to `None`. A [`Recut::Longer`] retry may go past it.
    pub fn cut_batches_at(&self, records: Option<usize>) {
        self.with(|s| s.batch_cap = records.map(|r| r.max(1)));
    }

    /// The next invocation that commits its `k`-th chunk (its k-th successful
    /// `TransactWriteItems`) dies right after it: no further call leaves it, its answer is
    /// lost, and the mapping treats it as a function error. `k` ≥ 1. Each call arms one
    /// more crash, played after the ones armed before it.
    pub fn crash_after_chunks(&self, k: usize) {
        self.with(|s| s.crashes.push_back(k.max(1)));
    }

    /// The next `n` invocations fail as a function error before doing anything (the runtime
    /// crashed at start, a bad deploy).
    pub fn fail_next_invocations(&self, n: u32) {
        self.with(|s| s.failing_invocations += n);
    }

    /// The next `n` `PutRecords` calls are refused entry by entry
    /// (`ProvisionedThroughputExceededException` on every record, as Kinesis answers a
    /// throttled put). The event publisher puts refused entries again a few times itself, so
    /// it takes that many refusals in a row to fail the batch record.
    pub fn fail_kinesis_puts(&self, n: u32) {
        self.with(|s| s.kinesis_put_failures += n);
    }

    /// The next `n` `TransactWriteItems` calls are answered `400
    /// ProvisionedThroughputExceededException`, nothing written. The SDK retries throttling
    /// itself (3 attempts by default), so 3 in a row fail the chunk for the function.
    pub fn throttle_count_writes(&self, n: u32) {
        self.throttle_count_writes_after(0, n);
    }

    /// As [`Faults::throttle_count_writes`], played only once an invocation committed
    /// `chunks` chunks: the batch then fails in its middle, at the first record of the chunk
    /// that could not be written.
    pub fn throttle_count_writes_after(&self, chunks: usize, n: u32) {
        self.with(|s| {
            s.throttled_transactions += n;
            s.throttle_after_chunks = chunks;
        });
    }

    /// The next `n` `TransactWriteItems` calls are cancelled with `ThrottlingError` reasons
    /// (`TransactionCanceledException`), nothing written: the way DynamoDB reports a throttled
    /// item inside a transaction.
    pub fn cancel_count_writes_throttled(&self, n: u32) {
        self.with(|s| s.throttle_cancellations += n);
    }

    /// The mapping sees records as this much older than they are (a stalled pipeline), for
    /// `MaximumRecordAgeInSeconds`.
    pub fn age_records_by(&self, age: Duration) {
        self.with(|s| s.record_age_offset = age);
    }

    /// The next `n` stream reads present an iterator the stream no longer knows (as one that
    /// expired: moto answers HTTP 500, AWS `ExpiredIteratorException`); the mapping must get
    /// a new one after the last record it read, losing and repeating nothing.
    pub fn expire_stream_iterators(&self, n: u32) {
        self.with(|s| s.stale_iterators += n);
    }

    /// Virtual shard `n` stops delivering: its records pile up (read, not invoked, not
    /// aged out) while the other shards run, until [`Faults::resume_shard`].
    pub fn stall_shard(&self, n: usize) {
        self.with(|s| s.stalled_shards.insert(n));
    }

    pub fn resume_shard(&self, n: usize) {
        self.with(|s| s.stalled_shards.remove(&n));
    }

    /// Every invocation on virtual shard `n` fails as a function error, so it retries (and
    /// after `MaximumRetryAttempts` gives its batches up), until [`Faults::heal_shard`].
    pub fn fail_shard(&self, n: usize) {
        self.with(|s| s.failing_shards.insert(n));
    }

    pub fn heal_shard(&self, n: usize) {
        self.with(|s| s.failing_shards.remove(&n));
    }

    /// Disarms every fault.
    pub fn clear(&self) {
        self.with(|s| *s = Switches::default());
    }

    /// True while some one-shot fault is still waiting to be played.
    pub fn armed(&self) -> bool {
        self.with(|s| {
            s.duplicate_batches > 0
                || !s.recuts.is_empty()
                || !s.crashes.is_empty()
                || s.failing_invocations > 0
                || s.kinesis_put_failures > 0
                || s.throttled_transactions > 0
                || s.throttle_cancellations > 0
                || s.stale_iterators > 0
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Switches) -> T) -> T {
        f(&mut self.switches.lock().expect("fault switches"))
    }

    pub(crate) fn take_duplicate(&self) -> bool {
        self.with(|s| take_one(&mut s.duplicate_batches))
    }

    pub(crate) fn take_recut(&self) -> Option<Recut> {
        self.with(|s| s.recuts.pop_front())
    }

    pub(crate) fn batch_cap(&self) -> Option<usize> {
        self.with(|s| s.batch_cap)
    }

    pub(crate) fn take_invocation_failure(&self) -> bool {
        self.with(|s| take_one(&mut s.failing_invocations))
    }

    pub(crate) fn is_stalled(&self, shard: usize) -> bool {
        self.with(|s| s.stalled_shards.contains(&shard))
    }

    pub(crate) fn is_failing(&self, shard: usize) -> bool {
        self.with(|s| s.failing_shards.contains(&shard))
    }

    /// A shard a fault keeps from applying its records.
    pub(crate) fn holds_back(&self, shard: usize) -> bool {
        self.is_stalled(shard) || self.is_failing(shard)
    }

    pub(crate) fn take_stale_iterator(&self) -> bool {
        self.with(|s| take_one(&mut s.stale_iterators))
    }

    pub(crate) fn record_age_offset(&self) -> Duration {
        self.with(|s| s.record_age_offset)
    }

    fn take_crash_at(&self, chunks: usize) -> bool {
        self.with(|s| {
            let crash = s.crashes.front() == Some(&chunks);
            if crash {
                s.crashes.pop_front();
            }
            crash
        })
    }

    fn take_kinesis_failure(&self) -> bool {
        self.with(|s| take_one(&mut s.kinesis_put_failures))
    }

    fn take_count_write_throttle(&self, chunks_committed: usize) -> Option<Throttle> {
        self.with(|s| {
            if chunks_committed < s.throttle_after_chunks {
                None
            } else if take_one(&mut s.throttled_transactions) {
                if s.throttled_transactions == 0 {
                    s.throttle_after_chunks = 0;
                }
                Some(Throttle::Request)
            } else if take_one(&mut s.throttle_cancellations) {
                Some(Throttle::Cancellation)
            } else {
                None
            }
        })
    }
}

fn take_one(n: &mut u32) -> bool {
    let armed = *n > 0;
    if armed {
        *n -= 1;
    }
    armed
}

#[derive(Debug, Clone, Copy)]
enum Throttle {
    Request,
    Cancellation,
}

/// What one event source mapping did, as tests read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Invocations of the function, retries and duplicates included.
    pub invocations: u64,
    /// Records handed to the function, summed over invocations.
    pub records_delivered: u64,
    /// Invocations that failed as a whole: an `Err`, a crash, a timeout, a refused event.
    pub function_errors: u64,
    /// Invocations that answered with `batchItemFailures`.
    pub partial_failures: u64,
    /// Invocations that retried a failed batch.
    pub retries: u64,
    /// Batches delivered a second time after they succeeded.
    pub duplicate_deliveries: u64,
    /// Invocations killed after their k-th chunk ([`Faults::crash_after_chunks`]).
    pub crashes: u64,
    /// Batches given up on (retries or record age exhausted) and sent to the on-failure
    /// destination, and the records they held.
    pub dlq_batches: u64,
    pub dlq_records: u64,
    /// Records acknowledged: the checkpoint moved past them (applied or given up on).
    pub records_acknowledged: u64,
    /// `TransactWriteItems` calls of the function that succeeded: committed chunks.
    pub transactions_committed: u64,
    /// Count-row updates those transactions wrote (their items minus the claim).
    pub count_row_writes: u64,
    /// Injected faults that were played.
    pub throttled_count_writes: u64,
    pub refused_kinesis_puts: u64,
    /// Stream reads that failed (moto's 500 on a stale iterator, say) and were re-acquired.
    pub stream_read_errors: u64,
}

/// The live counters behind [`Counters`].
#[derive(Debug, Default)]
pub(crate) struct CounterCells {
    pub invocations: AtomicU64,
    pub records_delivered: AtomicU64,
    pub function_errors: AtomicU64,
    pub partial_failures: AtomicU64,
    pub retries: AtomicU64,
    pub duplicate_deliveries: AtomicU64,
    pub crashes: AtomicU64,
    pub dlq_batches: AtomicU64,
    pub dlq_records: AtomicU64,
    pub records_acknowledged: AtomicU64,
    pub transactions_committed: AtomicU64,
    pub count_row_writes: AtomicU64,
    pub throttled_count_writes: AtomicU64,
    pub refused_kinesis_puts: AtomicU64,
    pub stream_read_errors: AtomicU64,
}

impl CounterCells {
    pub fn add(cell: &AtomicU64, n: u64) {
        cell.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Counters {
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        Counters {
            invocations: get(&self.invocations),
            records_delivered: get(&self.records_delivered),
            function_errors: get(&self.function_errors),
            partial_failures: get(&self.partial_failures),
            retries: get(&self.retries),
            duplicate_deliveries: get(&self.duplicate_deliveries),
            crashes: get(&self.crashes),
            dlq_batches: get(&self.dlq_batches),
            dlq_records: get(&self.dlq_records),
            records_acknowledged: get(&self.records_acknowledged),
            transactions_committed: get(&self.transactions_committed),
            count_row_writes: get(&self.count_row_writes),
            throttled_count_writes: get(&self.throttled_count_writes),
            refused_kinesis_puts: get(&self.refused_kinesis_puts),
            stream_read_errors: get(&self.stream_read_errors),
        }
    }
}

/// The invocation running in one function instance (one per stream shard), as far as the
/// interceptors need it: how many chunks it committed, and whether it died.
#[derive(Debug, Default)]
pub(crate) struct InvocationSlot {
    current: Mutex<Option<Arc<LiveInvocation>>>,
}

#[derive(Debug, Default)]
pub(crate) struct LiveInvocation {
    chunks_committed: AtomicUsize,
    dead: AtomicBool,
    died: Notify,
}

impl LiveInvocation {
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Resolves once the invocation died.
    pub async fn died(&self) {
        while !self.is_dead() {
            self.died.notified().await;
        }
    }
}

impl InvocationSlot {
    pub fn begin(&self) -> Arc<LiveInvocation> {
        let live = Arc::new(LiveInvocation::default());
        *self.current.lock().expect("invocation slot") = Some(live.clone());
        live
    }

    pub fn end(&self) {
        *self.current.lock().expect("invocation slot") = None;
    }

    fn current(&self) -> Option<Arc<LiveInvocation>> {
        self.current.lock().expect("invocation slot").clone()
    }

    fn is_dead(&self) -> bool {
        self.current().is_some_and(|live| live.is_dead())
    }
}

/// What an interceptor shares with its mapping.
#[derive(Debug, Clone)]
pub(crate) struct FaultContext {
    pub faults: Arc<Faults>,
    pub counters: Arc<CounterCells>,
    pub invocation: Arc<InvocationSlot>,
}

/// The number of actions of the `TransactWriteItems` in flight (claim + count rows).
#[derive(Debug, Clone, Copy)]
struct TransactionSize(usize);

impl Storable for TransactionSize {
    type Storer = StoreReplace<Self>;
}

/// The number of entries of the `PutRecords` in flight.
#[derive(Debug, Clone, Copy)]
struct PutSize(usize);

impl Storable for PutSize {
    type Storer = StoreReplace<Self>;
}

/// The error response this attempt gets instead of the harmless read it was turned into.
#[derive(Debug, Clone)]
struct InjectedResponse {
    status: u16,
    content_type: &'static str,
    body: String,
}

impl Storable for InjectedResponse {
    type Storer = StoreReplace<Self>;
}

fn operation(cfg: &ConfigBag) -> Option<&str> {
    cfg.load::<Metadata>().map(Metadata::name)
}

/// Stops every call of an invocation that died: a dead process sends nothing more.
fn refuse_if_dead(context: &FaultContext) -> Result<(), BoxError> {
    if context.invocation.is_dead() {
        return Err("the invocation crashed (injected fault): no more calls leave it".into());
    }
    Ok(())
}

/// Turns the attempt's request into a harmless read and arranges for `response` to replace
/// that read's answer, so nothing the original request would have written is written.
fn divert(
    request: &mut aws_smithy_runtime_api::client::orchestrator::HttpRequest,
    cfg: &mut ConfigBag,
    target: &str,
    response: InjectedResponse,
) -> Result<(), BoxError> {
    let body = r#"{"Limit":1}"#;
    let headers = request.headers_mut();
    headers.insert("x-amz-target", target.to_owned());
    headers.insert("content-length", body.len().to_string());
    *request.body_mut() = SdkBody::from(body);
    cfg.interceptor_state().store_put(response);
    Ok(())
}

fn replace_response(
    context: &mut BeforeDeserializationInterceptorContextMut<'_>,
    cfg: &mut ConfigBag,
) {
    let Some(injected) = cfg.load::<InjectedResponse>().cloned() else {
        return;
    };
    cfg.interceptor_state().unset::<InjectedResponse>();
    let mut response = HttpResponse::new(
        StatusCode::try_from(injected.status).expect("a valid status"),
        SdkBody::from(injected.body),
    );
    response
        .headers_mut()
        .insert("content-type", injected.content_type);
    *context.response_mut() = response;
}

/// Faults on the function's DynamoDB client: throttled count writes, and the crash after the
/// k-th committed chunk. Also counts committed chunks and the count rows they wrote.
#[derive(Debug)]
pub(crate) struct CountWriteFaults(pub FaultContext);

const TRANSACT_WRITE_ITEMS: &str = "TransactWriteItems";
const DYNAMODB_JSON: &str = "application/x-amz-json-1.0";

impl Intercept for CountWriteFaults {
    fn name(&self) -> &'static str {
        "LikesLocalCountWriteFaults"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // Client interceptors run this hook before the operation's metadata is in `cfg`:
        // the input's type tells the operation.
        if let Some(input) = context
            .input()
            .downcast_ref::<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput>()
        {
            let size = input.transact_items().len();
            cfg.interceptor_state().store_put(TransactionSize(size));
        }
        Ok(())
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        refuse_if_dead(&self.0)?;
        if operation(cfg) != Some(TRANSACT_WRITE_ITEMS) {
            return Ok(());
        }
        let chunks_committed = self
            .0
            .invocation
            .current()
            .map_or(0, |live| live.chunks_committed.load(Ordering::SeqCst));
        let Some(throttle) = self.0.faults.take_count_write_throttle(chunks_committed) else {
            return Ok(());
        };
        CounterCells::add(&self.0.counters.throttled_count_writes, 1);
        let body = match throttle {
            Throttle::Request => serde_json::json!({
                "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                "message": "The level of configured provisioned throughput for the table was exceeded. (injected by likes-local)",
            }),
            Throttle::Cancellation => {
                let size = cfg.load::<TransactionSize>().map_or(1, |s| s.0.max(1));
                let mut reasons = vec![serde_json::json!({"Code": "None"}); size];
                reasons[size - 1] = serde_json::json!({
                    "Code": "ThrottlingError",
                    "Message": "Throughput exceeds the current capacity for one or more global secondary indexes. (injected by likes-local)",
                });
                serde_json::json!({
                    "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                    "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons [ThrottlingError] (injected by likes-local)",
                    "CancellationReasons": reasons,
                })
            }
        };
        divert(
            context.request_mut(),
            cfg,
            "DynamoDB_20120810.ListTables",
            InjectedResponse {
                status: 400,
                content_type: DYNAMODB_JSON,
                body: body.to_string(),
            },
        )
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        replace_response(context, cfg);
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if operation(cfg) != Some(TRANSACT_WRITE_ITEMS)
            || !matches!(context.output_or_error(), Some(Ok(_)))
        {
            return Ok(());
        }
        let size = cfg.load::<TransactionSize>().map_or(0, |s| s.0);
        let counters = &self.0.counters;
        CounterCells::add(&counters.transactions_committed, 1);
        CounterCells::add(&counters.count_row_writes, size.saturating_sub(1) as u64);
        if let Some(live) = self.0.invocation.current() {
            let chunks = live.chunks_committed.fetch_add(1, Ordering::SeqCst) + 1;
            if self.0.faults.take_crash_at(chunks) {
                live.dead.store(true, Ordering::SeqCst);
                live.died.notify_waiters();
                live.died.notify_one();
            }
        }
        Ok(())
    }
}

/// Faults on the function's Kinesis client: refused puts, and the silence of a dead
/// invocation.
#[derive(Debug)]
pub(crate) struct EventLogFaults(pub FaultContext);

const PUT_RECORDS: &str = "PutRecords";

impl Intercept for EventLogFaults {
    fn name(&self) -> &'static str {
        "LikesLocalEventLogFaults"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(input) = context
            .input()
            .downcast_ref::<aws_sdk_kinesis::operation::put_records::PutRecordsInput>()
        {
            cfg.interceptor_state()
                .store_put(PutSize(input.records().len()));
        }
        Ok(())
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        refuse_if_dead(&self.0)?;
        if operation(cfg) != Some(PUT_RECORDS) || !self.0.faults.take_kinesis_failure() {
            return Ok(());
        }
        CounterCells::add(&self.0.counters.refused_kinesis_puts, 1);
        let size = cfg.load::<PutSize>().map_or(0, |s| s.0);
        let refused = serde_json::json!({
            "ErrorCode": "ProvisionedThroughputExceededException",
            "ErrorMessage": "Rate exceeded for shard shardId-000000000000 in stream. (injected by likes-local)",
        });
        let body = serde_json::json!({
            "FailedRecordCount": size,
            "Records": vec![refused; size],
        });
        divert(
            context.request_mut(),
            cfg,
            "Kinesis_20131202.ListStreams",
            InjectedResponse {
                status: 200,
                content_type: "application/x-amz-json-1.1",
                body: body.to_string(),
            },
        )
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        replace_response(context, cfg);
        Ok(())
    }
}
