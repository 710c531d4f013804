//! The local stack's ExportTableToPointInTime, through the SDK as reconciliation calls it:
//! the table as of the export time (not as of now), in DynamoDB's layout, which the export
//! reader reads; DescribeExport goes IN_PROGRESS, then COMPLETED.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::operation::export_table_to_point_in_time::ExportTableToPointInTimeError;
use aws_sdk_dynamodb::primitives::DateTime;
use aws_sdk_dynamodb::types::ExportStatus;
use likes_core::clock::now_ms;
use likes_core::pipeline::Counts;
use likes_core::ItemId;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::ExportReader;
use likes_tests::exports::create_bucket;
use likes_tests::TestStack;

const PREFIX: &str = "reconcile/local";

fn counts(like_count: u64, dislike_count: u64) -> Counts {
    Counts {
        like_count,
        dislike_count,
    }
}

fn item(id: &str) -> ItemId {
    ItemId::parse(id).unwrap()
}

/// A moment strictly between the writes before it and the writes after it.
async fn cut() -> i64 {
    tokio::time::sleep(Duration::from_millis(20)).await;
    let at = now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;
    at
}

#[tokio::test]
async fn an_export_shows_the_table_as_of_its_export_time_not_as_of_now() {
    let stack = TestStack::start().await;
    let s3 = stack.s3();
    let bucket = create_bucket(&s3).await;

    stack.react("alice", "game:1", Like).await;
    stack.react("bob", "game:1", Like).await;
    stack.react("carol", "game:1", Dislike).await;
    stack.react("dave", "game:2", Like).await;
    stack.react("dave", "game:2", Neutral).await;
    stack.react("erin", "avatar:5", Dislike).await;
    likes_store::FreshnessStore::new(stack.dynamodb(), stack.name("CountsTable"))
        .probe(
            &stack.name("ReactionsTable"),
            &["#probe#0".to_owned()],
            now_ms(),
        )
        .await
        .unwrap();
    let at = cut().await;
    stack.react("alice", "game:1", Dislike).await;
    stack.react("frank", "game:3", Like).await;
    stack.erase_row("bob", "game:1").await;
    stack.react("dave", "game:2", Like).await;

    let finished = stack.export_reactions(&bucket, PREFIX, at).await;
    assert_eq!(
        finished.statuses,
        [ExportStatus::InProgress, ExportStatus::Completed]
    );
    let described = &finished.description;
    assert_eq!(described.item_count, Some(6));
    // Epoch seconds with a fraction on the wire: equal to the millisecond.
    let export_ms = described
        .export_time
        .map(|t| (t.as_secs_f64() * 1000.0).round() as i64);
    assert_eq!(export_ms, Some(at));

    // The ARN is an export's: arn:aws:dynamodb:<region>:<account>:table/<table>/export/<id>.
    let arn = described.export_arn.as_deref().unwrap();
    let table_arn = stack.reactions_arn().await;
    let export_id = arn
        .strip_prefix(&format!("{table_arn}/export/"))
        .unwrap_or_else(|| panic!("{arn} is not an export of {table_arn}"));
    let (millis, suffix) = export_id.split_once('-').unwrap();
    assert!(
        millis.len() == 14 && millis.bytes().all(|b| b.is_ascii_digit()),
        "{export_id}"
    );
    assert!(
        suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit()),
        "{export_id}"
    );
    let folder = format!("{PREFIX}/AWSDynamoDB/{export_id}");
    assert_eq!(
        described.export_manifest.as_deref(),
        Some(format!("{folder}/manifest-summary.json").as_str())
    );

    let listed = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix(&folder)
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    for name in [
        "_started",
        "manifest-files.json",
        "manifest-files.md5",
        "manifest-summary.json",
        "manifest-summary.md5",
    ] {
        assert!(
            keys.contains(&format!("{folder}/{name}").as_str()),
            "{name} in {keys:?}"
        );
    }
    let data_files = keys.iter().filter(|k| k.contains("/data/")).count();
    assert!(data_files > 1, "several data files: {keys:?}");

    let reader = ExportReader::new(s3);
    let export = reader
        .open(&bucket, described.export_manifest.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(export.files.len(), data_files);
    let recount = reader.recount(&export, |_| {}).await.unwrap();
    assert_eq!(
        recount.per_item,
        BTreeMap::from([
            (item("game:1"), counts(2, 1)),
            (item("game:2"), counts(0, 0)),
            (item("avatar:5"), counts(0, 1)),
        ]),
        "the table as of the export time"
    );
    assert_eq!(
        (recount.rows_read, recount.probes, recount.foreign_rows),
        (6, 1, 0)
    );

    // The writes after the export time did land: the export did not just miss them.
    let now: BTreeMap<String, Counts> = stack.recount().await;
    assert_eq!(now["game:1"], counts(0, 2));
    assert_eq!(now["game:3"], counts(1, 0));
}

#[tokio::test]
async fn an_export_time_after_the_latest_restorable_time_or_before_the_table_existed_is_refused() {
    let stack = TestStack::start().await;
    let bucket = create_bucket(&stack.s3()).await;
    let table_arn = stack.reactions_arn().await;
    let created = now_ms();
    // As on AWS, the recovery window ends behind now: a moment ago is not restorable yet.
    let latest = stack.latest_restorable_ms().await;
    assert!(latest < now_ms(), "latest {latest}");

    for at in [now_ms(), created + 60_000, created - 3_600_000] {
        let err = stack
            .dynamodb()
            .export_table_to_point_in_time()
            .table_arn(&table_arn)
            .s3_bucket(&bucket)
            .export_time(DateTime::from_millis(at))
            .send()
            .await
            .expect_err("an export time outside the recovery window");
        assert!(
            matches!(
                err.as_service_error(),
                Some(ExportTableToPointInTimeError::InvalidExportTimeException(_))
            ),
            "{err:?}"
        );
    }
}
