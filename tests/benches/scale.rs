//! `make bench-scale`: the design and a naive counter at AWS's scale, in simulated time, on
//! one machine and without an emulator.
//!
//! A viral item liked by 50,000 distinct users a second over 100,000 background reactions a
//! second flows through a model of AWS's topology: the Reactions stream's shards, the event
//! source mapping as template.yaml configures it, the aggregator's calls with modelled
//! latencies (per batch a Query of the shard's progress, then per chunk an intent PutItem,
//! an UpdateItem per count row and the progress UpdateItem: no transaction), the Counts
//! table's per-partition-key write units, and the Kinesis event stream's per-shard records;
//! then the event log's read models, behind the leaderboard consumer's mapping of the log's
//! shards: the likers' entries (a like's with its claim), and the leaderboard's intents
//! and score rows, with its scheduled refresher beside them. Every decision is the real one from
//! `likes_core` (batch hotness, the records a shard's progress covers, chunk size, count-row
//! routing by the stream shard's slot, intent numbers, event partition keys, liker buckets,
//! score deltas, board shards) and the leaderboard's (intent runs by `run_length`, the
//! refresher's boards, its schedule and tick); only AWS is modelled. Deterministic: a seeded
//! generator drives the traffic and the latencies.
//!
//! Sizes: `LIKES_SCALE_SECONDS` (60), `LIKES_SCALE_SHARDS` (Reactions stream shards, 200),
//! `LIKES_SCALE_EVENT_SHARDS` (Kinesis shards, 300: the on-demand stream keeps capacity for
//! twice its peak, and 150,000 events/s need 150 shards), `LIKES_SCALE_VIRAL_RATE` (50000/s),
//! `LIKES_SCALE_BACKGROUND_RATE` (100000/s), `LIKES_SCALE_ITEMS` (background items,
//! 10000000), `LIKES_SCALE_ZIPF` (their popularity exponent, 0.9; 0 is uniform),
//! `LIKES_SCALE_ROWS` (K), `LIKES_SCALE_OVERFLOW` (H) and `LIKES_SCALE_BOARD_SHARDS`
//! (`LeaderboardShards`), else the template's; `LIKES_SCALE_SEED` (1).
//!
//! The report is written into docs/performance.md between its `scale` markers, and the
//! worst count partition key per second drawn in docs/scale.svg.

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
#[path = "scale/leaderboard.rs"]
mod leaderboard;
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

use std::sync::mpsc::sync_channel;
use std::time::Instant;

use likes_core::pipeline::{CountLayout, HOT_ITEM_CHANGES, MAX_CHUNK_RECORDS};
use likes_core::reconcile::Period;
use likes_local::template::{self, Template};
use likes_tests::{
    env_count, say, AGGREGATOR_FUNCTION, LEADERBOARD_FUNCTION, LEADERBOARD_REFRESH_FUNCTION,
    PUBLISHER_FUNCTION,
};

use design::{Design, DesignConfig};
use leaderboard::{Leaderboard, NaiveBoards, RefresherConfig};
use mapping::{MappingConfig, SECOND};
use naive::Naive;
use publisher::Publisher;
use report::{Column, KeyMeter};
use traffic::{Traffic, TrafficConfig};

