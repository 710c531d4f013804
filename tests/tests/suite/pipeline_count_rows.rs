//! What a count row and an all-time score row keep for reconciliation, written through
//! their consumers' own writers: no subtotal for the epoch they were first written in, so a
//! row whose changes all fell in one epoch leaves the cleaning pass nothing to drop; and
//! changes a lagging shard brings from before that epoch go to the item's correction row
//! (a count's) or are summed on the row (a score's), once, however often they are retried.

use likes_core::leaderboard::{ScoreDelta, Window};
use likes_core::pipeline::{CountTarget, Counts, Lane, RowDelta};
use likes_core::reconcile::{judge, Verdict};
use likes_core::{Delta, ItemId};
use likes_store::reconciliation::{reconciled_attributes, ReconciliationStore};
use likes_store::{CountIntent, CountsWriter, LeaderboardStore};
use likes_tests::TestStack;

fn likes(like: i64) -> Delta {
    Delta { like, dislike: 0 }
}

/// One row's delta: likes by epoch, and changes near cuts.
fn delta(by_epoch: &[(i64, i64)], near_cuts: &[(i64, u64)]) -> RowDelta {
    RowDelta {
        total: likes(by_epoch.iter().map(|(_, n)| n).sum()),
        by_epoch: by_epoch.iter().map(|(e, n)| (*e, likes(*n))).collect(),
        near_cuts: near_cuts.iter().copied().collect(),
        liked_buckets: Default::default(),
    }
}

fn intent(n: i64, deltas: Vec<(CountTarget, RowDelta)>) -> CountIntent {
    CountIntent {
        n,
        last_seq: format!("{n:020}"),
        stream_time_ms: 0,
        probe_key: None,
        deltas: deltas.into_iter().collect(),
    }
}

fn recount(like_count: u64) -> Counts {
    Counts {
        like_count,
        dislike_count: 0,
    }
}

#[tokio::test]
async fn a_row_keeps_no_subtotal_for_its_first_epoch_and_older_changes_go_to_the_correction_row() {
    let stack = TestStack::builder().start().await;
    let table = stack.name("CountsTable");
    let writer = CountsWriter::new(stack.dynamodb(), &table);
    let reconciliation = ReconciliationStore::new(stack.dynamodb(), &table);
    let shared = ItemId::parse("game:shared").unwrap();
    let cold = ItemId::parse("game:cold").unwrap();
    let row_of = |item: &ItemId| CountTarget {
        item: item.clone(),
        lane: Lane::Base,
        row: 3,
    };

    // Shard a is first on both rows, in epoch 10: 2 likes on one item, 1 on the other.
    let first = intent(
        1,
        vec![
            (row_of(&shared), delta(&[(10, 2)], &[])),
            (row_of(&cold), delta(&[(10, 1)], &[])),
        ],
    );
    assert_eq!(writer.apply("shard-a", &first, 1).await.unwrap(), 2);
    // Shard b lags, in a container that knows neither row: its chunk for the same row holds
    // a like from epoch 9, one from 10 and one from 11, near cut 11; and a new item's like.
    let new = ItemId::parse("game:zz-new").unwrap();
    let late = intent(
        7,
        vec![
            (
                row_of(&shared),
                delta(&[(9, 1), (10, 1), (11, 1)], &[(11, 1)]),
            ),
            (row_of(&new), delta(&[(11, 1)], &[])),
        ],
    );
    let lagging = CountsWriter::new(stack.dynamodb(), &table);
    assert_eq!(lagging.apply("shard-b", &late, 2).await.unwrap(), 2);
    // Retried by the same container, and by a new one that knows nothing of the rows.
    assert_eq!(lagging.apply("shard-b", &late, 3).await.unwrap(), 0);
    let fresh = CountsWriter::new(stack.dynamodb(), &table);
    assert_eq!(fresh.apply("shard-b", &late, 4).await.unwrap(), 0);
    assert_eq!(fresh.apply("shard-a", &first, 5).await.unwrap(), 0);

    let rows = reconciliation.item_rows(&shared).await.unwrap();
    assert_eq!(rows.len(), 2, "the row and the correction row: {rows:?}");
    let (row, correction): (Vec<_>, Vec<_>) =
        rows.iter().partition(|row| row.first_epoch.is_some());
    let (row, correction) = (row[0], correction[0]);
    assert_eq!(row.first_epoch, Some(10), "{row:?}");
    assert_eq!(row.total, likes(4), "{row:?}");
    assert_eq!(
        row.subtotals,
        [(11, likes(1))].into(),
        "a subtotal only for the epoch after its first: {row:?}"
    );
    assert!(row.near_cuts.is_empty(), "{row:?}");
    assert_eq!(
        row.first_near_cuts,
        [0, 1],
        "the change near the cut closing its first epoch: {row:?}"
    );
    assert_eq!(correction.total, likes(1), "{correction:?}");
    assert_eq!(
        correction.subtotals,
        [(9, likes(1))].into(),
        "{correction:?}"
    );
    // Counted once each: 5 likes, 1 before cut 10, 4 before cut 11 (deferred: a change
    // near it), 5 before 12.
    assert_eq!(
        stack.counts_store().read(&shared).await.unwrap(),
        recount(5)
    );
    assert_eq!(judge(recount(1), &rows, 10), Verdict::InSync);
    assert_eq!(judge(recount(4), &rows, 11), Verdict::Deferred);
    assert_eq!(judge(recount(5), &rows, 12), Verdict::InSync);
    assert_eq!(
        judge(recount(2), &rows, 10),
        Verdict::Correct(likes(1)),
        "the judge can still see a drift before the row's first epoch"
    );

    let new_rows = reconciliation.item_rows(&new).await.unwrap();
    assert_eq!(new_rows.len(), 1, "only its own row: {new_rows:?}");
    assert_eq!(new_rows[0].total, likes(1), "{new_rows:?}");

    // The cold row: one epoch's changes, no subtotal, nothing for a cleaning pass to drop.
    let cold_rows = reconciliation.item_rows(&cold).await.unwrap();
    assert_eq!(cold_rows.len(), 1, "{cold_rows:?}");
    assert!(cold_rows[0].subtotals.is_empty(), "{cold_rows:?}");
    assert_eq!(judge(recount(0), &cold_rows, 10), Verdict::InSync);
    assert_eq!(judge(recount(1), &cold_rows, 11), Verdict::InSync);
    assert!(
        reconciled_attributes(&cold_rows[0], 11).is_empty(),
        "{cold_rows:?}"
    );
    assert_eq!(
        reconciled_attributes(row, 12),
        ["e11l", "e11d"].map(String::from),
        "{row:?}"
    );
}

