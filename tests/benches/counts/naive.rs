//! The naive baseline, run beside the design on the same stream: one counter row per item
//! (`item_id` alone as its key), one `UpdateItem ADD` per flip, no shard, no intent, no
//! watermark. It is a second reader of the Reactions stream, as a second Lambda mapping
//! would be, batched as the template batches the aggregator, and it keeps every record it
//! read: the cost accounting joins the aggregator's intents against that log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record, ShardIteratorType};
use likes_core::clock::now_ms;
use likes_core::{Delta, ReactionState, Transition};
use likes_tests::TestStack;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::capacity::Item;

/// How often an idle shard is read, as the local mapping reads it.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// UpdateItems in flight per batch: a naive handler still sends its writes concurrently.
pub const WRITES_IN_FLIGHT: usize = 16;

/// One Reactions stream record, as both consumers got it.
#[derive(Debug, Clone)]
pub struct StreamRecord {
    /// The stream shard it was read from, and its place there.
    pub stream_shard: String,
    pub sequence_number: String,
    /// Its keys: the partition key, which the local mapping splits the shard by, and the item.
    pub user: String,
    pub item: String,
    /// Zero for a record that changes no state (moto's keys-only INSERT, a trim).
    pub delta: Delta,
    /// When the flip was written: the row's `updated_at`.
    pub event_time_ms: Option<i64>,
    /// When the naive counter's ADD for it returned.
    pub applied_ms: Option<i64>,
}

impl StreamRecord {
    pub fn is_flip(&self) -> bool {
        !self.delta.is_zero()
    }
}

pub struct Naive {
    pub counter: Counter,
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    log: Mutex<Vec<StreamRecord>>,
    /// Per shard: when a read last found nothing new and nothing was buffered.
    caught_up: Mutex<HashMap<String, Instant>>,
    stop: AtomicBool,
}

impl Naive {
    /// Creates the baseline's table beside the stack's and starts reading the Reactions
    /// stream from its start, batched like the aggregator's mapping.
    pub async fn start(stack: &TestStack) -> Self {
        let client = stack.dynamodb();
        let table = format!("{}-Naive", stack.name("CountsTable"));
        client
            .create_table()
            .table_name(&table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("item_id")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .expect("attribute definition"),
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("item_id")
                    .key_type(KeyType::Hash)
                    .build()
                    .expect("key schema"),
            )
            .send()
            .await
            .expect("CreateTable of the naive counter");
        let config = stack.pipeline().config();
        let (stream_arn, batch_size, window) = (
            config.stream_arn.clone(),
            config.batch_size,
            config.batching_window,
        );
        let streams = aws_sdk_dynamodbstreams::Client::new(&stack.stack.aws.sdk);
        let shards: Vec<String> = streams
            .describe_stream()
            .stream_arn(&stream_arn)
            .send()
            .await
            .expect("DescribeStream")
            .stream_description
            .expect("a stream description")
            .shards()
            .iter()
            .filter_map(|s| s.shard_id().map(str::to_owned))
            .collect();
        let shared = Arc::new(Shared::default());
        let tasks = shards
            .into_iter()
            .map(|shard| {
                let reader = ShardReader {
                    streams: streams.clone(),
                    stream_arn: stream_arn.clone(),
                    shard,
                    counter: Counter {
                        client: client.clone(),
                        table: table.clone(),
                    },
                    batch_size,
                    window,
                    shared: shared.clone(),
                };
                tokio::spawn(reader.run())
            })
            .collect();
        Self {
            counter: Counter { client, table },
            shared,
            tasks,
        }
    }

