//! A deployment's long life of faults and stalls, in compressed time, told as its phases:
//! events lost every way, reconciliation stalled for many horizons, a reshard and an
//! erasure, then a run whose export expires under it; at the end every read model equals a
//! recount and every row is within its bound.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::reconcile::Period;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::{DriftReport, Progress, ReconcileError, Reconciler, Step};
use likes_store::reconciliation::Phase;
use likes_store::LeaderboardStore;
use likes_tests::{eventually, until, TestStack};

use crate::capacity;
use crate::reconcile_support::{run_state, subtotal_epochs};

/// A deployment's life, in compressed time: epochs of a few seconds and a subtotal horizon
/// of three epochs, so the test's minute of stalled reconciliation is many horizons, as a
/// week is many 6-hour horizons. What the service never reads from its configuration (the
/// streams' 24 h, the export bucket's 7-day lifecycle) happens by its effect: a batch given
/// up to the dead-letter queue, events the board never applied, an export's files gone.
/// Through all of it, rows stay within their bound, and at the end the counts, the likers
/// lists and the all-time board equal a recount of the Reactions table, and the run's report
/// names every cut given up on the way.
#[tokio::test]
async fn a_long_life_of_faults_and_stalls_ends_exact_and_bounded_with_every_given_up_cut_named() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .refreshing_boards()
        .start()
        .await;
    let period = stack.reconcile_period();
    let horizon_ms = 3 * period.length_ms;
    let items = ["game:a", "game:b", "game:c", "game:busy", "game:crowd"];
    for u in 0..12 {
        let state = if u % 5 == 4 { Dislike } else { Like };
        stack.react(&format!("u{u}"), items[u % 3], state).await;
    }
    stack.settle().await;
    lose_events_every_way(&stack).await;
    let Stall {
        mut given_up,
        left_going,
    } = stall_for_many_horizons(&stack, period, horizon_ms).await;
    split_the_stream_and_erase_a_user(&stack, &items).await;

    // The first run that can complete: its export's files are gone before its compare ends
    // (as the bucket's lifecycle would expire them under a run waiting too long), so it
    // starts again from a new export.
    let scheduled = stack.reconciler();
    let cut = stack.next_cut(0);
    let all_time = LeaderboardStore::new(stack.dynamodb(), stack.name("LeaderboardTable"));
    move_the_board_past(&stack, &all_time, cut).await;
    // The operator's run finishes the run the stall left going first, with the real bucket
    // (or gives it up, past its deadline), and says so.
    let earlier = Mutex::new(Vec::new());
    let mut note = |progress| match progress {
        Progress::EarlierRunReconciled(report) => earlier.lock().unwrap().push(Ok(*report)),
        Progress::EarlierRunGivenUp { cut_ms, .. } => earlier.lock().unwrap().push(Err(cut_ms)),
        _ => {}
    };
    let (mut completed, expired_arn) =
        run_until_the_cut_pauses(&stack, &scheduled, cut, &mut note).await;
    expire_the_export(&stack, &expired_arn).await;
    let report = reconcile_from_a_new_export(&scheduled, cut, &mut note, &expired_arn).await;
    assert_eq!(report.unknown_state_rows, 1, "{report:?}");
    // An attempt that paused corrected the count it judged first; this one judges every
    // item again, from its own export.
    assert_eq!(report.items_checked, items.len() as u64, "{report:?}");
    completed.push(report);
    let earlier = earlier.into_inner().unwrap();
    assert_eq!(
        earlier
            .iter()
            .map(|run| run.as_ref().map_or_else(|cut| *cut, |report| report.cut_ms))
            .collect::<Vec<_>>(),
        [left_going],
        "the run the stall left going was finished first, and named"
    );
    for run in earlier.into_iter().rev() {
        match run {
            Ok(report) => completed.insert(0, report),
            Err(cut) => given_up.push(cut),
        }
    }
    assert_lost_events_repaired_and_given_up_cuts_named(&completed, &given_up);

    // At the end, every read model equals the Reactions table.
    assert_read_models_equal_the_reactions_table(&stack, &items, &all_time).await;
    // And the run left every row clean before its cut.
    for epoch in subtotal_epochs(&stack, "game:busy").await {
        assert!(
            epoch >= period.epoch(cut),
            "epoch {epoch} is before the cut"
        );
    }
    assert_rows_within_their_bounds(&stack, &["game:busy", "game:crowd"]).await;
}

