//! `make bench-reconcile`: what one reconciliation run costs at a size, as figures (not a
//! timed test), and that cost projected to 10^11 reaction rows.
//!
//! 1. Fills the Reactions table with `LIKES_BENCH_RECONCILE_ROWS` rows (default 100,000) over
//!    `LIKES_BENCH_RECONCILE_ITEMS` items (10,000; 5 hot ones take a fifth of the rows), in
//!    the shape the write path stores, by BatchWriteItem; the Likers table with the entries
//!    the log consumer would have written for the likes; and the Counts table with the
//!    count rows the aggregator would have written for them, 1% of items then put off by a
//!    few.
//! 2. Runs one reconciliation at the next cut (`Reconciler::run_at`, the export through the
//!    emulator's point-in-time exports), timed by phase from its progress reports.
//! 3. Prints rows read and rates, the drift report, and request units from what the run
//!    really read and wrote (S3 GETs from the export's manifest; Scan read units and write
//!    units of corrections and cleanup from the Counts items before and after, with AWS's
//!    item-size rules).
//! 4. Projects the run to 10^11 rows, in the function and as an Athena query, and says how
//!    many rows one run in the function carries, from its measured rate and memory.
//!
//! The stream: the bulk rows' records reach the aggregator's mapping as records past their
//! `MaximumRecordAgeInSeconds` (a fault that ages them), so the mapping gives them up to the
//! dead-letter queue instead of counting them a second time on top of the count rows written
//! directly, and instead of taking the emulator many minutes (a 99-item count transaction
//! holds its one lock for hundreds of ms). The bench checks none was counted, then lets the
//! pulse's probes through so `as_of` passes the cut. The event log's publisher is paused: no
//! part of reconciliation reads it.

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
#[allow(dead_code)]
#[path = "dynamodb/capacity.rs"]
mod capacity;
// The EMF capture keeps the functions' metric lines out of the figures; its tallies are the
// counts bench's.
#[path = "reconcile/dataset.rs"]
mod dataset;
#[allow(dead_code)]
#[path = "counts/emf.rs"]
mod emf;
#[path = "reconcile/figures.rs"]
mod figures;
#[path = "reconcile/load.rs"]
mod load;
#[path = "reconcile/memory.rs"]
mod memory;
#[path = "reconcile/phases.rs"]
mod phases;
#[path = "reconcile/projection.rs"]
mod projection;
#[path = "reconcile/usage.rs"]
mod usage;

use std::time::{Duration, Instant};

use likes_core::clock::now_ms;
use likes_tests::TestStack;

use dataset::Size;

/// Longer than any bulk load here: the mapping gives up on records older than a day.
const RECORD_AGE: Duration = Duration::from_secs(2 * 86_400);
const SETTLE: Duration = Duration::from_secs(300);
/// The run's deadline: the export poll (10 s) and the pipeline passing the cut fit well in it.
const RUN_TIMEOUT_MS: i64 = 300_000;

#[tokio::main]
async fn main() {
    capacity::check_rules();
    let size = Size {
        reactions: likes_tests::env_count("LIKES_BENCH_RECONCILE_ROWS", 100_000),
        items: likes_tests::env_count("LIKES_BENCH_RECONCILE_ITEMS", 10_000),
    };
    let started = Instant::now();
    // The pulse, the mapping and the run print a metrics line each from the stack's start.
    let capture = emf::Capture::start();
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    stack.publisher().pause();
    let aggregator = stack.pipeline();
    aggregator.faults().age_records_by(RECORD_AGE);

    eprintln!(
        "loading {} reaction rows over {} items",
        size.reactions, size.items
    );
    let load_ms = now_ms();
    let reactions = load::put_all(
        &stack.dynamodb(),
        &stack.name("ReactionsTable"),
        size.reactions,
        move |i| dataset::reaction_row(i, size, load_ms),
        |done| eprintln!("  {done} reaction rows"),
    )
    .await;
    let likes = std::sync::Arc::new(dataset::likes(size));
    let liked = likes.clone();
    let likers = load::put_all(
        &stack.dynamodb(),
        &stack.name("LikersTable"),
        likes.len(),
        move |k| dataset::liker_entry(liked[k], size, load_ms),
        |done| eprintln!("  {done} likers entries"),
    )
    .await;
    let period = stack.reconcile_period();
    let now = now_ms();
    let data = dataset::build(size, period.epoch(now), now);
    let rows = data.count_rows.clone();
    let counts = load::put_all(
        &stack.dynamodb(),
        &stack.name("CountsTable"),
        rows.len(),
        move |i| rows[i].clone(),
        |_| {},
    )
    .await;
    let table_bytes: usize = (0..size.reactions)
        .map(|i| capacity::item_size(&dataset::reaction_row(i, size, load_ms)))
        .sum();

    eprintln!("waiting for the aggregator's mapping to give up on the bulk rows' records");
    let counters = aggregator
        .settle(SETTLE)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        counters.dlq_records >= size.reactions as u64 && counters.records_delivered == 0,
        "the pipeline counted none of the rows written directly: {counters:?}"
    );
    aggregator.faults().clear();

    // The first cut whose uncertainty lies after every write, and the moment its last
    // write is clear of it (stream times are rounded down to the second).
    let cut = period.cut_at(now_ms() + period.uncertainty_ms) + period.length_ms;
    let clear = cut + period.uncertainty_ms + 1_200;
    tokio::time::sleep(Duration::from_millis((clear - now_ms()).max(0) as u64)).await;

    let before = usage::counts_table(&stack).await;
    eprintln!("reconciling at cut {cut}");
    let resident = memory::reset_peak();
    let (report, phases) = phases::run(&stack.reconciler(), cut, now_ms() + RUN_TIMEOUT_MS).await;
    let run_memory = resident
        .zip(memory::peak())
        .map(|(before, peak)| peak - before);
    let after = usage::counts_table(&stack).await;
    assert_eq!(
        (
            report.items_checked,
            report.items_drifted,
            report.items_corrected,
            report.correction_abs_sum,
            report.items_deferred
        ),
        (
            size.items as u64,
            data.drifted_items,
            data.drifted_items,
            data.drift_abs_sum,
            0
        ),
        "the run found exactly the drift injected: {}",
        report.summary()
    );
    let export = usage::export_objects(&stack, &report.export_arn).await;

    figures::Figures {
        size,
        reactions,
        likers,
        counts,
        table_bytes,
        report,
        drift_injected: data.drifted_items,
        phases,
        writes: usage::writes(&before, &after),
        scan_half_units: before.scan_half_units,
        count_rows: before.rows.len(),
        export,
        run_memory,
    }
    .print(&stack, started.elapsed());
    likes_tests::docs::write_said("reconcile", "make bench-reconcile");
    drop(stack);
    capture.stop();
}
