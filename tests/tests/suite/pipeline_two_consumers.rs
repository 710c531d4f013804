//! Two consumers of one stream shard at once (docs/exactly-once.md): a batch handed to two
//! instances of the aggregator, the second started a little later at every step of the
//! first, and a second mapping on the Reactions stream beside the template's for as long as
//! likes flow (CloudFormation runs both while it replaces a mapping). Either way every flip
//! is counted once: one writer per shard, decided before any count row is written.

use std::time::Duration;

use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_tests::TestStack;

pub(super) const ITEMS: [&str; 3] = ["game:1", "avatar:2", "exp:3"];

/// Every 3 ms from 0 to 60 ms: on the emulator (a few milliseconds a request) the second
/// instance's reads and writes fall before, between and after each of the first's.
pub(super) fn staggers() -> Vec<Duration> {
    (0..=60).step_by(3).map(Duration::from_millis).collect()
}

/// Users `<tag>-u<i>` each like an item, every fourth then dislikes it, every fifth unlikes
/// it, every third likes a second item.
pub(super) async fn flips(stack: &TestStack, tag: &str, users: std::ops::Range<usize>) {
    for u in users {
        let user = format!("{tag}-u{u}");
        let item = ITEMS[u % ITEMS.len()];
        stack.react(&user, item, Like).await;
        if u % 4 == 0 {
            stack.react(&user, item, Dislike).await;
        }
        if u % 5 == 0 {
            stack.react(&user, item, Neutral).await;
        }
        if u % 3 == 0 {
            stack.react(&user, ITEMS[(u + 1) % ITEMS.len()], Like).await;
        }
    }
}

/// Flips by users `during-u<i>`, `per_round` of them at a time with `pause` after each
/// round, for `load`: the traffic a replaced mapping meets.
pub(super) async fn flip_for(stack: &TestStack, load: Duration, per_round: usize, pause: Duration) {
    let started = std::time::Instant::now();
    let mut round = 0;
    while started.elapsed() < load {
        flips(stack, "during", round * per_round..(round + 1) * per_round).await;
        tokio::time::sleep(pause).await;
        round += 1;
    }
}

/// Waits until a second mapping applied everything it read, which must be something.
pub(super) async fn settle_second(second: &likes_local::event_source_mapping::Pipeline) {
    let counters = second
        .settle(Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        counters.records_delivered > 0 && counters.invocations > 0,
        "the second mapping delivered nothing: {counters:?}"
    );
}

/// One batch after another handed to a second instance too, started 0 to 60 ms after the
/// first: on the emulator (a few milliseconds a request) its reads and writes fall before,
/// between and after each of the first's (the shard's progress read, the intent, each count
/// row, the progress moved). The simulator answers in well under a millisecond, so there the
/// two mostly meet only when started together.
#[tokio::test]
async fn a_batch_at_two_consumers_staggered_at_every_step_counts_each_flip_once() {
    let stack = TestStack::start().await;
    let staggers = staggers();
    let twins = staggers.len() as u64;
    stack.pipeline().faults().deliver_twice_at_once(staggers);
    let mut round = 0;
    while stack.pipeline().faults().armed() {
        assert!(round < 60, "the staggered deliveries were not all played");
        flips(&stack, "a", round * 8..(round + 1) * 8).await;
        stack.settle().await;
        round += 1;
    }
    let counters = stack.settle().await;
    assert_eq!(counters.twin_deliveries, twins, "{counters:?}");
    stack.assert_counts_match_recount(&ITEMS).await;
}

/// A second, identical mapping started while likes flow: it reads the stream from the
/// template's starting position, what the first applied already and what comes next, at
/// the same time as the first, for as long as the writes go on.
#[tokio::test]
async fn a_second_mapping_beside_the_first_under_load_counts_each_flip_once() {
    let stack = TestStack::start().await;
    flips(&stack, "before", 0..30).await;
    let second = stack.second_mapping(stack.pipeline());
    flip_for(&stack, Duration::from_secs(40), 20, Duration::ZERO).await;
    stack.settle().await;
    settle_second(&second).await;
    stack.assert_counts_match_recount(&ITEMS).await;
}
