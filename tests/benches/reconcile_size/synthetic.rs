//! Exports synthesized in AWS's layout, without a table behind them: the reconcile bench's
//! reaction rows as DynamoDB JSON lines, gzipped a data file at a time, with the manifests an
//! export writes (`likes_tests::exports::write_export`).

use std::io::Write;

use aws_sdk_dynamodb::types::AttributeValue;
use flate2::write::GzEncoder;
use likes_tests::exports::{self, FixtureFile, WrittenExport};
use serde_json::{json, Map, Value};

use crate::dataset::{self, Size};

/// Writes an export of `size.reactions` rows under `prefix`, `file_rows` a data file; the
/// data files are made and sent one at a time, then the manifests.
pub async fn write(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    size: Size,
    file_rows: usize,
) -> WrittenExport {
    let mut files = Vec::new();
    for first in (0..size.reactions).step_by(file_rows) {
        let rows = first..(first + file_rows).min(size.reactions);
        let bytes = tokio::task::spawn_blocking(move || data_file(rows, size))
            .await
            .expect("a data file is made");
        files.push(FixtureFile {
            md5_checksum: exports::md5_base64(&bytes),
            item_count: (file_rows.min(size.reactions - first)) as u64,
            bytes,
        });
    }
    exports::write_export(s3, bucket, prefix, &files).await
}

/// Deletes an export's objects, so the emulator holds one size at a time.
pub async fn delete(s3: &aws_sdk_s3::Client, bucket: &str, written: &WrittenExport) {
    for key in &written.data_keys {
        exports::delete(s3, bucket, key).await;
    }
}

fn data_file(rows: std::ops::Range<usize>, size: Size) -> Vec<u8> {
    let mut gzip = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for i in rows {
        let item: Map<String, Value> = dataset::reaction_row(i, size, 1_732_912_345_678)
            .into_iter()
            .map(|(name, value)| (name, attribute(value)))
            .collect();
        serde_json::to_writer(&mut gzip, &json!({ "Item": item })).expect("gzip in memory");
        gzip.write_all(b"\n").expect("gzip in memory");
    }
    gzip.finish().expect("gzip in memory")
}

fn attribute(value: AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        other => panic!("a reaction row holds strings and numbers only, not {other:?}"),
    }
}
