//! `make bench-reconcile-size`: what the in-function recount holds and how long it reads, per
//! export row, at sizes past what one invocation of the reconcile function's memory carries;
//! where the template's default `RecountEngine` (`auto`) sends each size; and both projected
//! to 10^8 and 10^11 reaction rows.
//!
//! The exports are synthesized in AWS's layout (`manifest-summary.json`, `manifest-files.json`
//! with each file's MD5, gzipped DynamoDB JSON data files) in the emulator's S3, from the
//! reconcile bench's rows (`dataset::reaction_row`: the same shape, ten rows an item), without
//! writing a row through the service. Each is read by the production reader as an in-function
//! run reads it (`ExportReader::recount_with_likes`), and a counting allocator gives the heap's
//! peak during the read exactly (resident memory hides what the allocator reuses). The sizes
//! are `LIKES_BENCH_RECONCILE_SIZES` (comma-separated rows; 1, 2 and 5 million unless set).

#[allow(dead_code)]
#[path = "dynamodb/capacity.rs"]
mod capacity;
#[allow(dead_code)]
#[path = "reconcile/dataset.rs"]
mod dataset;
#[path = "reconcile_size/heap.rs"]
mod heap;
#[path = "reconcile_size/synthetic.rs"]
mod synthetic;

use std::time::Instant;

use likes_reconcile::{AthenaConfig, ExportReader, RecountEngine};
use likes_tests::say;

use dataset::Size;

#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

/// Rows per synthesized data file (about 15 MB gzipped).
const FILE_ROWS: usize = 250_000;
/// Reaction rows an item, as in the reconcile bench.
const ROWS_PER_ITEM: usize = 10;
/// Lambda's largest memory and longest invocation.
const LAMBDA_MAX_MB: f64 = 10_240.0;
const LAMBDA_MAX_SECONDS: f64 = 900.0;
/// The share of the function's memory the recount may take: the Scan of the count rows, the
/// likers Scan, the runtime and the SDK need the rest.
const RECOUNT_SHARE: f64 = 0.5;
const MB: f64 = 1024.0 * 1024.0;

struct Measured {
    rows: usize,
    items: usize,
    files: usize,
    heap_bytes: usize,
    seconds: f64,
    manifest_heap_bytes: usize,
    engine: &'static str,
}

#[tokio::main]
async fn main() {
    let started = Instant::now();
    let sizes: Vec<usize> = std::env::var("LIKES_BENCH_RECONCILE_SIZES")
        .unwrap_or_else(|_| "1000000,2000000,5000000".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("LIKES_BENCH_RECONCILE_SIZES: rows, comma-separated")
        })
        .collect();
    let template =
        likes_local::template::Template::load(&likes_local::repo_root().join("template.yaml"))
            .expect("template.yaml parses");
    let function = template
        .resource("ReconcileFunction")
        .expect("a ReconcileFunction");
    let memory_mb = template
        .function_property("ReconcileFunction", "MemorySize")
        .and_then(serde_yaml::Value::as_f64)
        .expect("the reconcile function's MemorySize");
    let bound: u64 = function["Properties"]["Environment"]["Variables"]
        ["RECOUNT_FUNCTION_MAX_ROWS"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .expect("the reconcile function's RECOUNT_FUNCTION_MAX_ROWS");
    let default_engine = template.parameter("RecountEngine").expect("RecountEngine");
    assert_eq!(
        default_engine, "auto",
        "the bench measures the template's default"
    );
    let engine = RecountEngine::BySize {
        athena: AthenaConfig {
            workgroup: String::new(),
            database: String::new(),
            counts_table_arn: String::new(),
            leaderboard_table_arn: String::new(),
            likers_table_arn: String::new(),
        },
        function_max_rows: bound,
    };

    let aws = likes_local::aws::AwsTarget::connect()
        .await
        .expect("an AWS endpoint: run under likes-local exec");
    let s3 = likes_local::aws::s3_client(&aws.sdk);
    let bucket = likes_tests::exports::create_bucket(&s3).await;
    let reader = ExportReader::new(s3.clone());

    let mut measured = Vec::new();
    for &rows in &sizes {
        let size = Size {
            reactions: rows,
            items: (rows / ROWS_PER_ITEM).max(dataset::HOT_ITEMS + 1),
        };
        eprintln!("synthesizing an export of {rows} rows");
        let written =
            synthetic::write(&s3, &bucket, &format!("size-{rows}"), size, FILE_ROWS).await;

        // What every invocation of a run does first, whichever engine: the manifests.
        let base = heap::reset_peak();
        let export = reader
            .open(&bucket, &written.summary_key)
            .await
            .expect("the synthesized export opens");
        let manifest_heap_bytes = heap::peak() - base;
        let in_athena = engine.in_athena(export.summary.item_count);

        eprintln!("recounting it in the function");
        let base = heap::reset_peak();
        let read = Instant::now();
        let recount = reader
            .recount_with_likes(&export, |_| {})
            .await
            .expect("the synthesized export reads");
        let seconds = read.elapsed().as_secs_f64();
        let heap_bytes = heap::peak() - base;
        assert_eq!(recount.rows_read, rows as u64, "every row read");
        // The rows' shape leaves some of `size.items` without a row; what is held is the
        // items the export names.
        let items = recount.per_item.len();
        assert!(items > size.items / 2, "the items recounted: {items}");
        drop(recount);
        synthetic::delete(&s3, &bucket, &written).await;
        measured.push(Measured {
            rows,
            items,
            files: export.files.len(),
            heap_bytes,
            seconds,
            manifest_heap_bytes,
            engine: if in_athena { "athena" } else { "function" },
        });
    }
    print(&measured, memory_mb, bound, started.elapsed().as_secs_f64());
    likes_tests::docs::write_said("reconcile-size", "make bench-reconcile-size");
}

