//! `make bench-counts`: what counting costs and how fresh counts are, as figures (not a timed
//! test), for the design and for a naive baseline measured side by side on the same stream.
//!
//! Two phases, each written through the real write path (`ReactionsStore::set`) at a steady
//! offered rate and counted by the real pipeline (the local event source mapping invoking
//! `likes_consumers::Aggregator`): a hot item that thousands of distinct users like, then
//! cold reactions over a thousand items (first likes and dislikes, switches, unlikes). The
//! naive counter (one row per item, one `UpdateItem ADD` per flip) reads the same stream.
//!
//! 1. Count writes per stream record and per flip, from the pipeline's counters and from
//!    the intents read back (one per chunk, on the Counts table beside its shard's watermark).
//! 2. Write units per flip with AWS's item-size rules, from the real intents, count rows and
//!    watermark rows read back: per chunk one intent `PutItem`, one `UpdateItem` per count row
//!    it adds to and one watermark `UpdateItem`, each billed once.
//! 3. Read units per count read (one item, a 40-id batch, the freshness read), from the
//!    items those reads return.
//! 4. Staleness from event time (the row's `updated_at`) to visible in a count read, and
//!    the pipeline's own applied - event time.
//! 5. Writes per second on the hot item's rows.
//!
//! The report is written into docs/performance.md between its `counts` markers.
//!
//! `LIKES_BENCH_HOT_USERS` (default 5000), `LIKES_BENCH_COLD_REACTIONS` (2000),
//! `LIKES_BENCH_COLD_ITEMS` (1000), `LIKES_BENCH_COLD_SAMPLES` (50), and the writes per
//! second offered, `LIKES_BENCH_HOT_RATE` (80) and `LIKES_BENCH_COLD_RATE` (40), size the
//! run. The rates stay under what the emulator sustains beside both counters and the
//! readers (every request waits on moto's one lock).

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
// The capacity rules are shared with `make bench-write`, which uses the index arithmetic.
#[allow(dead_code)]
#[path = "dynamodb/capacity.rs"]
mod capacity;
#[path = "counts/column.rs"]
mod column;
#[path = "counts/emf.rs"]
mod emf;
#[path = "counts/emulator.rs"]
mod emulator;
#[path = "counts/figures.rs"]
mod figures;
#[path = "counts/ledger.rs"]
mod ledger;
#[path = "counts/naive.rs"]
mod naive;
#[path = "counts/table.rs"]
mod table;
#[path = "counts/workload.rs"]
mod workload;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use likes_local::faults::Counters;
use likes_tests::TestStack;

use figures::Report;
use naive::Naive;
use workload::{Samples, Sighting, Written};

pub const HOT: &str = "experience:viral";
const SETTLE: Duration = Duration::from_secs(180);

#[tokio::main]
async fn main() {
    capacity::check_rules();
    let run = Run {
        hot_users: likes_tests::env_count("LIKES_BENCH_HOT_USERS", 5000),
        cold_reactions: likes_tests::env_count("LIKES_BENCH_COLD_REACTIONS", 2000),
        cold_items: likes_tests::env_count("LIKES_BENCH_COLD_ITEMS", 1000),
        samples: likes_tests::env_count("LIKES_BENCH_COLD_SAMPLES", 50),
        hot_rate: likes_tests::env_count("LIKES_BENCH_HOT_RATE", 80) as f64,
        cold_rate: likes_tests::env_count("LIKES_BENCH_COLD_RATE", 40) as f64,
    };
    let started = Instant::now();
    // The mapping starts with the stack and prints a metrics line per batch from then on.
    let capture = emf::Capture::start();
    let stack = TestStack::builder().as_deployed().start().await;
    let naive = Naive::start(&stack).await;
    let emulator = emulator::time(&stack).await;

    let hot = hot_phase(&stack, &naive, &run).await;
    let cold = cold_phase(&stack, &naive, &run).await;

    let pipeline = stack.pipeline();
    pipeline.pause();
    naive.stop();
    let emf = capture.stop();
    eprintln!("checking both counters against a recount of the Reactions table");
    let recount = stack.assert_counts_match_recount(&[HOT]).await;
    let naive_rows = naive.counter.rows().await;
    for (item, counts) in &recount {
        let row = naive_rows.get(item).cloned().unwrap_or_default();
        assert_eq!(
            naive::like_count(&row),
            counts.like_count,
            "the naive counter of {item} differs from the recount"
        );
    }

    let report = Report::gather(&stack, &naive, hot, cold, emf, naive_rows, emulator).await;
    report.print(&stack, &run, started);
    likes_tests::docs::write_said("counts", "make bench-counts");
}

