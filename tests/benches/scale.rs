//! `make bench-scale`: the design and a naive counter at AWS's scale, in simulated time, on
//! one machine and without an emulator.
//!
//! A viral item liked by 50,000 distinct users a second over 100,000 background reactions a
//! second flows through a model of AWS's topology: the Reactions stream's shards, the event
//! source mapping as template.yaml configures it, the aggregator's calls with modelled
//! latencies, the Counts table's per-partition-key write units and transaction conflicts,
//! and the Kinesis event stream's per-shard records. Every decision is the real one from
//! `likes_core::pipeline` (batch hotness, chunk cuts, count-row routing, claims, event
//! partition keys); only AWS is modelled. Deterministic: a seeded generator drives the
//! traffic and the latencies.
//!
//! Sizes: `LIKES_SCALE_SECONDS` (60), `LIKES_SCALE_SHARDS` (Reactions stream shards, 200),
//! `LIKES_SCALE_EVENT_SHARDS` (Kinesis shards, 200), `LIKES_SCALE_VIRAL_RATE` (50000/s),
//! `LIKES_SCALE_BACKGROUND_RATE` (100000/s), `LIKES_SCALE_ITEMS` (background items,
//! 10000000), `LIKES_SCALE_ZIPF` (their popularity exponent, 0.9; 0 is uniform),
//! `LIKES_SCALE_ROWS` (K) and `LIKES_SCALE_OVERFLOW` (H), else the template's;
//! `LIKES_SCALE_SEED` (1).

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
// The capacity rules are shared with the other benches, which use more of them.
#[allow(dead_code)]
#[path = "dynamodb/capacity.rs"]
mod capacity;
#[path = "scale/design.rs"]
mod design;
#[path = "scale/kinesis.rs"]
mod kinesis;
#[path = "scale/latency.rs"]
mod latency;
#[path = "scale/mapping.rs"]
mod mapping;
#[path = "scale/meter.rs"]
mod meter;
#[path = "scale/naive.rs"]
mod naive;
#[path = "scale/plot.rs"]
mod plot;
#[path = "scale/publisher.rs"]
mod publisher;
#[path = "scale/report.rs"]
mod report;
#[path = "scale/table.rs"]
mod table;
#[path = "scale/traffic.rs"]
mod traffic;

use std::time::Instant;

use likes_core::pipeline::{CountLayout, HOT_ITEM_CHANGES, MAX_CHUNK_ITEMS};
use likes_core::reconcile::Period;
use likes_local::template::{self, Template};
use likes_tests::{env_count, AGGREGATOR_FUNCTION, PUBLISHER_FUNCTION};

use design::{Design, DesignConfig};
use mapping::{MappingConfig, SECOND};
use naive::Naive;
use publisher::Publisher;
use report::Column;
use traffic::{Traffic, TrafficConfig};

