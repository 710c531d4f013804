//! Two consumers of one shard at once, for every consumer but the aggregator
//! (docs/exactly-once.md, "Every other consumer with two writers"): the publisher's, the
//! leaderboard's (with the likers lists), the broadcaster's, the eraser's and the
//! retractor's batches each handed to a second instance of the function too, started 0 to
//! 60 ms after the first, and a second leaderboard mapping beside the first. Every read
//! model still equals what the clients set, the last live pushes are the exact counts, and
//! every job retracts or erases each reaction once and says so.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::ReactionState::{Dislike, Like};
use likes_tests::TestStack;
use serde_json::{json, Value};

use super::pipeline_two_consumers::{flip_for, flips, settle_second, staggers, ITEMS};

/// Rows an erasure deletes, or a retraction turns to NONE, a second: a job of a few
/// reactions takes several slices, so the second instances meet slices that write.
const JOB_ROWS_PER_SECOND: &str = "4";

/// Each item's score summed over its all-time rows and over its day rows (a like and its
/// end may fall on two days; their sum is the item's likes).
async fn scores(stack: &TestStack) -> BTreeMap<String, (i64, i64)> {
    let mut scores = BTreeMap::<String, (i64, i64)>::new();
    for row in stack.rows("LeaderboardTable").await {
        let (Some(AttributeValue::S(board)), Some(AttributeValue::S(item))) =
            (row.get("board"), row.get("item_id"))
        else {
            continue;
        };
        let Some(AttributeValue::N(score)) = row.get("score") else {
            continue;
        };
        let score: i64 = score.parse().expect("a number");
        let entry = scores.entry(item.clone()).or_default();
        if board.starts_with("all#") {
            entry.0 += score;
        } else if board.starts_with("day#") {
            entry.1 += score;
        }
    }
    scores
}

