//! The export reader against exports written into the emulator's S3 in DynamoDB's layout:
//! a whole export recounts exactly, and each way an export can be broken fails the read.

use std::collections::BTreeMap;

use likes_core::pipeline::Counts;
use likes_core::ItemId;
use likes_local::aws::AwsTarget;
use likes_reconcile::{ExportReader, ReadProgress, ReconcileError, RowKey, UnknownStateRow};
use likes_tests::exports::{
    create_bucket, delete, probe, put, reaction, s3_client, write_export, FixtureFile,
    WrittenExport,
};
use serde_json::json;

struct Fixture {
    // Holds the emulator this test started, if it started one.
    _aws: AwsTarget,
    s3: aws_sdk_s3::Client,
    bucket: String,
    reader: ExportReader,
}

impl Fixture {
    async fn new() -> Self {
        let aws = AwsTarget::connect().await.expect("an AWS endpoint");
        let s3 = s3_client(&aws.sdk);
        let bucket = create_bucket(&s3).await;
        Self {
            reader: ExportReader::new(s3.clone()),
            _aws: aws,
            s3,
            bucket,
        }
    }

    async fn write(&self, files: &[FixtureFile]) -> WrittenExport {
        write_export(&self.s3, &self.bucket, "reconcile/2024-11-29", files).await
    }

    async fn recount(&self, location: &str) -> Result<likes_reconcile::Recount, ReconcileError> {
        let export = self.reader.open(&self.bucket, location).await?;
        self.reader.recount(&export, |_| {}).await
    }
}

/// Three data files, as three partitions would write them: one of them empty.
fn three_files() -> Vec<FixtureFile> {
    vec![
        FixtureFile::rows(&[
            reaction("alice", "game:1", "LIKE"),
            reaction("bob", "game:1", "LIKE"),
            reaction("carol", "game:1", "DISLIKE"),
            reaction("alice", "avatar:7", "NONE"),
        ]),
        FixtureFile::rows(&[]),
        FixtureFile::rows(&[
            reaction("dave", "game:1", "NONE"),
            reaction("dave", "avatar:7", "DISLIKE"),
            reaction("erin", "place:3", "LIKE"),
            probe(4),
            json!({"user_id": {"S": "import"}, "item_id": {"S": "batch/2024"}, "note": {"S": "x"}}),
        ]),
    ]
}

fn item(id: &str) -> ItemId {
    ItemId::parse(id).unwrap()
}

fn counts(like_count: u64, dislike_count: u64) -> Counts {
    Counts {
        like_count,
        dislike_count,
    }
}

#[tokio::test]
async fn an_export_of_several_files_recounts_every_item_exactly() {
    let f = Fixture::new().await;
    let written = f.write(&three_files()).await;

    let export = f.reader.open(&f.bucket, &written.folder).await.unwrap();
    assert_eq!(
        export,
        f.reader
            .open(&f.bucket, &written.summary_key)
            .await
            .unwrap(),
        "the folder and the summary key open the same export"
    );
    assert_eq!(export.summary.item_count, 9);
    assert_eq!(export.files.len(), 3);

    let mut progress = Vec::new();
    let recount = f
        .reader
        .recount(&export, |p| progress.push(p))
        .await
        .unwrap();
    assert_eq!(
        recount.per_item,
        BTreeMap::from([
            (item("game:1"), counts(2, 1)),
            (item("avatar:7"), counts(0, 1)),
            (item("place:3"), counts(1, 0)),
        ])
    );
    assert_eq!(
        (
            recount.rows_read,
            recount.reactions,
            recount.probes,
            recount.foreign_rows
        ),
        (9, 7, 1, 1)
    );
    assert_eq!(
        recount.foreign,
        [RowKey {
            user_id: "import".into(),
            item_id: "batch/2024".into()
        }]
    );
    let progress_at = |files_done, rows_read| ReadProgress {
        files_done,
        files_total: 3,
        rows_read,
    };
    assert_eq!(
        progress,
        [progress_at(1, 4), progress_at(2, 4), progress_at(3, 9)]
    );
}

