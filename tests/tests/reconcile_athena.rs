//! The recount SQL that Athena runs at platform scale (infra/athena/recount.sql), run by
//! DuckDB over the data files of a real local export, gives the reconcile function's own
//! recount of that export row for row.

use std::collections::BTreeMap;
use std::path::Path;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::{Export, ExportReader};
use likes_tests::exports::{create_bucket, get};
use likes_tests::{unique_prefix, TestStack};

/// One CSV line of recount_duckdb.py: item, likes, dislikes, unknown states.
type SqlRow = (String, u64, u64, u64);

/// Downloads the export's data files into `folder`, as an operator would to check the SQL.
async fn download(s3: &aws_sdk_s3::Client, export: &Export, folder: &Path) {
    std::fs::create_dir_all(folder).unwrap();
    for file in &export.files {
        let key = &file.data_file_s3_key;
        let name = key.rsplit('/').next().unwrap();
        std::fs::write(folder.join(name), get(s3, &export.bucket, key).await).unwrap();
    }
}

fn duckdb_recount(folder: &Path) -> Vec<SqlRow> {
    let root = likes_local::repo_root();
    let output = std::process::Command::new(root.join(".venv/bin/python"))
        .arg(root.join("infra/athena/recount_duckdb.py"))
        .arg(folder)
        .output()
        .expect("run .venv/bin/python (make .venv)");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "recount_duckdb.py failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("item_id,likes,dislikes,unknown_states"));
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            let number = |i: usize| fields[i].parse::<u64>().unwrap();
            (fields[0].to_owned(), number(1), number(2), number(3))
        })
        .collect()
}

#[tokio::test]
async fn duckdb_runs_the_athena_recount_to_the_readers_result_row_for_row() {
    let stack = TestStack::start().await;
    let s3 = stack.s3();
    let bucket = create_bucket(&s3).await;
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
    // A row no writer of the service makes: skipped by both.
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
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let finished = stack
        .export_reactions(&bucket, "reconcile/athena", now_ms())
        .await;
    let reader = ExportReader::new(s3.clone());
    let export = reader
        .open(&bucket, finished.description.export_manifest().unwrap())
        .await
        .unwrap();
    let recount = reader.recount(&export, |_| {}).await.unwrap();
    assert_eq!((recount.probes, recount.foreign_rows), (1, 1));

    let folder = std::env::temp_dir().join(format!("likes-export-{}", unique_prefix()));
    download(&s3, &export, &folder).await;
    let sql = duckdb_recount(&folder);
    std::fs::remove_dir_all(&folder).unwrap();

    let expected: Vec<SqlRow> = recount
        .per_item
        .iter()
        .map(|(item, c)| (item.to_string(), c.like_count, c.dislike_count, 0))
        .collect();
    assert_eq!(sql, expected);
    // And the export is the one the writes made.
    assert_eq!(
        sql.iter()
            .map(|(item, likes, dislikes, _)| (item.as_str(), (*likes, *dislikes)))
            .collect::<BTreeMap<_, _>>(),
        BTreeMap::from([
            ("avatar:9", (0, 2)),
            ("exp.4_b-c", (1, 0)),
            ("game:1", (3, 1)),
            ("place:2", (0, 0)),
        ])
    );
}
