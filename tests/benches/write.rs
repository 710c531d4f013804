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
#[path = "write/handler.rs"]
mod handler;
#[path = "write/sent.rs"]
mod sent;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_api::{App, Config, Endpoint};
use likes_core::write::{KEYS_KEPT, KEYS_TRIM_ABOVE};
use likes_core::{IdempotencyKey, ItemId, ReactionState, UserId, WriteOutcome, WriteRequest};
use likes_store::ReactionsStore;
use likes_tests::TestStack;

use capacity::{Item, KeysOnlyIndex};
use handler::Reaction;
use sent::{Sent, SentRequests};
use ReactionState::{Dislike, Like, None as Neutral};

/// The `by_liked_at` LSI of template.yaml: KEYS_ONLY on `liked_at`.
const LIKED_AT_INDEX: KeysOnlyIndex = KeysOnlyIndex {
    table_keys: ["user_id", "item_id"],
    sort_key: "liked_at",
};

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
    println!("Likes write path: figures, not a timed test");
    println!("  {build} build, {cpus} CPUs; AWS endpoint: {endpoint}");
    println!(
        "  stream pollers (aggregator): {} paused for the bench",
        pollers.len()
    );
    println!("  item size = sum of attribute name bytes + value bytes (AWS's rules), from the emulator's");
    println!(
        "  images; WCU = ceil(larger of before/after image / 1 KB); by_liked_at (LSI, KEYS_ONLY)"
    );
    println!(
        "  entry = its 3 key attributes + 100 B, each put or delete of it costs ceil(entry / 1 KB)"
    );

    bench.reaction_kinds().await;
    bench.row_growth(flips).await;
    cpu_per_request(&stack, requests, pollers.len()).await;
    bootstrap_size();
    println!("\n(bench took {:.1} s)", started.elapsed().as_secs_f64());
}

struct Bench {
    /// Reads the images; its requests are not counted.
    raw: Client,
    /// The code under test, on a client whose requests are counted.
    store: ReactionsStore,
    sent: SentRequests,
    table: String,
}

/// One reaction write, seen from outside: the row before, the row after, what went out.
struct Observed {
    before: Item,
    /// The row right after the reaction's own UpdateItem: `after` unless a trim followed.
    flipped: Item,
    after: Item,
    sent: Vec<Sent>,
    /// The condition held: the row was written.
    written: bool,
}

/// Write units of one observed reaction.
#[derive(Debug, Default, Clone, Copy)]
struct Units {
    table: u64,
    index: u64,
    trim: u64,
}

impl Units {
    fn total(self) -> u64 {
        self.table + self.index + self.trim
    }
}

impl Observed {
    fn units(&self) -> Units {
        if !self.written {
            // A failed condition is still billed (existing item size, at least 1 WCU); it
            // writes nothing, so no index entry moves.
            return Units {
                table: capacity::failed_condition_units(&self.before),
                ..Units::default()
            };
        }
        Units {
            table: capacity::update_units(&self.before, &self.flipped),
            index: LIKED_AT_INDEX.write_units(&self.before, &self.flipped),
            trim: if self.trims() > 0 {
                capacity::update_units(&self.flipped, &self.after)
                    + LIKED_AT_INDEX.write_units(&self.flipped, &self.after)
            } else {
                0
            },
        }
    }

    fn trims(&self) -> usize {
        self.sent
            .iter()
            .filter(|s| matches!(s, Sent::Trim { .. }))
            .count()
    }
}

impl Bench {
    fn new(stack: &TestStack) -> Self {
        let sent = SentRequests::default();
        let config = aws_sdk_dynamodb::config::Builder::from(&stack.stack.aws.sdk)
            .interceptor(sent.clone())
            .build();
        let table = stack.name("ReactionsTable");
        Self {
            raw: stack.dynamodb(),
            store: ReactionsStore::new(Client::from_conf(config), table.clone()),
            sent,
            table,
        }
    }

