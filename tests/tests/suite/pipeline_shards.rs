//! AWS's stream topology, locally: the Reactions stream split by `user_id` into virtual
//! shards, each with its own batches, checkpoint and retries, running side by side.
//! A stalled or failing shard holds back its own users' records and nobody else's.

use std::collections::BTreeSet;
use std::time::Duration;

use likes_core::ItemId;
use likes_core::ReactionState::Like;
use likes_tests::{eventually, TestStack};

const SHARDS: usize = 4;

async fn like_all(stack: &TestStack, users: &[String], item: &str) {
    for user in users {
        stack.react(user, item, Like).await;
    }
}

async fn likes(stack: &TestStack, item: &str) -> u64 {
    stack
        .counts_store()
        .read(&ItemId::parse(item).unwrap())
        .await
        .unwrap()
        .like_count
}

/// Users on every virtual shard but `held`.
fn users_elsewhere(stack: &TestStack, tag: &str, held: usize, per_shard: usize) -> Vec<String> {
    (0..SHARDS)
        .filter(|n| *n != held)
        .flat_map(|n| stack.users_on_shard(tag, n, per_shard))
        .collect()
}

#[tokio::test]
async fn many_users_spread_over_every_shard_and_count_once() {
    let stack = TestStack::builder().mappings(SHARDS, &[]).start().await;
    let users: Vec<String> = (0..40).map(|u| format!("spread-u{u}")).collect();
    like_all(&stack, &users, "game:spread").await;
    let counters = stack.settle().await;
    let shards = stack.pipeline().shards();
    assert_eq!(shards.len(), SHARDS, "{shards:?}");
    for (id, shard) in &shards {
        assert!(id.ends_with(&format!("-v{}", shard.index)), "{id}");
        assert!(
            shard.invocations > 0 && shard.acknowledged == shard.routed,
            "{id} delivered its records: {shard:?}"
        );
    }
    assert_eq!(
        counters.records_acknowledged,
        stack.stream_records().await as u64,
        "{counters:?}"
    );
    assert_eq!(likes(&stack, "game:spread").await, 40);
    stack.assert_counts_match_recount(&["game:spread"]).await;
}

#[tokio::test]
async fn a_stalled_shard_holds_its_records_while_the_others_are_applied() {
    let stack = TestStack::builder().mappings(SHARDS, &[]).start().await;
    let pipeline = stack.pipeline();
    let held = 1;
    pipeline.faults().stall_shard(held);
    let stalled = stack.users_on_shard("stalled", held, 6);
    let running = users_elsewhere(&stack, "running", held, 4);
    like_all(&stack, &stalled, "game:stalled").await;
    like_all(&stack, &running, "game:running").await;
    pipeline
        .settle_running(Duration::from_secs(30))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(likes(&stack, "game:running").await, running.len() as u64);
    assert_eq!(
        likes(&stack, "game:stalled").await,
        0,
        "the stalled shard applied nothing"
    );
    let (stalled_id, progress) = pipeline
        .shards()
        .into_iter()
        .find(|(_, p)| p.index == held)
        .unwrap();
    assert_eq!(progress.invocations, 0, "{progress:?}");
    assert_eq!(
        progress.routed,
        stack.stream_records_of(&stalled).await as u64,
        "its records piled up: {progress:?}"
    );
    match pipeline.settle(Duration::from_millis(500)).await {
        Err(likes_local::event_source_mapping::SettleError::Timeout { held, .. }) => {
            assert_eq!(
                held,
                vec![stalled_id],
                "the timeout names the stalled shard"
            )
        }
        other => panic!("a stalled shard keeps the pipeline from settling: {other:?}"),
    }
    pipeline.faults().resume_shard(held);
    stack.settle().await;
    assert_eq!(likes(&stack, "game:stalled").await, stalled.len() as u64);
    stack
        .assert_counts_match_recount(&["game:stalled", "game:running"])
        .await;
}