pub struct Run {
    pub hot_users: usize,
    pub cold_reactions: usize,
    pub cold_items: usize,
    pub samples: usize,
    pub hot_rate: f64,
    pub cold_rate: f64,
}

/// One phase, as written and watched.
pub struct Phase {
    pub written: Vec<Written>,
    pub writing: Duration,
    pub counters: Counters,
    pub hot_series: workload::HotSeries,
    pub samples: Vec<(String, Sighting)>,
}

async fn hot_phase(stack: &TestStack, naive: &Naive, run: &Run) -> Phase {
    eprintln!(
        "hot phase: {} distinct users like {HOT}, {} writes/s offered",
        run.hot_users, run.hot_rate
    );
    let before = stack.pipeline().counters();
    let store = stack.reactions_store();
    let deadline =
        Instant::now() + Duration::from_secs_f64(run.hot_users as f64 / run.hot_rate) + SETTLE;
    let ((written, writing), hot_series) = tokio::join!(
        workload::write_paced(
            &store,
            "hot",
            workload::hot(HOT, run.hot_users),
            run.hot_rate,
            |_| {}
        ),
        workload::watch_hot(stack, naive, HOT, run.hot_users as u64, deadline),
    );
    let counters = settle(stack, naive).await;
    Phase {
        written,
        writing,
        counters: minus(counters, before),
        hot_series,
        samples: Vec::new(),
    }
}

async fn cold_phase(stack: &TestStack, naive: &Naive, run: &Run) -> Phase {
    eprintln!(
        "cold phase: {} reactions over {} items and {} sample items, {} writes/s offered",
        run.cold_reactions, run.cold_items, run.samples, run.cold_rate
    );
    let before = stack.pipeline().counters();
    let store = stack.reactions_store();
    let samples: Samples = Samples::default();
    let writing = Arc::new(AtomicBool::new(true));
    let reactions = workload::cold(run.cold_reactions, run.cold_items, run.samples);
    let deadline =
        Instant::now() + Duration::from_secs_f64(reactions.len() as f64 / run.cold_rate) + SETTLE;
    let counts = stack.counts_store();
    let seen = samples.clone();
    let write = async {
        let done = workload::write_paced(&store, "cold", reactions, run.cold_rate, move |w| {
            let sighting = Sighting {
                event_time_ms: w.event_time_ms.expect("a sample like is a flip"),
                ..Sighting::default()
            };
            seen.lock()
                .expect("samples")
                .push((w.item.clone(), sighting));
        })
        .await;
        writing.store(false, Ordering::SeqCst);
        done
    };
    let ((written, writing_took), ()) = tokio::join!(
        write,
        workload::watch_samples(&counts, naive, &samples, &writing, deadline)
    );
    let counters = settle(stack, naive).await;
    let samples = samples.lock().expect("samples").clone();
    Phase {
        written,
        writing: writing_took,
        counters: minus(counters, before),
        hot_series: workload::HotSeries::default(),
        samples,
    }
}

async fn settle(stack: &TestStack, naive: &Naive) -> Counters {
    let counters = stack
        .pipeline()
        .settle(SETTLE)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    naive.settle(SETTLE).await;
    counters
}

fn minus(after: Counters, before: Counters) -> Counters {
    Counters {
        invocations: after.invocations - before.invocations,
        records_delivered: after.records_delivered - before.records_delivered,
        intents_written: after.intents_written - before.intents_written,
        count_row_writes: after.count_row_writes - before.count_row_writes,
        retries: after.retries - before.retries,
        function_errors: after.function_errors - before.function_errors,
        ..Counters::default()
    }
}
