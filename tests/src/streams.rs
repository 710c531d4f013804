//! The stack's streams read independently of the pipeline: the Reactions stream's records
//! and shards, the Kinesis event log, the dead-letter queues.

use std::collections::BTreeMap;

use crate::{TestRequest, TestStack};

/// A record of the event log, where and when it arrived.
#[derive(Debug, Clone)]
pub struct LogArrival {
    pub shard_id: String,
    pub arrival_ms: i64,
    pub record: likes_core::pipeline::LogRecord,
}

impl TestStack {
    pub fn kinesis(&self) -> aws_sdk_kinesis::Client {
        aws_sdk_kinesis::Client::new(&self.stack.aws.sdk)
    }

    pub fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.stack.aws.sdk)
    }

    /// Every flip's event on the Kinesis event log, in no particular order, duplicates
    /// included (heartbeats and moderation records left out).
    pub async fn events(&self) -> Vec<likes_core::pipeline::ReactionEvent> {
        self.log_records()
            .await
            .into_iter()
            .filter_map(likes_core::pipeline::LogRecord::event)
            .collect()
    }

    /// Every record on the Kinesis event log, in no particular order, duplicates included:
    /// each shard read from TRIM_HORIZON to its end.
    pub async fn log_records(&self) -> Vec<likes_core::pipeline::LogRecord> {
        self.log_arrivals()
            .await
            .into_iter()
            .map(|arrival| arrival.record)
            .collect()
    }

    /// Every record on the Kinesis event log as [`Self::log_records`] reads them, each with
    /// its shard and its arrival on the log (what the boards' `as_of` is a time of).
    pub async fn log_arrivals(&self) -> Vec<LogArrival> {
        let kinesis = self.kinesis();
        let stream = self.name("EventsStream");
        let shards = kinesis
            .list_shards()
            .stream_name(&stream)
            .send()
            .await
            .expect("ListShards of the events stream");
        let mut records = Vec::new();
        for shard in shards.shards() {
            let mut iterator = kinesis
                .get_shard_iterator()
                .stream_name(&stream)
                .shard_id(shard.shard_id())
                .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("GetShardIterator")
                .shard_iterator;
            while let Some(current) = iterator.take() {
                let page = kinesis
                    .get_records()
                    .shard_iterator(current)
                    .limit(10_000)
                    .send()
                    .await
                    .expect("GetRecords of the events stream");
                records.extend(page.records().iter().map(|record| {
                    LogArrival {
                        shard_id: shard.shard_id().to_owned(),
                        arrival_ms: record
                            .approximate_arrival_timestamp()
                            .and_then(|at| at.to_millis().ok())
                            .expect("a record's arrival on the log"),
                        record: likes_core::pipeline::LogRecord::parse(record.data().as_ref())
                            .expect(
                                "an event, a heartbeat or a moderation record on the event log",
                            ),
                    }
                }));
                if page.records().is_empty() {
                    break;
                }
                iterator = page.next_shard_iterator;
            }
        }
        records
    }

    /// How many records the Reactions stream holds now (every shard, from TRIM_HORIZON),
    /// read independently of the pipeline.
    pub async fn stream_records(&self) -> usize {
        self.stream_partition_keys().await.len()
    }

    /// How many records the Reactions stream holds now for each of `users`: what a test
    /// expects of the pipeline, whatever the emulator emits per write (moto two INSERTs for
    /// a new row and a MODIFY for a no-op write, AWS one and none).
    pub async fn stream_records_of(&self, users: &[String]) -> usize {
        let users: std::collections::BTreeSet<&String> = users.iter().collect();
        self.stream_partition_keys()
            .await
            .iter()
            .filter(|user| users.contains(user))
            .count()
    }

    /// Splits every open shard of the Reactions stream in two, as DynamoDB does over a
    /// table's life (the emulator's own operation: AWS has no API for it). Each child's id,
    /// by parent. Lambda finishes a parent's open tumbling window before its children
    /// start, so the split comes near a window's end: what is written after it is not held
    /// back for most of a window.
    pub async fn split_reactions_stream(&self) -> BTreeMap<String, Vec<String>> {
        if let Some(left) = self.window_left() {
            let before_end = std::time::Duration::from_millis(1_500);
            tokio::time::sleep(left.saturating_sub(before_end)).await;
        }
        let arn = self.pipeline().config().stream_arn.clone();
        let answer = self
            .emulator_operation("SplitStreamShards", serde_json::json!({ "StreamArn": arn }))
            .await;
        serde_json::from_value(answer["Children"].clone()).expect("children by parent")
    }

    /// Calls one of the emulator's own operations (`LikesEmulator.<operation>`, for what
    /// AWS does on its own and has no API for) and returns its answer.
    pub(crate) async fn emulator_operation(
        &self,
        operation: &str,
        body: serde_json::Value,
    ) -> serde_json::Value {
        let endpoint = &self.stack.aws.endpoint_url;
        let addr = endpoint
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|err| panic!("the emulator listens on {endpoint}: {err}"));
        let answer = TestRequest::new(addr, "POST", "/")
            .header("x-amz-target", &format!("LikesEmulator.{operation}"))
            .header("content-type", "application/x-amz-json-1.0")
            .body(body.to_string())
            .send()
            .await;
        answer.assert_status(200);
        answer.json()
    }

    /// The `user_id` of every record in the Reactions stream, in each shard's order.
    pub(crate) async fn stream_partition_keys(&self) -> Vec<String> {
        self.stream_partition_keys_by_shard()
            .await
            .into_values()
            .flatten()
            .collect()
    }

    /// The `user_id` of every record in the Reactions stream, by shard, in its order.
    pub async fn stream_partition_keys_by_shard(&self) -> BTreeMap<String, Vec<String>> {
        use aws_sdk_dynamodbstreams::types::{AttributeValue, ShardIteratorType};
        let streams = aws_sdk_dynamodbstreams::Client::new(&self.stack.aws.sdk);
        let arn = self.pipeline().config().stream_arn.clone();
        let description = streams
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await
            .expect("DescribeStream")
            .stream_description
            .expect("a stream description");
        let mut by_shard = BTreeMap::new();
        for shard in description.shards() {
            let keys: &mut Vec<String> = by_shard
                .entry(shard.shard_id().unwrap_or_default().to_owned())
                .or_default();
            let mut iterator = streams
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(shard.shard_id().unwrap_or_default())
                .shard_iterator_type(ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("GetShardIterator")
                .shard_iterator;
            while let Some(current) = iterator.take() {
                let page = streams
                    .get_records()
                    .shard_iterator(current)
                    .send()
                    .await
                    .expect("GetRecords");
                if page.records().is_empty() {
                    break;
                }
                for record in page.records() {
                    let user = record
                        .dynamodb()
                        .and_then(|change| change.keys())
                        .and_then(|keys| keys.get("user_id"));
                    if let Some(AttributeValue::S(user)) = user {
                        keys.push(user.clone());
                    }
                }
                iterator = page.next_shard_iterator;
            }
        }
        by_shard
    }

    /// Waits, if need be, for the aggregator's next tumbling window, so that at least `room`
    /// is left in the current one: Lambda never puts records of two windows in one batch,
    /// and a test that needs one batch must write it within a window.
    pub async fn wait_for_window_room(&self, room: std::time::Duration) {
        let Some(window) = self.pipeline().config().tumbling_window else {
            return;
        };
        let now = likes_core::clock::now_ms() as u128;
        let into = std::time::Duration::from_millis((now % window.as_millis()) as u64);
        if window.saturating_sub(into) < room {
            // A little past the boundary: the stream stamps records with its own clock.
            tokio::time::sleep(window - into + std::time::Duration::from_millis(200)).await;
        }
    }

    /// `count` user ids `<tag>-u<i>` whose records land on virtual shard `shard` of the
    /// aggregator's mapping (one shard's records make one batch, as on AWS).
    pub fn users_on_shard(&self, tag: &str, shard: usize, count: usize) -> Vec<String> {
        let pipeline = self.pipeline();
        (0..)
            .map(|i| format!("{tag}-u{i}"))
            .filter(|user| pipeline.shard_index(user) == shard)
            .take(count)
            .collect()
    }
}
