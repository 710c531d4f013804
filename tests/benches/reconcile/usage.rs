//! What one run asked of S3 and DynamoDB, worked out from what it really read and wrote: the
//! export's objects as S3 lists them, the Counts table's items before and after the run
//! priced with AWS's item-size rules.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_reconcile::ExportReader;
use likes_tests::TestStack;

use crate::capacity::{self, Item};

/// The reconciler's Scan segments (`likes_store::reconciliation`): the same pages it reads.
const SCAN_SEGMENTS: i32 = 4;
/// GETs of the manifests: `manifest-summary.json`, `manifest-files.json` and the `.md5`
/// file of each, checked before any data file is read.
const MANIFEST_GETS: u64 = 4;

/// The Counts table at one moment, by key, and the read units a full Scan of it costs.
pub struct CountsTable {
    pub rows: HashMap<(String, String), Item>,
    /// Eventually consistent, in half units: 0.5 per started 4 KB of each page.
    pub scan_half_units: u64,
}

pub async fn counts_table(stack: &TestStack) -> CountsTable {
    let client = stack.dynamodb();
    let table = stack.name("CountsTable");
    let mut counts = CountsTable {
        rows: HashMap::new(),
        scan_half_units: 0,
    };
    for segment in 0..SCAN_SEGMENTS {
        let mut start = None;
        loop {
            let page = client
                .scan()
                .table_name(&table)
                .segment(segment)
                .total_segments(SCAN_SEGMENTS)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .expect("Scan of the Counts table");
            let bytes: usize = page.items().iter().map(capacity::item_size).sum();
            counts.scan_half_units += capacity::eventually_consistent_half_units(bytes);
            for row in page.items() {
                counts.rows.insert(key(row), row.clone());
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
    }
    counts
}

fn key(row: &Item) -> (String, String) {
    let text = |name: &str| match row.get(name) {
        Some(AttributeValue::S(value)) => value.clone(),
        other => panic!("a Counts row's {name} is {other:?}"),
    };
    (text("item_id"), text("shard"))
}

/// The run's writes to the Counts table, in write units.
#[derive(Debug, Default)]
pub struct Writes {
    pub corrections: u64,
    pub correction_units: u64,
    pub cleaned_rows: u64,
    pub cleanup_units: u64,
}

/// Corrections are new `D#C` rows (one UpdateItem each, no before image); a cleaned row is a
/// count row that lost attributes (one REMOVE update, billed on the larger image).
pub fn writes(before: &CountsTable, after: &CountsTable) -> Writes {
    let mut writes = Writes::default();
    for (key, row) in &after.rows {
        match before.rows.get(key) {
            None if key.1 == likes_store::reconciliation::CORRECTION_ROW => {
                writes.corrections += 1;
                writes.correction_units += capacity::write_units(capacity::item_size(row));
            }
            Some(old) if key.1.starts_with("D#") && row.len() < old.len() => {
                writes.cleaned_rows += 1;
                writes.cleanup_units += capacity::update_units(old, row);
            }
            _ => {}
        }
    }
    writes
}

/// The export as S3 holds it.
pub struct ExportObjects {
    pub data_files: u64,
    /// Σ of the data files' sizes (gzipped, as stored).
    pub data_bytes: u64,
    /// GETs a recount makes: the manifests, then one per data file.
    pub gets: u64,
}

pub async fn export_objects(stack: &TestStack, export_arn: &str) -> ExportObjects {
    let manifest = stack
        .dynamodb()
        .describe_export()
        .export_arn(export_arn)
        .send()
        .await
        .expect("DescribeExport")
        .export_description
        .and_then(|d| d.export_manifest)
        .expect("a completed export names its manifest");
    let bucket = stack.name("ExportBucket");
    let s3 = stack.s3();
    let export = ExportReader::new(s3.clone())
        .open(&bucket, &manifest)
        .await
        .expect("the export's manifests");
    let mut data_bytes = 0;
    for file in &export.files {
        let head = s3
            .head_object()
            .bucket(&bucket)
            .key(&file.data_file_s3_key)
            .send()
            .await
            .expect("HeadObject of a data file");
        data_bytes += head.content_length().unwrap_or_default() as u64;
    }
    let data_files = export.files.len() as u64;
    ExportObjects {
        data_files,
        data_bytes,
        gets: MANIFEST_GETS + data_files,
    }
}
