//! `make bench-cold-start`: cold start of the real bootstraps and their size, as figures (not
//! a timed test).
//!
//! The one `target/lambda/likes/bootstrap` that `cargo lambda build --release` made is spawned
//! as Lambda would start each function: an environment of Lambda's reserved variables (its
//! `_HANDLER` the function's `Handler`) and the function's own from template.yaml (resolved against a local stack on the emulator), with
//! `AWS_LAMBDA_RUNTIME_API` pointing at a stand-in Runtime API in this process that hands it
//! one event. Timed from just before the spawn to the bootstrap's first `GET …/next` (init:
//! runtime, config, SDK clients) and to its response `POST` (the first invocation served,
//! its DynamoDB calls to the emulator included); then the process is killed.
//!
//! `LIKES_BENCH_SPAWNS` (default 15) sets the measured spawns per function.

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
#[path = "cold_start/bootstrap.rs"]
mod bootstrap;
// The emulator's round trips are timed as `make bench-counts` times them (which uses every
// field).
#[allow(dead_code)]
#[path = "counts/emulator.rs"]
mod emulator;
#[path = "cold_start/environment.rs"]
mod environment;
#[path = "cold_start/events.rs"]
mod events;
#[path = "cold_start/measured.rs"]
mod measured;
#[path = "cold_start/report.rs"]
mod report;
#[path = "cold_start/runtime_api.rs"]
mod runtime_api;
#[path = "cold_start/spawn.rs"]
mod spawn;

use std::time::Instant;

use likes_tests::{say, TestStack};

use bootstrap::{lambda_dir, Bootstrap, BOOTSTRAP};
use environment::lambda_environment;
use measured::MEASURED;
use report::{print_cold_starts, print_conditions, print_size};
use spawn::{cold_start, Sample, Target};

#[tokio::main]
async fn main() {
    let spawns = likes_tests::env_count("LIKES_BENCH_SPAWNS", 15) as u64;
    let started = Instant::now();
    let lambda_dir = lambda_dir();
    let stack = TestStack::builder().as_deployed().start().await;
    // The stream mapping runs in this process; paused, it adds no load on the emulator.
    for pipeline in stack.stack.pipelines() {
        pipeline.pause();
    }
    let bootstrap = Bootstrap::inspect(&lambda_dir);

    let targets: Vec<Target> = MEASURED
        .into_iter()
        .map(|function| Target {
            function,
            bootstrap: lambda_dir.join(BOOTSTRAP).join("bootstrap"),
            environment: lambda_environment(&stack, function.logical_id),
        })
        .collect();
    // Before the cold starts: besides the figures for scale, its hundred-odd requests carry
    // the emulator past a one-off stall of 60-70 ms that otherwise lands on one early start.
    let emulator = emulator::time(&stack).await;
    let mut samples: Vec<Vec<Sample>> = targets.iter().map(|_| Vec::new()).collect();
    // Round robin, so drift in the emulator or the machine touches every function alike;
    // round 0 warms the emulator's tables and the page cache and is not counted.
    for round in 0..=spawns {
        for (target, samples) in targets.iter().zip(&mut samples) {
            let sample = cold_start(&stack, target, round).await;
            if round > 0 {
                samples.push(sample);
            }
        }
    }

    print_conditions(spawns);
    print_size(&bootstrap);
    print_cold_starts(&targets, &samples, spawns);
    say!("   For scale, the emulator's round trips (not DynamoDB's), warm client in this process:");
    say!(
        "   UpdateItem {:.1} ms (put-reaction's write; the aggregator's per count row), PutItem of {} B {:.1} ms",
        emulator.update_item_ms,
        emulator::INTENT_BYTES,
        emulator.intent_put_ms
    );
    say!("   (the aggregator's chunk: an intent PutItem, then one count-row UpdateItem per row it adds to).");
    say!(
        "\n(bench took {:.1} s, release build not included)",
        started.elapsed().as_secs_f64()
    );
    likes_tests::docs::write_said("cold-start", "make bench-cold-start");
}
