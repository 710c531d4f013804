//! `make bench-reads`: what a count read costs DynamoDB, as figures (not a timed test), for
//! the design (the public count handlers with the container's count cache) and the naive read
//! (no cache: every read Queries the item's partitions, as the handlers did before the cache)
//! side by side.
//!
//! One container (one `App`, one request at a time, as Lambda runs it) reads one viral item
//! at 1, 100 and 10,000 reads/s in real time, then a 40-item browse page. Requests are counted
//! on the wire by an interceptor on the DynamoDB client; read units come from AWS's size rules
//! over what each read request read, priced by another as it is answered. The page is also
//! read as a materialized per-item total would be read (one BatchGetItem of 40 one-row keys),
//! to show what that design would save.
//!
//! Every design read also reads its items' namespace rules and owners from the Catalog table
//! (one BatchGetItem of what the container's catalog cache does not hold fresh), so both are
//! read twice: without rules (no catalog rows: each key read finds nothing) and then with
//! rules set through the HTTP API (the namespace disables dislikes, every item's owner hides
//! its like count).
//!
//! The viral item is laid out as the aggregator leaves a hot item: K = 64 count rows in its
//! own partition and in each of H = 8 overflow partitions, with a marker; the page's items are
//! cold (two count rows each). `LIKES_BENCH_READ_SECONDS` (default 3) sets how long each rate
//! runs.
//!
//! Last, a page of an item's likers: 2,000 likers spread over the item's buckets as the likers
//! consumer leaves them, read through the real handler, beside what one Query of an index
//! keyed by the item alone would read (the layout that melts on a viral item's writes), with
//! what checking the reader's privacy adds; then the page when half of the newest 800 likers
//! are hidden from the reader (private, blocked, or blocking the reader), beside the
//! unfiltered read.

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
#[allow(dead_code)]
#[path = "dynamodb/capacity.rs"]
mod capacity;
#[path = "reads/container.rs"]
mod container;
#[path = "reads/likers.rs"]
mod likers;
#[path = "reads/priced.rs"]
mod priced;
#[path = "reads/rules.rs"]
mod rules;
#[path = "reads/seed.rs"]
mod seed;
#[allow(dead_code)]
#[path = "write/sent.rs"]
mod sent;

use std::time::{Duration, Instant};

use likes_core::namespace::Namespace;
use likes_core::ItemId;
use likes_store::catalog::CATALOG_CACHE_MS;
use likes_tests::{say, TestStack};

use container::{Container, Cost};
use seed::{partition_half_units, seed};

const VIRAL: &str = "game:viral";
const ROWS_PER_PARTITION: u32 = 64;
const OVERFLOW_PARTITIONS: u32 = 8;
const PAGE: usize = 40;
const RATES: [u32; 3] = [1, 100, 10_000];
/// Naive reads per rate: each one costs the same, whatever the rate.
const NAIVE_SAMPLE: u64 = 50;
const LIKERS: usize = 2_000;

#[tokio::main]
async fn main() {
    capacity::check_rules();
    let seconds = likes_tests::env_count("LIKES_BENCH_READ_SECONDS", 3) as u64;
    let stack = TestStack::start().await;
    let raw = stack.dynamodb();
    let table = stack.name("CountsTable");
    let page: Vec<ItemId> = (0..PAGE)
        .map(|n| ItemId::parse(&format!("game:page{n}")).expect("a valid id"))
        .collect();
    seed(&raw, &table, &page).await;
    let viral_half_units = partition_half_units(&raw, &table, VIRAL).await
        + partition_half_units(&raw, &table, &format!("{VIRAL}#1")).await
            * u64::from(OVERFLOW_PARTITIONS);
    let viral_queries = 1 + OVERFLOW_PARTITIONS;
    let as_of_half_units = partition_half_units(&raw, &table, "#asof#0").await as f64;
    let unit = |half: f64| half / 2.0;

    say!("Likes count reads: figures, not a timed test");
    say!(
        "  one container, one request at a time; {}; requests counted on the wire",
        if cfg!(debug_assertions) {
            "debug build"
        } else {
            "release build"
        }
    );
    say!(
        "  viral item: {viral_queries} partitions x {ROWS_PER_PARTITION} rows = {viral_queries} Queries, {} RCU per uncached read; as_of replica {} RCU",
        unit(viral_half_units as f64),
        unit(as_of_half_units)
    );
    say!(
        "  the design's reads include the Catalog table's BatchGetItem of the namespace's rules and the items' owners (each row, or its absence, cached {} ms); the naive read reads the counts only",
        CATALOG_CACHE_MS
    );
    let without = without_rules(&stack, &table, &page, seconds).await;
    with_rules(&stack, &page, seconds, &without).await;
    likes_tests::docs::write_said("count-reads", "make bench-reads");
    likers::likers_pages(&stack).await;
}

