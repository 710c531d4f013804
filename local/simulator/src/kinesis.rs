//! Kinesis Data Streams: a stream's shards split the 128-bit hash space evenly, and a
//! record goes to the shard whose range holds the MD5 of its partition key, as on AWS.
//! Sequence numbers rise across the whole service, so a shard's always do.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use crate::reply::{self, Reply};

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
/// AWS keeps records a day unless the stream asks for longer.
const DEFAULT_RETENTION_HOURS: i64 = 24;
/// GetRecords answers at most this many records.
const READ_LIMIT: usize = 10_000;
/// Sequence numbers are written this wide, so their text and number orders agree.
const SEQUENCE_DIGITS: usize = 21;

#[derive(Debug, Default)]
pub struct Kinesis {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    streams: BTreeMap<String, Stream>,
    sequence: u64,
}

#[derive(Debug)]
struct Stream {
    created: f64,
    retention_hours: i64,
    shards: Vec<Shard>,
}

#[derive(Debug)]
struct Shard {
    first_hash: u128,
    last_hash: u128,
    records: Vec<Record>,
}

#[derive(Debug)]
struct Record {
    sequence: String,
    partition_key: String,
    /// Base64, as the wire carries it.
    data: String,
    arrived: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Request {
    stream_name: Option<String>,
    #[serde(rename = "StreamARN")]
    stream_arn: Option<String>,
    shard_count: Option<usize>,
    retention_period_hours: Option<i64>,
    shard_id: Option<String>,
    shard_iterator_type: Option<String>,
    starting_sequence_number: Option<String>,
    timestamp: Option<f64>,
    shard_iterator: Option<String>,
    limit: Option<usize>,
    partition_key: Option<String>,
    explicit_hash_key: Option<String>,
    data: Option<String>,
    records: Option<Vec<Entry>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    data: String,
    partition_key: String,
    /// Where the record goes instead of the hash of its key (a decimal 128-bit number).
    explicit_hash_key: Option<String>,
}

impl Kinesis {
    pub fn answer(&self, operation: &str, body: &[u8]) -> Reply {
        let request: Request = match reply::read(body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if operation == "CreateStream" {
            return state.create(&request);
        }
        if operation == "GetRecords" {
            return state.get_records(&request);
        }
        let Some(name) = stream_name(&request) else {
            return Reply::bad_request("StreamName or StreamARN is required");
        };
        if !state.streams.contains_key(&name) {
            return not_found(&name);
        }
        match operation {
            "DescribeStreamSummary" => state.summary(&name),
            "IncreaseStreamRetentionPeriod" => {
                if let (Some(stream), Some(hours)) =
                    (state.streams.get_mut(&name), request.retention_period_hours)
                {
                    stream.retention_hours = hours;
                }
                Reply::json(&json!({}))
            }
            "ListShards" => state.list_shards(&name),
            "PutRecord" => {
                let entry = Entry {
                    data: request.data.clone().unwrap_or_default(),
                    partition_key: request.partition_key.clone().unwrap_or_default(),
                    explicit_hash_key: request.explicit_hash_key.clone(),
                };
                let (shard, sequence) = state.put(&name, entry);
                Reply::json(&json!({ "ShardId": shard_id(shard), "SequenceNumber": sequence }))
            }
            "PutRecords" => {
                let written: Vec<_> = request
                    .records
                    .unwrap_or_default()
                    .into_iter()
                    .map(|entry| {
                        let (shard, sequence) = state.put(&name, entry);
                        json!({ "ShardId": shard_id(shard), "SequenceNumber": sequence })
                    })
                    .collect();
                Reply::json(&json!({ "FailedRecordCount": 0, "Records": written }))
            }
            "GetShardIterator" => state.iterator(&name, &request),
            other => Reply::unknown_operation(&format!("Kinesis_20131202.{other}")),
        }
    }
}

impl State {
    fn create(&mut self, request: &Request) -> Reply {
        let Some(name) = request.stream_name.clone() else {
            return Reply::bad_request("StreamName is required");
        };
        if self.streams.contains_key(&name) {
            return Reply::error(
                400,
                "ResourceInUseException",
                &format!("Stream {name} already exists"),
            );
        }
        let count = request.shard_count.unwrap_or(4).max(1) as u128;
        let width = u128::MAX / count;
        let shards = (0..count)
            .map(|n| Shard {
                first_hash: n * width,
                last_hash: if n + 1 == count {
                    u128::MAX
                } else {
                    (n + 1) * width - 1
                },
                records: Vec::new(),
            })
            .collect();
        self.streams.insert(
            name,
            Stream {
                created: now(),
                retention_hours: DEFAULT_RETENTION_HOURS,
                shards,
            },
        );
        Reply::json(&json!({}))
    }

    fn summary(&self, name: &str) -> Reply {
        let stream = &self.streams[name];
        Reply::json(&json!({
            "StreamDescriptionSummary": {
                "StreamName": name,
                "StreamARN": arn(name),
                "StreamStatus": "ACTIVE",
                "StreamModeDetails": { "StreamMode": "PROVISIONED" },
                "RetentionPeriodHours": stream.retention_hours,
                "StreamCreationTimestamp": stream.created,
                "EnhancedMonitoring": [{ "ShardLevelMetrics": [] }],
                "EncryptionType": "NONE",
                "OpenShardCount": stream.shards.len(),
                "ConsumerCount": 0,
            }
        }))
    }

