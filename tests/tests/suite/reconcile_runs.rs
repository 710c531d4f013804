//! Reconciliation end to end against the emulator: real exports at a cut, the real pipeline
//! applying flips before, during and after it, drift injected the ways it happens (a count
//! row edited by hand, a batch skipped to the dead-letter queue, a record the aggregator
//! cannot read), and the counts brought back to a recount without ever losing a flip
//! applied after the cut.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::{DriftReport, Progress, ReconcileError, Step, MAX_ATTEMPTS};
use likes_store::reconciliation::{Phase, ReconciliationStore};
use likes_tests::{eventually, until, TestStack};

use crate::capacity;

fn run_state(stack: &TestStack) -> ReconciliationStore {
    ReconciliationStore::new(stack.dynamodb(), stack.name("CountsTable"))
}

/// Runs reconciliation at the cut `at_ms` to the end (at most a minute).
async fn reconcile(stack: &TestStack, at_ms: i64) -> DriftReport {
    let deadline = now_ms() + 60_000;
    match stack
        .reconciler()
        .run_at(Some(at_ms), true, deadline, &mut |_| {})
        .await
        .expect("the run finishes")
    {
        Step::Reconciled(report) => *report,
        other => panic!("the run stopped at {other:?}"),
    }
}

/// Reconciles the first cut clear of every write so far, once it is clear.
async fn reconcile_next(stack: &TestStack) -> DriftReport {
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    reconcile(stack, cut).await
}

#[tokio::test]
async fn no_drift_means_no_corrections_while_reactions_keep_flowing() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let items = ["game:r1", "game:r2", "game:r3"];
    for u in 0..12 {
        stack.react(&format!("a{u}"), items[u % 3], Like).await;
        if u % 4 == 0 {
            stack.react(&format!("a{u}"), items[u % 3], Dislike).await;
        }
    }
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    // Flips after the cut, before and while the run compares.
    for u in 0..6 {
        stack.react(&format!("b{u}"), items[u % 3], Like).await;
    }
    let (report, ()) = tokio::join!(reconcile(&stack, cut), async {
        for u in 0..6 {
            stack.react(&format!("c{u}"), items[u % 3], Like).await;
            stack.react(&format!("a{u}"), items[u % 3], Neutral).await;
        }
    });
    assert_eq!(report.items_checked, 3, "{report:?}");
    assert_eq!(
        (
            report.items_drifted,
            report.items_corrected,
            report.items_deferred
        ),
        (0, 0, 0),
        "{report:?}"
    );
    assert!(report.rows_read >= 12, "{report:?}");
    stack.settle().await;
    stack.assert_counts_match_recount(&items).await;
}

