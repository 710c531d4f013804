//! The functions measured and the one event each spawn of them is handed, with the check that
//! the handler's answer was a success.

use likes_tests::TestStack;
use serde_json::{json, Value};

use crate::events::{self, HttpRequest};

/// The functions measured: the write path, the count read, and the stream handler.
pub const MEASURED: [Measured; 3] = [
    Measured {
        logical_id: "PutReactionFunction",
        event: Event::PutReaction,
    },
    Measured {
        logical_id: "GetLikeCountFunction",
        event: Event::GetLikeCount,
    },
    Measured {
        logical_id: "AggregatorFunction",
        event: Event::StreamInsert,
    },
];

#[derive(Clone, Copy)]
pub struct Measured {
    pub logical_id: &'static str,
    pub event: Event,
}

#[derive(Clone, Copy)]
pub enum Event {
    /// `PUT /v1/items/{item_id}/reaction` LIKE by a new user each spawn: a first like.
    PutReaction,
    /// `GET /v1/items/{item_id}/like-count`.
    GetLikeCount,
    /// One INSERT record from the Reactions stream, new each spawn: a new intent is applied.
    StreamInsert,
}

impl Event {
    pub fn payload(self, stack: &TestStack, spawn: u64, now_ms: i64) -> Value {
        let request_id = request_id(spawn, now_ms);
        match self {
            Event::PutReaction => HttpRequest {
                method: "PUT",
                route: "/v1/items/{item_id}/reaction",
                user: &format!("cold-writer-{spawn}"),
                headers: json!({
                    "content-type": "application/json",
                    "idempotency-key": format!("cold-{spawn}"),
                }),
                body: Some(json!({ "state": "LIKE" })),
            }
            .event(&request_id, now_ms),
            Event::GetLikeCount => HttpRequest {
                method: "GET",
                route: "/v1/items/{item_id}/like-count",
                user: "cold-reader",
                headers: json!({}),
                body: None,
            }
            .event(&request_id, now_ms),
            Event::StreamInsert => {
                let stream_arn = stack
                    .stack
                    .resources
                    .attribute("ReactionsTable", "StreamArn")
                    .expect("the Reactions table has a stream");
                events::stream_insert(stream_arn, &format!("cold-liker-{spawn}"), spawn, now_ms)
            }
        }
    }

    /// Panics unless the response is the handler's success.
    pub fn check(self, function: &str, response: &[u8]) {
        let response: Value = serde_json::from_slice(response).unwrap_or_else(|e| {
            panic!(
                "{function} answered non-JSON ({e}): {}",
                String::from_utf8_lossy(response)
            )
        });
        let served = match self {
            Event::PutReaction | Event::GetLikeCount => response["statusCode"]
                .as_u64()
                .is_some_and(|status| (200..300).contains(&status)),
            Event::StreamInsert => response["batchItemFailures"]
                .as_array()
                .is_some_and(Vec::is_empty),
        };
        assert!(served, "{function} did not succeed: {response}");
    }
}

pub fn request_id(spawn: u64, now_ms: i64) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", spawn, now_ms)
}