fn env_number(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

/// A mapping of the Reactions stream as the template deploys it.
fn stream_mapping(template: &Template, function: &str, shards: u32, seed: u64) -> MappingConfig {
    let event = template
        .function_property(function, "Events")
        .and_then(|events| events.as_mapping())
        .and_then(|events| {
            events
                .values()
                .find(|e| e["Type"].as_str() == Some("DynamoDB"))
        })
        .unwrap_or_else(|| panic!("{function} has a DynamoDB stream event"));
    let property = |name: &str| {
        event["Properties"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("{function}'s stream event has no {name}"))
    };
    MappingConfig {
        shards,
        batch_size: property("BatchSize") as usize,
        batching_window: property("MaximumBatchingWindowInSeconds") * SECOND,
        seed,
    }
}

fn parameter(template: &Template, name: &str) -> u32 {
    template
        .parameter(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("template parameter {name} has a numeric default"))
}

fn main() {
    capacity::check_rules();
    let started = Instant::now();
    let template = Template::load(&template::default_path()).expect("template.yaml");
    let traffic = TrafficConfig {
        seconds: env_count("LIKES_SCALE_SECONDS", 60) as u64,
        viral_per_second: env_count("LIKES_SCALE_VIRAL_RATE", 50_000) as f64,
        background_per_second: env_count("LIKES_SCALE_BACKGROUND_RATE", 100_000) as f64,
        background_items: env_count("LIKES_SCALE_ITEMS", 10_000_000) as u64,
        zipf_exponent: env_number("LIKES_SCALE_ZIPF", 0.9),
        seed: env_count("LIKES_SCALE_SEED", 1) as u64,
    };
    let shards = env_count("LIKES_SCALE_SHARDS", 200) as u32;
    let aggregator_mapping = stream_mapping(&template, AGGREGATOR_FUNCTION, shards, traffic.seed);
    let publisher_mapping = stream_mapping(&template, PUBLISHER_FUNCTION, shards, traffic.seed);
    let event_shards = env_count("LIKES_SCALE_EVENT_SHARDS", 200) as u32;
    let layout = CountLayout {
        rows: env_count(
            "LIKES_SCALE_ROWS",
            parameter(&template, "CountShards") as usize,
        ) as u32,
        overflow_partitions: env_count(
            "LIKES_SCALE_OVERFLOW",
            parameter(&template, "OverflowPartitions") as usize,
        ) as u32,
    };
    let aggregator_number = |name: &str| -> i64 {
        template.environment(AGGREGATOR_FUNCTION)[name]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} is a number"))
    };
    let chunk_records = aggregator_number("CHUNK_RECORDS") as usize;
    // Epoch subtotals and near-cut counts ride in the same row update: they change no write
    // count, but the real routing needs them.
    let period = Period {
        length_ms: aggregator_number("RECONCILE_EPOCH_SECONDS") * 1000,
        uncertainty_ms: aggregator_number("EXPORT_UNCERTAINTY_SECONDS") * 1000,
    };
    let design_config = DesignConfig {
        chunk_records,
        layout,
        period,
        stream_shards: shards,
        seed: traffic.seed + 1,
    };

    // Three mappings of one stream, independent of each other: a thread each, each with its
    // own generator of the same flips.
    let (seed, config) = (traffic.seed, &traffic);
    let ((offered, design_run, design), events, (naive_run, naive)) = std::thread::scope(|scope| {
        let design = scope.spawn(|| {
            let mut traffic = Traffic::new(config.clone());
            let mut design = Design::new(design_config);
            let run = mapping::run(aggregator_mapping, &mut traffic, &mut design);
            (traffic.offered(), run, design.finish())
        });
        let publisher = scope.spawn(|| {
            let mut publisher = Publisher::new(shards, event_shards, seed + 2);
            let traffic = Traffic::new(config.clone());
            mapping::run(publisher_mapping, traffic, &mut publisher);
            publisher.finish()
        });
        let naive = scope.spawn(|| {
            // Batched as the aggregator is, as a second mapping of the stream would be.
            let mut naive = Naive::new(shards, event_shards, seed + 3);
            let traffic = Traffic::new(config.clone());
            let run = mapping::run(aggregator_mapping, traffic, &mut naive);
            (run, naive.finish())
        });
        (
            design.join().expect("design run"),
            publisher.join().expect("publisher run"),
            naive.join().expect("naive run"),
        )
    });

    // A figure from a run that lost or doubled a flip would be worthless.
    assert_eq!(
        (design.counted_viral, design.counted_total),
        (offered.viral, offered.total),
        "the design's count rows add up to exactly the flips offered"
    );
    assert_eq!(naive.counted_total, offered.total);

    println!(
        "Likes at scale: {} simulated seconds of AWS's topology, every decision from likes-core",
        traffic.seconds
    );
    println!(
        "  traffic   {} likes/s on {} by distinct users, over {} reactions/s on {} items",
        traffic.viral_per_second,
        traffic::VIRAL_ITEM,
        traffic.background_per_second,
        traffic.background_items
    );
    println!(
        "            (item popularity ~ rank^-{}, users uniform over 100M), seed {}: {} flips",
        traffic.zipf_exponent, traffic.seed, offered.flips
    );
    println!(
        "  stream    {shards} Reactions stream shards by hash(user_id); per shard one batch in flight,"
    );
    println!("            a failed batch resent at once from its failed record (template.yaml):");
    println!(
        "            aggregator BatchSize {}, window {} s; publisher BatchSize {}, window {} s",
        aggregator_mapping.batch_size,
        aggregator_mapping.batching_window / SECOND,
        publisher_mapping.batch_size,
        publisher_mapping.batching_window / SECOND
    );
    println!(
        "  design    chunks <= {chunk_records} records (CHUNK_RECORDS) and <= {MAX_CHUNK_ITEMS} items; K = {} rows,",
        layout.rows
    );
    println!(
        "            H = {} overflow partitions, hot at >= {HOT_ITEM_CHANGES} changes in a batch",
        layout.overflow_partitions
    );
    println!(
        "  latency   TransactWriteItems {}, UpdateItem {}, PutRecords {} ms, uniform",
        range(latency::TRANSACTION),
        range(latency::UPDATE_ITEM),
        range(latency::PUT_RECORDS)
    );
    println!(
        "  conflict  two transactions in flight at once on one count row: the later is cancelled,"
    );
    println!(
        "            retried 5 times, 50/100/200/400 ms apart; a cancelled attempt billed half"
    );
    println!("  kinesis   {event_shards} event stream shards, MD5 of the partition key over even hash ranges");
    println!();
    let columns = [
        Column {
            name: "design",
            counts_wcu: design.counts_wcu.finish(design_run.end),
            kinesis: events.kinesis.finish(design_run.end),
            conflicts: Some(design.conflicts.seconds().to_vec()),
            chunks: Some((
                design.chunks_committed,
                design.chunks_failed,
                design.chunks_already_claimed,
            )),
            staleness: design.staleness,
            as_of_lag: Some(design.as_of_lag),
            event_lag: events.lag,
            count_row_writes: design.count_row_writes,
            other_counts_writes: Some(design.marker_writes + design.watermark_writes),
            claims_wcu: Some(design.claims_wcu.finish(design_run.end)),
            mapping: design_run,
        },
        Column {
            name: "naive (row per item)",
            counts_wcu: naive.counts_wcu.finish(naive_run.end),
            kinesis: naive.events.kinesis.finish(naive_run.end),
            conflicts: None,
            chunks: None,
            staleness: naive.staleness,
            as_of_lag: None,
            event_lag: naive.events.lag,
            count_row_writes: naive.count_row_writes,
            other_counts_writes: None,
            claims_wcu: None,
            mapping: naive_run,
        },
    ];
    report::print(&columns, traffic.seconds as usize, offered.flips);
    println!();
    println!(
        "  counted: the design's rows add up to the {} flips offered ({} viral likes)",
        offered.flips, offered.viral.like
    );
    println!("  limits: 1000 WCU/s per partition key (OVER: a second past it), 1000 records/s per");
    println!(
        "  Kinesis shard. Demand, not service: nothing is throttled here, so a key OVER the limit"
    );
    println!(
        "  is one AWS would throttle, and that design would fall further behind from then on."
    );
    println!();
    println!("Left out of the model:");
    println!(
        "  - DynamoDB adaptive capacity and split-for-heat (a hot partition can be split, never"
    );
    println!("    one partition key: a key stays at 1000 WCU/s), and throttling itself");
    println!(
        "  - real network jitter and tail latency (latencies are uniform in the ranges above)"
    );
    println!(
        "  - Lambda cold starts and invoke overhead, stream propagation delay, shard splits, the"
    );
    println!("    tumbling window's end-of-window invocations, the pulse's probe writes");
    println!(
        "  - Kinesis's 1 MB/s per shard byte limit (events are a few hundred bytes: the record"
    );
    println!("    limit binds first) and partially refused PutRecords");
    println!(
        "  - the emulator: nothing here talks to one; this is arithmetic on the real decisions"
    );
    let svg = likes_local::repo_root().join("docs/scale.svg");
    plot::worst_key_wcu(&columns, &svg).expect("write the plot");
    println!();
    println!("plot: {}", svg.display());
    println!("ran in {:.1} s", started.elapsed().as_secs_f64());
    let (wcu, records) = columns[0].worst();
    println!("worst: {wcu} WCU/s on one count partition key, {records} records/s on one Kinesis shard, limit 1000");
}

fn range((low, high): (u64, u64)) -> String {
    format!("{}-{}", low / mapping::MS, high / mapping::MS)
}