    async fn row(&self, user: &UserId, item: &ItemId) -> Item {
        self.raw
            .get_item()
            .table_name(&self.table)
            .key("user_id", AttributeValue::S(user.as_str().into()))
            .key("item_id", AttributeValue::S(item.as_str().into()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem")
            .item
            .unwrap_or_default()
    }

    async fn observe(
        &self,
        user: &UserId,
        item: &ItemId,
        target: ReactionState,
        key: &str,
    ) -> Observed {
        let request = WriteRequest {
            target,
            key: Some(IdempotencyKey::parse(key).expect("a valid key").hash()),
            if_match: None,
        };
        let before = self.row(user, item).await;
        self.sent.take();
        let outcome = self
            .store
            .set(user, item, &request, likes_core::clock::now_ms())
            .await
            .expect("the write is answered");
        let sent = self.sent.take();
        let after = self.row(user, item).await;
        let written = matches!(outcome, WriteOutcome::Applied(_));
        if !written {
            assert_eq!(before, after, "a refused write changed the row");
        }
        // The trim runs right after the flip, inside `set`: the row between the two is the
        // final row plus the attributes the trim removed, which the flip left as they were.
        let mut flipped = after.clone();
        for request in &sent {
            if let Sent::Trim { removed } = request {
                for name in removed {
                    let value = before
                        .get(name)
                        .unwrap_or_else(|| panic!("trimmed {name} was on the row before the flip"));
                    assert!(!after.contains_key(name), "{name} survived its trim");
                    flipped.insert(name.clone(), value.clone());
                }
            }
        }
        Observed {
            before,
            flipped,
            after,
            sent,
            written,
        }
    }

    /// Section 1: every kind of reaction once, on one row with typical ids.
    async fn reaction_kinds(&self) {
        let user = UserId::parse(TYPICAL_USER).expect("valid");
        let item = ItemId::parse(TYPICAL_ITEM).expect("valid");
        let untouched = ItemId::parse("game:never-liked").expect("valid");
        let steps = [
            ("first like      no row -> LIKE", &item, Like, "k1"),
            ("unchanged       LIKE -> LIKE, new key", &item, Like, "k2"),
            ("replayed key    (k1 again)", &item, Like, "k1"),
            ("unlike          LIKE -> NONE", &item, Neutral, "k3"),
            ("dislike         NONE -> DISLIKE", &item, Dislike, "k4"),
            ("re-like         DISLIKE -> LIKE", &item, Like, "k5"),
            ("switch          LIKE -> DISLIKE", &item, Dislike, "k6"),
            ("un-dislike      DISLIKE -> NONE", &item, Neutral, "k7"),
            ("re-like         NONE -> LIKE", &item, Like, "k8"),
            ("unlike, no row  (never reacted)", &untouched, Neutral, "k9"),
        ];
        println!(
            "\n1. Write units and requests per reaction: ReactionsStore::set as PUT reaction calls it, keyed\n   (user_id {} B, item_id {} B)",
            TYPICAL_USER.len(),
            TYPICAL_ITEM.len()
        );
        println!(
            "   {:<40} {:<16} {:>15} {:>7} {:>6} {:>6}",
            "reaction", "requests sent", "row B before>after", "table ", "index", "total"
        );
        for (name, item, target, key) in steps {
            let observed = self.observe(&user, item, target, key).await;
            let units = observed.units();
            let mark = if observed.written { " " } else { "*" };
            let table = format!("{}{mark}", units.table);
            println!(
                "   {:<40} {:<16} {:>8} > {:<4}  {:>7} {:>6} {:>6}",
                name,
                sent::describe(&observed.sent),
                capacity::item_size(&observed.before),
                capacity::item_size(&observed.after),
                table,
                units.index,
                units.total(),
            );
        }
        println!("   * the condition failed, nothing was written; DynamoDB still bills a failed conditional");
        println!("     write at the existing item's size, minimum 1 WCU (0 only if failed checks were free).");
        println!("   index: 1 = one by_liked_at entry put (liked_at appears) or deleted (liked_at removed).");
    }

    /// Section 2: one row flipped LIKE <-> NONE with a fresh key each time, for typical and
    /// for the longest ids the API accepts: growth, trims, amortized units.
    async fn row_growth(&self, flips: usize) {
        let shapes = [
            (
                "typical ids",
                TYPICAL_USER.to_owned(),
                "growth:12345".to_owned(),
            ),
            (
                "longest ids",
                "u".repeat(likes_core::ids::USER_ID_MAX_LEN),
                format!(
                    "growth:{}",
                    "i".repeat(likes_core::ids::ITEM_ID_MAX_LEN - 7)
                ),
            ),
        ];
        let mut columns = Vec::new();
        for (label, user, item) in &shapes {
            let user = UserId::parse(user).expect("valid");
            let item = ItemId::parse(item).expect("valid");
            let mut observed = Vec::with_capacity(flips);
            for flip in 0..flips {
                let target = if flip % 2 == 0 { Like } else { Neutral };
                let key = format!("{label}-{flip}");
                let o = self.observe(&user, &item, target, &key).await;
                assert!(o.written, "flip {flip} of the growth run was refused");
                observed.push(o);
            }
            columns.push(Growth::new(label, &user, &item, &observed));
        }
        println!(
            "\n2. One row flipped {flips} times LIKE <-> NONE, a new Idempotency-Key each (keeps {KEYS_KEPT} keys, trims above {KEYS_TRIM_ABOVE})"
        );
        let row = |name: &str, cell: &dyn Fn(&Growth) -> String| {
            print!("   {name:<38}");
            for column in &columns {
                print!(" {:<38}", cell(column));
            }
            println!();
        };
        row("", &|g| g.label.clone());
        row("requests sent", &|g| g.requests.clone());
        row("trim writes", &|g| g.trim_schedule.clone());
        row("trims per flip", &|g| {
            format!("{:.3}", g.trims as f64 / flips as f64)
        });
        row("row bytes after flip 1", &|g| g.sizes_after[0].to_string());
        row(&format!("row bytes after flip {flips}"), &|g| {
            g.sizes_after[flips - 1].to_string()
        });
        row("row bytes at rest, min-max", &|g| {
            format!(
                "{}-{}",
                g.sizes_after.iter().min().expect("flips"),
                g.sizes_after.iter().max().expect("flips")
            )
        });
        row("row bytes at peak (before a trim)", &|g| g.peak.to_string());
        row("largest write", &|g| format!("{} WCU", g.largest_write));
        row("flips with a write over 1 WCU", &|g| {
            g.over_one_unit.to_string()
        });
        row("table WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(|u| u.table))
        });
        row("index WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(|u| u.index))
        });
        row("trim WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(|u| u.trim))
        });
        row("total WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(Units::total))
        });
        // Between the first and the last trim lie whole trim periods: the long-run rate.
        row("total WCU per flip, steady state", &|g| match g.steady() {
            Some(units) => format!(
                "{:.3} (flips {}-{})",
                average(units, Units::total),
                g.trimmed_at[0] + 1,
                g.trimmed_at[g.trimmed_at.len() - 1]
            ),
            None => "n/a: fewer than 2 trims".to_owned(),
        });
    }
}

