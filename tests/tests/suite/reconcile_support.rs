//! What the `reconcile_*` tests share: the run's state, a run at a cut to its end, and the
//! subtotal epochs an item's rows hold.

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_reconcile::{DriftReport, Step};
use likes_store::reconciliation::ReconciliationStore;
use likes_tests::{until, TestStack};

/// The store of the stack's reconciliation run, which its Counts table keeps.
pub(crate) fn run_state(stack: &TestStack) -> ReconciliationStore {
    ReconciliationStore::new(stack.dynamodb(), stack.name("CountsTable"))
}

/// Runs reconciliation at the cut `at_ms` to the end (at most a minute).
pub(crate) async fn reconcile(stack: &TestStack, at_ms: i64) -> DriftReport {
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

/// Three likes of `item` by new users, counted, then its first count row edited to hold two
/// (a drift of one like); the first cut clear of it all, once it is clear.
pub(crate) async fn drifted_by_one(stack: &TestStack, item: &str) -> i64 {
    for u in 0..3 {
        stack
            .react(&format!("u{u}"), item, likes_core::ReactionState::Like)
            .await;
    }
    stack.settle().await;
    stack.edit_count_row(item, "D#0", 2).await;
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    cut
}

/// Reconciles the first cut clear of every write so far, once it is clear.
pub(crate) async fn reconcile_next(stack: &TestStack) -> DriftReport {
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    reconcile(stack, cut).await
}

/// The epochs whose like subtotals `item`'s base partition and all-time score row hold.
pub(crate) async fn subtotal_epochs(stack: &TestStack, item: &str) -> Vec<i64> {
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