/// The same for an all-time score row, which must hold the whole score: likes a lagging log
/// shard brings from before its first epoch, and a correction attributed to an epoch before
/// it, get their subtotals there and are summed (`bfl`), so a cut at or before the first
/// epoch still knows what was applied before it after the cleaning drops those subtotals.
#[tokio::test]
async fn an_all_time_score_row_keeps_no_subtotal_for_its_first_epoch_and_sums_what_came_before() {
    let stack = TestStack::builder().start().await;
    let board = LeaderboardStore::new(stack.dynamodb(), stack.name("LeaderboardTable"))
        .with_board_shards(4);
    let score = |by_epoch: &[(i64, i64)]| ScoreDelta {
        total: by_epoch.iter().map(|(_, n)| n).sum(),
        by_epoch: by_epoch.iter().copied().collect(),
        near_cuts: Default::default(),
    };
    let apply = |shard: &'static str, by_epoch: Vec<(i64, i64)>| {
        let board = board.clone();
        async move {
            let deltas = [((Window::All, "game:ranked".to_owned()), score(&by_epoch))].into();
            let intent = board.begin(shard, 1, &deltas, "1", 0).await.unwrap();
            board
                .complete(shard, &intent, None, &mut Default::default())
                .await
                .unwrap();
        }
    };
    apply("shard-a", vec![(10, 2)]).await;
    apply("shard-b", vec![(9, 1), (10, 1)]).await;
    assert!(board.correct_all_time("game:ranked", 2, 10).await.unwrap());
    assert!(
        !board.correct_all_time("game:ranked", 2, 10).await.unwrap(),
        "a correction at a cut is made once"
    );

    let row = board.all_time_row("game:ranked").await.unwrap().unwrap();
    assert_eq!(row.first_epoch, Some(10), "{row:?}");
    assert_eq!(row.total, likes(6), "{row:?}");
    assert_eq!(row.subtotals, [(9, likes(3))].into(), "{row:?}");
    assert_eq!(row.before_first, likes(3), "{row:?}");
    assert_eq!(
        judge(recount(3), std::slice::from_ref(&row), 10),
        Verdict::InSync
    );
    assert_eq!(
        judge(recount(6), std::slice::from_ref(&row), 11),
        Verdict::InSync
    );
    // Once the cleaning pass has dropped the subtotal of epoch 9, cut 10 still adds up.
    let mut cleaned = row.clone();
    cleaned.subtotals.clear();
    assert_eq!(
        reconciled_attributes(&row, 10),
        ["e9l", "e9d"].map(String::from),
        "{row:?}"
    );
    assert_eq!(judge(recount(3), &[cleaned.clone()], 10), Verdict::InSync);
    assert_eq!(judge(recount(6), &[cleaned], 11), Verdict::InSync);
}
