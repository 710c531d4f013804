//! Reading a shard: iterators (at a position, after or at a sequence number, at a time) and
//! GetRecords, metered against the shard's 2 MB a second out.

use base64::Engine;
use serde_json::json;

use super::{
    not_found, rate_exceeded, record_bytes, shard_id, shard_index, stream_resource, Request, State,
    SEQUENCE_DIGITS, THROTTLED,
};
use crate::meter::{Meter, Unit};
use crate::reply::Reply;

/// GetRecords answers at most this many records.
const READ_LIMIT: usize = 10_000;

impl State {
    pub(super) fn iterator(&self, name: &str, request: &Request) -> Reply {
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

    pub(super) fn get_records(&self, request: &Request, meter: &Meter) -> Reply {
        let Some((name, n, position)) = request.shard_iterator.as_deref().and_then(decode_iterator)
        else {
            return Reply::error(400, "InvalidArgumentException", "unreadable shard iterator");
        };
        let Some(shard) = self.streams.get(&name).and_then(|s| s.shards.get(n)) else {
            return not_found(&name);
        };
        let resource = stream_resource(&name);
        if meter.at_limit(&resource, &shard_id(n), Unit::BytesOut) {
            return Reply::error(400, THROTTLED, &rate_exceeded(&name, n));
        }
        let limit = request.limit.unwrap_or(READ_LIMIT).min(READ_LIMIT);
        let read = || shard.records.iter().skip(position).take(limit);
        let bytes = read()
            .map(|r| record_bytes(&r.data, &r.partition_key))
            .sum();
        meter.take(&resource, &shard_id(n), Unit::BytesOut, bytes);
        let records: Vec<_> = read()
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
        // A split shard read to its end has no next iterator: its children go on.
        let read_out = shard.end.is_some() && next >= shard.records.len();
        let mut answer = json!({
            "Records": records,
            "MillisBehindLatest": behind as i64,
        });
        if !read_out {
            answer["NextShardIterator"] = json!(encode_iterator(&name, n, next));
        }
        Reply::json(&answer)
    }
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
