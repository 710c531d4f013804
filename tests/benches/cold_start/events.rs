//! The events the bench hands each bootstrap, shaped as Lambda delivers them: an API Gateway
//! HTTP API (payload 2.0) request with the JWT authorizer's claims, and a DynamoDB stream
//! batch of one INSERT with NEW_AND_OLD_IMAGES.

use serde_json::{json, Value};

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
        let route_key = format!("{} {}", self.method, self.route);
        let now_s = now_ms / 1000;
        let mut headers = json!({
            "host": "127.0.0.1",
            "user-agent": "likes-bench-cold-start",
        });
        if let (Some(headers), Some(extra)) = (headers.as_object_mut(), self.headers.as_object()) {
            headers.extend(extra.clone());
        }
        let mut event = json!({
            "version": "2.0",
            "routeKey": route_key,
            "rawPath": path,
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {
                "accountId": "000000000000",
                "apiId": "local",
                "domainName": "127.0.0.1",
                "domainPrefix": "local",
                "http": {
                    "method": self.method,
                    "path": path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": "likes-bench-cold-start",
                },
                "requestId": request_id,
                "routeKey": route_key,
                "stage": "$default",
                "time": "",
                "timeEpoch": now_ms,
                // API Gateway passes every claim as a string.
                "authorizer": { "jwt": { "claims": {
                    "sub": self.user,
                    "iss": "likes-local",
                    "aud": "likes",
                    "iat": now_s.to_string(),
                    "exp": (now_s + 3600).to_string(),
                }, "scopes": null } },
            },
            "pathParameters": { "item_id": ITEM },
            "isBase64Encoded": false,
        });
        if let Some(body) = &self.body {
            event["body"] = Value::String(body.to_string());
        }
        event
    }
}

/// A stream batch of one INSERT: `user` likes [`ITEM`] for the first time. `sequence` makes
/// the record's eventID and SequenceNumber unique, so each cold start commits a new claim
/// rather than finding an earlier run's.
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
    json!({ "Records": [{
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
