//! The AWS-side faults: smithy interceptors on the SDK clients the poller builds for a
//! function instance, and the invocation they watch.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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

use likes_functions::Clients;

use super::{CounterCells, Faults};

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

/// Puts the mapping's fault interceptors on the clients of a function instance, by its
/// `Handler`. What a crash "after k chunks" counts is the write each consumer commits its
/// work with: the aggregator's intents and count rows, the eraser's BatchWriteItem deletes (a crash
/// leaves a slice half done), the read models' UpdateItems (an intent half applied, a lease
/// held, a batch half listed). The publisher's faults are refused puts.
pub(crate) fn intercept(
    handler: &str,
    mut clients: Clients,
    sdk: &aws_config::SdkConfig,
    context: FaultContext,
) -> Clients {
    let dynamodb = |faults: CountWriteFaults| {
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(sdk)
                .interceptor(faults)
                .build(),
        )
    };
    match handler {
        "aggregator" => clients.dynamodb = dynamodb(CountWriteFaults::committing_counts(context)),
        "erase" => clients.dynamodb = dynamodb(CountWriteFaults::committing_deletes(context)),
        "leaderboard" => {
            clients.dynamodb = dynamodb(CountWriteFaults::committing_updates(context));
        }
        "publisher" => {
            clients.kinesis = aws_sdk_kinesis::Client::from_conf(
                aws_sdk_kinesis::config::Builder::from(sdk)
                    .interceptor(EventLogFaults(context))
                    .build(),
            );
        }
        _ => {}
    }
    clients
}

/// What an interceptor shares with its mapping.
#[derive(Debug, Clone)]
pub(crate) struct FaultContext {
    pub faults: Arc<Faults>,
    pub counters: Arc<CounterCells>,
    pub invocation: Arc<InvocationSlot>,
}

/// The write in flight is an `UpdateItem` of a count row (`D#<k>`, with its key) or an
/// intent's `PutItem`: what the aggregator's throttles hit and its counters count.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CountWrite {
    Row(String),
    Intent,
}

impl Storable for CountWrite {
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
/// k-th committed chunk. Also counts the aggregator's intents and the count rows it wrote.
#[derive(Debug)]
struct CountWriteFaults {
    context: FaultContext,
    /// The operations whose successes are the invocation's committed chunks, as
    /// [`Faults::crash_after_chunks`] counts them; the aggregator's count writes (intents and
    /// count rows) always count.
    chunk: &'static [&'static str],
}

impl CountWriteFaults {
    /// The aggregator's: its count writes, an intent's `PutItem` and each count row's
    /// `UpdateItem` (so a crash can fall inside an intent half applied).
    pub fn committing_counts(context: FaultContext) -> Self {
        Self {
            context,
            chunk: &[],
        }
    }

    /// The eraser's: a chunk is one `BatchWriteItem` of deletes.
    pub fn committing_deletes(context: FaultContext) -> Self {
        Self {
            context,
            chunk: &[BATCH_WRITE_ITEM],
        }
    }

    /// The leaderboard's consumer (the likers entries too): a chunk is one `UpdateItem`.
    pub fn committing_updates(context: FaultContext) -> Self {
        Self {
            context,
            chunk: &[UPDATE_ITEM],
        }
    }
}

/// The table an `UpdateItem` writes, for [`Faults::count_chunks_of`].
#[derive(Debug, Clone)]
struct ChunkTable(String);

impl Storable for ChunkTable {
    type Storer = StoreReplace<Self>;
}

const BATCH_WRITE_ITEM: &str = "BatchWriteItem";
const UPDATE_ITEM: &str = "UpdateItem";
const DYNAMODB_JSON: &str = "application/x-amz-json-1.0";
/// The Counts table's keys, and how its count rows' and intents' sort keys start.
const COUNTS_PARTITION_KEY: &str = "item_id";
const COUNTS_SORT_KEY: &str = "shard";
const COUNT_ROW_PREFIX: &str = "D#";
const INTENT_PREFIX: &str = "N#";

impl Intercept for CountWriteFaults {
    fn name(&self) -> &'static str {
        "LikesLocalCountWriteFaults"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        use aws_sdk_dynamodb::operation::{put_item::PutItemInput, update_item::UpdateItemInput};
        use aws_sdk_dynamodb::types::AttributeValue;
        use std::collections::HashMap;
        // Client interceptors run this hook before the operation's metadata is in `cfg`:
        // the input's type tells the operation.
        let input = context.input();
        let text = |item: Option<&HashMap<String, AttributeValue>>, name: &str| {
            item.and_then(|item| item.get(name))
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        let write = if let Some(update) = input.downcast_ref::<UpdateItemInput>() {
            let row = text(update.key(), COUNTS_SORT_KEY);
            let partition = text(update.key(), COUNTS_PARTITION_KEY);
            row.starts_with(COUNT_ROW_PREFIX)
                .then(|| CountWrite::Row(format!("{partition}/{row}")))
        } else if let Some(put) = input.downcast_ref::<PutItemInput>() {
            text(put.item(), COUNTS_SORT_KEY)
                .starts_with(INTENT_PREFIX)
                .then_some(CountWrite::Intent)
        } else {
            None
        };
        if let Some(write) = write {
            cfg.interceptor_state().store_put(write);
        }
        let table = input
            .downcast_ref::<UpdateItemInput>()
            .and_then(|update| update.table_name());
        if let Some(table) = table {
            cfg.interceptor_state()
                .store_put(ChunkTable(table.to_owned()));
        }
        Ok(())
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        refuse_if_dead(&self.context)?;
        let Some(CountWrite::Row(row)) = cfg.load::<CountWrite>() else {
            return Ok(());
        };
        let chunks_committed = self
            .context
            .invocation
            .current()
            .map_or(0, |live| live.chunks_committed.load(Ordering::SeqCst));
        if !self
            .context
            .faults
            .take_count_write_throttle(chunks_committed, row)
        {
            return Ok(());
        }
        CounterCells::add(&self.context.counters.throttled_count_writes, 1);
        let body = serde_json::json!({
            "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
            "message": "The level of configured provisioned throughput for the table was exceeded. (injected by likes-local)",
        });
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
        if !matches!(context.output_or_error(), Some(Ok(_))) {
            return Ok(());
        }
        let counters = &self.context.counters;
        match cfg.load::<CountWrite>() {
            Some(CountWrite::Row(_)) => CounterCells::add(&counters.count_row_writes, 1),
            Some(CountWrite::Intent) => CounterCells::add(&counters.intents_written, 1),
            None if operation(cfg).is_some_and(|op| self.chunk.contains(&op))
                && self
                    .context
                    .faults
                    .counts_chunks_of(cfg.load::<ChunkTable>().map(|t| t.0.as_str())) => {}
            None => return Ok(()),
        }
        if let Some(live) = self.context.invocation.current() {
            let chunks = live.chunks_committed.fetch_add(1, Ordering::SeqCst) + 1;
            if self.context.faults.take_crash_at(chunks) {
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
struct EventLogFaults(pub FaultContext);

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