    fn list_shards(&self, name: &str) -> Reply {
        let shards: Vec<_> = self.streams[name]
            .shards
            .iter()
            .enumerate()
            .map(|(n, shard)| {
                json!({
                    "ShardId": shard_id(n),
                    "HashKeyRange": {
                        "StartingHashKey": shard.first_hash.to_string(),
                        "EndingHashKey": shard.last_hash.to_string(),
                    },
                    "SequenceNumberRange": { "StartingSequenceNumber": sequence_text(0) },
                })
            })
            .collect();
        Reply::json(&json!({ "Shards": shards }))
    }

    /// Appends `entry` to the shard its explicit hash key, or else the MD5 of its partition
    /// key, falls in: that shard and the new sequence number.
    fn put(&mut self, name: &str, entry: Entry) -> (usize, String) {
        self.sequence += 1;
        let sequence = sequence_text(self.sequence);
        let hash = entry
            .explicit_hash_key
            .as_deref()
            .and_then(|key| key.parse::<u128>().ok())
            .unwrap_or_else(|| u128::from_be_bytes(md5::compute(entry.partition_key.as_bytes()).0));
        let stream = self
            .streams
            .get_mut(name)
            .expect("the caller checked the stream");
        let n = stream
            .shards
            .iter()
            .position(|s| s.first_hash <= hash && hash <= s.last_hash)
            .unwrap_or(0);
        stream.shards[n].records.push(Record {
            sequence: sequence.clone(),
            partition_key: entry.partition_key,
            data: entry.data,
            arrived: now(),
        });
        (n, sequence)
    }

    fn iterator(&self, name: &str, request: &Request) -> Reply {
        let Some(n) = request.shard_id.as_deref().and_then(shard_index) else {
            return Reply::error(400, "ResourceNotFoundException", "no such shard");
        };
        let Some(shard) = self.streams[name].shards.get(n) else {
            return Reply::error(400, "ResourceNotFoundException", "no such shard");
        };
        let at = |sequence: &str| {
            shard
                .records
                .iter()
                .position(|r| r.sequence.as_str() >= sequence)
                .unwrap_or(shard.records.len())
        };
        let starting = request
            .starting_sequence_number
            .as_deref()
            .map(|s| format!("{:0>width$}", s, width = SEQUENCE_DIGITS));
        let position = match (request.shard_iterator_type.as_deref(), starting.as_deref()) {
            (Some("TRIM_HORIZON"), _) => 0,
            (Some("LATEST"), _) => shard.records.len(),
            (Some("AT_SEQUENCE_NUMBER"), Some(s)) => at(s),
            (Some("AFTER_SEQUENCE_NUMBER"), Some(s)) => shard
                .records
                .iter()
                .position(|r| r.sequence.as_str() > s)
                .unwrap_or(shard.records.len()),
            (Some("AT_TIMESTAMP"), _) => {
                let at = request.timestamp.unwrap_or_default();
                shard
                    .records
                    .iter()
                    .position(|r| r.arrived >= at)
                    .unwrap_or(shard.records.len())
            }
            _ => return Reply::bad_request("an iterator type this request cannot use"),
        };
        Reply::json(&json!({ "ShardIterator": encode_iterator(name, n, position) }))
    }

    fn get_records(&self, request: &Request) -> Reply {
        let Some((name, n, position)) = request.shard_iterator.as_deref().and_then(decode_iterator)
        else {
            return Reply::error(400, "InvalidArgumentException", "unreadable shard iterator");
        };
        let Some(shard) = self.streams.get(&name).and_then(|s| s.shards.get(n)) else {
            return not_found(&name);
        };
        let limit = request.limit.unwrap_or(READ_LIMIT).min(READ_LIMIT);
        let records: Vec<_> = shard
            .records
            .iter()
            .skip(position)
            .take(limit)
            .map(|r| {
                json!({
                    "SequenceNumber": r.sequence,
                    "ApproximateArrivalTimestamp": r.arrived,
                    "Data": r.data,
                    "PartitionKey": r.partition_key,
                })
            })
            .collect();
        let next = position + records.len();
        let behind = shard
            .records
            .last()
            .filter(|_| next < shard.records.len())
            .map_or(0.0, |last| {
                (last.arrived - shard.records[next].arrived) * 1000.0
            });
        Reply::json(&json!({
            "Records": records,
            "NextShardIterator": encode_iterator(&name, n, next),
            "MillisBehindLatest": behind as i64,
        }))
    }
}

fn stream_name(request: &Request) -> Option<String> {
    request.stream_name.clone().or_else(|| {
        request
            .stream_arn
            .as_deref()
            .and_then(|arn| arn.rsplit_once("stream/"))
            .map(|(_, name)| name.to_owned())
    })
}

fn not_found(name: &str) -> Reply {
    Reply::error(
        400,
        "ResourceNotFoundException",
        &format!("Stream {name} under account {ACCOUNT} not found."),
    )
}

pub fn arn(name: &str) -> String {
    format!("arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{name}")
}

fn shard_id(n: usize) -> String {
    format!("shardId-{n:012}")
}

fn shard_index(id: &str) -> Option<usize> {
    id.strip_prefix("shardId-")?.parse().ok()
}

fn sequence_text(n: u64) -> String {
    format!("{n:0>width$}", width = SEQUENCE_DIGITS)
}

fn encode_iterator(name: &str, shard: usize, position: usize) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{name}\n{shard}\n{position}"))
}

fn decode_iterator(iterator: &str) -> Option<(String, usize, usize)> {
    let text = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(iterator)
            .ok()?,
    )
    .ok()?;
    let mut parts = text.split('\n');
    let name = parts.next()?.to_owned();
    Some((
        name,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    ))
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