fn print(measured: &[Measured], memory_mb: f64, bound: u64, wall_seconds: f64) {
    let per_row = |m: &Measured| m.heap_bytes as f64 / m.rows as f64;
    let worst = measured.iter().map(per_row).fold(0.0, f64::max);
    let per_million = |m: &Measured| m.seconds / m.rows as f64 * 1e6;
    let slowest = measured.iter().map(per_million).fold(0.0, f64::max);
    // What a data file adds to the manifests' heap, between the smallest and largest export
    // (the rest is the same for any export: the SDK's buffers, the summary).
    let (first, last) = (&measured[0], &measured[measured.len() - 1]);
    let manifest_per_file = (last.manifest_heap_bytes as f64 - first.manifest_heap_bytes as f64)
        .max(0.0)
        / (last.files as f64 - first.files as f64).max(1.0);
    let fits = |mb: f64| mb * MB / worst;
    let supported = (memory_mb * RECOUNT_SHARE * MB / worst) as u64;

    say!("Likes reconciliation by size: figures, not a timed test");
    say!(
        "  release build, 2 CPUs shared; AWS endpoint: the offline emulator's S3; bench wall time {wall_seconds:.0} s"
    );
    say!(
        "  exports synthesized in AWS's layout ({FILE_ROWS} rows a gzipped DYNAMODB_JSON data file, the reconcile"
    );
    say!("  bench's row shape, about {ROWS_PER_ITEM} rows an item), read by ExportReader::recount_with_likes; heap peak");
    say!("  from a counting allocator (every byte the process held at once during the read)");
    say!();
    say!(
        "1. The in-function recount (what every invocation of an in-function run reads and holds)"
    );
    say!("   rows        items     files  heap peak     per row   read      per million rows   RecountEngine auto");
    for m in measured {
        say!(
            "   {:<11} {:<9} {:<6} {:>8.1} MB  {:>6.0} B  {:>6.1} s  {:>6.2} s            {}",
            m.rows,
            m.items,
            m.files,
            m.heap_bytes as f64 / MB,
            per_row(m),
            m.seconds,
            per_million(m),
            m.engine
        );
    }
    say!(
        "   the function's {memory_mb:.0} MB holds {:.1e} rows at {worst:.0} B/row (the most measured) with nothing else;",
        fits(memory_mb)
    );
    say!(
        "   half of it (the rest for the count rows' Scan, the likers Scan, the runtime) {supported} rows."
    );
    say!(
        "   RECOUNT_FUNCTION_MAX_ROWS in template.yaml: {bound}: exports of more items go to Athena."
    );
    assert!(
        bound <= supported,
        "RECOUNT_FUNCTION_MAX_ROWS {bound} is past what the measured recount fits in half of {memory_mb} MB ({supported})"
    );
    say!();
    say!("2. Past the bound (RecountEngine auto): the function reads the manifests, then Athena recounts");
    for m in measured {
        say!(
            "   {:<11} rows: manifests {:>7.1} KB of heap ({} data files)",
            m.rows,
            m.manifest_heap_bytes as f64 / 1024.0,
            m.files
        );
    }
    say!(
        "   then its work is the drifted items Athena returns (one result line at a time), not the table."
    );
    say!();
    say!("3. Projection (on paper, from the figures above)");
    for rows in [1e8, 1e11] {
        let heap_mb = rows * worst / MB;
        let read_s = rows * slowest / 1e6;
        let files_local = (rows / FILE_ROWS as f64).ceil();
        say!(
            "   {rows:.0e} rows, in the function: {:.0} MB of recount ({:.0}x the function's {memory_mb:.0} MB, {:.1}x Lambda's largest)",
            heap_mb,
            heap_mb / memory_mb,
            heap_mb / LAMBDA_MAX_MB
        );
        say!(
            "                          and {:.0} s of reading per invocation ({:.1}x Lambda's 900 s): {}.",
            read_s,
            read_s / LAMBDA_MAX_SECONDS,
            if heap_mb > LAMBDA_MAX_MB || read_s > LAMBDA_MAX_SECONDS {
                "no invocation can hold it"
            } else {
                "it fits only at Lambda's largest memory"
            }
        );
        say!(
            "                in Athena (auto chooses it past {bound}): the manifests, {:.1} MB more at {files_local:.0} data files",
            manifest_per_file * (files_local - first.files as f64) / MB
        );
        say!("                of this size, then the drift.");
    }
    say!("   Assumptions: the reconcile bench's row shape and items; one process on a shared 2-core machine");
    say!("     reading the emulator's S3, not Lambda reading S3; the recount only (the compare's Scan of the");
    say!("     count rows and the likers repair's Scan come on top: `make bench-reconcile` measures the whole run).");
}
