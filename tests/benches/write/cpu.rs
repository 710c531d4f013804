//! Section 3: the handler's CPU per request and the emulator round trip, through the Lambda
//! adapter, the store alone and the local HTTP front.

use std::collections::BTreeMap;
use std::time::Duration;

use likes_api::{App, Config, Endpoint};
use likes_store::ReactionsStore;
use likes_tests::{say, TestStack};

use crate::handler::{self, Reaction};
use crate::TYPICAL_USER;

/// Section 3: CPU per request of the handler, and the emulator round trip.
pub async fn cpu_per_request(stack: &TestStack, requests: usize, pollers: usize) {
    const ROWS: usize = 20;
    const WARM_UP: usize = 50;
    let app = put_reaction_app(stack);
    // Each request flips its row (LIKE -> DISLIKE -> NONE -> ...) with a fresh key, so every
    // one is a real write, and a row's trim comes every few flips as it would on a busy row.
    let reactions = |run: &str, n: usize| -> Vec<Reaction> {
        (0..n)
            .map(|i| Reaction {
                user: format!("{TYPICAL_USER}-{}", i % ROWS),
                item: format!("cpu:{run}"),
                key: format!("{run}-{i}"),
                state: ["LIKE", "DISLIKE", "NONE"][(i / ROWS) % 3],
            })
            .collect()
    };
    handler::through_handler(&app, stack, &reactions("warm-handler", WARM_UP)).await;
    let adapter = handler::through_handler(&app, stack, &reactions("handler", requests)).await;
    let store = ReactionsStore::new(stack.dynamodb(), stack.name("ReactionsTable"));
    handler::through_store(&store, &reactions("warm-store", WARM_UP)).await;
    let store = handler::through_store(&store, &reactions("store", requests)).await;
    handler::through_front(stack, &reactions("warm-front", WARM_UP)).await;
    let front = handler::through_front(stack, &reactions("front", requests)).await;

    say!(
        "\n3. CPU per request, PUT {}: {requests} sequential requests per path after {WARM_UP} warm-up,",
        handler::ROUTE_PATH
    );
    say!("   each a real flip with a fresh key over {ROWS} rows (so a trim every few flips of a row)");
    say!(
        "   {:<58} {:>12} {:>12} {:>12}",
        "path (CPU: this process only, the emulator excluded)",
        "CPU/request",
        "wall p50",
        "wall p99"
    );
    for (name, run) in [
        (
            "Lambda adapter -> App::handle -> store (a bootstrap's work)",
            &adapter,
        ),
        (
            "  of which ReactionsStore::set alone (SDK, HTTP, trims)",
            &store,
        ),
        (
            "local HTTP front: + JWT check, v2 event, client and server",
            &front,
        ),
    ] {
        say!(
            "   {name:<58} {:>9} us {:>9.2} ms {:>9.2} ms",
            run.cpu_per_request().as_micros(),
            millis(run.wall_percentile(50.0)),
            millis(run.wall_percentile(99.0)),
        );
    }
    say!("   wall = round trip to the local emulator (moto, one global lock), not an AWS latency;");
    say!("   not counted: the Lambda runtime API's HTTP calls and JSON log output.");
    if pollers > 0 {
        let runs = [&adapter, &store, &front];
        let idle: Duration = runs.iter().map(|r| r.pollers_cpu).sum();
        say!(
            "   The paused stream poller still reads the stream: its thread's CPU ({} us/request) is",
            idle.as_micros() / (runs.len() * requests).max(1) as u128
        );
        say!("   left out, but its reads hold the emulator's lock, which shows in the p99.");
    }
}

/// The put-reaction function's handler, configured from its `Environment` in template.yaml
/// as the local front configures it.
fn put_reaction_app(stack: &TestStack) -> App {
    let stack = &stack.stack;
    let variables: BTreeMap<String, String> = stack
        .template
        .environment("PutReactionFunction")
        .into_iter()
        .map(|(name, value)| {
            let resolved = stack
                .resources
                .resolve(&stack.template, &value)
                .unwrap_or_else(|| panic!("{name} resolves locally"));
            (name, resolved)
        })
        .collect();
    let config = Config::from_lookup(Endpoint::PutReaction, |name| variables.get(name).cloned())
        .expect("the put-reaction function's configuration");
    App::new(config, &stack.aws.sdk)
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