#[tokio::test]
async fn a_missing_summary_manifest_fails_naming_its_key() {
    let f = Fixture::new().await;
    let written = f.write(&three_files()).await;
    delete(&f.s3, &f.bucket, &written.summary_key).await;

    let err = f.recount(&written.folder).await.unwrap_err();
    assert!(
        matches!(&err, ReconcileError::Missing { key, .. } if *key == written.summary_key),
        "{err}"
    );
    assert!(err.to_string().contains(&written.summary_key), "{err}");
}

#[tokio::test]
async fn a_missing_files_manifest_fails_naming_its_key() {
    let f = Fixture::new().await;
    let written = f.write(&three_files()).await;
    delete(&f.s3, &f.bucket, &written.files_key).await;

    let err = f.recount(&written.summary_key).await.unwrap_err();
    assert!(
        matches!(&err, ReconcileError::Missing { key, .. } if *key == written.files_key),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_data_file_fails_the_recount() {
    let f = Fixture::new().await;
    let written = f.write(&three_files()).await;
    delete(&f.s3, &f.bucket, &written.data_keys[2]).await;

    let err = f.recount(&written.folder).await.unwrap_err();
    assert!(
        matches!(&err, ReconcileError::Missing { key, .. } if *key == written.data_keys[2]),
        "{err}"
    );
}

#[tokio::test]
async fn a_truncated_data_file_fails_even_with_a_matching_md5() {
    let f = Fixture::new().await;
    let mut files = three_files();
    let whole = std::mem::take(&mut files[2].bytes);
    files[2].bytes = whole[..whole.len() - 10].to_vec();
    files[2].md5_checksum = likes_tests::exports::md5_base64(&files[2].bytes);
    let written = f.write(&files).await;

    let err = f.recount(&written.folder).await.unwrap_err();
    assert!(
        matches!(&err, ReconcileError::Gzip { key, .. } if *key == written.data_keys[2]),
        "{err}"
    );
}

#[tokio::test]
async fn a_data_file_that_differs_from_its_md5_fails() {
    let f = Fixture::new().await;
    let mut files = three_files();
    files[0].md5_checksum = likes_tests::exports::md5_base64(b"other bytes");
    let written = f.write(&files).await;

    let err = f.recount(&written.folder).await.unwrap_err();
    assert!(
        matches!(&err, ReconcileError::Checksum { key, expected, .. }
            if *key == written.data_keys[0] && *expected == files[0].md5_checksum),
        "{err}"
    );
}

#[tokio::test]
async fn a_manifest_changed_after_its_md5_file_was_written_fails() {
    let f = Fixture::new().await;
    let written = f.write(&three_files()).await;
    let summary = likes_tests::exports::get(&f.s3, &f.bucket, &written.summary_key).await;
    let tampered = String::from_utf8(summary)
        .unwrap()
        .replace("\"itemCount\":9", "\"itemCount\":9 ");
    put(
        &f.s3,
        &f.bucket,
        &written.summary_key,
        tampered.into_bytes(),
    )
    .await;

    let err = f.recount(&written.folder).await.unwrap_err();
    assert!(
        matches!(&err, ReconcileError::Checksum { key, .. } if *key == written.summary_key),
        "{err}"
    );
}

/// A row the service never wrote (put behind the API) never stops a run: it counts as no
/// change, as the aggregator counts it, and is reported with its keys.
#[tokio::test]
async fn a_reaction_in_an_unknown_state_counts_as_no_change_and_is_reported() {
    let f = Fixture::new().await;
    let mut files = three_files();
    files.push(FixtureFile::rows(&[
        reaction("frank", "game:1", "LIKE"),
        reaction("frank", "game:2", "SUPERLIKE"),
    ]));
    let written = f.write(&files).await;

    let recount = f.recount(&written.folder).await.unwrap();
    assert_eq!(recount.per_item[&item("game:1")], counts(3, 1));
    assert_eq!(recount.per_item[&item("game:2")], counts(0, 0));
    assert_eq!(recount.unknown_state_rows, 1);
    assert_eq!(
        recount.unknown_states,
        [UnknownStateRow {
            item_id: "game:2".into(),
            user_id: Some("frank".into()),
            state: Some("SUPERLIKE".into()),
            rows: 1
        }]
    );
}
