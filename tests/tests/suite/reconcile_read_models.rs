//! Read models repaired from a run's export: the likers lists and the all-time leaderboard
//! brought back to the export's flips, without undoing a like given after the cut.

use likes_core::leaderboard::{Board, Window};
use std::collections::BTreeSet;
use std::time::Duration;

use likes_core::clock::now_ms;
use likes_core::likers::bucket_of;
use likes_core::ReactionState::{Like, None as Neutral};
use likes_reconcile::{ReconcileError, Step};
use likes_tests::{eventually, until, TestStack};

use crate::reconcile_support::reconcile;

/// The likers of `item`, newest first (one page: the test's items have a few).
async fn likers_of(stack: &TestStack, item: &str) -> Vec<String> {
    let page = stack.likers_page(item, "limit=100").await;
    assert_eq!(page["next_cursor"], serde_json::Value::Null, "{page}");
    likes_tests::liker_ids(&page)
}

/// The run repairs the likers lists from its export: a like whose event was lost is
/// listed, the likes an unlike and an erasure took back (their events lost) are not, nor are
/// the likes of rows erased long ago (one of a user who liked the item again since), and a
/// like given after the cut stays listed.
#[tokio::test]
async fn likers_lists_are_repaired_from_the_export_without_undoing_later_likes() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let item = "game:listed";
    for user in ["kept", "veteran", "unliked", "erased"] {
        stack.react(user, item, Like).await;
    }
    stack.settle_leaderboard().await;
    // Likes of rows erased a day ago whose erasures' events were lost: a user who has not
    // liked the item since, and one who has.
    let likers = likes_store::LikersStore::new(stack.dynamodb(), stack.name("LikersTable"));
    let day_ago = now_ms() - 86_400_000;
    for (user, liked_at_ms) in [("ghost", day_ago), ("veteran", day_ago + 1)] {
        let erased = likes_core::likers::LikerUpdate {
            item_id: likes_core::ItemId::parse(item).unwrap(),
            bucket: likes_core::likers::bucket_of(user),
            user_id: user.into(),
            row_created_ms: day_ago - 1,
            op_id: 1,
            change: likes_core::likers::LikerChange::Liked { liked_at_ms },
        };
        assert!(likers.apply(&erased).await.unwrap());
    }
    // Counting those likes a day ago listed their buckets.
    stack.list_likers_buckets(item, &["ghost", "veteran"]).await;
    // The log's consumer never applies the next events (their records expired): the lists
    // miss them.
    stack.react("lost", item, Like).await;
    stack.react("unliked", item, Neutral).await;
    stack.erase_row("erased", item).await;
    stack.settle_leaderboard().await;
    stack.lose_liker(item, "lost").await;
    stack.keep_liker(item, "unliked").await;
    stack.keep_liker(item, "erased").await;
    assert_eq!(
        likers_of(&stack, item).await,
        ["erased", "unliked", "veteran", "kept", "ghost"],
        "veteran is listed once, at the newest like"
    );

    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    stack.react("late", item, Like).await;
    stack.settle_leaderboard().await;

    // A run whose invocation is out of time by the repair stops it, reports so, and still
    // finishes; the lists are as they were.
    let reconciler = stack.reconciler();
    let hurried = loop {
        match reconciler
            .run_at(Some(cut), true, now_ms() - 60_000, &mut |_| {})
            .await
        {
            Ok(Step::Reconciled(report)) => break *report,
            Ok(_) | Err(ReconcileError::NotYetRestorable { .. }) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(err) => panic!("an invocation failed: {err}"),
        }
    };
    assert!(hurried.likers_incomplete, "{hurried:?}");
    assert_eq!(
        (hurried.likers_added, hurried.likers_removed),
        (0, 0),
        "{hurried:?}"
    );

    // Run again, with time: the cut's compare is opened again and the repair done.
    let report = reconcile(&stack, cut).await;
    assert!(!report.likers_incomplete, "{report:?}");
    assert_eq!(
        (
            report.likers_added,
            report.likers_removed,
            report.likers_unreadable
        ),
        (1, 4, 0),
        "{report:?}"
    );
    assert_eq!(
        likers_of(&stack, item).await,
        ["late", "lost", "veteran", "kept"]
    );

    let rerun = reconcile(&stack, cut).await;
    assert_eq!(
        (rerun.likers_added, rerun.likers_removed),
        (0, 0),
        "a rerun finds the lists repaired: {rerun:?}"
    );
}

/// Likes the aggregator never took (its count writes lost: neither counted nor their likers
/// buckets listed) are on no page, though their entries are written; the run that corrects
/// the item's count lists the buckets that hold its likes, and the repair of a like whose
/// entry was lost as well lists that like's bucket, so the page lists them all.
#[tokio::test]
async fn likes_the_counts_never_took_are_listed_once_a_run_corrects_the_count() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let item = "game:uncounted";
    let users = ["first", "second", "third"];
    let buckets: BTreeSet<u32> = users.iter().map(|user| bucket_of(user)).collect();
    assert_eq!(buckets.len(), users.len(), "each in a bucket of its own");
    for user in users {
        stack.react(user, item, Like).await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;
    let item_id = likes_core::ItemId::parse(item).unwrap();
    let counts = stack.counts_store();
    let counted = counts.read(&item_id).await.unwrap().like_count;
    assert_eq!(counted, users.len() as u64);
    assert_eq!(stack.uncount_likes(item).await, counted as i64);
    assert_eq!(counts.read(&item_id).await.unwrap().like_count, 0);
    assert_eq!(
        likers_of(&stack, item).await,
        Vec::<String>::new(),
        "no bucket of the item is listed"
    );

    // The likers event of one of them was lost too: the run lists its like again.
    stack.lose_liker(item, "first").await;

    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    let report = reconcile(&stack, cut).await;
    assert_eq!(report.items_corrected, 1, "{report:?}");
    assert_eq!(report.likers_added, 1, "{report:?}");
    assert_eq!(counts.read(&item_id).await.unwrap().like_count, counted);
    let newest_first: Vec<&str> = users.iter().rev().copied().collect();
    assert_eq!(likers_of(&stack, item).await, newest_first);
}

