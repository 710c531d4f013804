//! Reconciliation end to end against the emulator: real exports at a cut, the real pipeline
//! applying flips before, during and after it, drift injected the ways it happens (a count
//! row edited by hand, a batch skipped to the dead-letter queue, a record the aggregator
//! cannot read), and the counts brought back to a recount without ever losing a flip
//! applied after the cut.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::{DriftReport, Step};
use likes_tests::TestStack;

/// Runs reconciliation at the cut `at_ms` to the end (at most a minute).
async fn reconcile(stack: &TestStack, at_ms: i64) -> DriftReport {
    let deadline = now_ms() + 60_000;
    match stack
        .reconciler()
        .run_at(at_ms, deadline, &mut |_| {})
        .await
        .expect("the run finishes")
    {
        Step::Reconciled(report) => *report,
        other => panic!("the run stopped at {other:?}"),
    }
}

/// Sleeps until `t_ms`.
async fn until(t_ms: i64) {
    let wait = t_ms - now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

/// The first moment a write is clear of the cut's uncertainty, even as the stream records
/// it: `ApproximateCreationDateTime` is rounded down to the second.
fn clear_of(stack: &TestStack, cut: i64) -> i64 {
    cut + stack.reconcile_period().uncertainty_ms + 1_200
}

/// The first cut at least `margin_ms` from now, so every write so far is clear of its
/// uncertainty.
fn next_cut(stack: &TestStack, margin_ms: i64) -> i64 {
    let period = stack.reconcile_period();
    period.cut_at(now_ms() + margin_ms + period.uncertainty_ms) + period.length_ms
}

#[tokio::test]
async fn no_drift_means_no_corrections_while_reactions_keep_flowing() {
    let stack = TestStack::start_for_reconciliation().await;
    let items = ["game:r1", "game:r2", "game:r3"];
    for u in 0..12 {
        stack.react(&format!("a{u}"), items[u % 3], Like).await;
        if u % 4 == 0 {
            stack.react(&format!("a{u}"), items[u % 3], Dislike).await;
        }
    }
    let cut = next_cut(&stack, 0);
    until(clear_of(&stack, cut)).await;
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
    let stack = TestStack::start_for_reconciliation().await;
    let (edited, skipped, poisoned) = ("game:edited", "game:skipped", "game:poisoned");
    for u in 0..4 {
        stack.react(&format!("u{u}"), edited, Like).await;
    }
    stack.settle().await;
    // 1. A count row edited by hand: five likes nobody gave.
    stack
        .dynamodb()
        .update_item()
        .table_name(stack.name("CountsTable"))
        .key("item_id", AttributeValue::S(edited.into()))
        .key("shard", AttributeValue::S("D#0".into()))
        .update_expression("ADD like_count :five")
        .expression_attribute_values(":five", AttributeValue::N("5".into()))
        .send()
        .await
        .unwrap();
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
        .dynamodb()
        .put_item()
        .table_name(stack.name("ReactionsTable"))
        .item("user_id", AttributeValue::S("p0".into()))
        .item("item_id", AttributeValue::S(poisoned.into()))
        .item("state", AttributeValue::S("LIKE".into()))
        .item("op_id", AttributeValue::S("one".into()))
        .item("updated_at", AttributeValue::N(now_ms().to_string()))
        .send()
        .await
        .unwrap();
    stack.settle().await;
    let drifted = [edited, skipped, poisoned];
    let cut = next_cut(&stack, 0);
    until(clear_of(&stack, cut)).await;
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

    let rerun = reconcile(&stack, cut).await;
    assert_eq!(
        (rerun.items_drifted, rerun.items_corrected),
        (0, 0),
        "the corrections are part of what was applied before the cut now: {rerun:?}"
    );
    stack.assert_counts_match_recount(&drifted).await;
}

#[tokio::test]
async fn an_item_with_flips_near_the_cut_is_deferred_then_fixed_by_the_next_run() {
    let stack = TestStack::start_for_reconciliation().await;
    let item = "game:near";
    // Drift: a row the aggregator cannot read.
    stack
        .dynamodb()
        .put_item()
        .table_name(stack.name("ReactionsTable"))
        .item("user_id", AttributeValue::S("p0".into()))
        .item("item_id", AttributeValue::S(item.into()))
        .item("state", AttributeValue::S("DISLIKE".into()))
        .send()
        .await
        .unwrap();
    let period = stack.reconcile_period();
    let cut = next_cut(&stack, 500);
    // A like inside the cut's uncertainty: the run cannot tell which side it fell on.
    until(cut - period.uncertainty_ms / 2).await;
    stack.react("near", item, Like).await;
    until(clear_of(&stack, cut)).await;
    let first = reconcile(&stack, cut).await;
    assert_eq!(
        (first.items_deferred, first.items_corrected),
        (1, 0),
        "{first:?}"
    );

    let next = next_cut(&stack, 0);
    until(clear_of(&stack, next)).await;
    let second = reconcile(&stack, next).await;
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
    let stack = TestStack::start_for_reconciliation().await;
    let before = now_ms() - 60_000;
    let err = stack
        .reconciler()
        .run_at(before, now_ms() + 60_000, &mut |_| {})
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
    let cut = next_cut(&stack, 0);
    until(clear_of(&stack, cut)).await;
    let report = reconcile(&stack, cut).await;
    assert_eq!(
        (report.items_checked, report.items_drifted),
        (1, 0),
        "{report:?}"
    );
}