#[tokio::test]
async fn a_failing_shard_retries_without_holding_back_the_others() {
    // Retries without bound, so the failing shard keeps its records until it heals.
    let stack = TestStack::builder()
        .mappings(SHARDS, &[("MaximumRetryAttempts", -1)])
        .start()
        .await;
    let pipeline = stack.pipeline();
    let held = 2;
    pipeline.faults().fail_shard(held);
    let failing = stack.users_on_shard("failing", held, 5);
    let running = users_elsewhere(&stack, "running", held, 4);
    like_all(&stack, &failing, "game:failing").await;
    like_all(&stack, &running, "game:running").await;
    pipeline
        .settle_running(Duration::from_secs(30))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(likes(&stack, "game:running").await, running.len() as u64);
    assert_eq!(likes(&stack, "game:failing").await, 0);
    // The others settling says nothing of how far the failing shard got: wait for its retry.
    eventually(Duration::from_secs(30), async || {
        let counters = pipeline.counters();
        if counters.function_errors >= 1 && counters.retries >= 1 {
            Ok(())
        } else {
            Err(format!(
                "the failing shard has not retried yet: {counters:?}"
            ))
        }
    })
    .await;
    pipeline.faults().heal_shard(held);
    let counters = stack.settle().await;
    assert_eq!(counters.dlq_batches, 0, "{counters:?}");
    assert_eq!(likes(&stack, "game:failing").await, failing.len() as u64);
    stack
        .assert_counts_match_recount(&["game:failing", "game:running"])
        .await;
}

/// Under `TumblingWindowInSeconds` the function gets time window events: each names the
/// virtual shard it came from and an aligned window of the declared length, and each
/// window with records ends in a final invocation that hands back the window's state.
#[tokio::test]
async fn time_window_events_reach_the_function_with_the_virtual_shard_id() {
    const WINDOW: i64 = 2;
    let stack = TestStack::builder()
        .mappings(SHARDS, &[("TumblingWindowInSeconds", WINDOW)])
        .start()
        .await;
    let pipeline = stack.pipeline();
    assert_eq!(
        pipeline.config().tumbling_window,
        Some(Duration::from_secs(WINDOW as u64))
    );
    let users: Vec<String> = (0..SHARDS)
        .flat_map(|n| stack.users_on_shard("window", n, 2))
        .collect();
    like_all(&stack, &users, "game:window").await;
    stack.settle().await;
    let shards: BTreeSet<String> = pipeline.shards().into_keys().collect();
    // Every window that held records is closed by a final invocation once it is over.
    eventually(Duration::from_secs(3 * WINDOW as u64 + 10), async || {
        let deliveries = pipeline.deliveries();
        let opened: BTreeSet<_> = deliveries
            .iter()
            .filter(|d| d.records > 0)
            .map(|d| (d.shard_id.clone(), d.window))
            .collect();
        let closed: BTreeSet<_> = deliveries
            .iter()
            .filter(|d| d.is_final_invoke_for_window)
            .map(|d| (d.shard_id.clone(), d.window))
            .collect();
        let seen: BTreeSet<String> = opened.iter().map(|(shard, _)| shard.clone()).collect();
        if seen == shards && opened.is_subset(&closed) {
            return Ok(());
        }
        Err(format!(
            "final invocations for {opened:?}, saw {closed:?}; shards {shards:?}"
        ))
    })
    .await;
    let deliveries = pipeline.deliveries();
    for delivery in &deliveries {
        let window = delivery.window.expect("a time window event");
        assert_eq!(window.end - window.start, WINDOW, "{delivery:?}");
        assert_eq!(window.start % WINDOW, 0, "aligned: {delivery:?}");
        assert!(shards.contains(&delivery.shard_id), "{delivery:?}");
        if delivery.is_final_invoke_for_window {
            assert_eq!(delivery.records, 0, "{delivery:?}");
        }
    }
    assert_eq!(pipeline.counters().function_errors, 0);
    assert_eq!(likes(&stack, "game:window").await, users.len() as u64);
    stack.assert_counts_match_recount(&["game:window"]).await;
}
