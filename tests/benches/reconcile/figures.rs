//! The figures the bench prints, from the run's report, its phase timings and the units
//! worked out in [`crate::usage`].

use std::time::Duration;

use likes_reconcile::DriftReport;
use likes_tests::{say, TestStack};

use crate::dataset::{Size, HOT_ITEMS};
use crate::load::Loaded;
use crate::phases::Phases;
use crate::projection::{self, Measured};
use crate::usage::{ExportObjects, Writes};

/// Figures are given per this many reaction rows.
const PER_ROWS: f64 = 100_000.0;

pub struct Figures {
    pub size: Size,
    pub reactions: Loaded,
    pub likers: Loaded,
    pub counts: Loaded,
    /// Σ DynamoDB item sizes of the reaction rows written.
    pub table_bytes: usize,
    pub report: DriftReport,
    /// Items given drift before the run.
    pub drift_injected: u64,
    pub phases: Phases,
    pub writes: Writes,
    /// A full Scan of the Counts table as the run read it.
    pub scan_half_units: u64,
    pub count_rows: usize,
    pub export: ExportObjects,
    /// How much the bench's resident memory grew to during the run (bytes).
    pub run_memory: Option<u64>,
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

impl Figures {
    fn per_rows(&self, units: f64) -> f64 {
        units * PER_ROWS / self.report.rows_read as f64
    }

    pub fn print(&self, stack: &TestStack, elapsed: Duration) {
        let build = if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        };
        let rows = self.report.rows_read as f64;
        let p = &self.phases;
        let recount_rate = rows / p.recount.as_secs_f64();
        say!("Likes reconciliation: figures, not a timed test");
        say!(
            "  {build} build, {} CPUs; AWS endpoint: {}; bench wall time {}",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            stack.stack.aws.endpoint_url,
            seconds(elapsed)
        );
        say!(
            "  table: {} reaction rows over {} items ({HOT_ITEMS} hot ones hold a fifth of them), {} count rows",
            self.size.reactions, self.size.items, self.count_rows
        );
        say!(
            "  load:  BatchWriteItem of 25 puts: reactions {} requests in {} ({:.0} requests/s, {:.0} rows/s),",
            self.reactions.requests,
            seconds(self.reactions.elapsed),
            self.reactions.requests_per_second(),
            self.reactions.rows_per_second()
        );
        say!(
            "         likers entries {} requests in {}, count rows {} requests in {}",
            self.likers.requests,
            seconds(self.likers.elapsed),
            self.counts.requests,
            seconds(self.counts.elapsed)
        );
        say!("  honest about: the count rows are written directly in the aggregator's layout (totals, first epoch,");
        say!("    updated_at, a hot row's later epoch's subtotals; hot items over 8 overflow partitions), the likers entries in the likers");
        say!("    consumer's (the count rows list no likers buckets: nothing here reads a page); the stream records of the bulk rows");
        say!("    went to the dead-letter queue as too old (checked: none counted), so nothing counted them twice.");
        say!("    The run itself is the real one: export at the cut, S3 reads, Scan, judge, corrections, cleanup.");
        say!();

        say!("1. One run, by phase (local emulator, one lock for every request)");
        let phase = |name: &str, d: Duration| {
            say!(
                "   {name:<34} {:>9}   {:>9} per 100K rows",
                seconds(d),
                seconds(Duration::from_secs_f64(self.per_rows(d.as_secs_f64())))
            );
        };
        phase("export wait (+ pipeline past cut)", p.export_wait);
        phase("recount: S3 GET + gunzip + parse", p.recount);
        phase("Counts Scan", p.counts_scan);
        phase("compare + correct", p.compare);
        phase("leaderboard: Query + repair", p.leaderboard);
        phase("likers: Scan + repair", p.likers);
        phase("cleanup (REMOVE subtotals)", p.cleanup);
        phase("report (S3 PUT, run done)", p.report);
        phase("total", p.total());
        phase("total after the export", p.after_export());
        say!(
            "   rows read {} ({} probe rows); {:.0} rows/s read and recounted; {:.0} rows/s over the whole run",
            self.report.rows_read,
            self.report.probe_rows,
            recount_rate,
            rows / p.total().as_secs_f64()
        );
        if let Some(bytes) = self.run_memory {
            say!(
                "   memory: the process's peak grew by {:.1} MB during the run, {:.0} B per reaction row (a lower bound)",
                bytes as f64 / 1e6,
                bytes as f64 / rows
            );
        }
        say!("   The export wait is the reconciler's 10 s poll of DescribeExport (the emulator completes in 2 s;");
        say!("   AWS takes minutes). Cleanup and corrections are one UpdateItem each at the emulator's pace.");
        say!();

        let r = &self.report;
        say!("2. Drift report");
        say!(
            "   items checked {}, in sync {}, drifted {} (injected {}), corrected {}, deferred {}, clamped {};",
            r.items_checked,
            r.items_in_sync,
            r.items_drifted,
            self.drift_injected,
            r.items_corrected,
            r.items_deferred,
            r.items_clamped
        );
        say!(
            "   correction |sum| {}; corrections written {} (D#C rows); count rows cleaned {}",
            r.correction_abs_sum,
            self.writes.corrections,
            self.writes.cleaned_rows
        );
        say!();

        let e = &self.export;
        say!(
            "3. Request units, this run and per 100K reaction rows ({} rows read)",
            r.rows_read
        );
        let units = |name: &str, n: f64, how: &str| {
            say!(
                "   {name:<30} {n:>9.1}   {:>9.1} per 100K rows   {how}",
                self.per_rows(n)
            );
        };
        units(
            "S3 GET",
            e.gets as f64,
            &format!("{} data files + 2 manifests + their .md5", e.data_files),
        );
        units("S3 PUT", 1.0, "the drift report");
        units(
            "Counts Scan RCU",
            self.scan_half_units as f64 / 2.0,
            "eventually consistent: 0.5 per started 4 KB of each page",
        );
        units(
            "correction WCU",
            self.writes.correction_units as f64,
            "new D#C rows: ceil(size / 1 KB) each",
        );
        units(
            "cleanup WCU",
            self.writes.cleanup_units as f64,
            "REMOVE updates: ceil(larger image / 1 KB) each",
        );
        say!("   Cleanup writes only rows with subtotals before the cut: a row keeps none for its first epoch, so");
        say!("   here the hot items' rows (written in two epochs), not the cold ones (one epoch each).");
        say!();

        let export_bytes_per_row = e.data_bytes as f64 / rows;
        say!("4. The export");
        say!(
            "   {} data files, {} bytes gzipped: {export_bytes_per_row:.1} B/row; table {:.1} B/row by DynamoDB's item sizes",
            e.data_files,
            e.data_bytes,
            self.table_bytes as f64 / self.size.reactions as f64
        );
        say!();

        projection::print(&Measured {
            recount_rows_per_second: recount_rate,
            export_bytes_per_row,
            file_bytes: e.data_bytes as f64 / e.data_files as f64,
            table_bytes_per_row: self.table_bytes as f64 / self.size.reactions as f64,
            reaction_rows_per_item: self.size.reactions as f64 / self.size.items as f64,
            memory_bytes_per_row: self.run_memory.map(|bytes| bytes as f64 / rows),
            function_memory_mb: stack
                .stack
                .template
                .function_property("ReconcileFunction", "MemorySize")
                .and_then(serde_yaml::Value::as_f64)
                .expect("the reconcile function's MemorySize"),
        });
    }
}