fn env_number(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

/// A mapping of a stream (`source`: the event's `Type`, DynamoDB or Kinesis) as the template
/// deploys it.
fn stream_mapping(
    template: &Template,
    function: &str,
    source: &str,
    shards: u32,
    seed: u64,
) -> MappingConfig {
    let event = template
        .function_property(function, "Events")
        .and_then(|events| events.as_mapping())
        .and_then(|events| events.values().find(|e| e["Type"].as_str() == Some(source)))
        .unwrap_or_else(|| panic!("{function} has a {source} stream event"));
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

/// `LeaderboardRefreshFunction`: its schedule's `rate(<n> <unit>)`, and how long and how
/// often one invocation ticks (`REFRESH_SECONDS`, `REFRESH_TICK_MS`).
fn refresher_config(template: &Template) -> RefresherConfig {
    let function = LEADERBOARD_REFRESH_FUNCTION;
    let expression = template
        .function_property(function, "Events")
        .and_then(|events| events.as_mapping())
        .and_then(|events| {
            events
                .values()
                .find(|e| e["Type"].as_str() == Some("ScheduleV2"))
        })
        .and_then(|event| event["Properties"]["ScheduleExpression"].as_str())
        .unwrap_or_else(|| panic!("{function} has a ScheduleV2 event with an expression"));
    let (count, unit) = expression
        .strip_prefix("rate(")
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|rate| rate.split_once(' '))
        .unwrap_or_else(|| panic!("{function}'s schedule {expression:?} is not a rate(...)"));
    let count: u64 = count
        .parse()
        .unwrap_or_else(|_| panic!("{function}'s schedule {expression:?} has no count"));
    let unit = match unit.trim_end_matches('s') {
        "minute" => 60 * SECOND,
        "hour" => 3600 * SECOND,
        "day" => 86_400 * SECOND,
        _ => panic!("{function}'s schedule {expression:?} has no unit the scheduler takes"),
    };
    let environment = template.environment(function);
    let number = |name: &str| -> u64 {
        environment[name]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{function}'s {name} is a number"))
    };
    RefresherConfig {
        every: count * unit,
        run_for: number("REFRESH_SECONDS") * SECOND,
        tick: number("REFRESH_TICK_MS") * mapping::MS,
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
    let aggregator_mapping = stream_mapping(
        &template,
        AGGREGATOR_FUNCTION,
        "DynamoDB",
        shards,
        traffic.seed,
    );
    let publisher_mapping = stream_mapping(
        &template,
        PUBLISHER_FUNCTION,
        "DynamoDB",
        shards,
        traffic.seed,
    );
    let event_shards = env_count("LIKES_SCALE_EVENT_SHARDS", 300) as u32;
    let leaderboard_mapping = stream_mapping(
        &template,
        LEADERBOARD_FUNCTION,
        "Kinesis",
        event_shards,
        traffic.seed + 5,
    );
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
    let board_shards = env_count(
        "LIKES_SCALE_BOARD_SHARDS",
        parameter(&template, "LeaderboardShards") as usize,
    ) as u32;
    let refresher = refresher_config(&template);
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
    // own generator of the same flips. The log's reader follows the publisher's puts, in a
    // thread of its own.
    let (seed, config) = (traffic.seed, &traffic);
    let (leaderboard_log, leaderboard_puts) = sync_channel(1024);
    let (
        (offered, design_run, design),
        events,
        (naive_run, naive),
        (leaderboard_run, leaderboard, naive_boards),
    ) = std::thread::scope(|scope| {
        let design = scope.spawn(|| {
            let mut traffic = Traffic::new(config.clone());
            let mut design = Design::new(design_config);
            let run = mapping::run(aggregator_mapping, &mut traffic, &mut design);
            (traffic.offered(), run, design.finish())
        });
        let publisher = scope.spawn(move || {
            let readers = vec![leaderboard_log];
            let mut publisher = Publisher::new(shards, event_shards, readers, seed + 2);
            let traffic = Traffic::new(config.clone());
            mapping::run(publisher_mapping, traffic, &mut publisher);
            publisher.finish()
        });
        let leaderboard = scope.spawn(move || {
            // The naive design's ADDs as the events reach the log, beside the design's.
            let mut naive = NaiveBoards::new();
            let puts = leaderboard_puts.into_iter().inspect(|put| naive.put(put));
            let mut leaderboard =
                Leaderboard::new(event_shards, (board_shards, period), refresher, seed + 7);
            let run = mapping::run(leaderboard_mapping, puts, &mut leaderboard);
            (run, leaderboard.finish(run.end), naive)
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
            leaderboard.join().expect("leaderboard run"),
        )
    });

    // A figure from a run that lost or doubled a flip would be worthless.
    assert_eq!(
        (design.counted_viral, design.counted_total),
        (offered.viral, offered.total),
        "the design's count rows add up to exactly the flips offered"
    );
    assert_eq!(naive.counted_total, offered.total);
    // Every viral like is one liked entry, in one of the item's buckets, and every like on
    // the log scored once on the all-time board.
    assert_eq!(
        leaderboard.viral_liked.values().sum::<i64>(),
        offered.viral.like,
        "the viral item's liked entries are its distinct likers"
    );
    assert_eq!(
        leaderboard.viral_liked.len(),
        likes_core::likers::LIKER_BUCKETS as usize
    );
    assert_eq!(
        (leaderboard.scored_viral, leaderboard.scored_all),
        (offered.viral.like, offered.total.like),
        "the leaderboard's score deltas add up to the net likes offered"
    );

    say!(
        "Likes at scale: {} simulated seconds of AWS's topology, every decision from likes-core",
        traffic.seconds
    );
    say!(
        "  traffic   {} likes/s on {} by distinct users, over {} reactions/s on {} items",
        traffic.viral_per_second,
        traffic::VIRAL_ITEM,
        traffic.background_per_second,
        traffic.background_items
    );
    say!(
        "            (item popularity ~ rank^-{}, users uniform over 100M), seed {}: {} flips",
        traffic.zipf_exponent,
        traffic.seed,
        offered.flips
    );
    say!(
        "  stream    {shards} Reactions stream shards by hash(user_id); per shard one batch in flight,"
    );
    say!("            a failed batch resent at once from its failed record (template.yaml):");
    say!(
        "            aggregator BatchSize {}, window {} s; publisher BatchSize {}, window {} s",
        aggregator_mapping.batch_size,
        aggregator_mapping.batching_window / SECOND,
        publisher_mapping.batch_size,
        publisher_mapping.batching_window / SECOND
    );
    say!(
        "  design    chunks <= {chunk_records} records (CHUNK_RECORDS, at most MAX_CHUNK_RECORDS = {MAX_CHUNK_RECORDS}); K = {} rows,",
        layout.rows
    );
    say!(
        "            H = {} overflow partitions, hot at >= {HOT_ITEM_CHANGES} changes in a batch; a stream",
        layout.overflow_partitions
    );
    say!("            shard writes the row and overflow partition of its slot (CountLayout::slot)");
    say!("  writes    per batch a strongly consistent Query of #wm#<shard>; per chunk that adds");
    say!(
        "            anything an intent PutItem on #wm#<shard> (its rows as compact JSON), then a"
    );
    say!(
        "            conditional UpdateItem per count row (32 in flight, billed once at the row's"
    );
    say!(
        "            size), then the progress UpdateItem on #wm#<shard>. No transaction: writes on"
    );
    say!("            one row queue, none is cancelled or retried");
    let notes = &design.row_notes;
    say!(
        "  row size  {} B (the largest count row, every likers bucket listed) + {} B per i#<shard> intent note, one per stream",
        notes.size.bare,
        notes.size.note
    );
    say!(
        "            shard that writes the row: from these {shards} shards' slots, at most {} on a base",
        notes.most_on_base_row
    );
    say!(
        "            row, {} on an overflow row: {} WCU a write (1 WCU up to {} notes)",
        notes.most_on_overflow_row,
        notes.units_at_most,
        notes.size.notes_in_one_unit()
    );
    say!(
        "  latency   Query {}, PutItem and UpdateItem {}, PutRecords {} ms, uniform",
        range(latency::QUERY),
        range(latency::UPDATE_ITEM),
        range(latency::PUT_RECORDS)
    );
    say!("  kinesis   {event_shards} event stream shards (an on-demand stream keeps capacity for twice its");
    say!("            peak), MD5 of the partition key over even hash ranges");
    say!();
    let columns = [
        Column {
            name: "design",
            counts_wcu: design.counts_wcu.finish(design_run.end),
            kinesis: events.kinesis.finish(design_run.end),
            chunks: Some((design.chunks, design.intents)),
            staleness: design.staleness,
            as_of_lag: Some(design.as_of_lag),
            event_lag: events.lag,
            count_row_writes: design.count_row_writes,
            other_counts_writes: Some(design.marker_writes + design.progress_writes),
            progress_wcu: Some(design.progress_wcu.finish(design_run.end)),
            mapping: design_run,
        },
        Column {
            name: "naive (row per item)",
            counts_wcu: naive.counts_wcu.finish(naive_run.end),
            kinesis: naive.events.kinesis.finish(naive_run.end),
            chunks: None,
            staleness: naive.staleness,
            as_of_lag: None,
            event_lag: naive.events.lag,
            count_row_writes: naive.count_row_writes,
            other_counts_writes: None,
            progress_wcu: None,
            mapping: naive_run,
        },
    ];
    report::print(&columns, traffic.seconds as usize, offered.flips);
    say!();
    say!(
        "  counted: the design's rows add up to the {} flips offered ({} viral likes)",
        offered.flips,
        offered.viral.like
    );
    say!(
        "  limits: 1000 WCU/s per partition key, 1000 records/s per Kinesis shard, in any sliding"
    );
    say!(
        "  second (OVER: past it; HOT: past 80% of it). Demand, not service: nothing is throttled"
    );
    say!("  here, so a key OVER the limit is one AWS would throttle, and that design would fall");
    say!("  further behind from then on.");
    print_leaderboard(
        &leaderboard_mapping,
        board_shards,
        &refresher,
        leaderboard_run,
        leaderboard,
        naive_boards,
        traffic.seconds as usize,
    );
    say!();
    say!("Left out of the model:");
    say!("  - DynamoDB adaptive capacity and split-for-heat (a hot partition can be split, never");
    say!("    one partition key: a key stays at 1000 WCU/s), and throttling itself");
    say!("  - real network jitter and tail latency (latencies are uniform in the ranges above)");
    say!("  - count rows: DynamoDB applying one row's queued writes one at a time (none waits for");
    say!("    another here); crashes (no intent left pending, no batch retried); the Query's read");
    say!("    units; the notes of earlier stream shards (shards roll over every few hours, and a");
    say!("    row keeps their notes for 26 h, and up to 8 older ones); epoch subtotals");
    say!("    and near-cut counts in a row's size (~25 B per epoch it took changes in)");
    say!("  - Lambda cold starts and invoke overhead, stream propagation delay, shard splits, the");
    say!("    tumbling window's end-of-window invocations, the pulse's probe writes");
    say!("  - Kinesis's 1 MB/s per shard byte limit (events are a few hundred bytes: the record");
    say!("    limit binds first) and partially refused PutRecords");
    say!("  - the log's readers: one batch in flight per Kinesis shard, batched by the template's");
    say!("    mappings (the same mapping model as the Reactions stream's), no fan-out, no retries");
    say!("    (nothing fails)");
    say!("  - likers: every entry write is billed as the largest entry's (both claims);");
    say!("    no duplicate or out-of-order deliveries, so no condition fails; no page is read");
    say!("  - leaderboard: the queue on a hot score row (DynamoDB applies one item's writes one");
    say!("    at a time: how many are in flight on one row is measured, none is slowed by it);");
    say!(
        "    failures (no batch retried, no head left pending, no event on the log twice, no tick"
    );
    say!("    failed); two shards beginning one row at once; a container forgetting rows;");
    say!("    the index's propagation delay; the reads' RCU (the #progress and by_score Queries");
    say!("    are counted, the first epochs' reads only timed); the refresher's Query latency beyond the");
    say!(
        "    uniform range, its cold starts and the scheduler's jitter; paging of a Query on tied"
    );
    say!("    scores, and the reads of the rows the sparse index leaves out (a board whose top");
    say!("    reaches down to one like)");
    say!("  - the emulator: nothing here talks to one; this is arithmetic on the real decisions");
    let svg = likes_local::repo_root().join("docs/scale.svg");
    plot::worst_key_wcu(&columns, &svg).expect("write the plot");
    say!();
    say!("ran in {:.1} s", started.elapsed().as_secs_f64());
    likes_tests::docs::write_said("scale", "make bench-scale");
    println!("plot: {}", svg.display());
    let (wcu, records) = columns[0].worst();
    println!("worst: {wcu} WCU/s on one count partition key, {records} records/s on one Kinesis shard, limit 1000");
}

/// The leaderboard's likers entries, intents and score rows, and the refresher's boards,
/// against an UpdateItem per event (and likers entries keyed by item).
fn print_leaderboard(
    config: &MappingConfig,
    board_shards: u32,
    refresher: &RefresherConfig,
    run: mapping::MappingRun,
    leaderboard: leaderboard::LeaderboardTally,
    naive: NaiveBoards,
    seconds: usize,
) {
    use likes_store::leaderboard::{IN_FLIGHT, MAX_INTENT_BYTES, RANKED_FROM};
    say!();
    say!(
        "Leaderboard (LeaderboardFunction): BatchSize {}, window {} s per log shard, S = {board_shards}",
        config.batch_size,
        config.batching_window / SECOND,
    );
    say!(
        "  design: per run of <= {MAX_INTENT_BYTES} intent bytes, the likers entries (a like's and its end's"
    );
    say!(
        "  with its claim) in item_id#<hash(user) mod {}>, keyed by position; its net deltas frozen in",
        likes_core::likers::LIKER_BUCKETS
    );
    say!(
        "  one #intent head, then a conditional UpdateItem per score row ({IN_FLIGHT} in flight) on all#<s>,"
    );
    say!(
        "  day#<date>#<s> by hash(item) mod S (all-time rows the shard does not know read first, a"
    );
    say!(
        "  BatchGetItem), by_score sparse (an item's first like leaves its rows out; a row enters at"
    );
    say!("  its next write, or a delta >= {RANKED_FROM}),");
    say!("  and an UpdateItem of the progress (the head stays until the next intent's put); the");
    say!(
        "  invocation returns then. LeaderboardRefreshFunction, every {} s for {} s, ticking every {} ms:",
        refresher.every / SECOND,
        refresher.run_for / SECOND,
        refresher.tick / mapping::MS
    );
    say!(
        "  a #progress Query; if a shard moved, all, today and its days: S by_score Queries and a"
    );
    say!(
        "  #top PutItem per board; naive: an UpdateItem ADD per event and board as it reaches the"
    );
    say!("  log, one key per board");
    // The refresher ticks on after the consumers are done: every meter ends with it.
    let end = run.end.max(leaderboard.end);
    let [rows, boards, index, intents, progress, top, likers, naive_likers] = [
        leaderboard.row_wcu,
        leaderboard.board_wcu,
        leaderboard.index_wcu,
        leaderboard.intent_wcu,
        leaderboard.progress_wcu,
        leaderboard.top_wcu,
        leaderboard.likers_wcu,
        leaderboard.naive_likers_wcu,
    ]
    .map(|meter| meter.finish(end));
    let [naive_rows, naive_boards, naive_index] =
        [naive.row_wcu, naive.board_wcu, naive.index_wcu].map(|meter| meter.finish(end));
    let design_meters = [
        ("worst score row, WCU/s: max", &rows, Some(&naive_rows)),
        (
            "worst board key (table), WCU/s: max",
            &boards,
            Some(&naive_boards),
        ),
        ("worst by_score key, WCU/s: max", &index, Some(&naive_index)),
        ("worst #intent#<shard> key, WCU/s: max", &intents, None),
        ("#progress key, WCU/s: max", &progress, None),
        ("#top key, WCU/s: max", &top, None),
        (
            "worst likers entry key, WCU/s: max",
            &likers,
            Some(&naive_likers),
        ),
    ];
    report::print_worst_keys(
        &["design (sharded, intents)", "naive (ADD per event)"],
        &design_meters
            .iter()
            .map(|(label, design, naive)| KeyMeter {
                label,
                by_design: vec![Some(*design), *naive],
            })
            .collect::<Vec<_>>(),
        seconds,
    );
    let offered = |values: &[u64]| values[..seconds.min(values.len())].to_vec();
    let mean_max = |values: &[u64]| {
        let mean = offered(values).iter().sum::<u64>() as f64 / seconds.max(1) as f64;
        format!("{mean:.0} / {}", values.iter().max().copied().unwrap_or(0))
    };
    let summed = |meters: &[&meter::PerSecondWorst<String>]| -> Vec<u64> {
        (0..meters[0].total.len())
            .map(|s| meters.iter().map(|m| m.total[s]).sum())
            .collect()
    };
    let row = |label: &str, design: String, naive: &str| {
        say!("  {label:<46} {design:>28} {naive:>28}");
    };
    row(
        "likers entries, all keys, WCU/s: mean / max",
        mean_max(&likers.total),
        &mean_max(&naive_likers.total),
    );
    row(
        "leaderboard WCU/s, all keys: mean / max",
        mean_max(&summed(&[&boards, &index, &intents, &progress, &top])),
        &mean_max(&summed(&[&naive_boards, &naive_index])),
    );
    row(
        "score-row UpdateItems/s: mean / max",
        mean_max(leaderboard.score_writes.seconds()),
        "-",
    );
    let queued =
        |h: &meter::Histogram, p: f64| h.percentile(p).map_or("-".into(), |n| n.to_string());
    row(
        "writes queued on one score row at once: max / p99",
        format!(
            "{} / {}",
            queued(&leaderboard.queued, 100.0),
            queued(&leaderboard.queued, 99.0)
        ),
        "-",
    );
    row(
        &format!("  on {}'s rows: p50 / p99", traffic::VIRAL_ITEM),
        format!(
            "{} / {}",
            queued(&leaderboard.viral_queued, 50.0),
            queued(&leaderboard.viral_queued, 99.0)
        ),
        "-",
    );
    let (markers, bytes, units) = leaderboard.viral_row;
    row(
        "  its all row: n#<shard> markers; bytes; WCU a write",
        format!("{markers}; {bytes}; {units}"),
        "-",
    );
    row(
        "refreshes/s: mean / max",
        mean_max(leaderboard.refreshes.seconds()),
        "-",
    );
    row(
        "refresher Queries/s: mean / max",
        mean_max(leaderboard.refresher_queries.seconds()),
        "-",
    );
    let ms =
        |h: &meter::Histogram, p: f64| h.percentile(p).map_or("-".into(), |v| format!("{v} ms"));
    row(
        "refresher ticks; tick takes p50 / max",
        format!(
            "{}; {} / {}",
            leaderboard.ticks,
            ms(&leaderboard.tick_ms, 50.0),
            ms(&leaderboard.tick_ms, 100.0)
        ),
        "-",
    );
    row(
        "staleness, log -> refresher tick: p50 / p99",
        format!(
            "{} / {}",
            ms(&leaderboard.staleness, 50.0),
            ms(&leaderboard.staleness, 99.0)
        ),
        "-",
    );
    row(
        "invocations; retried; worst iterator age",
        format!(
            "{}; {}; {} ms",
            run.invocations, run.retried_batches, run.max_iterator_age_ms
        ),
        "-",
    );
    say!(
        "  counted: score deltas on `all` add up to the {} net likes offered ({} on {})",
        leaderboard.scored_all,
        leaderboard.scored_viral,
        traffic::VIRAL_ITEM
    );
    if leaderboard.never_refreshed > 0 {
        say!(
            "  {} scoring events had no tick refresh their boards after their intent by the end",
            leaderboard.never_refreshed
        );
    }
    for (label, meter, _) in &design_meters {
        let (wcu, key, second) = meter.peak();
        if wcu > report::WCU_PER_PARTITION_SECOND {
            say!(
                "  OVER: {} ({label}) takes {wcu} WCU/s in s {second}, past the {} of one key",
                key.map_or("-", String::as_str),
                report::WCU_PER_PARTITION_SECOND
            );
        }
    }
}

fn range((low, high): (u64, u64)) -> String {
    format!("{}-{}", low / mapping::MS, high / mapping::MS)
}
