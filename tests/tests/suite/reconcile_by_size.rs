//! `RecountEngine` `auto` (the template's default): each run recounts where its export's size
//! says, from the export's `manifest-summary.json` item count: in the function up to
//! `RECOUNT_FUNCTION_MAX_ROWS`, in Athena (the emulator's, in DuckDB) past it. Both correct
//! the same drift.

use std::time::Duration;

use likes_core::clock::now_ms;
use likes_reconcile::{DriftReport, Reconciler, Step};
use likes_tests::TestStack;

use crate::reconcile_support::drifted_by_one;

/// Runs the reconciler at `cut` until it reports.
async fn reconcile(reconciler: &Reconciler, cut: i64) -> DriftReport {
    let give_up_at = now_ms() + 120_000;
    loop {
        assert!(now_ms() < give_up_at, "the run did not finish in 120 s");
        match reconciler
            .run_at(Some(cut), true, now_ms() + 20_000, &mut |_| {})
            .await
            .expect("an invocation")
        {
            Step::Reconciled(report) => return *report,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Three likes of `item`, its counts put off by two, and a cut after them; the run with the
/// reconcile function's variables as the template sets them but for `overrides`.
async fn drifted_run(item: &str, overrides: &[(&str, &str)]) -> (TestStack, DriftReport) {
    let stack = TestStack::builder()
        .for_reconciliation("auto")
        .start()
        .await;
    let cut = drifted_by_one(&stack, item).await;
    let report = reconcile(&stack.reconciler_with(overrides), cut).await;
    (stack, report)
}

#[tokio::test]
async fn by_size_a_run_within_the_bound_recounts_in_the_function() {
    let item = "game:small";
    let (stack, report) = drifted_run(item, &[]).await;
    assert_eq!(report.recounted_by, "function", "{report:?}");
    assert!(
        report.rows_read > 0,
        "the function read the export: {report:?}"
    );
    assert_eq!(
        (report.items_drifted, report.items_corrected),
        (1, 1),
        "{report:?}"
    );
    stack.assert_counts_match_recount(&[item]).await;
}

#[tokio::test]
async fn by_size_a_run_whose_export_is_past_the_bound_is_judged_in_athena() {
    let item = "game:large";
    // Any export holds more than one item (the pulse's probes at least): past this bound.
    let (stack, report) = drifted_run(item, &[("RECOUNT_FUNCTION_MAX_ROWS", "1")]).await;
    assert_eq!(report.recounted_by, "athena", "{report:?}");
    assert_eq!(
        (report.items_drifted, report.items_corrected),
        (1, 1),
        "{report:?}"
    );
    stack.assert_counts_match_recount(&[item]).await;
}
