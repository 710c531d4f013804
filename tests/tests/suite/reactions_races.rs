//! The reactions store against the emulator under racing writers: one winner of a row's
//! conditional write, and a gap-free chain of versions from many concurrent writers.

use likes_core::ReactionState::{self, Like, None as Neutral};
use likes_core::WriteOutcome;
use likes_store::ReactionsStore;

use crate::reactions_store::{item, keyed, user, Fixture};

/// Sixteen writers, each with its own client (connection), released together by a barrier,
/// race the same conditional write on a row, on many fresh rows: each row must have exactly
/// one winner. Against stock `moto_server` (no global lock) some rows get two, which is why
/// the emulator serializes requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_racing_likes_on_one_row_have_exactly_one_winner() {
    let f = Fixture::new().await;
    let u = user("racer");
    let writers: Vec<ReactionsStore> = (0..16)
        .map(|_| ReactionsStore::new(f.stack.dynamodb(), f.store.table()))
        .collect();
    for round in 0..24 {
        let i = item(&format!("game:race-{round}"));
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(writers.len()));
        let writes = writers.iter().enumerate().map(|(n, store)| {
            let (store, start) = (store.clone(), start.clone());
            let (u, i) = (u.clone(), i.clone());
            tokio::spawn(async move {
                start.wait().await;
                store
                    .set(&u, &i, &keyed(Like, &format!("k{n}")), 1_000)
                    .await
            })
        });
        let mut winners = 0;
        for write in writes.collect::<Vec<_>>() {
            let outcome = write.await.unwrap().unwrap();
            if matches!(outcome, WriteOutcome::Applied(_)) {
                winners += 1;
            }
        }
        assert_eq!(
            winners, 1,
            "row {round}: one conditional write wins, the others see LIKE"
        );
        assert_eq!(f.store.get(&u, &i).await.unwrap().version, 1, "row {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_writers_leave_a_gap_free_op_id_sequence() {
    let f = Fixture::new().await;
    let (u, i) = (user("busy"), item("game:busy"));
    let writers = (0..16).map(|writer| {
        let store = f.store.clone();
        let (u, i) = (u.clone(), i.clone());
        tokio::spawn(async move {
            let mut applied = Vec::new();
            for n in 0..6 {
                let target = ReactionState::ALL[(writer + n) % 3];
                let outcome = store
                    .set(&u, &i, &keyed(target, &format!("w{writer}-{n}")), 1_000)
                    .await
                    .unwrap();
                if let WriteOutcome::Applied(change) = outcome {
                    applied.push((change.version, change.previous_state, change.state));
                }
            }
            applied
        })
    });
    let mut applied = Vec::new();
    for writer in writers {
        applied.extend(writer.await.unwrap());
    }
    applied.sort_by_key(|(version, _, _)| *version);
    let final_row = f.store.get(&u, &i).await.unwrap();
    let versions: Vec<u64> = applied.iter().map(|(v, _, _)| *v).collect();
    assert_eq!(versions, (1..=final_row.version).collect::<Vec<_>>());
    // Each flip starts from the state the previous one left: a chain with no lost update.
    let mut state = Neutral;
    for (version, previous, next) in &applied {
        assert_eq!(
            *previous,
            state,
            "flip {version} starts where {} ended",
            version - 1
        );
        state = *next;
    }
    assert_eq!(final_row.state, state);
}
