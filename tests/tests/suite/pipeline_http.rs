//! The count pipeline end to end, as a client sees it: reactions set through the local HTTP
//! front, the stream polled by the local event source mapping (suffering a crash and a
//! duplicate delivery on the way), counts read back through the count endpoints.

use std::time::Duration;

use likes_core::clock::now_ms;
use likes_tests::TestStack;
use serde_json::{json, Value};

async fn set(stack: &TestStack, user: &str, item: &str, state: &str, key: &str) {
    let response = stack
        .request("PUT", &format!("/v1/items/{item}/reaction"), Some(user))
        .header("idempotency-key", key)
        .json(&json!({ "state": state }))
        .send()
        .await;
    response.assert_status(200);
}

#[tokio::test]
async fn reactions_set_over_http_are_counted_once_and_read_back_over_http() {
    let stack = TestStack::builder().scheduled().start().await;
    let faults = stack.pipeline().faults();
    faults.crash_after_chunks(1);
    faults.duplicate_next_batches(1);
    let items = ["game:http1", "game:http2"];
    for u in 0..8 {
        let user = format!("client{u}");
        let item = items[u % 2];
        set(&stack, &user, item, "LIKE", &format!("{user}-1")).await;
        if u % 3 == 0 {
            set(&stack, &user, item, "DISLIKE", &format!("{user}-2")).await;
        }
        // A client retry of the first write: replayed, no second flip.
        set(&stack, &user, item, "LIKE", &format!("{user}-1")).await;
    }
    let unlike = stack
        .request(
            "DELETE",
            &format!("/v1/items/{}/like", items[1]),
            Some("client1"),
        )
        .send()
        .await;
    assert_eq!(unlike.status, 200);
    let written = now_ms();
    let counters = stack.settle().await;
    assert_eq!(
        (counters.crashes, counters.duplicate_deliveries),
        (1, 1),
        "{counters:?}"
    );
    let recount = stack.assert_counts_match_recount(&items).await;
    stack.wait_for_as_of(written, Duration::from_secs(30)).await;

    for item in items {
        let response = stack.like_count(item).await;
        response.assert_status(200);
        let body = response.json();
        assert_eq!(body["like_count"], recount[item].like_count, "{body}");
        assert_eq!(body["dislike_count"], recount[item].dislike_count, "{body}");
        let as_of = body["as_of"]
            .as_str()
            .expect("batches were applied: {body}");
        let as_of_ms = likes_core::clock::parse_rfc3339(as_of).unwrap();
        assert!(
            written <= as_of_ms && as_of_ms <= now_ms(),
            "as_of {as_of} passed every write of this run, and is no later than now"
        );
    }
    let batch = stack
        .request("POST", "/v1/items/like-counts:batchGet", Some("reader"))
        .json(&json!({ "item_ids": items }))
        .send()
        .await;
    assert_eq!(batch.status, 200);
    let counts: &Value = &batch.json()["counts"];
    for item in items {
        assert_eq!(counts[item]["like_count"], recount[item].like_count);
        assert_eq!(counts[item]["dislike_count"], recount[item].dislike_count);
    }
}

/// A batch commits its chunk and dies before it advances its shard's watermark; its retry
/// meets the claim and skips the chunk. The counts are complete, so the retry must advance
/// the watermark: otherwise `as_of` stays behind these writes until some later batch.
#[tokio::test]
async fn as_of_passes_a_crashed_batch_once_its_retry_applied_it() {
    let stack = TestStack::builder().scheduled().start().await;
    stack.pipeline().faults().crash_after_chunks(1);
    for u in 0..3 {
        set(
            &stack,
            &format!("c{u}"),
            "game:asof",
            "LIKE",
            &format!("c{u}-1"),
        )
        .await;
    }
    let written = now_ms();
    let counters = stack.settle().await;
    assert_eq!(counters.crashes, 1, "{counters:?}");
    stack.assert_counts_match_recount(&["game:asof"]).await;
    stack.wait_for_as_of(written, Duration::from_secs(30)).await;
}