#[tokio::test]
async fn drift_of_every_kind_is_corrected_once_and_a_rerun_changes_nothing() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let (edited, skipped, poisoned) = ("game:edited", "game:skipped", "game:poisoned");
    for u in 0..4 {
        stack.react(&format!("u{u}"), edited, Like).await;
    }
    stack.settle().await;
    // 1. A count row edited by hand: five likes nobody gave.
    stack.edit_count_row(edited, "D#0", 5).await;
    // 2. A batch the mapping gives up on: its records are too old, so it goes to the DLQ.
    let faults = stack.pipeline().faults();
    faults.age_records_by(Duration::from_secs(2 * 86_400));
    for u in 0..3 {
        stack.react(&format!("s{u}"), skipped, Like).await;
    }
    let counters = stack.settle().await;
    assert!(
        counters.dlq_batches >= 1,
        "the batch was skipped: {counters:?}"
    );
    faults.clear();
    // 3. A row the aggregator cannot read (op_id is no number): counted as no change.
    stack
        .put_reaction_row(
            "p0",
            poisoned,
            &[
                ("state", AttributeValue::S("LIKE".into())),
                ("op_id", AttributeValue::S("one".into())),
                ("updated_at", AttributeValue::N(now_ms().to_string())),
            ],
        )
        .await;
    stack.settle().await;
    // The edited item's correction row as an older layout wrote it: every run in a set.
    stack
        .dynamodb()
        .put_item()
        .table_name(stack.name("CountsTable"))
        .item("item_id", AttributeValue::S(edited.into()))
        .item("shard", AttributeValue::S("D#C".into()))
        .item("like_count", AttributeValue::N("0".into()))
        .item("dislike_count", AttributeValue::N("0".into()))
        .item("runs", AttributeValue::Ss(vec!["cut-1000".into()]))
        .send()
        .await
        .unwrap();
    let drifted = [edited, skipped, poisoned];
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    // After the cut: a like on each item, which no correction may overwrite.
    for item in drifted {
        stack.react("late", item, Like).await;
    }

    let report = reconcile(&stack, cut).await;
    assert_eq!(
        (
            report.items_drifted,
            report.items_corrected,
            report.items_clamped
        ),
        (3, 3, 0),
        "{report:?}"
    );
    let mut largest: Vec<(&str, i64)> = report
        .largest_drifts
        .iter()
        .map(|d| (d.item_id.as_str(), d.like_drift))
        .collect();
    largest.sort();
    assert_eq!(largest, [(edited, -5), (poisoned, 1), (skipped, 3)]);
    assert_eq!(report.correction_abs_sum, 9);
    stack.settle().await;
    let recount = stack.assert_counts_match_recount(&drifted).await;
    assert_eq!(
        recount[skipped].like_count, 4,
        "3 skipped + 1 after the cut"
    );

    let correction = stack
        .dynamodb()
        .get_item()
        .table_name(stack.name("CountsTable"))
        .key("item_id", AttributeValue::S(edited.into()))
        .key("shard", AttributeValue::S("D#C".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert!(
        correction.contains_key("last_cut") && !correction.contains_key("runs"),
        "the older layout's row moved to one number: {correction:?}"
    );

    let rerun = reconcile(&stack, cut).await;
    assert_eq!(
        (rerun.items_drifted, rerun.items_corrected),
        (0, 0),
        "the corrections are part of what was applied before the cut now: {rerun:?}"
    );
    stack.assert_counts_match_recount(&drifted).await;
}

/// A compare too big for one invocation pauses at its deadline and the next invocation goes
/// on after the last item judged: every item is judged once over the invocations, each
/// drift corrected once, and the report adds up all of them.
#[tokio::test]
async fn a_compare_out_of_time_pauses_and_the_next_invocation_goes_on_from_there() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let items: Vec<String> = (0..6).map(|n| format!("game:paused-{n}")).collect();
    for item in &items {
        stack.react("u", item, Like).await;
    }
    stack.settle().await;
    for (n, item) in items.iter().enumerate() {
        stack.edit_count_row(item, "D#0", n as i64 + 1).await;
    }
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;

    // Invocations whose deadline has passed: each takes the run one step, and a compare
    // judges one item (every invocation makes progress) before it pauses.
    let reconciler = stack.reconciler();
    let mut paused_at = Vec::new();
    let give_up_at = now_ms() + 120_000;
    let report = loop {
        assert!(now_ms() < give_up_at, "paused at {paused_at:?}");
        match reconciler
            .run_at(Some(cut), true, now_ms(), &mut |_| {})
            .await
        {
            Ok(Step::Reconciled(report)) => break *report,
            Ok(Step::Comparing {
                items_done,
                items_total,
                ..
            }) => {
                assert_eq!(items_total, items.len() as u64);
                paused_at.push(items_done);
            }
            Ok(_) | Err(ReconcileError::NotYetRestorable { .. }) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(err) => panic!("an invocation failed: {err}"),
        }
    };
    let judged: Vec<u64> = (1..items.len() as u64).collect();
    assert_eq!(paused_at, judged, "one more item judged by each invocation");
    assert_eq!(
        (
            report.items_checked,
            report.items_drifted,
            report.items_corrected,
            report.items_already_corrected
        ),
        (6, 6, 6, 0),
        "{report:?}"
    );
    assert_eq!(report.correction_abs_sum, (1..=6).sum::<u64>());
    let state = run_state(&stack).state().await.unwrap().unwrap();
    assert_eq!(
        (state.phase, state.paused, state.leases),
        (Phase::Done, None, 1),
        "the finished run keeps no checkpoint"
    );
    stack
        .assert_counts_match_recount(&items.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
}

#[tokio::test]
async fn an_item_with_flips_near_the_cut_is_deferred_then_fixed_by_the_next_run() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let item = "game:near";
    // Drift: a row the aggregator cannot read.
    stack
        .put_reaction_row(
            "p0",
            item,
            &[("state", AttributeValue::S("DISLIKE".into()))],
        )
        .await;
    let period = stack.reconcile_period();
    let cut = stack.next_cut(500);
    // A like inside the cut's uncertainty: the run cannot tell which side it fell on.
    until(cut - period.uncertainty_ms / 2).await;
    stack.react("near", item, Like).await;
    until(stack.clear_of(cut)).await;
    let first = reconcile(&stack, cut).await;
    assert_eq!(
        (first.items_deferred, first.items_corrected),
        (1, 0),
        "{first:?}"
    );
    // A rerun of the cut is just as uncertain about it: its cleanup kept what says so.
    let rerun = reconcile(&stack, cut).await;
    assert_eq!(
        (rerun.items_deferred, rerun.items_corrected),
        (1, 0),
        "{rerun:?}"
    );

    let second = reconcile_next(&stack).await;
    assert_eq!(
        (second.items_deferred, second.items_corrected),
        (0, 1),
        "{second:?}"
    );
    stack.settle().await;
    let recount = stack.assert_counts_match_recount(&[item]).await;
    assert_eq!(
        (recount[item].like_count, recount[item].dislike_count),
        (1, 1)
    );
}

