//! `GET /v1/leaderboard` through the local front: the exact ranking from the Kinesis event
//! log, each event counted once however often it is delivered or its invocation dies.

use likes_tests::TestStack;
use serde_json::{json, Value};

async fn board(stack: &TestStack, query: &str) -> Value {
    // Public: no token.
    let response = stack
        .request("GET", &format!("/v1/leaderboard?{query}"), None)
        .send()
        .await;
    response.assert_status(200);
    assert_eq!(
        response.header("cache-control"),
        Some("public, max-age=5, s-maxage=5, stale-while-revalidate=5")
    );
    response.json()
}

fn items(board: &Value) -> Value {
    board["items"].clone()
}

async fn like(stack: &TestStack, user: &str, item: &str) {
    stack
        .request("PUT", &format!("/v1/items/{item}/like"), Some(user))
        .send()
        .await
        .assert_status(200);
}

#[tokio::test]
async fn duplicated_and_crashed_deliveries_keep_the_ranking_exact_with_ties_by_item_id() {
    let stack = TestStack::start().await;
    // The event log holds some events twice (the publisher's batch delivered again), the
    // leaderboard gets batches twice, and an invocation dies right after its first chunk.
    stack.publisher().faults().duplicate_next_batches(2);
    let faults = stack.leaderboard().faults();
    faults.duplicate_next_batches(3);
    faults.crash_after_chunks(1);
    for (item, likers) in [
        ("game:c", 3),
        ("game:b", 3),
        ("game:a", 2),
        ("game:d", 1),
        ("game:e", 1),
    ] {
        for n in 0..likers {
            like(&stack, &format!("user{n}"), item).await;
        }
    }
    // An unlike lowers a score: b ties a at 2; e falls to 0 and leaves the board.
    for (user, item) in [("user0", "game:b"), ("user0", "game:e")] {
        stack
            .request("DELETE", &format!("/v1/items/{item}/like"), Some(user))
            .send()
            .await
            .assert_status(200);
    }
    let counters = stack.settle_leaderboard().await;
    assert!(
        counters.duplicate_deliveries >= 3 && counters.crashes >= 1,
        "the faults were played: {counters:?}"
    );
    assert!(
        stack.publisher().counters().duplicate_deliveries >= 2,
        "the log holds duplicates"
    );

    let expected = json!([
        {"item_id": "game:c", "like_count": 3},
        {"item_id": "game:a", "like_count": 2},
        {"item_id": "game:b", "like_count": 2},
        {"item_id": "game:d", "like_count": 1},
    ]);
    let all = board(&stack, "window=all").await;
    assert_eq!(all["window"], "all");
    assert_eq!(items(&all), expected);
    assert!(all["as_of"].is_string(), "as_of is stated: {all}");
    // Every event's time is today (UTC).
    let day = board(&stack, "window=day&limit=100").await;
    assert_eq!(day["window"], "day");
    assert_eq!(items(&day), expected);
    // The default window is all; a limit cuts inside a tie by item id.
    assert_eq!(
        items(&board(&stack, "limit=2").await),
        json!(expected.as_array().unwrap()[..2])
    );
}

#[tokio::test]
async fn bad_windows_and_limits_are_400_problems() {
    let stack = TestStack::start().await;
    for query in [
        "window=week",
        "window=",
        "limit=0",
        "limit=101",
        "limit=ten",
        "window=day&limit=-1",
    ] {
        stack
            .request("GET", &format!("/v1/leaderboard?{query}"), None)
            .send()
            .await
            .problem(400);
    }
    let empty = board(&stack, "window=day").await;
    assert_eq!(empty["items"], json!([]));
    assert_eq!(empty["as_of"], Value::Null);
}
