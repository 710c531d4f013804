//! Exactly once (docs/exactly-once.md): whatever the event source mapping does (deliver a batch twice,
//! retry it cut shorter or longer, checkpoint at a partial failure, lose an invocation that
//! died after committing chunks), every count equals a recount of the Reactions table.
//!
//! Each test arms faults in the local mapping (`likes_local::faults`), writes through the
//! write path, waits until the pipeline applied the whole stream, then checks the counts
//! and that the faults were really played (a fault that never fired proves nothing).

use std::time::Duration;

use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_local::faults::Recut;
use likes_tests::TestStack;
use serde_json::Value;

const ITEMS: [&str; 3] = ["game:1", "avatar:2", "exp:3"];

/// A history of `users` over [`ITEMS`]: each likes one item; every third then switches to
/// dislike, every fifth unlikes, every seventh also dislikes another item.
async fn history_of(stack: &TestStack, users: &[String]) {
    for (u, user) in users.iter().enumerate() {
        let item = ITEMS[u % ITEMS.len()];
        stack.react(user, item, Like).await;
        if u % 3 == 0 {
            stack.react(user, item, Dislike).await;
        }
        if u % 5 == 0 {
            stack.react(user, item, Neutral).await;
        }
        if u % 7 == 0 {
            stack
                .react(user, ITEMS[(u + 1) % ITEMS.len()], Dislike)
                .await;
        }
    }
}

/// The history of `users` users `<tag>-u<i>`, spread over every virtual shard.
async fn history(stack: &TestStack, tag: &str, users: usize) {
    let users: Vec<String> = (0..users).map(|u| format!("{tag}-u{u}")).collect();
    history_of(stack, &users).await;
}

/// Writes histories of users whose records all land on one virtual shard until the stream
/// holds at least `records` of theirs (however many records a write makes), while the
/// mapping is paused, so they reach the function as one batch of several chunks (chunks are
/// 100 records) when the mapping resumes. Returns that shard's id.
async fn history_in_one_batch(stack: &TestStack, tag: &str, records: usize) -> String {
    const ROUND: usize = 10;
    let pipeline = stack.pipeline();
    // A batch holds the records of one tumbling window only: start near a window's start,
    // since writing a few hundred records takes over 25 s on a loaded machine.
    stack.wait_for_window_room(Duration::from_secs(55)).await;
    pipeline.pause();
    // Reading the stream back costs its whole length, so it is read after each round only:
    // the records per user so far size the next round to what is still missing.
    let mut users = Vec::new();
    let mut wanted = ROUND;
    loop {
        let round = stack.users_on_shard(tag, 0, wanted);
        history_of(stack, &round[users.len()..]).await;
        users = round;
        let written = stack.stream_records_of(&users).await;
        if written >= records {
            break;
        }
        let per_user = (written / users.len()).max(1);
        wanted = users.len() + (records - written).div_ceil(per_user);
    }
    pipeline.resume();
    pipeline
        .shards()
        .into_iter()
        .find(|(_, progress)| progress.index == 0)
        .map(|(id, _)| id)
        .expect("the mapping lists its virtual shards")
}

#[tokio::test]
async fn duplicate_deliveries_count_once() {
    let stack = TestStack::start().await;
    stack.pipeline().faults().duplicate_next_batches(3);
    stack.pipeline().pause();
    history(&stack, "a", 90).await;
    stack.pipeline().resume();
    history(&stack, "b", 12).await;
    let counters = stack.settle().await;
    assert_eq!(counters.duplicate_deliveries, 3, "{counters:?}");
    assert!(counters.intents_written >= 3, "{counters:?}");
    stack.assert_counts_match_recount(&ITEMS).await;
}

#[tokio::test]
async fn a_crash_inside_an_intent_counts_once() {
    let stack = TestStack::start().await;
    stack.pipeline().faults().crash_after_chunks(2);
    history_in_one_batch(&stack, "a", 150).await;
    let counters = stack.settle().await;
    assert_eq!(counters.crashes, 1, "{counters:?}");
    assert!(
        counters.function_errors >= 1 && counters.retries >= 1,
        "{counters:?}"
    );
    stack.assert_counts_match_recount(&ITEMS).await;
}