/// A cut the table's recovery window does not reach (a stack younger than it) cannot be
/// exported: the run is given up with a clear error, and the next cut runs as usual.
#[tokio::test]
async fn a_cut_before_the_table_existed_is_given_up_and_blocks_nothing() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let before = now_ms() - 60_000;
    let err = stack
        .reconciler()
        .run_at(Some(before), true, now_ms() + 60_000, &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            likes_reconcile::ReconcileError::CutNotExportable { .. }
        ),
        "{err}"
    );
    stack.react("after", "game:after", Like).await;
    let report = reconcile_next(&stack).await;
    assert_eq!(
        (report.items_checked, report.items_drifted),
        (1, 0),
        "{report:?}"
    );
}

/// A reaction row the service never wrote (a state put behind the API) never stops a run:
/// it recounts as no change, as the aggregator counted it, and the report names it; the
/// drift beside it is corrected, and the next run succeeds too.
#[tokio::test]
async fn a_row_in_an_unknown_state_counts_as_no_change_and_every_later_run_succeeds() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let item = "game:love";
    for u in 0..3 {
        stack.react(&format!("u{u}"), item, Like).await;
    }
    stack.settle().await;
    // An under-count beside it: one like taken off by hand.
    stack.edit_count_row(item, "D#0", -1).await;
    stack
        .put_reaction_row(
            "bot",
            item,
            &[
                ("state", AttributeValue::S("LOVE".into())),
                ("op_id", AttributeValue::N("1".into())),
                ("updated_at", AttributeValue::N(now_ms().to_string())),
            ],
        )
        .await;
    stack.settle().await;
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;

    let report = reconcile(&stack, cut).await;
    assert_eq!(report.unknown_state_rows, 1, "{report:?}");
    assert_eq!(
        (
            report.unknown_states[0].user_id.as_deref(),
            report.unknown_states[0].state.as_deref()
        ),
        (Some("bot"), Some("LOVE"))
    );
    assert_eq!(
        (report.items_corrected, report.largest_drifts[0].like_drift),
        (1, 1),
        "{report:?}"
    );
    stack.settle().await;
    let recount = stack.assert_counts_match_recount(&[item]).await;
    assert_eq!(recount[item].like_count, 3);

    let later = reconcile_next(&stack).await;
    assert_eq!(
        (later.unknown_state_rows, later.items_drifted),
        (1, 0),
        "{later:?}"
    );
}

