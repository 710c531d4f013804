//! `GET /v1/leaderboard` through the local front: the exact ranking from the Kinesis event
//! log, each event counted once however often it is delivered or its invocation dies.

use std::collections::BTreeSet;

use likes_local::faults::Recut;
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

#[tokio::test]
async fn duplicated_and_crashed_deliveries_keep_the_ranking_exact_with_ties_by_item_id() {
    let stack = TestStack::start_with_leaderboard().await;
    // The event log holds some events twice (the publisher's batch delivered again), the
    // leaderboard gets batches twice, one invocation dies right after its first score row
    // took its intent (the intent is left half applied) and one after its third UpdateItem
    // (another row, or the refresh lease it took, left held), and the retries are cut
    // shorter, then longer.
    stack.publisher().faults().duplicate_next_batches(2);
    let faults = stack.leaderboard().faults();
    faults.duplicate_next_batches(3);
    faults.crash_after_chunks(1);
    faults.crash_after_chunks(3);
    faults.recut_next_retries([Recut::Shorter(2), Recut::Longer(5)]);
    let scores = [
        ("game:hot", 12),
        ("game:c", 3),
        ("game:b", 3),
        ("game:a", 2),
        ("game:d", 1),
        ("game:e", 1),
    ];
    // The items' score rows are on more than one board shard, so ranking merges shards.
    let shards: u32 = stack
        .stack
        .function_environment("LeaderboardFunction")
        .unwrap_or_else(|err| panic!("{err}"))["LEADERBOARD_SHARDS"]
        .parse()
        .expect("a number");
    let used: BTreeSet<u32> = scores
        .iter()
        .map(|(item, _)| likes_core::leaderboard::item_shard(item, shards))
        .collect();
    assert!(used.len() > 1, "{shards} board shards, items on {used:?}");
    for (item, likers) in scores {
        // A burst of likes on one item at once, as a popular item gets them.
        futures_util::future::join_all((0..likers).map(|n| {
            let stack = &stack;
            async move { stack.like(&format!("user{n}"), item).await }
        }))
        .await;
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
        counters.duplicate_deliveries >= 3 && counters.crashes >= 2 && !faults.armed(),
        "the faults were played: {counters:?}"
    );
    assert!(
        stack.publisher().counters().duplicate_deliveries >= 2,
        "the log holds duplicates"
    );

    let expected = json!([
        {"item_id": "game:hot", "like_count": 12},
        {"item_id": "game:c", "like_count": 3},
        {"item_id": "game:a", "like_count": 2},
        {"item_id": "game:b", "like_count": 2},
        {"item_id": "game:d", "like_count": 1},
    ]);
    // The refresher re-ranks the boards within about a second of the log being applied.
    let all = stack.leaderboard_until("window=all", &expected).await;
    assert_eq!(all["window"], "all");
    assert!(all["as_of"].is_string(), "as_of is stated: {all}");
    // The same answer with the route's cache policy.
    assert_eq!(items(&board(&stack, "window=all").await), expected);
    // Every event's time is today (UTC).
    let day = stack
        .leaderboard_until("window=day&limit=100", &expected)
        .await;
    assert_eq!(day["window"], "day");
    // The default window is all; a limit cuts inside a tie by item id.
    assert_eq!(
        items(&board(&stack, "limit=3").await),
        json!(expected.as_array().unwrap()[..3])
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