#[tokio::test]
async fn the_all_time_leaderboard_is_repaired_from_the_export_without_undoing_later_likes() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .refreshing_boards()
        .start()
        .await;
    let (steady, lost) = ("game:steady", "game:lost");
    for user in ["s1", "s2", "s3"] {
        stack.react(user, steady, Like).await;
    }
    stack.react("l1", lost, Like).await;
    stack.react("l2", lost, Like).await;
    stack.react("s3", steady, Neutral).await;
    stack.settle_leaderboard().await;
    // Events the board never applied (a log shard's batch failing until its records
    // expired): two likes of one item, an unlike of another, taken off their score rows as
    // if never added; the counts took them all.
    stack.edit_all_time_score(lost, -2).await;
    stack.edit_all_time_score(steady, 1).await;
    let store =
        likes_store::LeaderboardStore::new(stack.dynamodb(), stack.name("LeaderboardTable"));
    let read = async |board: &Board| store.board(board, 10).await.unwrap();
    let board = async || read(&Board::global(Window::All)).await;
    let scores = |board: &likes_store::BoardTop| -> Vec<(String, i64)> {
        board
            .entries
            .iter()
            .map(|e| (e.item_id.clone(), e.like_count))
            .collect()
    };

    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    // After the cut: a like the repair must not undo, and likes from many users of another
    // item, which move every log shard's progress (and so the board's `as_of`) past it.
    stack.react("late", lost, Like).await;
    for n in 0..40 {
        stack.react(&format!("crowd{n}"), "game:crowd", Like).await;
    }
    stack.settle_leaderboard().await;
    let passed = cut + stack.reconcile_period().uncertainty_ms;
    // The board missed the lost events.
    let missed = [
        ("game:crowd".to_owned(), 40),
        ("game:steady".to_owned(), 3),
        ("game:lost".to_owned(), 1),
    ];
    eventually(Duration::from_secs(30), async || {
        let before = board().await;
        if before.as_of_ms.is_some_and(|a| a >= passed) && scores(&before) == missed {
            return Ok(());
        }
        Err(format!("the board is not as expected: {before:?}"))
    })
    .await;

    let report = reconcile(&stack, cut).await;
    assert!(
        !report.leaderboard_behind && !report.leaderboard_incomplete,
        "{report:?}"
    );
    assert_eq!(
        (report.leaderboard_corrected, report.leaderboard_deferred),
        (2, 0),
        "{report:?}"
    );
    assert!(report.leaderboard_checked >= 3, "{report:?}");
    assert_eq!(
        scores(&board().await),
        [
            ("game:crowd".to_owned(), 40),
            ("game:lost".to_owned(), 3),
            ("game:steady".to_owned(), 2)
        ],
        "the board equals the recount, with the like after the cut"
    );
    assert_eq!(
        scores(&read(&Board::of_item(lost, Window::All)).await),
        scores(&board().await),
        "the namespace's board, which the global one ranks from, is repaired too"
    );

    let rerun = reconcile(&stack, cut).await;
    assert_eq!(
        rerun.leaderboard_corrected, 0,
        "a rerun finds the board repaired: {rerun:?}"
    );
}

/// A like whose count write was lost lost its bucket's listing too. When the item's count
/// comes out right anyway (a hand edit makes up for it), no correction lists the bucket; the
/// run still lists every bucket that holds a like in its export, so the liker shows on the
/// likers page again: recounted in the function, and judged in Athena.
#[tokio::test]
async fn a_like_in_an_unlisted_bucket_is_listed_though_the_count_is_right() {
    a_like_in_an_unlisted_bucket_is_listed_by("function").await;
}

#[tokio::test]
async fn a_like_in_an_unlisted_bucket_is_listed_though_the_count_is_right_in_athena() {
    a_like_in_an_unlisted_bucket_is_listed_by("athena").await;
}

async fn a_like_in_an_unlisted_bucket_is_listed_by(engine: &str) {
    let stack = TestStack::builder()
        .for_reconciliation(engine)
        .start()
        .await;
    let item = "game:unlisted";
    let users = ["first", "second"];
    for user in users {
        stack.react(user, item, Like).await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;
    // Its count writes lost (the likes taken off and their buckets unlisted), and the count
    // made up by hand: the drift nets to zero.
    assert_eq!(stack.uncount_likes(item).await, 2);
    stack.edit_count_row(item, "D#0", 2).await;
    let item_id = likes_core::ItemId::parse(item).unwrap();
    assert_eq!(
        stack
            .counts_store()
            .read(&item_id)
            .await
            .unwrap()
            .like_count,
        2
    );
    assert_eq!(likers_of(&stack, item).await, Vec::<String>::new());

    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    let report = reconcile(&stack, cut).await;
    assert_eq!(
        (report.items_drifted, report.likers_added),
        (0, 0),
        "{report:?}"
    );
    let buckets: BTreeSet<u32> = users.iter().map(|user| bucket_of(user)).collect();
    assert_eq!(
        report.likers_buckets_listed,
        buckets.len() as u64,
        "{report:?}"
    );
    assert_eq!(likers_of(&stack, item).await, ["second", "first"]);
    stack.assert_counts_match_recount(&[item]).await;
}
