//! `as_of` never lies: every flip accepted before it is counted, even while the shard that
//! holds a flip keeps failing; and a stream with nothing to count still moves it forward,
//! thanks to the pulse's probes.

use std::time::{Duration, Instant};

use likes_core::clock::{now_ms, parse_rfc3339};
use likes_core::ReactionState::Like;
use likes_tests::{eventually, TestStack};

/// One count read: the like count and `as_of` (epoch millis) it answered together.
async fn read(stack: &TestStack, item: &str) -> (u64, Option<i64>) {
    let body = stack.like_count(item).await.json();
    (
        body["like_count"].as_u64().expect("a like count"),
        body["as_of"].as_str().map(|t| parse_rfc3339(t).unwrap()),
    )
}

/// The first count read of `item` whose own `as_of` is at least `at_ms`: its like count.
/// (A container may serve an answer it read up to a second ago, with the older `as_of` it
/// came with, after another item's answer already passed `at_ms`.)
async fn read_as_of(stack: &TestStack, item: &str, at_ms: i64) -> u64 {
    eventually(Duration::from_secs(30), async || {
        let (likes, as_of) = read(stack, item).await;
        if as_of.is_some_and(|as_of| as_of >= at_ms) {
            return Ok(likes);
        }
        Err(format!(
            "no read of {item} reached as_of {at_ms}: {as_of:?}"
        ))
    })
    .await
}

#[tokio::test]
async fn as_of_stays_behind_a_like_its_failing_shard_has_not_counted() {
    let stack = TestStack::builder().scheduled().start().await;
    let item = "game:fresh";
    stack.react("first", item, Like).await;
    let first = now_ms();
    stack.settle().await;
    stack.wait_for_as_of(first, Duration::from_secs(30)).await;

    // The shard's next invocations fail, so Lambda retries the batch holding the like.
    let faults = stack.pipeline().faults();
    faults.fail_next_invocations(6);
    stack.react("second", item, Like).await;
    let accepted = now_ms();
    let mut held_back = 0;
    let watch_until = Instant::now() + Duration::from_secs(3);
    while faults.armed() && Instant::now() < watch_until {
        let (likes, as_of) = read(&stack, item).await;
        if let Some(as_of) = as_of {
            assert!(
                as_of <= accepted || likes == 2,
                "as_of {as_of} is past the like accepted at {accepted}, but the count is {likes}"
            );
            if as_of < accepted && likes == 1 {
                held_back += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        held_back > 0,
        "as_of was seen held back while the shard failed"
    );
    let counters = stack.settle().await;
    assert!(
        counters.function_errors >= 1,
        "the fault fired: {counters:?}"
    );
    stack
        .wait_for_as_of(accepted, Duration::from_secs(30))
        .await;
    assert_eq!(
        read_as_of(&stack, item, accepted).await,
        2,
        "counted once the retry succeeded"
    );
}

/// On several shards, one stalled: the others' likes are counted and their watermarks move,
/// but `as_of` stays behind the like the stalled shard holds until it resumes.
#[tokio::test]
async fn a_stalled_shard_holds_as_of_back_while_the_others_are_counted() {
    let stack = TestStack::builder().scheduled().start().await;
    assert!(
        stack.pipeline().virtual_shards() > 1,
        "the stream runs on several shards"
    );
    let item = "game:stalled";
    stack
        .wait_for_as_of(now_ms() - 60_000, Duration::from_secs(30))
        .await;
    let faults = stack.pipeline().faults();
    faults.stall_shard(0);
    let held = stack.users_on_shard("held", 0, 1).remove(0);
    stack.react(&held, item, Like).await;
    let accepted = now_ms();
    let others = stack.users_on_shard("free", 1, 3);
    for user in &others {
        stack.react(user, item, Like).await;
    }
    let others_written = now_ms();
    // The other shards apply their likes: the count reaches 3 while as_of stays put.
    let mut samples = 0;
    eventually(Duration::from_secs(20), async || {
        let (likes, as_of) = read(&stack, item).await;
        if let Some(as_of) = as_of {
            assert!(
                as_of <= accepted,
                "as_of {as_of} passed the like the stalled shard holds (accepted {accepted})"
            );
        }
        if likes == 3 {
            samples += 1;
            if samples >= 5 {
                return Ok(());
            }
        }
        Err(format!("the free shards' likes were counted: {likes}"))
    })
    .await;
    faults.resume_shard(0);
    stack
        .wait_for_as_of(others_written, Duration::from_secs(30))
        .await;
    assert_eq!(
        read_as_of(&stack, item, others_written).await,
        4,
        "the held like, counted once it resumed"
    );
}

#[tokio::test]
async fn a_quiet_stream_keeps_as_of_moving() {
    let stack = TestStack::builder().scheduled().start().await;
    // Nothing is written: only the pulse's probes reach the stream.
    let first = stack
        .wait_for_as_of(now_ms() - 60_000, Duration::from_secs(30))
        .await;
    let later = stack
        .wait_for_as_of(first + 2_000, Duration::from_secs(30))
        .await;
    assert!(later > first, "as_of moved from {first} to {later}");
    assert_eq!(
        stack.recount().await.len(),
        0,
        "probe rows are no reactions"
    );
}

/// DynamoDB splits and closes a stream's shards over a table's life. A closed parent's last
/// watermark must not hold `as_of` at the split for ever: once its children carry on, the
/// likes after the split are counted, once each, and `as_of` passes them.
#[tokio::test]
async fn a_split_of_the_reactions_stream_keeps_as_of_moving() {
    let stack = TestStack::builder().scheduled().start().await;
    let item = "game:split";
    let before: Vec<String> = (0..6).map(|n| format!("before-{n}")).collect();
    for user in &before {
        stack.react(user, item, Like).await;
    }
    assert_eq!(read_as_of(&stack, item, now_ms()).await, 6);

    let children = stack.split_reactions_stream().await;
    let opened: Vec<&String> = children.values().flatten().collect();
    assert!(
        !children.is_empty() && opened.len() == 2 * children.len(),
        "every open shard split in two: {children:?}"
    );
    let after: Vec<String> = (0..16).map(|n| format!("after-{n}")).collect();
    for user in &after {
        stack.react(user, item, Like).await;
    }
    let written = now_ms();
    // The likes before the split stay on the parent; those after it went to the children,
    // both of them.
    let by_shard = stack.stream_partition_keys_by_shard().await;
    for (parent, children) in &children {
        assert!(by_shard[parent].iter().all(|user| !after.contains(user)));
        for child in children {
            let users = &by_shard[child];
            assert!(
                users.iter().any(|user| after.contains(user))
                    && users.iter().all(|user| !before.contains(user)),
                "child {child} holds {users:?}"
            );
        }
    }

    assert_eq!(
        read_as_of(&stack, item, written).await,
        22,
        "counted once each, before and after the split"
    );
    let later = stack
        .wait_for_as_of(written + 2_000, Duration::from_secs(30))
        .await;
    assert!(later > written, "as_of moved on past the split to {later}");
    stack.assert_counts_match_recount(&[item]).await;
}