/// Events lost every way a deployment loses them: a row the service never wrote, a count
/// batch given up to its dead-letter queue, likers entries and board events the log's
/// consumer never applied.
async fn lose_events_every_way(stack: &TestStack) {
    // A row the service never wrote, put behind the API.
    stack
        .put_reaction_row(
            "bot",
            "game:c",
            &[
                ("state", AttributeValue::S("LOVE".into())),
                ("op_id", AttributeValue::N("1".into())),
                ("updated_at", AttributeValue::N(now_ms().to_string())),
            ],
        )
        .await;
    // A count batch given up to the dead-letter queue (its records outlived the stream).
    let counts_faults = stack.pipeline().faults();
    counts_faults.age_records_by(Duration::from_secs(2 * 86_400));
    for u in 0..3 {
        stack.react(&format!("d{u}"), "game:a", Like).await;
    }
    assert!(stack.settle().await.dlq_batches >= 1);
    counts_faults.clear();
    // Likers entries the log never brought (their records expired): one like and one
    // unlike.
    stack.react("l0", "game:b", Like).await;
    stack.react("u1", "game:b", Neutral).await;
    stack.settle_leaderboard().await;
    stack.lose_liker("game:b", "l0").await;
    stack.keep_liker("game:b", "u1").await;
    // Events the board never applied (their log records expired): an unlike and two likes.
    stack.settle_leaderboard().await;
    stack.edit_all_time_score("game:b", 1).await;
    stack.edit_all_time_score("game:a", -2).await;
}

/// What a stall left behind: the cuts it gave up, and the cut of the run it left going.
struct Stall {
    given_up: Vec<i64>,
    left_going: i64,
}

/// Reconciliation stalls for many horizons (every export fails) while likes go on; the
/// scheduled invocations give cuts up and still prune: the busy item's rows hold no subtotal
/// older than the horizon. The stall ends with a run still going.
async fn stall_for_many_horizons(stack: &TestStack, period: Period, horizon_ms: i64) -> Stall {
    let horizon = (horizon_ms / 1000).to_string();
    let stalled = stack.reconciler_with(&[
        ("RECONCILE_HORIZON_SECONDS", &horizon),
        ("EXPORT_BUCKET", "likes-no-such-bucket"),
    ]);
    let stall_started = now_ms();
    let mut given_up = Vec::new();
    let mut last_invocation = stall_started;
    let mut user = 0;
    while now_ms() < stall_started + 3 * horizon_ms {
        for _ in 0..2 {
            stack.react(&format!("b{user}"), "game:busy", Like).await;
            user += 1;
        }
        last_invocation = now_ms();
        match stalled.advance(now_ms() + 2_000, &mut |_| {}).await {
            Err(ReconcileError::GivenUp { cut_ms, .. }) => given_up.push(cut_ms),
            Ok(Step::Reconciled(report)) => panic!("a stalled run completed: {report:?}"),
            Ok(_) | Err(_) => {}
        }
    }
    // The stall ends with a run still going: a new cut's export failed once.
    while run_state(stack)
        .state()
        .await
        .unwrap()
        .is_some_and(|run| run.phase == Phase::Done)
    {
        match stalled.advance(now_ms() + 2_000, &mut |_| {}).await {
            Err(ReconcileError::GivenUp { cut_ms, .. }) => given_up.push(cut_ms),
            // No new cut is due yet: wait for one instead of asking again at once.
            Ok(Step::Idle) => tokio::time::sleep(Duration::from_millis(200)).await,
            Ok(_) | Err(_) => {}
        }
    }
    let left_going = run_state(stack).state().await.unwrap().unwrap().cut_ms;
    assert!(given_up.len() >= 2, "cuts were given up: {given_up:?}");
    stack.settle().await;
    stack.settle_leaderboard().await;
    let oldest_kept = period.epoch(last_invocation - horizon_ms - horizon_ms / 2) - 1;
    for epoch in subtotal_epochs(stack, "game:busy").await {
        assert!(
            epoch >= oldest_kept,
            "epoch {epoch} outlived the horizon (oldest kept {oldest_kept})"
        );
    }
    Stall {
        given_up,
        left_going,
    }
}