/// A stack younger than point-in-time recovery's lag has no cut an export can serve: the
/// operator's run says when one will be and writes nothing; waiting for it succeeds.
#[tokio::test]
async fn no_cut_is_served_before_recovery_reaches_one_and_nothing_is_left_behind() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    // Day-long epochs: the first cut inside the table's recovery window is hours away.
    let daily = stack.reconciler_with(&[("RECONCILE_EPOCH_SECONDS", "86400")]);
    let err = daily
        .run_at(None, false, now_ms() + 60_000, &mut |_| {})
        .await
        .unwrap_err();
    let ReconcileError::NotYetRestorable {
        cut_ms,
        servable_at_ms,
    } = err
    else {
        panic!("{err}")
    };
    assert!(cut_ms > now_ms() && servable_at_ms > cut_ms, "{err}");
    assert!(
        err.to_string().starts_with("no cut can be exported yet"),
        "{err}"
    );
    assert_eq!(
        run_state(&stack).state().await.unwrap(),
        None,
        "a refused run leaves nothing behind"
    );

    // With the stack's short epochs, waiting reaches the first servable cut.
    stack.react("first", "game:first", Like).await;
    let step = stack
        .reconciler()
        .run_at(None, true, now_ms() + 60_000, &mut |_| {})
        .await
        .expect("the first servable cut is reconciled");
    let Step::Reconciled(report) = step else {
        panic!("the run stopped at {step:?}")
    };
    assert!(report.cut_ms <= stack.latest_restorable_ms().await);
}

/// An export that fails every attempt gives its cut up, with why, after a bounded number of
/// attempts; the cut can be run again, and the next cut proceeds.
#[tokio::test]
async fn an_export_that_fails_every_attempt_gives_the_cut_up_and_the_next_cut_proceeds() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let item = "game:given-up";
    stack.react("u0", item, Like).await;
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    // DynamoDB fails an export whose bucket it cannot write.
    let broken = stack.reconciler_with(&[("EXPORT_BUCKET", "likes-no-such-bucket")]);
    let mut errors = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        errors.push(
            broken
                .run_at(Some(cut), true, now_ms() + 60_000, &mut |_| {})
                .await
                .unwrap_err(),
        );
    }
    assert!(
        matches!(errors[0], ReconcileError::ExportFailed { .. }),
        "{}",
        errors[0]
    );
    let last = errors.last().unwrap();
    assert!(
        matches!(last, ReconcileError::GivenUp { cut_ms, .. } if *cut_ms == cut),
        "{last}"
    );
    let state = run_state(&stack).state().await.unwrap().unwrap();
    assert_eq!((state.cut_ms, &state.phase), (cut, &Phase::Done));
    assert!(state.abandoned.is_some(), "{state:?}");

    // The operator runs the given-up cut again, and it is reconciled from a new export.
    let again = reconcile(&stack, cut).await;
    assert_eq!(
        (again.items_checked, again.items_drifted),
        (1, 0),
        "{again:?}"
    );
    let later = reconcile_next(&stack).await;
    assert_eq!(
        (later.items_checked, later.items_drifted),
        (1, 0),
        "{later:?}"
    );
}