/// The figures of one row-growth run.
struct Growth {
    label: String,
    requests: String,
    /// The flips (counted from 1) that were followed by a trim.
    trimmed_at: Vec<usize>,
    trims: usize,
    trim_schedule: String,
    sizes_after: Vec<usize>,
    peak: usize,
    largest_write: u64,
    over_one_unit: usize,
    units: Vec<Units>,
}

impl Growth {
    fn new(label: &str, user: &UserId, item: &ItemId, observed: &[Observed]) -> Self {
        let sent: Vec<Sent> = observed.iter().flat_map(|o| o.sent.clone()).collect();
        let trimmed_at: Vec<usize> = observed
            .iter()
            .enumerate()
            .filter(|(_, o)| o.trims() > 0)
            .map(|(i, _)| i + 1)
            .collect();
        let gaps: Vec<usize> = trimmed_at.windows(2).map(|w| w[1] - w[0]).collect();
        let trim_schedule = match (trimmed_at.first(), gaps.first()) {
            (None, _) => "none".to_owned(),
            (Some(first), None) => format!("1, at flip {first}"),
            (Some(first), Some(gap)) if gaps.iter().all(|g| g == gap) => {
                format!("{}: flip {first}, then every {gap}th", trimmed_at.len())
            }
            (Some(_), Some(_)) => format!("{} at flips {trimmed_at:?}", trimmed_at.len()),
        };
        let largest: Vec<u64> = observed
            .iter()
            .map(|o| {
                let flip = capacity::update_units(&o.before, &o.flipped);
                match o.trims() {
                    0 => flip,
                    _ => flip.max(capacity::update_units(&o.flipped, &o.after)),
                }
            })
            .collect();
        Self {
            label: format!(
                "{label} ({} B user, {} B item)",
                user.as_str().len(),
                item.as_str().len()
            ),
            requests: sent::describe(&sent),
            trims: trimmed_at.len(),
            trimmed_at,
            trim_schedule,
            sizes_after: observed
                .iter()
                .map(|o| capacity::item_size(&o.after))
                .collect(),
            peak: observed
                .iter()
                .map(|o| capacity::item_size(&o.flipped))
                .max()
                .unwrap_or(0),
            largest_write: largest.iter().copied().max().unwrap_or(0),
            over_one_unit: largest.iter().filter(|u| **u > 1).count(),
            units: observed.iter().map(Observed::units).collect(),
        }
    }