/// A retry cut shorter than an intent a crash left half applied: a batch of 250 records
/// (chunks of 100, over three items) freezes its first chunk and writes its three rows, then
/// freezes the second and dies after one of its rows (the sixth count write). The retry, cut
/// shorter at 150, finishes that intent (the row that took it refuses it again) and moves the
/// progress past record 200; the next batch starts at record 150 and skips 150..200 instead
/// of counting them a second time.
#[tokio::test]
async fn a_retry_cut_shorter_inside_committed_work_then_the_next_batch_counts_once() {
    let stack = TestStack::start().await;
    let faults = stack.pipeline().faults();
    faults.cut_batches_at(Some(250));
    faults.crash_after_chunks(6);
    faults.recut_next_retries([Recut::Shorter(100)]);
    let shard = history_in_one_batch(&stack, "a", 300).await;
    let counters = stack.settle().await;
    let progress = &stack.pipeline().shards()[&shard];
    assert!(
        progress.acknowledged > 250,
        "the history must outgrow the first batch: {progress:?}"
    );
    assert_eq!((counters.crashes, counters.retries), (1, 1), "{counters:?}");
    // Delivered: 250 (crashed), 150 (the shorter retry), then the rest from record 150.
    assert_eq!(
        progress.records_delivered,
        250 + 150 + (progress.acknowledged - 150),
        "{progress:?}"
    );
    stack.assert_counts_match_recount(&ITEMS).await;
}

#[tokio::test]
async fn a_retry_cut_longer_counts_once() {
    let stack = TestStack::start().await;
    let faults = stack.pipeline().faults();
    // The first attempt holds 60 records, freezes them as one intent and dies before any
    // count row; the retry holds 60 more (past the first attempt's end), finishes the
    // intent and counts the rest.
    faults.cut_batches_at(Some(60));
    faults.crash_after_chunks(1);
    faults.recut_next_retries([Recut::Longer(60)]);
    history_in_one_batch(&stack, "a", 130).await;
    let counters = stack.settle().await;
    assert_eq!((counters.crashes, counters.retries), (1, 1), "{counters:?}");
    assert!(
        counters.records_delivered >= 60 + 120,
        "the retry must be longer: {counters:?}"
    );
    stack.assert_counts_match_recount(&ITEMS).await;
}

/// A throttled count write in the middle of a batch: the first chunk is applied (its intent
/// and its three count rows, four count writes), a row of the second cannot be (the SDK's
/// three attempts are all throttled), the function reports the second chunk's first record
/// in `batchItemFailures`, the mapping checkpoints before it and retries from there.
#[tokio::test]
async fn a_partial_batch_failure_from_a_throttled_count_write_counts_once() {
    let stack = TestStack::start().await;
    stack.pipeline().faults().throttle_count_writes_after(4, 3);
    let shard = history_in_one_batch(&stack, "a", 150).await;
    let counters = stack.settle().await;
    assert_eq!(counters.throttled_count_writes, 3, "{counters:?}");
    assert_eq!(counters.partial_failures, 1, "{counters:?}");
    assert_eq!(counters.function_errors, 0, "{counters:?}");
    // The shard's first batch holds its history (less any last records a slow write pushed
    // into the next tumbling window, which a batch never spans); the retry holds the same
    // batch from record 100, after the committed chunk, to its end.
    let batches: Vec<usize> = stack
        .pipeline()
        .deliveries()
        .iter()
        .filter(|d| d.shard_id == shard && d.records > 0)
        .map(|d| d.records)
        .collect();
    assert!(batches.len() >= 2 && batches[0] > 100, "{batches:?}");
    assert_eq!(
        batches[1],
        batches[0] - 100,
        "the retry starts at record 100, after the committed chunk: {batches:?}"
    );
    stack.assert_counts_match_recount(&ITEMS).await;
}

#[tokio::test]
async fn throttled_count_writes_count_once() {
    let stack = TestStack::start().await;
    let faults = stack.pipeline().faults();
    // Two throttles the SDK's own retries absorb, then five in a row, more than its three
    // attempts: the chunk fails in its middle, and the batch record with it.
    faults.throttle_count_writes(2);
    history(&stack, "a", 20).await;
    let first = stack.settle().await;
    assert_eq!(first.throttled_count_writes, 2, "{first:?}");
    // One shard, so the five throttles meet one writer in a row.
    faults.throttle_count_writes(5);
    history_of(&stack, &stack.users_on_shard("b", 1, 20)).await;
    let counters = stack.settle().await;
    assert_eq!(counters.throttled_count_writes, 7, "{counters:?}");
    assert!(counters.partial_failures >= 1, "{counters:?}");
    stack.assert_counts_match_recount(&ITEMS).await;
}