/// The Reactions stream splits under traffic to `items`, and a user erases their account.
async fn split_the_stream_and_erase_a_user(stack: &TestStack, items: &[&str]) {
    stack.split_reactions_stream().await;
    for u in 0..4 {
        stack.react(&format!("v{u}"), items[u % 4], Like).await;
    }
    let erasure = stack
        .request("DELETE", "/v1/users/me/reactions", Some("u0"))
        .send()
        .await;
    erasure.assert_status(202);
    let id = erasure.json()["erasure_id"].as_str().unwrap().to_owned();
    stack
        .wait_for_erasure("u0", &id, Duration::from_secs(60))
        .await;
    stack.settle().await;
    stack.settle_events().await;
    stack.settle_leaderboard().await;
    stack.settle_leaderboard().await;
}

/// Waits until the pipeline is clear of `cut` and the all-time board's `as_of` has passed it.
async fn move_the_board_past(stack: &TestStack, all_time: &LeaderboardStore, cut: i64) {
    until(stack.clear_of(cut)).await;
    stack
        .wait_for_as_of(stack.clear_of(cut), Duration::from_secs(60))
        .await;
    // Likes from many users after the cut move every log shard's progress past it.
    for n in 0..40 {
        stack.react(&format!("crowd{n}"), "game:crowd", Like).await;
    }
    stack.settle_events().await;
    stack.settle_leaderboard().await;
    eventually(Duration::from_secs(30), async || {
        let as_of = all_time
            .board(
                &likes_core::leaderboard::Board::global(likes_core::leaderboard::Window::All),
                10,
            )
            .await
            .unwrap()
            .as_of_ms;
        match as_of.is_some_and(|a| a >= stack.clear_of(cut)) {
            true => Ok(()),
            false => Err(format!("the board's as_of {as_of:?} never passed the cut")),
        }
    })
    .await;
}

/// Runs `cut` with invocations out of time until its run pauses in its compare: returns the
/// runs of the cut that completed first, and the export the paused run compares.
async fn run_until_the_cut_pauses(
    stack: &TestStack,
    scheduled: &Reconciler,
    cut: i64,
    note: &mut (dyn FnMut(Progress) + Send),
) -> (Vec<DriftReport>, String) {
    // Every run of the cut that completes, in order: an invocation may finish one before
    // another pauses (then the operator's next run of the cut compares it again). The run
    // the stall left going may pause too, and how many attempts it has left depends on
    // where the stall ended: only a pause of this cut's run is the one whose export expires.
    let mut completed: Vec<DriftReport> = Vec::new();
    let paused = loop {
        match scheduled.run_at(Some(cut), true, now_ms(), note).await {
            Ok(step @ Step::Comparing { cut_ms, .. }) if cut_ms == cut => break step,
            Ok(Step::Reconciled(report)) => completed.push(*report),
            Ok(_) | Err(ReconcileError::NotYetRestorable { .. }) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(err) => panic!("an invocation failed: {err}"),
        }
    };
    let expired_arn = match run_state(stack).state().await.unwrap().unwrap().phase {
        Phase::Comparing { export_arn, .. } => export_arn,
        other => panic!("{paused:?} left the run {other:?}"),
    };
    (completed, expired_arn)
}

/// The export `export_arn` expires, as the bucket's lifecycle would expire it under a run
/// waiting too long: every object under its folder goes.
async fn expire_the_export(stack: &TestStack, export_arn: &str) {
    let s3 = likes_local::aws::s3_client(&stack.stack.aws.sdk);
    let bucket = stack
        .stack
        .function_environment("ReconcileFunction")
        .unwrap()["EXPORT_BUCKET"]
        .clone();
    let manifest = stack
        .dynamodb()
        .describe_export()
        .export_arn(export_arn)
        .send()
        .await
        .unwrap()
        .export_description
        .and_then(|d| d.export_manifest)
        .expect("the export's manifest");
    let folder = &manifest[..=manifest.rfind('/').expect("a folder")];
    let mut expired = 0;
    let mut pages = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix(folder)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for object in page.unwrap().contents() {
            s3.delete_object()
                .bucket(&bucket)
                .key(object.key().unwrap())
                .send()
                .await
                .unwrap();
            expired += 1;
        }
    }
    assert!(expired > 0, "the run left an export under {folder}");
}

