//! The Athena recount (infra/athena/*.sql, as the reconcile function sends it), run by the
//! emulator's Athena in DuckDB over the data files of a real local export: it gives the
//! function's own recount row for row, fails rather than half-reads a corrupt export, and
//! carries a whole reconciliation run when the template selects it.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::{
    AthenaConfig, AthenaRecount, Export, ExportReader, ReconcileError, Recount, Step, ATTEMPTS,
};
use likes_tests::exports::create_bucket;
use likes_tests::{unique_prefix, TestStack};

/// An Athena recount as the stack's reconcile function is configured for it.
fn athena_recount(stack: &TestStack) -> AthenaRecount {
    let environment = stack
        .stack
        .function_environment("ReconcileFunction")
        .unwrap();
    AthenaRecount::new(
        stack.athena(),
        stack.s3(),
        AthenaConfig {
            workgroup: environment["ATHENA_WORKGROUP"].clone(),
            database: environment["GLUE_DATABASE"].clone(),
        },
    )
}

/// Polls the recount to its end (at most 30 s).
async fn athena_result(
    athena: &AthenaRecount,
    run_id: &str,
    export: &Export,
) -> Result<Recount, ReconcileError> {
    for _ in 0..300 {
        if let Some(recount) = athena.poll(run_id, export).await? {
            return Ok(recount);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("Athena's recount did not finish in 30 s");
}

/// Reactions in every state, a probe row and a foreign row, exported now.
async fn exported(stack: &TestStack) -> Export {
    for (user, item, state) in [
        ("alice", "game:1", Like),
        ("bob", "game:1", Like),
        ("carol", "game:1", Dislike),
        ("dave", "game:1", Neutral),
        ("alice", "avatar:9", Dislike),
        ("bob", "avatar:9", Dislike),
        ("carol", "place:2", Like),
        ("carol", "place:2", Neutral),
        ("erin", "exp.4_b-c", Like),
        ("frank", "game:1", Dislike),
        ("frank", "game:1", Like),
    ] {
        stack.react(user, item, state).await;
    }
    likes_store::FreshnessStore::new(stack.dynamodb(), stack.name("CountsTable"))
        .probe(
            &stack.name("ReactionsTable"),
            &["#probe#7".to_owned()],
            now_ms(),
        )
        .await
        .unwrap();
    // A row no writer of the service makes: skipped by both, and counted.
    stack
        .dynamodb()
        .put_item()
        .table_name(stack.name("ReactionsTable"))
        .item("user_id", AttributeValue::S("import".into()))
        .item("item_id", AttributeValue::S("batch/7".into()))
        .item("state", AttributeValue::S("LIKE".into()))
        .send()
        .await
        .unwrap();
    // The cut is in whole milliseconds; the emulator times writes finer, so a write in the
    // same millisecond as the cut may fall after it.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let bucket = create_bucket(&stack.s3()).await;
    let finished = stack
        .export_reactions(&bucket, "reconcile/athena", now_ms())
        .await;
    ExportReader::new(stack.s3())
        .open(&bucket, finished.description.export_manifest().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn athena_recounts_an_export_to_the_readers_result_row_for_row() {
    let stack = TestStack::start_for_reconciliation_in("athena").await;
    let export = exported(&stack).await;
    let reader = ExportReader::new(stack.s3())
        .recount(&export, |_| {})
        .await
        .unwrap();
    let athena = athena_result(&athena_recount(&stack), &unique_prefix(), &export)
        .await
        .unwrap();

    // Athena counts foreign rows; only the reader lists their keys.
    assert_eq!(reader.foreign.len(), 1);
    assert_eq!(
        athena,
        Recount {
            foreign: Vec::new(),
            ..reader.clone()
        }
    );
    // And the export is the one the writes made (the pulse writes probe rows of its own).
    assert_eq!(athena.rows_read, export.summary.item_count);
    assert_eq!(athena.foreign_rows, 1);
    assert!(athena.probes >= 1, "{athena:?}");
    assert_eq!(
        athena
            .per_item
            .iter()
            .map(|(item, c)| (item.as_str(), (c.like_count, c.dislike_count)))
            .collect::<BTreeMap<_, _>>(),
        BTreeMap::from([
            ("avatar:9", (0, 2)),
            ("exp.4_b-c", (1, 0)),
            ("game:1", (3, 1)),
            ("place:2", (0, 0)),
        ])
    );
}

#[tokio::test]
async fn a_corrupt_data_file_fails_the_athena_recount_after_its_retries() {
    let stack = TestStack::start_for_reconciliation_in("athena").await;
    let export = exported(&stack).await;
    let file = export
        .files
        .iter()
        .find(|f| f.item_count > 0)
        .expect("a data file with rows");
    stack
        .s3()
        .put_object()
        .bucket(&export.bucket)
        .key(&file.data_file_s3_key)
        .body(b"\x1f\x8b\x08\x00 not a gzip stream".to_vec().into())
        .send()
        .await
        .unwrap();

    match athena_result(&athena_recount(&stack), &unique_prefix(), &export).await {
        Err(ReconcileError::Query { step, failures }) => {
            assert_eq!(step, "recount");
            assert_eq!(failures.len(), ATTEMPTS, "{failures:?}");
        }
        other => panic!("a corrupt export was recounted: {other:?}"),
    }
}

#[tokio::test]
async fn a_run_recounted_by_athena_corrects_drift_once() {
    let stack = TestStack::start_for_reconciliation_in("athena").await;
    let items = ["game:a1", "game:a2"];
    for u in 0..6 {
        stack.react(&format!("u{u}"), items[u % 2], Like).await;
    }
    stack.settle().await;
    // Three likes nobody gave, on one count row.
    stack
        .dynamodb()
        .update_item()
        .table_name(stack.name("CountsTable"))
        .key("item_id", AttributeValue::S(items[0].into()))
        .key("shard", AttributeValue::S("D#0".into()))
        .update_expression("ADD like_count :three")
        .expression_attribute_values(":three", AttributeValue::N("3".into()))
        .send()
        .await
        .unwrap();
    let period = stack.reconcile_period();
    let cut = period.cut_at(now_ms() + period.uncertainty_ms) + period.length_ms;
    let run = |at: i64| {
        let reconciler = stack.reconciler();
        async move {
            match reconciler
                .run_at(Some(at), true, now_ms() + 60_000, &mut |_| {})
                .await
                .expect("the run finishes")
            {
                Step::Reconciled(report) => *report,
                other => panic!("the run stopped at {other:?}"),
            }
        }
    };
    let wait = cut + period.uncertainty_ms + 1_200 - now_ms();
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;

    let report = run(cut).await;
    assert_eq!(report.recounted_by, "athena");
    assert_eq!(report.items_checked, 2, "{report:?}");
    assert_eq!(
        (report.items_drifted, report.items_corrected),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(report.largest_drifts[0].like_drift, -3, "{report:?}");
    stack.assert_counts_match_recount(&items).await;

    let rerun = run(cut).await;
    assert_eq!(
        (rerun.items_drifted, rerun.items_corrected),
        (0, 0),
        "the correction is part of what was applied before the cut now: {rerun:?}"
    );
    stack.assert_counts_match_recount(&items).await;
}
