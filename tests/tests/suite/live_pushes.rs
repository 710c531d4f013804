//! Live counts pushed through the local WebSocket front to a real WebSocket client: the counts
//! on subscribe, coalesced pushes (at most one a second per item, the last one exact), only
//! to the buckets that hold watchers, throttled posts retried, and `stale` when counts cannot
//! catch up.

use std::time::Duration;

use likes_tests::TestStack;
use serde_json::{json, Value};

use crate::live_support::{counts_of, wait_for_count, ANSWER};

#[tokio::test]
async fn a_watcher_gets_counts_at_once_then_at_most_one_a_second_ending_at_the_exact_count() {
    let stack = TestStack::builder().scheduled().start().await;
    let item = "game:live-1";
    stack.like("early", item).await;
    wait_for_count(&stack, item, 1).await;
    stack
        .wait_for_as_of(likes_core::clock::now_ms(), Duration::from_secs(30))
        .await;

    let mut watcher = stack.watcher("watcher").await;
    watcher.subscribe(&[item]).await;
    let first = watcher
        .next(ANSWER)
        .await
        .expect("counts at once on subscribe");
    assert_eq!(first.message["type"], "counts", "{}", first.message);
    assert_eq!(first.message["item_id"], item);
    assert_eq!(first.message["like_count"], 1);
    assert_eq!(first.message["dislike_count"], 0);
    assert!(first.message["as_of"].is_string(), "{}", first.message);

    // Twelve likes from other users over about three seconds.
    for n in 0..12 {
        stack.like(&format!("fan{n}"), item).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut received = watcher
        .until(Duration::from_secs(30), |m| m["like_count"] == 13)
        .await;
    // Nothing after the exact count but the exact count.
    received.extend(watcher.collect(Duration::from_secs(4)).await);
    let pushes = counts_of(&received, item);
    assert!(!pushes.is_empty());
    assert!(
        pushes.len() < 12,
        "12 likes are coalesced into fewer pushes: {pushes:?}"
    );
    for pair in pushes.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(
            gap >= Duration::from_millis(900),
            "two pushes {gap:?} apart: {pushes:?}"
        );
        let (before, after) = (
            &pair[0].message["like_count"],
            &pair[1].message["like_count"],
        );
        assert!(
            before.as_u64() <= after.as_u64(),
            "counts went back: {pushes:?}"
        );
    }
    let last = &pushes.last().expect("a push").message;
    assert_eq!(last["like_count"], 13, "{pushes:?}");
    assert_eq!(stack.like_count(item).await.json()["like_count"], 13);
    assert!(
        received.iter().all(|r| r.message["type"] == "counts"),
        "{received:?}"
    );
}

/// The attribute's number in a row read back from DynamoDB.
fn number(row: &likes_store::rows::Item, name: &str) -> i64 {
    match &row[name] {
        aws_sdk_dynamodb::types::AttributeValue::N(n) => n.parse().expect("a number"),
        other => panic!("{name} is {other:?}"),
    }
}