/// While no run completes (every export fails), the count rows of a busy item still hold no
/// subtotal older than the horizon: the scheduled invocations prune them on their own, and the
/// next run that completes finds the counts exact.
/// Count rows and all-time score rows alike.
#[tokio::test]
async fn count_rows_stay_within_the_horizon_while_no_run_completes() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let period = stack.reconcile_period();
    let horizon_ms = 4 * period.length_ms;
    let horizon = (horizon_ms / 1000).to_string();
    let stalled = stack.reconciler_with(&[
        ("RECONCILE_HORIZON_SECONDS", &horizon),
        ("EXPORT_BUCKET", "likes-no-such-bucket"),
    ]);
    let item = "game:busy";
    let epochs = 10;
    let started = now_ms();
    let mut user = 0;
    let mut prunes = 0;
    while now_ms() < started + epochs * period.length_ms {
        for _ in 0..3 {
            stack.react(&format!("b{user}"), item, Like).await;
            user += 1;
        }
        // A scheduled invocation: its run fails, its pruning goes on.
        if stalled
            .advance(now_ms() + 2_000, &mut |_| {})
            .await
            .is_err()
        {
            prunes += 1;
        }
    }
    // A last invocation with the time to finish the pass it finds going (an invocation on
    // a loaded machine may leave one half done): the bound holds as of a finished pass.
    let last_invocation = now_ms();
    // Its run's outcome is the stall's, as above; what counts here is its pruning.
    let _stalled = stalled.advance(now_ms() + 30_000, &mut |_| {}).await;
    assert!(prunes > 0, "the stalled runs failed as arranged");
    stack.settle().await;
    stack.settle_leaderboard().await;
    // The bound holds as of the last invocation: rows age between two of them.
    let oldest_kept = period.epoch(last_invocation - horizon_ms - horizon_ms / 2) - 1;
    let epochs_held = subtotal_epochs(&stack, item).await;
    assert!(
        !epochs_held.is_empty(),
        "the busy item's rows hold subtotals"
    );
    for epoch in &epochs_held {
        assert!(
            *epoch >= oldest_kept,
            "epoch {epoch} outlived the horizon (oldest kept {oldest_kept})"
        );
    }
    stack.assert_counts_match_recount(&[item]).await;

    // The next run that can complete finds nothing to correct.
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    let report = reconcile(&stack, cut).await;
    assert_eq!(
        (report.items_checked, report.items_drifted),
        (1, 0),
        "{report:?}"
    );
    // Its cleaning pass ran to the end with it: nothing before the cut is left.
    let cut_epoch = period.epoch(cut);
    for epoch in subtotal_epochs(&stack, item).await {
        assert!(
            epoch >= cut_epoch,
            "epoch {epoch} is before the cut {cut_epoch}"
        );
    }
}

/// The epochs whose like subtotals `item`'s base partition and all-time score row hold.
async fn subtotal_epochs(stack: &TestStack, item: &str) -> Vec<i64> {
    let mut rows = stack
        .dynamodb()
        .query()
        .table_name(stack.name("CountsTable"))
        .key_condition_expression("item_id = :item")
        .expression_attribute_values(":item", AttributeValue::S(item.into()))
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    let score_row = stack.all_time_score_row(item).await;
    rows.push(score_row);
    rows.iter()
        .flat_map(|row| row.keys())
        .filter_map(|name| {
            name.strip_prefix('e')
                .and_then(|rest| rest.strip_suffix('l'))
                .and_then(|e| e.parse::<i64>().ok())
        })
        .collect()
}

/// The likers of `item`, newest first (one page: the test's items have a few).
async fn likers_of(stack: &TestStack, item: &str) -> Vec<String> {
    let page = stack.likers_page(item, "limit=100").await;
    assert_eq!(page["next_cursor"], serde_json::Value::Null, "{page}");
    likes_tests::liker_ids(&page)
}

/// Takes `row_created` off `user`'s likers entry for `item`, as entries were written before
/// they kept it.
async fn as_older_layout(stack: &TestStack, item: &str, user: &str) {
    let item = likes_core::ItemId::parse(item).unwrap();
    stack
        .dynamodb()
        .update_item()
        .table_name(stack.name("LikersTable"))
        .key(
            "bucket",
            AttributeValue::S(likes_core::likers::bucket(&item, user)),
        )
        .key("user_id", AttributeValue::S(user.into()))
        .update_expression("REMOVE row_created")
        .condition_expression("attribute_exists(op_id)")
        .send()
        .await
        .unwrap();
}

