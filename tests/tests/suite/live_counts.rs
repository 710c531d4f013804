//! Live counts through the local WebSocket front with a real WebSocket client: the counts on
//! subscribe, coalesced pushes (at most one a second per item, the last one exact),
//! unsubscribe, cleanup of dropped and gone connections, the message limits, the token check
//! at `$connect`, and `stale` when counts cannot catch up.

use std::time::Duration;

use likes_tests::live::{Received, Watcher};
use likes_tests::TestStack;
use serde_json::{json, Value};

/// How long an answer that must come (a subscribe's counts, a reply to a message, a post)
/// may take: generous, since the suite shares one emulator and two cores.
const ANSWER: Duration = Duration::from_secs(20);

/// Waits until the public count route says `likes` (panics after 30 s).
async fn wait_for_count(stack: &TestStack, item: &str, likes: u64) {
    for _ in 0..150 {
        if stack.like_count(item).await.json()["like_count"] == likes {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{item} never reached {likes} likes");
}

fn counts_of<'a>(received: &'a [Received], item: &str) -> Vec<&'a Received> {
    received
        .iter()
        .filter(|r| r.message["type"] == "counts" && r.message["item_id"] == item)
        .collect()
}

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

#[tokio::test]
async fn unsubscribed_and_reconnected_watchers_get_what_they_asked_for() {
    let stack = TestStack::builder().scheduled().start().await;
    let (item, other) = ("game:live-2", "game:live-2b");
    let mut stays = stack.watcher("stays").await;
    let mut leaves = stack.watcher("leaves").await;
    stays.subscribe(&[item]).await;
    leaves.subscribe(&[item, other]).await;
    assert_eq!(stays.next(ANSWER).await.unwrap().message["like_count"], 0);
    // The subscribe's counts come in item order: `other` last.
    let initial = leaves
        .until(Duration::from_secs(30), |m| m["item_id"] == other)
        .await;
    assert_eq!(counts_of(&initial, item).len(), 1, "{initial:?}");
    leaves.unsubscribe(&[item]).await;
    // An unsubscribe is answered with nothing.
    assert!(leaves.next(Duration::from_secs(1)).await.is_none());

    stack.like("u1", item).await;
    stays
        .until(Duration::from_secs(30), |m| m["like_count"] == 1)
        .await;
    let after = leaves.collect(Duration::from_secs(3)).await;
    assert!(
        counts_of(&after, item).is_empty(),
        "an unsubscribed watcher got a push: {after:?}"
    );
    // The connection still lists the item it kept.
    let rows = stack.rows("LiveSubscriptionsTable").await;
    assert_eq!(rows.len(), 2, "stays on item, leaves on other: {rows:?}");

    // A watcher that reconnects and resubscribes gets the current counts at once.
    drop(stays);
    wait_for_count(&stack, item, 1).await;
    let mut back = stack.watcher("stays").await;
    back.subscribe(&[item]).await;
    let current = back.next(ANSWER).await.unwrap().message;
    assert_eq!(
        (current["type"].clone(), current["like_count"].clone()),
        (json!("counts"), json!(1))
    );
}