/// The viral item at each rate and the page, read with no catalog row for their namespace
/// or for them (each key the catalog reads finds nothing), beside the naive reads and the
/// materialized total; what the design's reads cost, for the reads with rules to be put
/// beside.
async fn without_rules(stack: &TestStack, table: &str, page: &[ItemId], seconds: u64) -> Baseline {
    say!();
    say!(
        "One viral item without rules (no catalog row for its namespace or for it), DynamoDB requests and RCU per count read ({seconds} s per rate):"
    );
    say!(
        "  {:>10} | {:>11} | {:>26} | {:>14} | {:>21} | {:>27}",
        "offered /s",
        "achieved /s",
        "design (cache): req / RCU",
        "design: req /s",
        "catalog: req / RCU /s",
        "naive (no cache): req / RCU"
    );
    let item = ItemId::parse(VIRAL).expect("a valid id");
    let mut viral = Vec::new();
    for rate in RATES {
        let design = ViralReads::measure(stack, rate, seconds).await;
        // Without a cache every read costs the same at any rate; the emulator could not
        // serve 10,000 of them a second, so a bounded sample is read at the rate it can.
        let naive = Container::new(stack);
        let (naive_reads, _) = paced(rate, seconds, NAIVE_SAMPLE, || naive.naive_read(&item)).await;
        say!(
            "  {} | {:>27}",
            design.columns(),
            naive.cost(naive_reads).line()
        );
        viral.push(design);
    }

    say!();
    say!("A {PAGE}-item page (cold items, 2 count rows each) without rules, DynamoDB requests and RCU per page:");
    let design = PageReads::measure(stack, page, seconds).await;
    let naive = Container::new(stack);
    let started = Instant::now();
    naive.naive_page(page).await;
    let naive_wall = started.elapsed();
    let naive_cost = naive.cost(1);
    let started = Instant::now();
    let totals = naive.batch_get_rows(table, page).await;
    let total_wall = started.elapsed();
    let total_cost = naive.cost(1);
    say!(
        "  design, cache cold:                 {}",
        design.cold_line()
    );
    say!(
        "  design, the same page at 100 /s:    {}",
        design.warm_line()
    );
    say!(
        "  naive, a Query per item:            {} ({} ms on the emulator)",
        naive_cost.line(),
        naive_wall.as_millis()
    );
    say!(
        "  materialized total, BatchGetItem:   {} ({} ms on the emulator; {totals} rows)",
        total_cost.line(),
        total_wall.as_millis()
    );
    Baseline {
        viral,
        page: design,
    }
}

/// What the design's reads cost without rules.
struct Baseline {
    viral: Vec<ViralReads>,
    page: PageReads,
}

