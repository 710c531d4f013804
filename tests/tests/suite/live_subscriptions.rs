//! Subscriptions to live counts through the local WebSocket front with a real WebSocket
//! client: unsubscribe and resubscribe, the message limits (a bad message answered with an
//! error and changing nothing), and the cap on one connection's items under racing
//! subscribes.

use std::time::Duration;

use likes_tests::TestStack;
use serde_json::json;

use crate::live_support::{counts_of, wait_for_count, ANSWER};

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