    /// Waits until every shard was read to its end (for now) with nothing left to apply.
    pub async fn settle(&self, timeout: Duration) {
        let since = Instant::now();
        loop {
            let settled = {
                let caught_up = self.shared.caught_up.lock().expect("progress");
                caught_up.len() == self.tasks.len() && caught_up.values().all(|at| *at >= since)
            };
            if settled {
                return;
            }
            assert!(
                since.elapsed() < timeout,
                "the naive counter did not catch up with the stream in {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub fn log(&self) -> Vec<StreamRecord> {
        self.shared.log.lock().expect("log").clone()
    }

    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// The like count a naive counter row holds.
pub fn like_count(row: &Item) -> u64 {
    match row.get("like_count") {
        Some(AttributeValue::N(n)) => n.parse::<i64>().expect("a number").max(0) as u64,
        _ => 0,
    }
}

/// The baseline's table: the handler's one write, and the reads of its rows.
#[derive(Clone)]
pub struct Counter {
    client: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl Counter {
    /// The counter row of `item` (eventually consistent, as a count read would be).
    pub async fn row(&self, item: &str) -> Item {
        self.client
            .get_item()
            .table_name(&self.table)
            .key("item_id", AttributeValue::S(item.to_owned()))
            .send()
            .await
            .expect("GetItem of a naive counter")
            .item
            .unwrap_or_default()
    }

    /// Every counter row, by item.
    pub async fn rows(&self) -> HashMap<String, Item> {
        let mut rows = HashMap::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .expect("Scan of the naive counters");
            for row in page.items() {
                if let Some(AttributeValue::S(item)) = row.get("item_id") {
                    rows.insert(item.clone(), row.clone());
                }
            }
            match page.last_evaluated_key {
                Some(key) => start = Some(key),
                None => return rows,
            }
        }
    }

    /// The whole naive handler: one ADD per flip, on the item's only row.
    async fn add(&self, item: &str, delta: Delta) {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("item_id", AttributeValue::S(item.to_owned()))
            .update_expression("ADD like_count :like, dislike_count :dislike SET updated_at = :now")
            .expression_attribute_values(":like", AttributeValue::N(delta.like.to_string()))
            .expression_attribute_values(":dislike", AttributeValue::N(delta.dislike.to_string()))
            .expression_attribute_values(":now", AttributeValue::N(now_ms().to_string()))
            .send()
            .await
            .expect("UpdateItem ADD of a naive counter");
    }
}

struct ShardReader {
    streams: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
    shard: String,
    counter: Counter,
    batch_size: usize,
    window: Duration,
    shared: Arc<Shared>,
}

impl ShardReader {
    async fn run(self) {
        let mut iterator = self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(&self.shard)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("GetShardIterator")
            .shard_iterator;
        let mut buffer: Vec<(StreamRecord, Instant)> = Vec::new();
        while !self.shared.stop.load(Ordering::SeqCst) {
            let mut read = 0;
            if buffer.len() < self.batch_size {
                let Some(current) = iterator.take() else {
                    return;
                };
                let page = self
                    .streams
                    .get_records()
                    .shard_iterator(current)
                    .limit(1000)
                    .send()
                    .await
                    .expect("GetRecords of the Reactions stream");
                let arrived = Instant::now();
                read = page.records().len();
                buffer.extend(
                    page.records()
                        .iter()
                        .map(|r| (decode(r, &self.shard), arrived)),
                );
                iterator = page.next_shard_iterator;
            }
            if read == 0 && buffer.is_empty() {
                self.shared
                    .caught_up
                    .lock()
                    .expect("progress")
                    .insert(self.shard.clone(), Instant::now());
            }
            let due = buffer.first().is_some_and(|(_, arrived)| {
                buffer.len() >= self.batch_size || arrived.elapsed() >= self.window
            });
            if due {
                let len = buffer.len().min(self.batch_size);
                let batch: Vec<StreamRecord> = buffer.drain(..len).map(|(r, _)| r).collect();
                let applied = self.apply(batch).await;
                self.shared.log.lock().expect("log").extend(applied);
            } else if read == 0 {
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        }
    }

    /// One invocation of the naive handler: every flip of the batch, each its own ADD.
    async fn apply(&self, mut batch: Vec<StreamRecord>) -> Vec<StreamRecord> {
        let permits = Arc::new(Semaphore::new(WRITES_IN_FLIGHT));
        let mut writes = JoinSet::new();
        for (at, record) in batch.iter().enumerate().filter(|(_, r)| r.is_flip()) {
            let (counter, permits) = (self.counter.clone(), permits.clone());
            let (item, delta) = (record.item.clone(), record.delta);
            writes.spawn(async move {
                let _permit = permits.acquire_owned().await.expect("never closed");
                counter.add(&item, delta).await;
                (at, now_ms())
            });
        }
        while let Some(done) = writes.join_next().await {
            let (at, applied) = done.expect("naive write task");
            batch[at].applied_ms = Some(applied);
        }
        batch
    }
}

/// The record's flip, from its images through the transition table (as the aggregator
/// decides it), or none.
fn decode(record: &Record, stream_shard: &str) -> StreamRecord {
    let change = record.dynamodb.as_ref().expect("a stream record's change");
    let image = |image: Option<&HashMap<String, StreamValue>>, name: &str| {
        image.and_then(|i| i.get(name)).map(|v| match v {
            StreamValue::S(s) | StreamValue::N(s) => s.clone(),
            other => panic!("{name} is {other:?}"),
        })
    };
    let state = |i: Option<&HashMap<String, StreamValue>>| -> ReactionState {
        image(i, "state").map_or(ReactionState::None, |s| s.parse().expect("a state"))
    };
    let transition = Transition::new(
        state(change.old_image.as_ref()),
        state(change.new_image.as_ref()),
    );
    let delta = transition.delta();
    StreamRecord {
        stream_shard: stream_shard.to_owned(),
        sequence_number: change.sequence_number.clone().expect("a SequenceNumber"),
        user: image(change.keys.as_ref(), "user_id").expect("the user_id key"),
        item: image(change.keys.as_ref(), "item_id").expect("the item_id key"),
        delta,
        event_time_ms: (!delta.is_zero())
            .then(|| image(change.new_image.as_ref(), "updated_at"))
            .flatten()
            .map(|t| t.parse().expect("updated_at in epoch millis")),
        applied_ms: None,
    }
}
