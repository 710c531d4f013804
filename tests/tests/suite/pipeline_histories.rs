//! Exactly once (docs/exactly-once.md) as a property: for random histories of reactions (likes, dislikes, unlikes,
//! client retries of earlier keys, erased rows) played while the event source mapping
//! suffers random faults, every count equals a recount of the Reactions table.
//!
//! Kept small for the emulator: a handful of cases of at most 40 operations, all on one
//! local stack, each case on items of its own.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use likes_core::ReactionState::{self, Dislike, Like, None as Neutral};
use likes_local::faults::{Faults, Recut};
use likes_tests::TestStack;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const USERS: u8 = 5;
const ITEMS: u8 = 3;

#[derive(Debug, Clone)]
enum Op {
    /// A user sets a reaction with a fresh idempotency key.
    Set {
        user: u8,
        item: u8,
        state: ReactionState,
    },
    /// A client retries the `back`-th most recent keyed write with the same key and body.
    Retry { back: usize },
    /// Account erasure of one row (a REMOVE, whatever its state).
    Erase { user: u8, item: u8 },
    /// A fault armed at this point of the history.
    Fault(Fault),
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Duplicate,
    Crash,
    Recut(Recut),
    /// Count writes throttled this many times in a row (3 defeat the SDK's retries).
    Throttle(u32),
    /// Kinesis puts refused this many times in a row (4 defeat the publisher's retries).
    RefusePuts(u32),
    CutBatches(usize),
}

fn state() -> impl Strategy<Value = ReactionState> {
    prop_oneof![Just(Like), Just(Dislike), Just(Neutral)]
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Duplicate),
        Just(Fault::Crash),
        (1usize..30).prop_map(|n| Fault::Recut(Recut::Shorter(n))),
        (1usize..60).prop_map(|n| Fault::Recut(Recut::Longer(n))),
        prop_oneof![Just(1u32), Just(3)].prop_map(Fault::Throttle),
        prop_oneof![Just(2u32), Just(4)].prop_map(Fault::RefusePuts),
        (2usize..20).prop_map(Fault::CutBatches),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..USERS, 0..ITEMS, state()).prop_map(|(user, item, state)| Op::Set { user, item, state }),
        2 => (0usize..6).prop_map(|back| Op::Retry { back }),
        1 => (0..USERS, 0..ITEMS).prop_map(|(user, item)| Op::Erase { user, item }),
        2 => fault().prop_map(Op::Fault),
    ]
}

fn arm(faults: &Faults, fault: Fault) {
    match fault {
        Fault::Duplicate => faults.duplicate_next_batches(1),
        Fault::Crash => faults.crash_after_chunks(1),
        Fault::Recut(recut) => faults.recut_next_retries([recut]),
        Fault::Throttle(n) => faults.throttle_count_writes(n),
        Fault::RefusePuts(n) => faults.fail_kinesis_puts(n),
        Fault::CutBatches(n) => faults.cut_batches_at(Some(n)),
    }
}

/// Plays one history on the stack (items of its own), then checks every count.
async fn play(stack: &TestStack, case: u32, history: &[Op]) -> Result<(), TestCaseError> {
    let user = |u: u8| format!("h{case}-u{u}");
    let item = |i: u8| format!("h{case}:i{i}");
    let faults = stack.pipeline().faults();
    let mut keyed: Vec<(String, String, ReactionState, String)> = Vec::new();
    for (n, op) in history.iter().enumerate() {
        match op {
            Op::Set {
                user: u,
                item: i,
                state,
            } => {
                let key = format!("h{case}-k{n}");
                stack
                    .react_with_key(&user(*u), &item(*i), *state, &key)
                    .await;
                keyed.push((user(*u), item(*i), *state, key));
            }
            Op::Retry { back } => {
                if let Some((u, i, state, key)) = keyed.iter().rev().nth(*back).cloned() {
                    stack.react_with_key(&u, &i, state, &key).await;
                }
            }
            Op::Erase { user: u, item: i } => stack.erase_row(&user(*u), &item(*i)).await,
            Op::Fault(fault) => arm(faults, *fault),
        }
    }
    let settled = stack.pipeline().settle(Duration::from_secs(60)).await;
    // Faults left unplayed (a recut with no retry to cut) must not leak into the next case.
    faults.clear();
    let counters = settled.map_err(|err| TestCaseError::fail(err.to_string()))?;
    let recount = stack.recount().await;
    let counts = stack.counts_store();
    for i in 0..ITEMS {
        let id = item(i);
        let counted = counts
            .read(&likes_core::ItemId::parse(&id).unwrap())
            .await
            .map_err(|err| TestCaseError::fail(err.to_string()))?;
        let expected = recount.get(&id).copied().unwrap_or_default();
        prop_assert_eq!(
            counted,
            expected,
            "{} counted {:?}, recount {:?}; pipeline {:?}",
            id,
            counted,
            expected,
            counters
        );
    }
    Ok(())
}

#[test]
fn random_histories_under_random_faults_count_exactly_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stack = runtime.block_on(TestStack::start());
    let mut runner = TestRunner::new(Config {
        cases: 8,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..Config::default()
    });
    let cases = AtomicU32::new(0);
    let result = runner.run(&prop::collection::vec(op(), 10..=40), |history| {
        let case = cases.fetch_add(1, Ordering::Relaxed);
        runtime.block_on(play(&stack, case, &history))
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