/// The event log has its own mapping: while Kinesis refuses every put for a long while, the
/// publisher retries and the counts are complete all the same, with no retry of the
/// aggregator at all.
#[tokio::test]
async fn refused_event_puts_never_hold_back_the_counts() {
    let stack = TestStack::start().await;
    let events = stack.publisher().faults();
    // Every virtual shard's publisher retries at once: the refusals last as long as 60 do
    // on one shard.
    let refusals = 60 * stack.publisher().virtual_shards() as u64;
    events.fail_kinesis_puts(refusals as u32);
    history(&stack, "a", 30).await;
    let counters = stack.settle().await;
    assert_eq!(
        (
            counters.retries,
            counters.partial_failures,
            counters.function_errors
        ),
        (0, 0, 0),
        "{counters:?}"
    );
    stack.assert_counts_match_recount(&ITEMS).await;
    assert!(
        events.armed(),
        "the counts were complete while the event log was still refused"
    );
    let published = stack.settle_events().await;
    assert_eq!(published.refused_kinesis_puts, refusals, "{published:?}");
    assert!(published.partial_failures >= 2, "{published:?}");
    let flips = stack
        .events()
        .await
        .into_iter()
        .map(|e| e.event_id)
        .collect::<std::collections::BTreeSet<_>>();
    assert!(
        flips.len() >= 30,
        "every user's like reached the log: {}",
        flips.len()
    );
}

#[tokio::test]
async fn mixed_faults_count_once() {
    let stack = TestStack::start().await;
    let faults = stack.pipeline().faults();
    faults.cut_batches_at(Some(70));
    faults.duplicate_next_batches(2);
    faults.crash_after_chunks(1);
    faults.recut_next_retries([Recut::Shorter(25), Recut::Longer(80), Recut::Shorter(3)]);
    faults.throttle_count_writes(3);
    stack.publisher().faults().fail_kinesis_puts(4);
    // One virtual shard throughout: faults played in a row (three throttles) must meet one
    // writer, not be shared out among shards.
    history_in_one_batch(&stack, "a", 170).await;
    history_of(&stack, &stack.users_on_shard("b", 0, 30)).await;
    // The first crash and the throttles play out before the second crash is armed: armed
    // while they still play, it can end the retry the throttles meet after their first, and
    // the rest of them then meet a later retry, whose SDK attempts carry past them.
    likes_tests::eventually(Duration::from_secs(60), async || {
        let played = stack.pipeline().counters();
        (played.crashes >= 1 && played.partial_failures >= 1)
            .then_some(())
            .ok_or(format!("the first faults still play: {played:?}"))
    })
    .await;
    faults.crash_after_chunks(1);
    faults.duplicate_next_batches(1);
    history_of(&stack, &stack.users_on_shard("c", 0, 20)).await;
    let counters = stack.settle().await;
    assert!(!faults.armed(), "every fault was played: {counters:?}");
    assert_eq!(counters.crashes, 2, "{counters:?}");
    assert_eq!(counters.duplicate_deliveries, 3, "{counters:?}");
    // The throttled count write; the refused event puts fail the publisher's batch instead.
    assert!(counters.partial_failures >= 1, "{counters:?}");
    stack.assert_counts_match_recount(&ITEMS).await;
    let published = stack.settle_events().await;
    assert_eq!(published.refused_kinesis_puts, 4, "{published:?}");
    assert!(published.partial_failures >= 1, "{published:?}");
}

