//! The run projected, on paper, to a table of 10^11 reaction rows: the recount in the
//! function (as the bench ran it) and the same recount as an Athena query over the export,
//! from what this run measured and AWS's published prices.

use likes_tests::say;

/// Reaction rows projected to.
pub const ROWS: f64 = 1e11;
/// Published prices (us-east-1): Athena per TB scanned, S3 GET per 1,000 requests,
/// DynamoDB export to S3 per GB of table size.
const ATHENA_PER_TB: f64 = 5.0;
const S3_GET_PER_1000: f64 = 0.0004;
const EXPORT_PER_GB: f64 = 0.10;
/// Lambda's longest invocation.
const LAMBDA_MAX_SECONDS: f64 = 900.0;
/// Athena bills at least this much per query.
const ATHENA_MIN_BYTES: f64 = 10e6;
/// An export writes at least one file per partition, and a DynamoDB partition holds at most
/// 10 GB: the fewest data files a table can export to. DynamoDB publishes no file size.
const PARTITION_MAX_BYTES: f64 = 10e9;

const GB: f64 = 1e9;
const TB: f64 = 1e12;

/// What this run measured, per reaction row.
pub struct Measured {
    pub recount_rows_per_second: f64,
    /// The export's data files, gzipped, per row.
    pub export_bytes_per_row: f64,
    /// The export's mean data file.
    pub file_bytes: f64,
    /// DynamoDB item size (name + value bytes) per row: the table size exports are billed on.
    pub table_bytes_per_row: f64,
    pub reaction_rows_per_item: f64,
    /// What the run held in memory per reaction row, when measured.
    pub memory_bytes_per_row: Option<f64>,
    /// The reconcile function's `MemorySize` in template.yaml (MB).
    pub function_memory_mb: f64,
}

fn dollars(amount: f64) -> String {
    if amount < 0.01 {
        format!("${amount:.4}")
    } else if amount < 100.0 {
        format!("${amount:.2}")
    } else {
        format!("${amount:.0}")
    }
}

pub fn print(m: &Measured) {
    let export_bytes = ROWS * m.export_bytes_per_row;
    let table_bytes = ROWS * m.table_bytes_per_row;
    // From the fewest files the partitions allow to as many as this run's file size gives:
    // the emulator writes four files whatever the size, so its files are small.
    let files_fewest = (table_bytes / PARTITION_MAX_BYTES).ceil();
    let files_local = (export_bytes / m.file_bytes).ceil();
    let gets = |files: f64| files + 4.0;
    let get_cost = |files: f64| gets(files) / 1000.0 * S3_GET_PER_1000;
    let lambda_seconds = ROWS / m.recount_rows_per_second;
    let invocations = (lambda_seconds / LAMBDA_MAX_SECONDS).ceil();
    let table_gb = table_bytes / GB;
    let items = ROWS / m.reaction_rows_per_item;
    let scanned = export_bytes.max(ATHENA_MIN_BYTES);

    say!("5. Projection to 10^11 reaction rows (on paper)");
    say!(
        "     measured here: {:.0} B/row exported (gzipped DYNAMODB_JSON), {:.0} B/row of table (item sizes),",
        m.export_bytes_per_row, m.table_bytes_per_row
    );
    say!(
        "     {:.0} rows/s recounted in one process, {:.1} MB per data file, {:.0} reaction rows per item",
        m.recount_rows_per_second,
        m.file_bytes / 1e6,
        m.reaction_rows_per_item
    );
    say!(
        "     published: Athena ${ATHENA_PER_TB}/TB scanned (10 MB minimum per query), S3 GET \
         ${S3_GET_PER_1000}/1,000, export ${EXPORT_PER_GB:.2}/GB of table size; Lambda runs 15 min at most"
    );
    say!(
        "   export (both paths):  {table_gb:.0} GB of table -> {} per export; {:.0} GB of gzipped files in S3",
        dollars(table_gb * EXPORT_PER_GB),
        export_bytes / GB
    );
    say!(
        "   in the function:      {:.0} GB read in {files_fewest:.0} (one per 10 GB partition, the fewest) to {files_local:.0}",
        export_bytes / GB
    );
    say!(
        "                         (this run's file size) data files: {:.0} to {:.0} GETs, {} to {};",
        gets(files_fewest),
        gets(files_local),
        dollars(get_cost(files_fewest)),
        dollars(get_cost(files_local))
    );
    say!(
        "                         {:.1} h of one process's time = {invocations:.0} invocations of 15 min, and a",
        lambda_seconds / 3600.0
    );
    say!(
        "                         per-item tally of {items:.1e} items: one invocation can neither finish nor hold it."
    );
    say!("                         Fanning out over data files does not help alone: files split the table by user");
    say!("                         (its partition key), so every file holds every item, and the partial tallies");
    say!("                         must be merged by item, a shuffle. That is what a query engine does.");
    say!(
        "   Athena (GROUP BY):    {:.2} TB scanned -> {} per run, + the same {} to {} of GETs (one per file at least);",
        scanned / TB,
        dollars(scanned / TB * ATHENA_PER_TB),
        dollars(get_cost(files_fewest)),
        dollars(get_cost(files_local))
    );
    say!("                         gzip is not splittable, so one reader per file: files stay the unit of parallelism.");
    let by_time = m.recount_rows_per_second * LAMBDA_MAX_SECONDS;
    say!(
        "   what one run in the function carries: every invocation reads the whole export, so at most"
    );
    match m.memory_bytes_per_row {
        Some(per_row) => say!(
            "     {by_time:.1e} rows by time (15 min at this rate) and {:.1e} by memory ({:.0} MB at {per_row:.0} B/row)",
            m.function_memory_mb * 1024.0 * 1024.0 / per_row,
            m.function_memory_mb
        ),
        None => say!("     {by_time:.1e} rows by time (15 min at this rate); memory not measured here"),
    }
    say!("   Assumptions: the same row shape and gzip ratio as here (mostly LIKE rows, one idempotency key each);");
    say!("     file counts between the bounds above (DynamoDB writes at least one file per partition and");
    say!("     publishes no size); the recount's rate is one process here on a shared 2-core machine, not");
    say!("     Lambda's; Counts-side units scale with items, shown per 100K reaction rows at this bench's ratio.");
}