#[tokio::test]
async fn an_item_nobody_watches_is_not_pushed_and_a_watched_one_only_to_its_watchers_buckets() {
    let stack = TestStack::builder().scheduled().start().await;
    let (watched, unwatched) = ("game:live-watched", "game:live-unwatched");
    let mut first = stack.watcher("first").await;
    let mut second = stack.watcher("second").await;
    for watcher in [&mut first, &mut second] {
        watcher.subscribe(&[watched]).await;
        watcher.next(ANSWER).await.expect("counts on subscribe");
    }
    let subscribed_s = likes_tests::now_seconds();
    stack.like("u1", unwatched).await;
    stack.like("u2", watched).await;
    for watcher in [&mut first, &mut second] {
        let received = watcher
            .until(Duration::from_secs(30), |m| m["like_count"] == 1)
            .await;
        assert!(!counts_of(&received, watched).is_empty(), "{received:?}");
    }
    stack.settle_broadcaster().await;

    let rows = stack.rows("LivePushesTable").await;
    let key = |row: &likes_store::rows::Item| match &row["item_id"] {
        aws_sdk_dynamodb::types::AttributeValue::S(key) => key.clone(),
        other => panic!("item_id is {other:?}"),
    };
    assert!(
        rows.iter().all(|row| !key(row).starts_with(unwatched)),
        "an item nobody watches has no watch row and no claim: {rows:?}"
    );
    let watch_row = rows
        .iter()
        .find(|row| key(row) == watched)
        .unwrap_or_else(|| panic!("the watched item has a watch row: {rows:?}"));
    let watch_buckets: std::collections::BTreeSet<String> = watch_row
        .keys()
        .filter_map(|name| name.strip_prefix("watched#"))
        .map(str::to_owned)
        .collect();
    assert!(
        (1..=2).contains(&watch_buckets.len()),
        "two connections fill one or two buckets: {watch_row:?}"
    );
    for bucket in &watch_buckets {
        // Covered for as long as the connections can be open (API Gateway's 2 h), and the
        // row outlives every bucket it covers.
        let until = number(watch_row, &format!("watched#{bucket}"));
        assert!(
            until >= subscribed_s - 60 + likes_store::live::MAX_CONNECTION_SECONDS,
            "{watch_row:?}"
        );
        assert!(number(watch_row, "expires_at") >= until, "{watch_row:?}");
    }
    let claimed: std::collections::BTreeSet<String> = rows
        .iter()
        .filter_map(|row| {
            key(row)
                .strip_prefix(&format!("{watched}#"))
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(
        claimed, watch_buckets,
        "only the buckets that hold watchers are claimed and pushed to"
    );
}

#[tokio::test]
async fn throttled_posts_are_retried_within_bounds_and_the_counts_arrive() {
    let stack = TestStack::builder().scheduled().start().await;
    let (slow, other) = ("game:live-throttled", "game:live-other");
    let mut watcher = stack.watcher("w").await;
    watcher.subscribe(&[slow, other]).await;
    let snapshots = watcher.take(2, ANSWER).await;
    for item in [slow, other] {
        assert_eq!(counts_of(&snapshots, item).len(), 1, "{snapshots:?}");
    }
    let front = stack
        .stack
        .websocket_api()
        .expect("the template has a WebSocket API");
    // The first post is refused twice (429); its third attempt goes through, and the other
    // item's push arrives too.
    front.throttle_next_posts(2);
    stack.like("u1", slow).await;
    stack.like("u2", other).await;
    let mut received = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while [slow, other].iter().any(|item| {
        counts_of(&received, item)
            .iter()
            .all(|r| r.message["like_count"] != 1)
    }) {
        let left = deadline
            .checked_duration_since(std::time::Instant::now())
            .unwrap_or_else(|| panic!("both items' likes never arrived: {received:?}"));
        if let Some(message) = watcher.next(left).await {
            received.push(message);
        }
    }
    assert_eq!(front.throttled_posts(), 2, "the fault fired");
}

#[tokio::test]
async fn watchers_are_told_stale_when_counts_cannot_catch_up() {
    let stack = TestStack::builder()
        .scheduled()
        .environment(&[("LIVE_CATCH_UP_SECONDS", "2")])
        .start()
        .await;
    let item = "game:live-stale";
    let mut watcher = stack.watcher("w").await;
    watcher.subscribe(&[item]).await;
    watcher.next(ANSWER).await.expect("counts on subscribe");
    // The count pipeline stops: the counts and as_of stay where they are.
    for shard in 0..stack.pipeline().virtual_shards() {
        stack.pipeline().faults().stall_shard(shard);
    }
    stack.like("u1", item).await;
    let received = watcher
        .until(Duration::from_secs(30), |m| m["type"] == "stale")
        .await;
    let stale: &Value = &received.last().unwrap().message;
    assert_eq!(stale, &json!({"type": "stale", "item_id": item}));
    assert!(
        counts_of(&received, item)
            .iter()
            .all(|r| r.message["like_count"] == 0),
        "no count the pipeline has not applied: {received:?}"
    );
}
