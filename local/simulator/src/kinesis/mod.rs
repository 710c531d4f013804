//! Kinesis Data Streams: a stream's shards split the 128-bit hash space evenly, and a
//! record goes to the shard whose range holds the MD5 of its partition key, as on AWS.
//! Sequence numbers rise across the whole service, so a shard's always do. A split closes
//! its shard at the last sequence number given and opens two children on its halves. Each shard is
//! metered over a sliding second: a put to a shard that took 1,000 records or 1 MB in the
//! last second is refused (a PutRecords entry, or a whole PutRecord), and so is a read of
//! one whose readers took 2 MB. (The five reads a second per shard are not enforced.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use crate::meter::{Meter, Unit};
use crate::reply::{self, Reply};

mod reading;

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
/// AWS keeps records a day unless the stream asks for longer.
const DEFAULT_RETENTION_HOURS: i64 = 24;
/// Sequence numbers are written this wide, so their text and number orders agree.
const SEQUENCE_DIGITS: usize = 21;

#[derive(Debug)]
pub struct Kinesis {
    state: Mutex<State>,
    meter: Arc<Meter>,
}

pub fn stream_resource(stream: &str) -> String {
    format!("stream/{stream}")
}

const THROTTLED: &str = "ProvisionedThroughputExceededException";

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
    /// The shard this one was split from.
    parent: Option<usize>,
    /// The sequence numbers it holds: from `start`, and once it is split, through `end`.
    start: String,
    end: Option<String>,
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
    shard_to_split: Option<String>,
    new_starting_hash_key: Option<String>,
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
    pub fn new(meter: Arc<Meter>) -> Self {
        Self {
            state: Mutex::default(),
            meter,
        }
    }

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
            return state.get_records(&request, &self.meter);
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
                match self.put(&mut state, &name, entry) {
                    Ok((shard, sequence)) => Reply::json(
                        &json!({ "ShardId": shard_id(shard), "SequenceNumber": sequence }),
                    ),
                    Err(shard) => Reply::error(400, THROTTLED, &rate_exceeded(&name, shard)),
                }
            }
            "PutRecords" => {
                let mut failed = 0;
                let written: Vec<_> = request
                    .records
                    .unwrap_or_default()
                    .into_iter()
                    .map(|entry| match self.put(&mut state, &name, entry) {
                        Ok((shard, sequence)) => {
                            json!({ "ShardId": shard_id(shard), "SequenceNumber": sequence })
                        }
                        Err(shard) => {
                            failed += 1;
                            json!({
                                "ErrorCode": THROTTLED,
                                "ErrorMessage": rate_exceeded(&name, shard),
                            })
                        }
                    })
                    .collect();
                Reply::json(&json!({ "FailedRecordCount": failed, "Records": written }))
            }
            "GetShardIterator" => state.iterator(&name, &request),
            "SplitShard" => state.split(&name, &request),
            other => Reply::unknown_operation(&format!("Kinesis_20131202.{other}")),
        }
    }
}

impl Kinesis {
    /// Puts one record on its shard, unless the shard is at its limit (`Err(shard)`).
    fn put(&self, state: &mut State, name: &str, entry: Entry) -> Result<(usize, String), usize> {
        let resource = stream_resource(name);
        let n = state.shard_of(name, &entry);
        let shard = shard_id(n);
        if self.meter.at_limit(&resource, &shard, Unit::RecordsIn)
            || self.meter.at_limit(&resource, &shard, Unit::BytesIn)
        {
            return Err(n);
        }
        let bytes = record_bytes(&entry.data, &entry.partition_key);
        self.meter.take(&resource, &shard, Unit::RecordsIn, 1.0);
        self.meter.take(&resource, &shard, Unit::BytesIn, bytes);
        Ok((n, state.append(name, n, entry)))
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
                parent: None,
                start: sequence_text(0),
                end: None,
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
                "OpenShardCount": stream.shards.iter().filter(|s| s.end.is_none()).count(),
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
                let mut listed = json!({
                    "ShardId": shard_id(n),
                    "HashKeyRange": {
                        "StartingHashKey": shard.first_hash.to_string(),
                        "EndingHashKey": shard.last_hash.to_string(),
                    },
                    "SequenceNumberRange": { "StartingSequenceNumber": shard.start },
                });
                if let Some(parent) = shard.parent {
                    listed["ParentShardId"] = json!(shard_id(parent));
                }
                if let Some(end) = &shard.end {
                    listed["SequenceNumberRange"]["EndingSequenceNumber"] = json!(end);
                }
                listed
            })
            .collect();
        Reply::json(&json!({ "Shards": shards }))
    }

    /// The open shard whose hash range holds the record's explicit hash key, or the MD5 of its
    /// partition key.
    fn shard_of(&self, name: &str, entry: &Entry) -> usize {
        let hash = entry
            .explicit_hash_key
            .as_deref()
            .and_then(|key| key.parse::<u128>().ok())
            .unwrap_or_else(|| u128::from_be_bytes(md5::compute(entry.partition_key.as_bytes()).0));
        self.streams[name]
            .shards
            .iter()
            .position(|s| s.end.is_none() && s.first_hash <= hash && hash <= s.last_hash)
            .unwrap_or(0)
    }

    /// Splits an open shard at `NewStartingHashKey`: it is closed at the last sequence
    /// number given so far, and two children take its halves of the hash range.
    fn split(&mut self, name: &str, request: &Request) -> Reply {
        let (Some(n), Some(at)) = (
            request.shard_to_split.as_deref().and_then(shard_index),
            request
                .new_starting_hash_key
                .as_deref()
                .and_then(|key| key.parse::<u128>().ok()),
        ) else {
            return Reply::bad_request("ShardToSplit and NewStartingHashKey are required");
        };
        let end = sequence_text(self.sequence);
        let start = sequence_text(self.sequence + 1);
        let stream = self
            .streams
            .get_mut(name)
            .expect("the caller checked the stream");
        let Some(shard) = stream.shards.get_mut(n).filter(|s| s.end.is_none()) else {
            return Reply::error(400, "ResourceNotFoundException", "no such open shard");
        };
        if at <= shard.first_hash || at > shard.last_hash {
            return Reply::error(
                400,
                "InvalidArgumentException",
                "NewStartingHashKey is not inside the shard's hash key range",
            );
        }
        shard.end = Some(end);
        let halves = [(shard.first_hash, at - 1), (at, shard.last_hash)];
        for (first_hash, last_hash) in halves {
            stream.shards.push(Shard {
                first_hash,
                last_hash,
                records: Vec::new(),
                parent: Some(n),
                start: start.clone(),
                end: None,
            });
        }
        Reply::json(&json!({}))
    }

    /// Appends the record to shard `n`: its sequence number.
    fn append(&mut self, name: &str, n: usize, entry: Entry) -> String {
        self.sequence += 1;
        let sequence = sequence_text(self.sequence);
        let stream = self
            .streams
            .get_mut(name)
            .expect("the caller checked the stream");
        stream.shards[n].records.push(Record {
            sequence: sequence.clone(),
            partition_key: entry.partition_key,
            data: entry.data,
            arrived: now(),
        });
        sequence
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

/// A record's size as Kinesis meters it: its data (decoded) and its partition key.
fn record_bytes(data: &str, partition_key: &str) -> f64 {
    let data = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_or(data.len(), |bytes| bytes.len());
    (data + partition_key.len()) as f64
}

fn rate_exceeded(stream: &str, shard: usize) -> String {
    format!(
        "Rate exceeded for shard {} in stream {stream}",
        shard_id(shard)
    )
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

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