/// Once every consumer has applied the stream: the counts equal a recount of the Reactions
/// table, each item's likers pages list exactly its LIKE rows newest first, and its all-time
/// and day scores its likes.
async fn assert_read_models_equal_the_reactions_table(stack: &TestStack) {
    stack.settle().await;
    stack.settle_leaderboard().await;
    let recount = stack.assert_counts_match_recount(&ITEMS).await;
    for (item, counts) in &recount {
        // A Scan of the Reactions table only where it holds likes.
        let liked = match counts.like_count {
            0 => Vec::new(),
            _ => stack.liked_rows(item).await,
        };
        assert_eq!(
            stack.all_likers(item, 50).await,
            liked,
            "the likers of {item}: exactly its LIKE rows, newest first"
        );
    }
    let scores = scores(stack).await;
    let mut wrong = Vec::new();
    for (item, counts) in &recount {
        let likes = counts.like_count as i64;
        let scored = scores.get(item).copied().unwrap_or_default();
        if scored != (likes, likes) {
            wrong.push(format!("{item}: scored {scored:?}, liked {likes}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "scores (all time, days) differ from the likes:\n  {}\nleaderboard: {:?}",
        wrong.join("\n  "),
        stack.leaderboard().counters()
    );
}

/// Flips round by round, each settled through `mapping`, until its staggered second
/// instances were all played.
async fn flip_until_played(
    stack: &TestStack,
    mapping: &likes_local::event_source_mapping::Pipeline,
) -> likes_local::faults::Counters {
    let mut round = 0;
    while mapping.faults().armed() {
        assert!(round < 60, "the staggered deliveries were not all played");
        flips(stack, "a", round * 8..(round + 1) * 8).await;
        stack.settle_events().await;
        stack.settle_leaderboard().await;
        round += 1;
    }
    mapping.counters()
}

#[tokio::test]
async fn a_leaderboard_batch_at_two_consumers_staggered_scores_and_lists_each_flip_once() {
    let stack = TestStack::start().await;
    let staggers = staggers();
    let twins = staggers.len() as u64;
    stack.leaderboard().faults().deliver_twice_at_once(staggers);
    let counters = flip_until_played(&stack, stack.leaderboard()).await;
    assert_eq!(counters.twin_deliveries, twins, "{counters:?}");
    assert_read_models_equal_the_reactions_table(&stack).await;
}

/// A second, identical mapping of the leaderboard's consumer on the event log, started while
/// likes flow: it reads the log from its start (`TRIM_HORIZON`), what the first applied
/// already and what comes next, beside the first, cut its own way.
#[tokio::test]
async fn a_second_leaderboard_mapping_beside_the_first_scores_and_lists_each_flip_once() {
    let stack = TestStack::start().await;
    flips(&stack, "before", 0..30).await;
    stack.settle_leaderboard().await;
    let second = stack.second_mapping(stack.leaderboard());
    flip_for(
        &stack,
        Duration::from_secs(15),
        5,
        Duration::from_millis(200),
    )
    .await;
    stack.settle_leaderboard().await;
    settle_second(&second).await;
    assert_read_models_equal_the_reactions_table(&stack).await;
}

#[tokio::test]
async fn a_publisher_batch_at_two_consumers_staggered_puts_duplicates_the_log_scores_once() {
    let stack = TestStack::start().await;
    let staggers = staggers();
    let twins = staggers.len() as u64;
    stack.publisher().faults().deliver_twice_at_once(staggers);
    let counters = flip_until_played(&stack, stack.publisher()).await;
    assert_eq!(counters.twin_deliveries, twins, "{counters:?}");
    let events = stack.events().await;
    let distinct: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e.event_id.as_str()).collect();
    assert!(
        events.len() > distinct.len(),
        "the second instances put events again: {} records, {} events",
        events.len(),
        distinct.len()
    );
    assert_read_models_equal_the_reactions_table(&stack).await;
}

/// Users `<tag>-<n>`, each reacting to `reactions` items of their own and to the shared
/// ones (a like on even positions, a dislike on odd ones), beside a user who keeps theirs.
async fn react_for_jobs(stack: &TestStack, user: &str, reactions: usize) {
    for i in 0..reactions {
        let item = ITEMS
            .get(i)
            .map_or_else(|| format!("job:{user}-{i}"), |shared| (*shared).to_owned());
        let state = if i % 2 == 0 { Like } else { Dislike };
        stack.react(user, &item, state).await;
    }
}

/// Reactions `user` holds (LIKE or DISLIKE rows).
async fn reactions_of(stack: &TestStack, user: &str) -> usize {
    stack
        .rows("ReactionsTable")
        .await
        .iter()
        .filter(|row| {
            row.get("user_id") == Some(&AttributeValue::S(user.into()))
                && matches!(row.get("state"), Some(AttributeValue::S(s)) if s != "NONE")
        })
        .count()
}

#[tokio::test]
async fn an_erasure_slice_at_two_consumers_staggered_erases_each_reaction_once() {
    let stack = TestStack::builder()
        .parameters(&[("ErasureRowsPerSecond", JOB_ROWS_PER_SECOND)])
        .start()
        .await;
    flips(&stack, "keep", 0..12).await;
    let staggers = staggers();
    let twins = staggers.len() as u64;
    stack.eraser().faults().deliver_twice_at_once(staggers);
    let mut erased = 0;
    while stack.eraser().faults().armed() {
        assert!(erased < 20, "the staggered deliveries were not all played");
        let user = format!("erased-{erased}");
        let reactions = 9 + erased % 3;
        react_for_jobs(&stack, &user, reactions).await;
        let response = stack
            .request("DELETE", "/v1/users/me/reactions", Some(&user))
            .send()
            .await;
        response.assert_status(202);
        let id = response.json()["erasure_id"]
            .as_str()
            .expect("an erasure id")
            .to_owned();
        let seen = stack
            .wait_for_erasure(&user, &id, Duration::from_secs(60))
            .await;
        let done = seen.last().expect("an answer");
        assert_eq!(done["reactions_erased"], reactions, "{user}: {done}");
        assert_eq!(
            reactions_of(&stack, &user).await,
            0,
            "{user}'s rows are gone"
        );
        assert_eq!(stack.liked_items(&user).await, Vec::<Value>::new());
        erased += 1;
    }
    assert_eq!(stack.eraser().counters().twin_deliveries, twins);
    assert_read_models_equal_the_reactions_table(&stack).await;
}

#[tokio::test]
async fn a_retraction_slice_at_two_consumers_staggered_retracts_each_reaction_once() {
    let stack = TestStack::builder()
        .parameters(&[("ModerationRowsPerSecond", JOB_ROWS_PER_SECOND)])
        .start()
        .await;
    flips(&stack, "keep", 0..12).await;
    let staggers = staggers();
    let twins = staggers.len() as u64;
    stack.retractor().faults().deliver_twice_at_once(staggers);
    let moderator = format!("Bearer {}", stack.moderator_token("moderator"));
    let mut retracted = 0;
    while stack.retractor().faults().armed() {
        assert!(
            retracted < 20,
            "the staggered deliveries were not all played"
        );
        let user = format!("bot-{retracted}");
        let reactions = 9 + retracted % 3;
        react_for_jobs(&stack, &user, reactions).await;
        let response = stack
            .request(
                "POST",
                &format!("/v1/moderation/users/{user}/retractions"),
                None,
            )
            .header("authorization", &moderator)
            .json(&json!({"reason": "bought likes"}))
            .send()
            .await;
        response.assert_status(202);
        let id = response.json()["retraction_id"]
            .as_str()
            .expect("a retraction id")
            .to_owned();
        let done = stack.wait_for_retraction(&id).await;
        assert_eq!(done["reactions_retracted"], reactions, "{user}: {done}");
        assert_eq!(
            reactions_of(&stack, &user).await,
            0,
            "{user} reacts to nothing"
        );
        assert_eq!(stack.liked_items(&user).await, Vec::<Value>::new());
        retracted += 1;
    }
    assert_eq!(stack.retractor().counters().twin_deliveries, twins);
    assert_read_models_equal_the_reactions_table(&stack).await;
}

/// Each item's like and dislike count in the newest counts message `received` holds of it.
fn last_counts(received: &[likes_tests::live::Received], last: &mut BTreeMap<String, (u64, u64)>) {
    for r in received.iter().filter(|r| r.message["type"] == "counts") {
        let (Some(item), Some(likes), Some(dislikes)) = (
            r.message["item_id"].as_str(),
            r.message["like_count"].as_u64(),
            r.message["dislike_count"].as_u64(),
        ) else {
            panic!("a counts message without its counts: {}", r.message);
        };
        last.insert(item.to_owned(), (likes, dislikes));
    }
}

#[tokio::test]
async fn a_broadcaster_batch_at_two_consumers_staggered_pushes_counts_that_end_exact() {
    let stack = TestStack::builder().scheduled().start().await;
    let mut watcher = stack.watcher("watcher").await;
    watcher.subscribe(&ITEMS).await;
    let staggers = staggers();
    let twins = staggers.len() as u64;
    stack.broadcaster().faults().deliver_twice_at_once(staggers);
    // A batch keeps pushing until its counts cover its events (a second or two), so the
    // flips go on without waiting for it, and the log shards' batches overlap.
    // Bounded by rounds, not by the clock: a busy machine delivers fewer batches a second.
    let mut round = 0;
    while stack.broadcaster().faults().armed() {
        assert!(round < 300, "the staggered deliveries were not all played");
        flips(&stack, "a", round * 4..(round + 1) * 4).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        round += 1;
    }
    stack.settle().await;
    stack.settle_broadcaster().await;
    assert_eq!(stack.broadcaster().counters().twin_deliveries, twins);
    let recount = stack.assert_counts_match_recount(&ITEMS).await;
    let truth: BTreeMap<String, (u64, u64)> = ITEMS
        .iter()
        .map(|item| {
            let counts = recount.get(*item).copied().unwrap_or_default();
            (
                (*item).to_owned(),
                (counts.like_count as u64, counts.dislike_count as u64),
            )
        })
        .collect();
    let mut last = BTreeMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while last != truth {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(
            !left.is_zero(),
            "the pushes ended at {last:?}, not {truth:?}"
        );
        last_counts(
            &watcher.collect(left.min(Duration::from_secs(1))).await,
            &mut last,
        );
    }
    // Nothing older comes after the exact counts.
    last_counts(&watcher.collect(Duration::from_secs(3)).await, &mut last);
    assert_eq!(last, truth, "the last pushes of each item");
}
