//! Whole reconciliation runs judged in Athena, when the template selects it (the emulator's
//! Athena in DuckDB over real local exports): a run paused and resumed across invocations
//! corrects counts, scores and likers once, and a run started over after a failed attempt
//! is judged afresh.

use std::collections::BTreeSet;
use std::time::Duration;

use likes_core::clock::now_ms;
use likes_core::ReactionState::Like;
use likes_reconcile::{ExportReader, ReconcileError, Step};
use likes_store::reconciliation::{Phase, ReconciliationStore};
use likes_tests::{until, TestStack};

use crate::reconcile_support::drifted_by_one;

/// Drops `lost`'s entry (item, user) from its likers list, as a lost like event leaves it,
/// and lists `invented` as a like given a day ago, as a lost unlike leaves it.
pub(crate) async fn lose_and_invent_likers(
    stack: &TestStack,
    lost: (&str, &str),
    invented: (&str, &str),
) {
    stack.lose_liker(lost.0, lost.1).await;
    stack.invent_liker(invented.0, invented.1).await;
}

/// The users `item`'s likers list shows (its first page, which holds them all here).
async fn listed(stack: &TestStack, item: &str) -> BTreeSet<String> {
    stack.likers_page(item, "").await["items"]
        .as_array()
        .expect("a likers page")
        .iter()
        .map(|liker| liker["user_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_run_judged_by_athena_corrects_counts_and_the_board_once_across_paused_invocations() {
    let stack = TestStack::builder()
        .for_reconciliation("athena")
        .refreshing_boards()
        .start()
        .await;
    let items = ["game:a1", "game:a2", "game:a3"];
    for u in 0..9 {
        stack.react(&format!("u{u}"), items[u % 3], Like).await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;
    // Likes nobody gave on two items' count rows, and a score that lost two likes.
    for item in &items[..2] {
        stack.edit_count_row(item, "D#0", 3).await;
    }
    stack.edit_all_time_score(items[2], -2).await;
    lose_and_invent_likers(&stack, (items[0], "u0"), (items[1], "zed")).await;
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    // Likes from many users after the cut move every log shard's progress, and so the
    // board's `as_of`, past it.
    for n in 0..40 {
        stack.react(&format!("crowd{n}"), "game:crowd", Like).await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;

    // Each invocation has no time left past its first judged item: the compare pauses
    // after each and the next goes on from its checkpoint.
    let reconciler = stack.reconciler();
    let mut paused = 0;
    let give_up_at = now_ms() + 120_000;
    let report = loop {
        assert!(now_ms() < give_up_at, "the run did not finish in 120 s");
        match reconciler
            .run_at(Some(cut), true, now_ms(), &mut |_| {})
            .await
            .expect("an invocation")
        {
            Step::Reconciled(report) => break *report,
            Step::Comparing { .. } => paused += 1,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    assert_eq!(report.recounted_by, "athena");
    assert_eq!(paused, 1, "two drifted items, one per invocation");
    assert_eq!(
        (
            report.items_drifted,
            report.items_corrected,
            report.items_already_corrected
        ),
        (2, 2, 0),
        "{report:?}"
    );
    assert_eq!(report.items_checked, 4, "{report:?}");
    assert!(!report.leaderboard_behind, "{report:?}");
    assert_eq!(report.leaderboard_corrected, 1, "{report:?}");
    assert_eq!(
        (report.likers_added, report.likers_removed),
        (1, 1),
        "{report:?}"
    );
    assert!(listed(&stack, items[0]).await.contains("u0"));
    assert!(!listed(&stack, items[1]).await.contains("zed"));
    stack.assert_counts_match_recount(&items).await;
    let score = stack
        .leaderboard_store()
        .all_time_row(items[2])
        .await
        .unwrap()
        .expect("a score row")
        .total
        .like;
    assert_eq!(score, 3);

    let rerun = reconciler
        .run_at(Some(cut), true, now_ms() + 60_000, &mut |_| {})
        .await
        .expect("the rerun finishes");
    let Step::Reconciled(rerun) = rerun else {
        panic!("the rerun stopped at {rerun:?}")
    };
    assert_eq!(
        (
            rerun.items_drifted,
            rerun.leaderboard_corrected,
            rerun.likers_added + rerun.likers_removed
        ),
        (0, 0, 0),
        "the corrections are part of what was applied before the cut now: {rerun:?}"
    );
    stack.assert_counts_match_recount(&items).await;
}

/// An attempt whose judgement fails (a data file of its export corrupt) starts the cut over
/// from new exports, and Athena runs the new attempt's statements afresh: the run completes
/// and corrects once.
#[tokio::test]
async fn a_failed_athena_attempt_starts_over_and_the_next_is_judged_afresh() {
    let stack = TestStack::builder()
        .for_reconciliation("athena")
        .refreshing_boards()
        .start()
        .await;
    let item = "game:retried";
    let cut = drifted_by_one(&stack, item).await;

    // Invocations with no time to wait, until the run has all its exports asked for.
    let reconciler = stack.reconciler();
    let runs = ReconciliationStore::new(stack.dynamodb(), stack.name("CountsTable"));
    let give_up_at = now_ms() + 60_000;
    let first = loop {
        assert!(
            now_ms() < give_up_at,
            "the run did not reach its exports in 60 s"
        );
        match reconciler
            .run_at(Some(cut), true, now_ms(), &mut |_| {})
            .await
        {
            Ok(_) | Err(ReconcileError::NotYetRestorable { .. }) => {}
            Err(err) => panic!("an invocation failed: {err}"),
        }
        let phase = runs.state().await.unwrap().map(|state| state.phase);
        if let Some(Phase::Comparing {
            export_arn,
            derived: Some(derived),
        }) = phase
        {
            if derived.exports.len() == derived.tables.len() {
                break export_arn;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let manifest = stack
        .dynamodb()
        .describe_export()
        .export_arn(&first)
        .send()
        .await
        .unwrap()
        .export_description
        .and_then(|d| d.export_manifest)
        .expect("a manifest");
    let bucket = stack
        .stack
        .function_environment("ReconcileFunction")
        .unwrap()["EXPORT_BUCKET"]
        .clone();
    let export = ExportReader::new(stack.s3())
        .open(&bucket, &manifest)
        .await
        .unwrap();
    for file in export.files.iter().filter(|f| f.item_count > 0) {
        stack
            .s3()
            .put_object()
            .bucket(&bucket)
            .key(&file.data_file_s3_key)
            .body(b"\x1f\x8b\x08\x00 not a gzip stream".to_vec().into())
            .send()
            .await
            .unwrap();
    }

    let mut failed = Vec::new();
    let report = loop {
        assert!(now_ms() < give_up_at + 120_000, "the run did not finish");
        match reconciler
            .run_at(Some(cut), true, now_ms() + 60_000, &mut |_| {})
            .await
        {
            Ok(Step::Reconciled(report)) => break *report,
            Ok(_) => {}
            Err(err) => failed.push(err),
        }
    };
    assert!(
        matches!(failed.as_slice(), [ReconcileError::Query { .. }]),
        "the first attempt failed on its corrupt export, and only it: {failed:?}"
    );
    assert_ne!(report.export_arn, first, "{report:?}");
    assert_eq!(
        (report.items_drifted, report.items_corrected),
        (1, 1),
        "{report:?}"
    );
    stack.assert_counts_match_recount(&[item]).await;
}
