//! The events the bench hands each bootstrap, shaped as Lambda delivers them: an API Gateway
//! HTTP API (payload 2.0) request with the JWT authorizer's claims, and a DynamoDB stream
//! batch of one INSERT with NEW_AND_OLD_IMAGES, in a tumbling window as the aggregator's
//! mapping declares one.

use likes_local::http_api::GatewayRequest;
use serde_json::{json, Map, Value};

/// The item every request and record is about.
pub const ITEM: &str = "game:12345";

/// An HTTP API request as API Gateway sends it after the JWT authorizer let it through.
pub struct HttpRequest<'a> {
    pub method: &'a str,
    /// The template's route path, with `{item_id}`.
    pub route: &'a str,
    pub user: &'a str,
    pub headers: Value,
    pub body: Option<Value>,
}

impl HttpRequest<'_> {
    pub fn event(&self, request_id: &str, now_ms: i64) -> Value {
        let path = self.route.replace("{item_id}", ITEM);
        let now_s = now_ms / 1000;
        let mut headers = vec![
            ("host".to_owned(), "127.0.0.1".to_owned()),
            ("user-agent".to_owned(), "likes-bench-cold-start".to_owned()),
        ];
        if let Some(extra) = self.headers.as_object() {
            headers.extend(extra.iter().map(|(name, value)| {
                (name.clone(), value.as_str().unwrap_or_default().to_owned())
            }));
        }
        let body = self.body.as_ref().map(Value::to_string).unwrap_or_default();
        // API Gateway passes every claim as a string.
        let claims = [
            ("sub", self.user.to_owned()),
            ("iss", "likes-local".to_owned()),
            ("aud", "likes".to_owned()),
            ("iat", now_s.to_string()),
            ("exp", (now_s + 3600).to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
        GatewayRequest {
            method: self.method,
            route_path: self.route,
            path: &path,
            raw_query: "",
            headers,
            body: body.as_bytes(),
            path_parameters: Map::from_iter([("item_id".to_owned(), json!(ITEM))]),
            claims: Some(claims),
            source_ip: "127.0.0.1".to_owned(),
            request_id: request_id.to_owned(),
            now_ms,
        }
        .event()
    }
}

/// A stream batch of one INSERT: `user` likes [`ITEM`] for the first time. `sequence` makes
/// the record's eventID and SequenceNumber unique and rising, so each cold start applies a
/// new record (an intent and its count row) rather than finding it behind the shard's progress.
pub fn stream_insert(stream_arn: &str, user: &str, sequence: u64, now_ms: i64) -> Value {
    let keys = json!({ "user_id": {"S": user}, "item_id": {"S": ITEM} });
    // What the aggregator reads of the row `ReactionsStore::set` writes for a first like.
    let new_image = json!({
        "user_id": {"S": user},
        "item_id": {"S": ITEM},
        "state": {"S": "LIKE"},
        "op_id": {"N": "1"},
        "updated_at": {"N": now_ms.to_string()},
        "liked_at": {"N": now_ms.to_string()},
    });
    let region = stream_arn.split(':').nth(3).unwrap_or_default();
    let window_start = likes_core::clock::rfc3339(now_ms - now_ms.rem_euclid(60_000));
    let window_end = likes_core::clock::rfc3339(now_ms - now_ms.rem_euclid(60_000) + 60_000);
    json!({
        "window": {"start": window_start, "end": window_end},
        "state": {},
        "shardId": "shardId-00000000000000000000-00000001",
        "eventSourceARN": stream_arn,
        "isFinalInvokeForWindow": false,
        "isWindowTerminatedEarly": false,
        "Records": [{
        "eventID": format!("{sequence:032x}"),
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": {
            "ApproximateCreationDateTime": now_ms as f64 / 1000.0,
            "Keys": keys,
            "NewImage": new_image,
            "SequenceNumber": format!("{:021}", 100_000_000_000_000_000_000_u128 + sequence as u128),
            "SizeBytes": 120,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "eventSourceARN": stream_arn,
    }]})
}