/// With `MaximumRetryAttempts` bounded (10 here; the template retries until the record ages
/// out), the batch's metadata goes to the DLQ after the last retry and the mapping moves on:
/// its records are not counted (drift that reconciliation corrects), the records after it
/// are.
#[tokio::test]
async fn exhausted_retries_send_the_batch_to_the_dlq_and_move_on() {
    let stack = TestStack::builder()
        .mappings(
            likes_tests::stream_shards(),
            &[("MaximumRetryAttempts", 10)],
        )
        .start()
        .await;
    let mapping = stack.pipeline().config().clone();
    assert_eq!(mapping.maximum_retry_attempts, Some(10));
    let faults = stack.pipeline().faults();
    faults.fail_next_invocations(mapping.maximum_retry_attempts.unwrap() + 1);
    // Every record the write put on the stream reaches the shard before it delivers, so
    // they are one batch: a delivery between two of them would cut them in two (a CI run
    // under load delivered one of two alone).
    let shard = stack.pipeline().shard_index("lost");
    faults.stall_shard(shard);
    stack.react("lost", "game:lost", Like).await;
    let written = stack.stream_records_of(&["lost".to_owned()]).await as u64;
    likes_tests::eventually(Duration::from_secs(30), async || {
        let routed = stack
            .pipeline()
            .shards()
            .values()
            .map(|s| s.routed)
            .sum::<u64>();
        (routed >= written)
            .then_some(())
            .ok_or(format!("{routed} of {written} records routed"))
    })
    .await;
    faults.resume_shard(shard);
    let counters = stack.settle().await;
    assert_eq!(counters.dlq_batches, 1, "{counters:?}");
    assert_eq!(counters.function_errors, 11, "{counters:?}");
    let message = dlq_message(&stack).await;
    assert_eq!(
        message["requestContext"]["condition"],
        "RetryAttemptsExhausted"
    );
    assert_eq!(message["requestContext"]["approximateInvokeCount"], 11);
    let info = &message["DDBStreamBatchInfo"];
    assert_eq!(info["streamArn"], mapping.stream_arn.as_str());
    assert_eq!(
        info["batchSize"],
        stack.stream_records_of(&["lost".to_owned()]).await,
        "the batch holds every record of the new row"
    );
    let shards = stack.pipeline().shards();
    let named = info["shardId"].as_str().unwrap();
    assert_eq!(
        shards[named].index, shard,
        "the virtual shard of the user: {named}"
    );
    let (start, end) = (
        info["startSequenceNumber"].as_str().unwrap(),
        info["endSequenceNumber"].as_str().unwrap(),
    );
    // One record (AWS writes one per new row) begins and ends the batch; more are in order.
    if info["batchSize"] == 1 {
        assert_eq!(start, end, "a batch of one record");
    } else {
        assert!(
            (start.len(), start) < (end.len(), end),
            "{start} before {end}"
        );
    }
    let counts = stack.counts_store();
    let lost = likes_core::ItemId::parse("game:lost").unwrap();
    assert_eq!(counts.read(&lost).await.unwrap().like_count, 0);
    history(&stack, "after", 10).await;
    stack.settle().await;
    let recount = stack.recount().await;
    for item in ITEMS {
        let id = likes_core::ItemId::parse(item).unwrap();
        assert_eq!(counts.read(&id).await.unwrap(), recount[item], "{item}");
    }
}

#[tokio::test]
async fn records_older_than_the_maximum_age_go_to_the_dlq() {
    let stack = TestStack::start().await;
    let max_age = stack
        .pipeline()
        .config()
        .maximum_record_age
        .expect("the template bounds record age");
    let faults = stack.pipeline().faults();
    faults.age_records_by(max_age + Duration::from_secs(60));
    stack.react("late", "game:late", Like).await;
    let counters = stack.settle().await;
    assert_eq!(
        (counters.dlq_batches, counters.invocations),
        (1, 0),
        "{counters:?}"
    );
    let message = dlq_message(&stack).await;
    assert_eq!(message["requestContext"]["condition"], "RecordAgeExceeded");
    faults.age_records_by(Duration::ZERO);
    history(&stack, "fresh", 10).await;
    stack.settle().await;
    let recount = stack.recount().await;
    let counts = stack.counts_store();
    for item in ITEMS {
        let id = likes_core::ItemId::parse(item).unwrap();
        assert_eq!(counts.read(&id).await.unwrap(), recount[item], "{item}");
    }
}

/// The one message on the aggregator's on-failure queue.
async fn dlq_message(stack: &TestStack) -> Value {
    let received = stack
        .sqs()
        .receive_message()
        .queue_url(stack.name("AggregatorDeadLetterQueue"))
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap();
    let messages = received.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    serde_json::from_str(messages[0].body().unwrap()).unwrap()
}

/// Iterators that expire between reads (moto answers them with a 500): the mapping gets a
/// new one after the last record it read, so no record is skipped or delivered twice.
#[tokio::test]
async fn expired_stream_iterators_are_reacquired_without_losing_or_repeating_records() {
    let stack = TestStack::start().await;
    let faults = stack.pipeline().faults();
    faults.expire_stream_iterators(2);
    history(&stack, "a", 20).await;
    faults.expire_stream_iterators(3);
    history(&stack, "b", 20).await;
    let counters = stack.settle().await;
    assert_eq!(counters.stream_read_errors, 5, "{counters:?}");
    let in_stream = stack.stream_records().await as u64;
    assert_eq!(
        (counters.records_delivered, counters.records_acknowledged),
        (in_stream, in_stream),
        "{counters:?}"
    );
    stack.assert_counts_match_recount(&ITEMS).await;
}