/// The run repairs the likers lists from its export: a like whose event was lost is
/// listed, the likes an unlike and an erasure took back (their events lost) are not, an
/// entry of the older layout is brought to the export's flip or taken off, and a like given
/// after the cut stays listed.
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
    stack.settle_likers().await;
    // Older-layout entries: one whose like the export holds, one whose row is long gone.
    as_older_layout(&stack, item, "veteran").await;
    let likers = likes_store::LikersStore::new(stack.dynamodb(), stack.name("LikersTable"));
    let ghost = likes_core::likers::LikerUpdate {
        item_id: likes_core::ItemId::parse(item).unwrap(),
        bucket: likes_core::likers::bucket_of("ghost"),
        user_id: "ghost".into(),
        row_created_ms: 0,
        op_id: 1,
        change: likes_core::likers::LikerChange::Liked {
            liked_at_ms: now_ms() - 86_400_000,
        },
    };
    assert!(likers.apply(&ghost).await.unwrap());
    as_older_layout(&stack, item, "ghost").await;
    // The likers mapping fails on every shard (each of the log's shards is its own virtual
    // shard 0) until it gives the next events up to its dead-letter queue: the lists miss
    // them.
    let faults = stack.likers().faults();
    faults.fail_shard(0);
    stack.react("lost", item, Like).await;
    stack.react("unliked", item, Neutral).await;
    stack.erase_row("erased", item).await;
    let counters = stack.settle_likers().await;
    assert!(
        counters.dlq_batches >= 1,
        "the events were lost: {counters:?}"
    );
    faults.clear();
    assert_eq!(
        likers_of(&stack, item).await,
        ["erased", "unliked", "veteran", "kept", "ghost"]
    );

    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    stack.react("late", item, Like).await;
    stack.settle_likers().await;

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
        (2, 3, 0),
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
    let board = || async {
        likes_store::LeaderboardStore::new(stack.dynamodb(), stack.name("LeaderboardTable"))
            .board(&likes_core::leaderboard::Window::All, 10)
            .await
            .unwrap()
    };
    let scores = |board: &likes_store::leaderboard::Board| -> Vec<(String, i64)> {
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

    let rerun = reconcile(&stack, cut).await;
    assert_eq!(
        rerun.leaderboard_corrected, 0,
        "a rerun finds the board repaired: {rerun:?}"
    );
}

