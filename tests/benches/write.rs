//! `make bench-write`: what one reaction write costs, as figures (not a timed test).
//!
//! 1. DynamoDB write units per kind of reaction, computed with AWS's item-size rules from the
//!    row's real before and after images (read from the emulator around each write), the
//!    `by_liked_at` index entry counted.
//! 2. DynamoDB requests per reaction, counted on the wire by an interceptor on the client.
//! 3. Handler CPU time per request (this process only: the emulator runs apart) and the
//!    emulator round trip, through the Lambda adapter and through the local HTTP front.
//!
//! `LIKES_BENCH_REQUESTS` (default 1000) sets the requests per CPU run, `LIKES_BENCH_FLIPS`
//! (default 60) the flips of the row-growth run.

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
#[path = "dynamodb/capacity.rs"]
mod capacity;
#[path = "write/cpu.rs"]
mod cpu;
#[path = "write/growth.rs"]
mod growth;
#[path = "write/handler.rs"]
mod handler;
#[path = "write/kinds.rs"]
mod kinds;
#[path = "write/observe.rs"]
mod observe;
#[path = "write/sent.rs"]
mod sent;

use std::time::Instant;

use likes_tests::{say, TestStack};

use observe::Bench;

/// Ids of the sizes a deployment sees: a Cognito `sub` is a 36-character UUID.
const TYPICAL_USER: &str = "3f9c2a4e-8b1d-4c6f-9a7e-2d5b8c1e0f47";
const TYPICAL_ITEM: &str = "game:12345";

#[tokio::main]
async fn main() {
    capacity::check_rules();
    let requests = likes_tests::env_count("LIKES_BENCH_REQUESTS", 1000);
    let flips = likes_tests::env_count("LIKES_BENCH_FLIPS", 60);
    let started = Instant::now();
    // Section 3 writes each of its 20 rows (and users) far faster than the template's write
    // limit allows one user (5/s): deployed with a limit it never reaches, it measures writes,
    // not 429s. The limit's own cost is one bucket UpdateItem per lease, beside this.
    let stack = TestStack::builder()
        .as_deployed()
        .parameters(&[("WriteRatePerSecond", "100000"), ("WriteBurst", "100000")])
        .start()
        .await;
    // The aggregator's stream mapping runs in this process; in AWS it is another function, off
    // the write path. Paused, it delivers nothing: no count writes contend with the requests.
    let pollers = stack.stack.pipelines();
    for pipeline in pollers {
        pipeline.pause();
    }
    let bench = Bench::new(&stack);

    let build = match cfg!(debug_assertions) {
        true => "debug",
        false => "release (cargo bench profile)",
    };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let endpoint = match std::env::var_os("AWS_ENDPOINT_URL") {
        Some(_) => "AWS_ENDPOINT_URL (under `make bench-write`: the offline emulator)",
        None => "an offline emulator this bench started",
    };
    say!("Likes write path: figures, not a timed test");
    say!("  {build} build, {cpus} CPUs; AWS endpoint: {endpoint}");
    say!(
        "  stream pollers (aggregator): {} paused for the bench",
        pollers.len()
    );
    say!("  item size = sum of attribute name bytes + value bytes (AWS's rules), from the emulator's");
    say!("  images; WCU = ceil(larger of before/after image / 1 KB); by_liked_at (LSI, KEYS_ONLY)");
    say!(
        "  entry = its 3 key attributes + 100 B, each put or delete of it costs ceil(entry / 1 KB)"
    );

    bench.reaction_kinds().await;
    bench.row_growth(flips).await;
    cpu::cpu_per_request(&stack, requests, pollers.len()).await;
    say!("\n(bench took {:.1} s)", started.elapsed().as_secs_f64());
    likes_tests::docs::write_said("write", "make bench-write");
}
