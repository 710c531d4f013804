//! A hot item costs O(batches), not O(events), count writes (docs/architecture.md). Thousands of
//! distinct users like one item at once; the count comes out exact, and the count rows were
//! written once per committed chunk (one ADD of the chunk's summed delta), not once per like.
//! The stream's shards are held while the likes are written, so the batches the mapping
//! then delivers are as full as AWS's would be at that rate, however slowly this machine
//! writes them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use likes_core::clock::now_ms;
use likes_core::pipeline::Counts;
use likes_core::{IdempotencyKey, ItemId, ReactionState, UserId, WriteRequest};
use likes_tests::TestStack;
use tokio::task::JoinSet;

const USERS: usize = 2_000;
const WRITERS: usize = 16;
const HOT: &str = "experience:viral";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_item_is_counted_exactly_with_count_writes_per_batch_not_per_like() {
    let stack = TestStack::builder().as_deployed().start().await;
    let faults = stack.pipeline().faults();
    let shards = stack.pipeline().virtual_shards();
    for shard in 0..shards {
        faults.stall_shard(shard);
    }
    let store = stack.reactions_store();
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = JoinSet::new();
    for _ in 0..WRITERS {
        let (store, next) = (store.clone(), next.clone());
        writers.spawn(async move {
            let item = ItemId::parse(HOT).unwrap();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= USERS {
                    return;
                }
                let request = WriteRequest {
                    target: ReactionState::Like,
                    key: Some(IdempotencyKey::parse(&format!("hot-{n}")).unwrap().hash()),
                    if_match: None,
                };
                let user = UserId::parse(&format!("fan-{n}")).unwrap();
                store
                    .set(&user, &item, &request, now_ms())
                    .await
                    .expect("a like is written");
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.expect("writer task");
    }
    for shard in 0..shards {
        faults.resume_shard(shard);
    }
    let counters = stack
        .pipeline()
        .settle(Duration::from_secs(120))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let counted = stack
        .counts_store()
        .read(&ItemId::parse(HOT).unwrap())
        .await
        .unwrap();
    assert_eq!(
        counted,
        Counts {
            like_count: USERS as u64,
            dislike_count: 0
        }
    );
    stack.assert_counts_match_recount(&[HOT]).await;
    // One count-row ADD per intent at most (all of a chunk's likes summed), a chunk
    // per batch here (one item, at most CHUNK_RECORDS records): writes follow batches.
    let chunk_records: u64 = stack.pipeline().config().environment["CHUNK_RECORDS"]
        .parse()
        .unwrap();
    println!("hot item: {USERS} likes, chunks of {chunk_records}, {counters:?}");
    assert!(
        counters.count_row_writes <= counters.intents_written,
        "{counters:?}"
    );
    assert!(
        counters.count_row_writes <= counters.invocations,
        "at most one count-row write per batch: {counters:?}"
    );
    assert!(
        counters.count_row_writes >= (USERS as u64).div_ceil(chunk_records),
        "the likes were counted in chunks: {counters:?}"
    );
    assert!(
        counters.count_row_writes * 10 <= USERS as u64,
        "count writes grow with batches, not likes: {counters:?}"
    );
}