#[tokio::test]
async fn dropped_and_gone_connections_lose_their_rows() {
    let stack = TestStack::builder().scheduled().start().await;
    let item = "game:live-3";
    let mut dropped = stack.watcher("dropped").await;
    dropped.subscribe(&[item, "game:live-3b"]).await;
    assert_eq!(
        dropped.take(2, ANSWER).await.len(),
        2,
        "counts on subscribe"
    );
    assert_eq!(stack.rows("LiveConnectionsTable").await.len(), 1);
    assert_eq!(stack.rows("LiveSubscriptionsTable").await.len(), 2);
    // The client vanishes without a close frame: $disconnect removes its rows.
    dropped.drop_connection();
    let mut cleaned = false;
    for _ in 0..50 {
        if stack.rows("LiveConnectionsTable").await.is_empty()
            && stack.rows("LiveSubscriptionsTable").await.is_empty()
        {
            cleaned = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cleaned, "the dropped connection's rows stayed");

    // A connection whose $disconnect was lost: its rows exist, API Gateway says 410.
    let store = stack.live_store();
    store
        .connect("ghost", "ghost-user", likes_core::clock::now_ms())
        .await
        .unwrap();
    let id = likes_core::ItemId::parse(item).unwrap();
    assert_eq!(
        store
            .subscribe("ghost", &[id], &stack.watching())
            .await
            .unwrap(),
        likes_store::Watch::Subscribed
    );
    let mut live = stack.watcher("live").await;
    live.subscribe(&[item]).await;
    live.next(ANSWER).await.expect("counts on subscribe");
    stack.like("u1", item).await;
    live.until(Duration::from_secs(30), |m| m["like_count"] == 1)
        .await;
    let mut removed = false;
    for _ in 0..50 {
        if store.connection("ghost").await.unwrap().is_none() {
            removed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(removed, "the push that met 410 removed the gone connection");
    let rows = stack.rows("LiveSubscriptionsTable").await;
    assert_eq!(
        rows.len(),
        1,
        "only the live watcher's subscription is left: {rows:?}"
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
async fn the_management_api_answers_the_sdk_as_api_gateway_does() {
    use aws_sdk_apigatewaymanagement::operation::post_to_connection::PostToConnectionError;
    use aws_sdk_apigatewaymanagement::primitives::Blob;

    let stack = TestStack::start().await;
    let endpoint = stack
        .stack
        .function_environment(likes_tests::live::BROADCAST_FUNCTION)
        .unwrap()["LIVE_CONNECTIONS_ENDPOINT"]
        .clone();
    assert_eq!(
        endpoint,
        format!("{}/live", stack.ws_url().replace("ws://", "http://"))
    );
    let client = aws_sdk_apigatewaymanagement::Client::from_conf(
        aws_sdk_apigatewaymanagement::config::Builder::from(&stack.stack.aws.sdk)
            .endpoint_url(&endpoint)
            .build(),
    );
    let mut watcher = stack.watcher("w").await;
    let connections = stack.rows("LiveConnectionsTable").await;
    let Some(aws_sdk_dynamodb::types::AttributeValue::S(id)) =
        connections[0].get("connection_id").cloned()
    else {
        panic!("a connection row: {connections:?}");
    };

    client
        .post_to_connection()
        .connection_id(&id)
        .data(Blob::new(r#"{"hello":1}"#))
        .send()
        .await
        .expect("a post to an open connection");
    assert_eq!(
        watcher.next(ANSWER).await.unwrap().message,
        json!({"hello": 1})
    );
    let described = client
        .get_connection()
        .connection_id(&id)
        .send()
        .await
        .expect("an open connection is described");
    assert!(described.connected_at().is_some());
    assert_eq!(
        described.identity().and_then(|i| i.source_ip()),
        Some("127.0.0.1")
    );

    client
        .delete_connection()
        .connection_id(&id)
        .send()
        .await
        .expect("an open connection is closed");
    assert!(
        watcher.next(Duration::from_secs(5)).await.is_none(),
        "closed"
    );
    for _ in 0..50 {
        if stack.rows("LiveConnectionsTable").await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        stack.rows("LiveConnectionsTable").await.is_empty(),
        "$disconnect ran for the closed connection"
    );
    let gone = client
        .post_to_connection()
        .connection_id(&id)
        .data(Blob::new("late"))
        .send()
        .await
        .expect_err("a closed connection is gone");
    assert!(
        matches!(
            gone.as_service_error(),
            Some(PostToConnectionError::GoneException(_))
        ),
        "{gone:?}"
    );
    assert_eq!(gone.raw_response().map(|r| r.status().as_u16()), Some(410));
}

#[tokio::test]
async fn bad_messages_are_answered_with_an_error_and_change_nothing() {
    let stack = TestStack::start().await;
    let mut watcher = stack.watcher("w").await;
    let fifty_one: Vec<String> = (0..51).map(|n| format!("game:{n}")).collect();
    for (message, detail) in [
        (
            json!({"action": "subscribe", "item_ids": fifty_one}),
            "1 to 50",
        ),
        (
            json!({"action": "subscribe", "item_ids": ["bad id!"]}),
            "item_id",
        ),
        (json!({"action": "subscribe", "item_ids": []}), "1 to 50"),
        (
            json!({"action": "watch", "item_ids": ["game:1"]}),
            "unknown action",
        ),
        (json!({"item_ids": ["game:1"]}), "no action"),
        (json!(["subscribe"]), "JSON object"),
    ] {
        watcher.send(&message).await;
        let answer = watcher
            .next(ANSWER)
            .await
            .unwrap_or_else(|| panic!("no answer to {message}"))
            .message;
        assert_eq!(answer["type"], "error", "{message}: {answer}");
        let text = answer["detail"].as_str().unwrap_or_default();
        assert!(text.contains(detail), "{message}: {answer}");
    }
    assert!(stack.rows("LiveSubscriptionsTable").await.is_empty());
    let connection = stack.rows("LiveConnectionsTable").await;
    assert_eq!(connection.len(), 1);
    assert_eq!(
        connection[0]["items"],
        aws_sdk_dynamodb::types::AttributeValue::L(vec![]),
        "a refused message changes nothing"
    );
    // Fifty ids are fine.
    let fifty: Vec<String> = (0..50).map(|n| format!("game:{n}")).collect();
    watcher
        .send(&json!({"action": "subscribe", "item_ids": fifty}))
        .await;
    let mut answers = watcher.take(50, ANSWER).await;
    // And nothing more.
    answers.extend(watcher.collect(Duration::from_secs(1)).await);
    assert_eq!(counts_of(&answers, "game:7").len(), 1, "{answers:?}");
    assert_eq!(answers.len(), 50, "one counts message per item");
    assert_eq!(stack.rows("LiveSubscriptionsTable").await.len(), 50);
}

#[tokio::test]
async fn a_bad_token_is_refused_at_connect() {
    let stack = TestStack::start().await;
    let url = stack.ws_url();
    assert_eq!(Watcher::connect(&url, None).await.err(), Some(401));
    assert_eq!(
        Watcher::connect(&url, Some("not-a-jwt")).await.err(),
        Some(401)
    );
    let other_key = likes_local::jwt::JwtAuthorizer::new("another-secret").mint(
        "mallory",
        likes_tests::now_seconds(),
        60,
    );
    assert_eq!(
        Watcher::connect(&url, Some(&other_key)).await.err(),
        Some(401)
    );
    let expired = likes_local::jwt::JwtAuthorizer::from_env().mint(
        "late",
        likes_tests::now_seconds() - 120,
        60,
    );
    assert_eq!(
        Watcher::connect(&url, Some(&expired)).await.err(),
        Some(401)
    );
    assert!(stack.rows("LiveConnectionsTable").await.is_empty());
    // The header works as the query parameter does.
    let mut watcher = Watcher::connect_with_header(&url, &stack.token("alice"))
        .await
        .expect("a valid token in the header connects");
    watcher.subscribe(&["game:1"]).await;
    assert_eq!(
        watcher.next(ANSWER).await.unwrap().message["type"],
        "counts"
    );
    let rows = stack.rows("LiveConnectionsTable").await;
    assert_eq!(
        rows[0]["user_id"],
        aws_sdk_dynamodb::types::AttributeValue::S("alice".into())
    );
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

/// Subscribes racing on one connection (a client that sends several at once) never pass the
/// cap together, and every subscription row they write is listed on the connection, so
/// `$disconnect` removes them all.
#[tokio::test]
async fn concurrent_subscribes_keep_the_cap_and_leave_nothing_behind() {
    use likes_store::Watch;
    let stack = TestStack::start().await;
    let store = stack.live_store();
    store
        .connect("racer", "racer-user", likes_core::clock::now_ms())
        .await
        .unwrap();
    // Four subscribes of 40 items each: any three would pass the cap of 100.
    let mut racing = tokio::task::JoinSet::new();
    for batch in 0..4 {
        let (store, watching) = (store.clone(), stack.watching());
        let items: Vec<likes_core::ItemId> = (0..40)
            .map(|n| likes_core::ItemId::parse(&format!("game:race-{batch}-{n}")).unwrap())
            .collect();
        racing.spawn(async move { store.subscribe("racer", &items, &watching).await });
    }
    let mut outcomes = Vec::new();
    while let Some(outcome) = racing.join_next().await {
        outcomes.push(outcome.unwrap().unwrap());
    }
    let subscribed = outcomes.iter().filter(|o| **o == Watch::Subscribed).count();
    assert!(
        (1..=2).contains(&subscribed),
        "at most two of 40 fit in 100: {outcomes:?}"
    );
    let listed = store.connection("racer").await.unwrap().unwrap().items;
    assert_eq!(listed.len(), 40 * subscribed, "{outcomes:?}");
    let rows = stack.rows("LiveSubscriptionsTable").await;
    assert_eq!(
        rows.len(),
        listed.len(),
        "every subscription row is listed on its connection"
    );

    store.disconnect("racer").await.unwrap();
    let left = stack.rows("LiveSubscriptionsTable").await;
    assert!(
        left.is_empty(),
        "{} rows outlived the connection",
        left.len()
    );
}