/// The shards of the logs come and go (a stream's roll over every few hours, an on-demand
/// log's reshard with its traffic), and what each leaves goes after it: a stream shard's
/// watermark row expires by TTL past the stream's retention from its last write; a log shard
/// that expired from the log (listed no more, its last record older than any replay) has its
/// progress row retired by the refresher, and the next cleaning pass drops its intent number
/// from every all-time score row, then forgets it.
#[tokio::test]
async fn a_gone_shard_leaves_no_progress_watermark_or_intent_number_behind() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .refreshing_boards()
        .start()
        .await;
    let item = "game:kept";
    for u in 0..3 {
        stack.react(&format!("u{u}"), item, Like).await;
    }
    let wrote_ms = now_ms();
    stack.settle().await;
    stack.settle_leaderboard().await;
    let watermarks: Vec<_> = stack
        .rows("CountsTable")
        .await
        .into_iter()
        .filter(|row| matches!(row.get("item_id"), Some(AttributeValue::S(id)) if id.starts_with("#wm#")))
        .collect();
    assert!(!watermarks.is_empty(), "the aggregator wrote watermarks");
    let horizon_s = likes_core::pipeline::REPLAY_HORIZON_MS / 1000;
    for row in &watermarks {
        let Some(AttributeValue::N(expires)) = row.get("expires_at") else {
            panic!("a watermark row without expiry: {row:?}");
        };
        let expires: i64 = expires.parse().unwrap();
        assert!(
            (wrote_ms / 1000 - 60 + horizon_s..=now_ms() / 1000 + horizon_s).contains(&expires),
            "a watermark expires a replay horizon after its last write: {row:?}"
        );
    }

    // A log shard a reshard closed long ago: its progress, and its intent number on the
    // item's score row, as its consumer left them.
    let gone = "shardId-000000009999";
    let leaderboard = stack.name("LeaderboardTable");
    let three_days_ago = now_ms() - 3 * 86_400_000;
    stack
        .dynamodb()
        .put_item()
        .table_name(&leaderboard)
        .item("board", AttributeValue::S("#progress".into()))
        .item("item_id", AttributeValue::S(gone.into()))
        .item("through_seq", AttributeValue::S("42".into()))
        .item(
            "applied_through",
            AttributeValue::N(three_days_ago.to_string()),
        )
        .item("intents", AttributeValue::N("7".into()))
        .send()
        .await
        .unwrap();
    stack
        .dynamodb()
        .update_item()
        .table_name(&leaderboard)
        .set_key(Some(stack.all_time_score_key(item)))
        .update_expression("SET #n = :n")
        .expression_attribute_names("#n", "n#9999")
        .expression_attribute_values(":n", AttributeValue::N("7".into()))
        .send()
        .await
        .unwrap();
    let markers = || async {
        stack
            .all_time_score_row(item)
            .await
            .into_keys()
            .filter(|name| name.starts_with("n#"))
            .collect::<BTreeSet<_>>()
    };
    let live = markers().await;
    assert!(
        live.len() > 1,
        "live shards' numbers beside the gone one's: {live:?}"
    );

    // The refresher, ticking once a second, retires it.
    let store = stack.leaderboard_store();
    eventually(Duration::from_secs(30), async || {
        let progress = store.progress().await.unwrap();
        match progress.iter().any(|p| p.shard == gone) {
            false => Ok(()),
            true => Err(format!("the gone shard's progress stayed: {progress:?}")),
        }
    })
    .await;
    assert_eq!(
        store.retired().await.unwrap(),
        BTreeSet::from(["9999".to_owned()])
    );

    // A scheduled invocation's cleaning pass drops its number, and then forgets it.
    let _run = stack
        .reconciler()
        .advance(now_ms() + 60_000, &mut |_| {})
        .await;
    let kept = markers().await;
    assert_eq!(
        kept,
        live.iter()
            .filter(|m| *m != "n#9999")
            .cloned()
            .collect::<BTreeSet<_>>(),
        "only the gone shard's number went"
    );
    assert!(
        store.retired().await.unwrap().is_empty(),
        "the retired shard is forgotten"
    );
    stack.react("u9", item, Like).await;
    stack.settle().await;
    stack.settle_leaderboard().await;
    stack
        .leaderboard_until(
            "window=all",
            &serde_json::json!([{"item_id": item, "like_count": 4}]),
        )
        .await;
}

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
    let horizon = (horizon_ms / 1000).to_string();
    let items = ["game:a", "game:b", "game:c", "game:busy", "game:crowd"];
    for u in 0..12 {
        let state = if u % 5 == 4 { Dislike } else { Like };
        stack.react(&format!("u{u}"), items[u % 3], state).await;
    }
    stack.settle().await;

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
    // A likers batch given up to its dead-letter queue: one like and one unlike.
    stack.settle_likers().await;
    let likers_faults = stack.likers().faults();
    likers_faults.fail_shard(0);
    stack.react("l0", "game:b", Like).await;
    stack.react("u1", "game:b", Neutral).await;
    assert!(stack.settle_likers().await.dlq_batches >= 1);
    likers_faults.clear();
    // Events the board never applied (their log records expired): an unlike and two likes.
    stack.settle_leaderboard().await;
    stack.edit_all_time_score("game:b", 1).await;
    stack.edit_all_time_score("game:a", -2).await;

    // Reconciliation stalls for many horizons (every export fails) while likes go on; the
    // scheduled invocations give cuts up and still prune.
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
    while run_state(&stack)
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
    let left_going = run_state(&stack).state().await.unwrap().unwrap().cut_ms;
    assert!(given_up.len() >= 2, "cuts were given up: {given_up:?}");
    stack.settle().await;
    stack.settle_leaderboard().await;
    let oldest_kept = period.epoch(last_invocation - horizon_ms - horizon_ms / 2) - 1;
    for epoch in subtotal_epochs(&stack, "game:busy").await {
        assert!(
            epoch >= oldest_kept,
            "epoch {epoch} outlived the horizon (oldest kept {oldest_kept})"
        );
    }

    // The Reactions stream splits under traffic, and a user erases their account.
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
    stack.settle_likers().await;
    stack.settle_leaderboard().await;

    // The first run that can complete: its export's files are gone before its compare ends
    // (as the bucket's lifecycle would expire them under a run waiting too long), so it
    // starts again from a new export.
    let scheduled = stack.reconciler();
    let cut = stack.next_cut(0);
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
    let all_time =
        likes_store::LeaderboardStore::new(stack.dynamodb(), stack.name("LeaderboardTable"));
    eventually(Duration::from_secs(30), async || {
        let as_of = all_time
            .board(&likes_core::leaderboard::Window::All, 10)
            .await
            .unwrap()
            .as_of_ms;
        match as_of.is_some_and(|a| a >= stack.clear_of(cut)) {
            true => Ok(()),
            false => Err(format!("the board's as_of {as_of:?} never passed the cut")),
        }
    })
    .await;
    // The operator's run finishes the run the stall left going first, with the real bucket
    // (or gives it up, past its deadline), and says so.
    let earlier = Mutex::new(Vec::new());
    let mut note = |progress| match progress {
        Progress::EarlierRunReconciled(report) => earlier.lock().unwrap().push(Ok(*report)),
        Progress::EarlierRunGivenUp { cut_ms, .. } => earlier.lock().unwrap().push(Err(cut_ms)),
        _ => {}
    };
    // Every run of the cut that completes, in order: an invocation may finish one before
    // another pauses (then the operator's next run of the cut compares it again). The run
    // the stall left going may pause too, and how many attempts it has left depends on
    // where the stall ended: only a pause of this cut's run is the one whose export expires.
    let mut completed: Vec<DriftReport> = Vec::new();
    let paused = loop {
        match scheduled.run_at(Some(cut), true, now_ms(), &mut note).await {
            Ok(step @ Step::Comparing { cut_ms, .. }) if cut_ms == cut => break step,
            Ok(Step::Reconciled(report)) => completed.push(*report),
            Ok(_) | Err(ReconcileError::NotYetRestorable { .. }) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(err) => panic!("an invocation failed: {err}"),
        }
    };
    let expired_arn = match run_state(&stack).state().await.unwrap().unwrap().phase {
        Phase::Comparing { export_arn, .. } => Some(export_arn),
        other => panic!("{paused:?} left the run {other:?}"),
    };
    let s3 = likes_local::stack::s3_client(&stack.stack.aws.sdk);
    let bucket = stack
        .stack
        .function_environment("ReconcileFunction")
        .unwrap()["EXPORT_BUCKET"]
        .clone();
    // The paused run's export expires: every object under its folder goes.
    let manifest = stack
        .dynamodb()
        .describe_export()
        .export_arn(expired_arn.as_deref().unwrap())
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
    let mut failed = None;
    let report = loop {
        match scheduled
            .run_at(Some(cut), true, now_ms() + 60_000, &mut note)
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
        Some(report.export_arn.as_str()),
        expired_arn.as_deref(),
        "the cut was reconciled from a new export"
    );
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

    // At the end, every read model equals the Reactions table.
    stack.settle().await;
    let recount = stack.assert_counts_match_recount(&items).await;
    for item in items {
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
            .board(&likes_core::leaderboard::Window::All, 10)
            .await
            .unwrap();
        if board.entries == expected {
            return Ok(());
        }
        Err(format!("the board {board:?}, the recount {expected:?}"))
    })
    .await;
    // And the run left every row clean before its cut.
    for epoch in subtotal_epochs(&stack, "game:busy").await {
        assert!(
            epoch >= period.epoch(cut),
            "epoch {epoch} is before the cut"
        );
    }
    assert_rows_within_their_bounds(&stack, &["game:busy", "game:crowd"]).await;
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