/// Runs `cut` to its end, with time: an attempt fails on the expired export, and the cut is
/// reconciled from a new one.
async fn reconcile_from_a_new_export(
    scheduled: &Reconciler,
    cut: i64,
    note: &mut (dyn FnMut(Progress) + Send),
    expired_arn: &str,
) -> DriftReport {
    let mut failed = None;
    let report = loop {
        match scheduled
            .run_at(Some(cut), true, now_ms() + 60_000, note)
            .await
        {
            Ok(Step::Reconciled(report)) => break *report,
            Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(err) => {
                failed.get_or_insert(err);
            }
        }
    };
    assert!(
        matches!(failed, Some(ReconcileError::Missing { .. })),
        "the expired export failed an attempt: {failed:?}"
    );
    assert_ne!(
        report.export_arn, expired_arn,
        "the cut was reconciled from a new export"
    );
    report
}

/// The runs that completed repaired every lost likers and board event between them, and the
/// first names every cut given up.
fn assert_lost_events_repaired_and_given_up_cuts_named(
    completed: &[DriftReport],
    given_up: &[i64],
) {
    let total = |of: fn(&DriftReport) -> u64| completed.iter().map(of).sum::<u64>();
    assert_eq!(
        (total(|r| r.likers_added), total(|r| r.likers_removed)),
        (1, 1),
        "the lost likers events were repaired: {completed:?}"
    );
    assert_eq!(
        total(|r| r.leaderboard_corrected),
        2,
        "the lost board events were repaired: {completed:?}"
    );
    assert_eq!(
        completed[0]
            .cuts_given_up
            .iter()
            .map(|c| c.cut_ms)
            .collect::<Vec<_>>(),
        given_up,
        "the first completed run names every cut given up: {completed:?}"
    );
}

/// Every read model equals the Reactions table: the counts its recount, each likers list its
/// liked rows, the all-time board the ranking of the recount.
async fn assert_read_models_equal_the_reactions_table(
    stack: &TestStack,
    items: &[&str],
    all_time: &LeaderboardStore,
) {
    stack.settle().await;
    let recount = stack.assert_counts_match_recount(items).await;
    for &item in items {
        let users = |likers: Vec<(String, String)>| -> BTreeSet<String> {
            likers.into_iter().map(|(user, _)| user).collect()
        };
        assert_eq!(
            users(stack.all_likers(item, 100).await),
            users(stack.liked_rows(item).await),
            "the likers of {item}"
        );
    }
    let expected = likes_core::leaderboard::rank(
        recount
            .iter()
            .map(|(item, counts)| likes_core::leaderboard::Entry {
                item_id: item.clone(),
                like_count: counts.like_count as i64,
            })
            .collect(),
        10,
    );
    eventually(Duration::from_secs(30), async || {
        let board = all_time
            .board(
                &likes_core::leaderboard::Board::global(likes_core::leaderboard::Window::All),
                10,
            )
            .await
            .unwrap();
        if board.entries == expected {
            return Ok(());
        }
        Err(format!("the board {board:?}, the recount {expected:?}"))
    })
    .await;
}

/// Every row within the bound docs/architecture.md states for it: a reaction row and the count
/// rows of an item that is not `busy` under 1 KB (one write unit a write), a busy item's count
/// rows and any score row under 8 KB, a likers entry under 1 KB, the run state under 100 KB.
async fn assert_rows_within_their_bounds(stack: &TestStack, busy: &[&str]) {
    let text = |row: &likes_store::rows::Item, name: &str| match row.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        other => panic!("{name} is {other:?} in {row:?}"),
    };
    let within = |table: &str, row: &likes_store::rows::Item, bound: usize| {
        let size = capacity::item_size(row);
        assert!(
            size < bound,
            "a {table} row of {size} B, over {bound} B: {row:?}"
        );
    };
    for row in stack.rows("ReactionsTable").await {
        within("Reactions", &row, 1024);
    }
    for row in stack.rows("CountsTable").await {
        let item = text(&row, "item_id");
        let base = item.split('#').next().unwrap_or_default();
        let bound = match item.as_str() {
            "#reconcile" => 100 * 1024,
            _ if busy.contains(&base) => 8 * 1024,
            _ => 1024,
        };
        within("Counts", &row, bound);
    }
    for row in stack.rows("LikersTable").await {
        within("Likers", &row, 1024);
    }
    for row in stack.rows("LeaderboardTable").await {
        let board = text(&row, "board");
        if board.starts_with("all#") || board.starts_with("day#") {
            within("Leaderboard score", &row, 8 * 1024);
        }
    }
}
