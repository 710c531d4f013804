//! `make bench-reads`: what a count read costs DynamoDB, as figures (not a timed test), for
//! the design (the public count handlers with the container's count cache) and the naive read
//! (no cache: every read Queries the item's partitions, as the handlers did before the cache)
//! side by side.
//!
//! One container (one `App`, one request at a time, as Lambda runs it) reads one viral item
//! at 1, 100 and 10,000 reads/s in real time, then a 40-item browse page. Requests are counted
//! on the wire by an interceptor on the DynamoDB client; read units come from AWS's size rules
//! over the rows each request reads. The page is also read as a materialized per-item total
//! would be read (one BatchGetItem of 40 one-row keys), to show what that design would save.
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
#[path = "reads/seed.rs"]
mod seed;
#[allow(dead_code)]
#[path = "write/sent.rs"]
mod sent;

use std::time::{Duration, Instant};

use likes_core::ItemId;
use likes_tests::{say, TestStack};

use container::Container;
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
    let viral_per_query = viral_half_units as f64 / f64::from(viral_queries);
    let mut page_half_units = 0;
    for item in &page {
        page_half_units += partition_half_units(&raw, &table, item.as_str()).await;
    }
    let page_per_query = page_half_units as f64 / PAGE as f64;
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
    say!();
    say!("One viral item, DynamoDB requests and RCU per count read ({seconds} s per rate):");
    say!(
        "  {:>10} | {:>11} | {:>26} | {:>14} | {:>27}",
        "offered /s",
        "achieved /s",
        "design (cache): req / RCU",
        "design: req /s",
        "naive (no cache): req / RCU"
    );
    for rate in RATES {
        let design = Container::new(&stack);
        let naive = Container::new(&stack);
        let item = ItemId::parse(VIRAL).expect("a valid id");
        let (reads, achieved) =
            paced(rate, seconds, u64::MAX, || design.get_like_count(VIRAL)).await;
        let design_cost = design.cost(reads, viral_per_query, as_of_half_units);
        // Without a cache every read costs the same at any rate; the emulator could not
        // serve 10,000 of them a second, so a bounded sample is read at the rate it can.
        let (naive_reads, _) = paced(rate, seconds, NAIVE_SAMPLE, || naive.naive_read(&item)).await;
        let naive_cost = naive.cost(naive_reads, viral_per_query, as_of_half_units);
        let per_second = (design_cost.queries + design_cost.gets + design_cost.others) as f64
            / (reads as f64 / achieved);
        say!(
            "  {rate:>10} | {achieved:>11.0} | {:>26} | {per_second:>14.1} | {:>27}",
            design_cost.line(),
            naive_cost.line()
        );
    }

    say!();
    say!("A {PAGE}-item page (cold items, 2 count rows each), DynamoDB requests and RCU per page:");
    let design = Container::new(&stack);
    let started = Instant::now();
    design.batch_get_like_counts(&page).await;
    let cold_wall = started.elapsed();
    let cold = design.cost(1, page_per_query, as_of_half_units);
    let (pages, _) = paced(100, seconds, u64::MAX, || {
        design.batch_get_like_counts(&page)
    })
    .await;
    let warm = design.cost(pages, page_per_query, as_of_half_units);
    let naive = Container::new(&stack);
    let started = Instant::now();
    naive.naive_page(&page).await;
    let naive_wall = started.elapsed();
    let naive_cost = naive.cost(1, page_per_query, as_of_half_units);
    let started = Instant::now();
    let totals = naive.batch_get_rows(&table, &page).await;
    let total_wall = started.elapsed();
    let total_sent = naive.sent.take();
    say!(
        "  design, cache cold:                 {} ({} ms on the emulator)",
        cold.line(),
        cold_wall.as_millis()
    );
    say!("  design, the same page at 100 /s:    {}", warm.line());
    say!(
        "  naive, a Query per item:            {} ({} ms on the emulator)",
        naive_cost.line(),
        naive_wall.as_millis()
    );
    say!(
        "  materialized total, BatchGetItem:   {} req / {} RCU ({} ms on the emulator; {totals} rows)",
        total_sent.len(),
        // BatchGetItem rounds every item up to 4 KB on its own.
        unit(PAGE as f64),
        total_wall.as_millis()
    );
    likes_tests::docs::write_said("count-reads", "make bench-reads");
    likers::likers_pages(&stack).await;
}

/// Calls `read` `rate` times a second for `seconds`, or `max` times at most, one at a time (a
/// late call goes at once); returns the calls made and the rate achieved.
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
    (total, total as f64 / started.elapsed().as_secs_f64())
}