/// The reads of [`without_rules`] again, once the viral item's namespace has rules and every
/// item an owner who hid its like count: the catalog's rows are found, and cost what the
/// missing keys did.
async fn with_rules(stack: &TestStack, page: &[ItemId], seconds: u64, without: &Baseline) {
    let item = ItemId::parse(VIRAL).expect("a valid id");
    let namespace = Namespace::of(&item);
    let items: Vec<ItemId> = std::iter::once(item).chain(page.iter().cloned()).collect();
    rules::set_rules(stack, &namespace, &items).await;
    say!();
    say!(
        "With rules: namespace `{}` disables dislikes and every item's owner hides its like count (set through the HTTP API; the reads answer both counts hidden).",
        namespace.as_str()
    );
    say!("One viral item with rules, per count read, beside the design without:");
    say!(
        "  {:>10} | {:>11} | {:>26} | {:>14} | {:>21} | {:>26}",
        "offered /s",
        "achieved /s",
        "design (cache): req / RCU",
        "design: req /s",
        "catalog: req / RCU /s",
        "without rules: req / RCU"
    );
    for (rate, without) in RATES.into_iter().zip(&without.viral) {
        let with = ViralReads::measure(stack, rate, seconds).await;
        say!("  {} | {:>26}", with.columns(), without.cost.line());
    }
    say!("The {PAGE}-item page with rules, per page, beside the design without:");
    let with = PageReads::measure(stack, page, seconds).await;
    say!(
        "  design, cache cold:                 {}; without rules {}",
        with.cold_line(),
        without.page.cold.line()
    );
    say!(
        "  design, the same page at 100 /s:    {}; without rules {}",
        with.warm_line(),
        without.page.warm.line()
    );
}

/// One container reading the viral item at one rate through the count handler.
struct ViralReads {
    rate: u32,
    achieved: f64,
    cost: Cost,
}

impl ViralReads {
    async fn measure(stack: &TestStack, rate: u32, seconds: u64) -> Self {
        let design = Container::new(stack);
        let (reads, achieved) =
            paced(rate, seconds, u64::MAX, || design.get_like_count(VIRAL)).await;
        Self {
            rate,
            achieved,
            cost: design.cost(reads),
        }
    }

    /// The columns both viral tables share: offered and achieved rates, the requests and
    /// RCU per read, and a second's requests, all and the catalog's.
    fn columns(&self) -> String {
        format!(
            "{:>10} | {:>11.0} | {:>26} | {:>14.1} | {:>21}",
            self.rate,
            self.achieved,
            self.cost.line(),
            self.cost.requests_per_second(self.achieved),
            self.cost.catalog_per_second(self.achieved)
        )
    }
}

/// One container reading the page through the batch handler: once cold, then at 100 /s.
struct PageReads {
    cold: Cost,
    cold_wall: Duration,
    warm: Cost,
}

impl PageReads {
    async fn measure(stack: &TestStack, page: &[ItemId], seconds: u64) -> Self {
        let design = Container::new(stack);
        let started = Instant::now();
        design.batch_get_like_counts(page).await;
        let cold_wall = started.elapsed();
        let cold = design.cost(1);
        let (pages, _) = paced(100, seconds, u64::MAX, || {
            design.batch_get_like_counts(page)
        })
        .await;
        Self {
            cold,
            cold_wall,
            warm: design.cost(pages),
        }
    }

    fn cold_line(&self) -> String {
        format!(
            "{}, catalog {} ({} ms on the emulator)",
            self.cold.line(),
            self.cold.catalog_line(),
            self.cold_wall.as_millis()
        )
    }

    fn warm_line(&self) -> String {
        format!("{}, catalog {}", self.warm.line(), self.warm.catalog_line())
    }
}

/// Calls `read` `rate` times a second for `seconds`, or `max` times at most, one at a time (a
/// late call goes at once); returns the calls made and the rate achieved over their intervals.
async fn paced<F, Fut>(rate: u32, seconds: u64, max: u64, mut read: F) -> (u64, f64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let interval = Duration::from_secs(1) / rate;
    let total = (u64::from(rate) * seconds).min(max);
    let started = tokio::time::Instant::now();
    for n in 0..total {
        tokio::time::sleep_until(started + interval * n as u32).await;
        read().await;
    }
    // The last call stands for the interval it opens: a run that keeps up achieves the rate
    // offered (its calls span `total` intervals, not `total - 1`).
    tokio::time::sleep_until(started + interval * total as u32).await;
    (total, total as f64 / started.elapsed().as_secs_f64())
}