    fn per_flip(&self, part: impl Fn(Units) -> u64) -> f64 {
        average(&self.units, part)
    }

    /// The flips after the first trim up to and including the last: whole trim periods.
    fn steady(&self) -> Option<&[Units]> {
        match self.trimmed_at.as_slice() {
            [first, .., last] => Some(&self.units[*first..*last]),
            _ => None,
        }
    }
}

fn average(units: &[Units], part: impl Fn(Units) -> u64) -> f64 {
    units.iter().map(|u| part(*u)).sum::<u64>() as f64 / units.len() as f64
}

/// Section 3: CPU per request of the handler, and the emulator round trip.
async fn cpu_per_request(stack: &TestStack, requests: usize, pollers: usize) {
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

    println!(
        "\n3. CPU per request, PUT {}: {requests} sequential requests per path after {WARM_UP} warm-up,",
        handler::ROUTE_PATH
    );
    println!("   each a real flip with a fresh key over {ROWS} rows (so a trim every few flips of a row)");
    println!(
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
        println!(
            "   {name:<58} {:>9} us {:>9.2} ms {:>9.2} ms",
            run.cpu_per_request().as_micros(),
            millis(run.wall_percentile(50)),
            millis(run.wall_percentile(99)),
        );
    }
    println!(
        "   wall = round trip to the local emulator (moto, one global lock), not an AWS latency;"
    );
    println!("   not counted: the Lambda runtime API's HTTP calls and JSON log output.");
    if pollers > 0 {
        let runs = [&adapter, &store, &front];
        let idle: Duration = runs.iter().map(|r| r.pollers_cpu).sum();
        println!(
            "   The paused stream poller still reads the stream: its thread's CPU ({} us/request) is",
            idle.as_micros() / (runs.len() * requests).max(1) as u128
        );
        println!("   left out, but its reads hold the emulator's lock, which shows in the p99.");
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

/// The size of a built bootstrap, if `make build` or `make build-native` made one.
fn bootstrap_size() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("lambda/put-reaction/bootstrap");
    println!("\n4. Bootstrap size");
    match std::fs::read(&path) {
        Ok(bytes) => {
            // A release build from cargo lambda is stripped; a debug one keeps DWARF sections.
            let debug = bytes
                .windows(11)
                .any(|w| w == b".debug_info" || w == b".debug_line");
            println!(
                "   target/lambda/put-reaction/bootstrap: {:.1} MB ({})",
                bytes.len() as f64 / 1e6,
                if debug {
                    "a debug build (make build-native): not a release size"
                } else {
                    "release"
                }
            );
        }
        Err(_) => println!("   no target/lambda/put-reaction/bootstrap: `make build` makes one"),
    }
}
