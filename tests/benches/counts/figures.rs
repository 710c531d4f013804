//! The figures: every number the bench prints, worked out from the items read back, and
//! the table that prints them.

use std::collections::HashMap;
use std::time::Instant;

use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_core::Transition;
use likes_local::faults::Counters;
use likes_tests::TestStack;
use serde_json::json;

use crate::capacity::{self, Item};
use crate::ledger::{self, Transaction};
use crate::naive::{self, Naive, StreamRecord};
use crate::workload::{self, HotRead, Written};
use crate::{emf, emulator, Phase, Run, HOT};

/// Ids in the 40-id browse-page read.
const PAGE: usize = 40;
/// DynamoDB's write throughput per partition.
const PARTITION_WCU_PER_SECOND: f64 = 1000.0;
/// The viral item the service is sized for: 50K likes/s on one item.
const VIRAL_LIKES_PER_SECOND: f64 = 50_000.0;

/// One column of the table: one counter in one phase.
#[derive(Default)]
struct Column {
    /// The design's column (the naive counter writes no claims and no watermarks).
    design: bool,
    records: usize,
    flips: usize,
    count_writes: usize,
    transactions: usize,
    heartbeats: u64,
    /// Write units, by what was written.
    claim_units: u64,
    row_units: u64,
    heartbeat_units: u64,
    /// Item sizes seen (min, max), bytes.
    claim_bytes: (usize, usize),
    row_bytes: (usize, usize),
    /// Read units of one count read and of a 40-id page, in half units.
    read_one: u64,
    read_page: u64,
    visible_ms: Vec<i64>,
    applied_ms: Vec<i64>,
    /// Most writes in one second on one count row, and (design) on all the item's rows.
    peak_row_writes: usize,
    peak_item_writes: usize,
}

impl Column {
    fn units(&self) -> u64 {
        self.claim_units + self.row_units + self.heartbeat_units
    }

    fn per_flip(&self, units: u64) -> String {
        format!("{:.3}", units as f64 / self.flips.max(1) as f64)
    }
}

pub struct Report {
    design_hot: Column,
    naive_hot: Column,
    design_cold: Column,
    naive_cold: Column,
    hot: Phase,
    cold: Phase,
    emf: emf::Metrics,
    shards: u32,
    largest_chunk: usize,
    heartbeat_bytes: usize,
    freshness_half_units: u64,
    as_of_held: (usize, usize),
    as_of_lag_ms: Vec<i64>,
    answers: String,
    emulator: emulator::Timings,
}

impl Report {
    /// Reads back what both counters wrote and works out every figure.
    pub async fn gather(
        stack: &TestStack,
        naive: &Naive,
        hot: Phase,
        cold: Phase,
        emf: emf::Metrics,
        naive_rows: HashMap<String, Item>,
        emulator: emulator::Timings,
    ) -> Self {
        let client = stack.dynamodb();
        let environment = &stack.pipeline().config().environment;
        let number = |name: &str| -> u32 {
            environment[name]
                .parse()
                .unwrap_or_else(|_| panic!("{name} is a number"))
        };
        let shards = number("COUNT_SHARDS");
        let layout = likes_core::pipeline::CountLayout {
            rows: shards,
            overflow_partitions: number("OVERFLOW_PARTITIONS"),
        };
        let log = naive.log();
        let claims = ledger::scan(&client, &stack.name("ClaimsTable")).await;
        let count_items = ledger::scan(&client, &stack.name("CountsTable")).await;
        let rows = ledger::rows_by_key(&count_items);
        let transactions = ledger::transactions(&claims, &log, layout, &rows);

        // The rebuilt transactions must be the ones the mapping counted, or no figure stands.
        let total = stack.pipeline().counters();
        assert_eq!(
            transactions.len() as u64,
            total.transactions_committed,
            "claims read back vs transactions committed"
        );
        assert_eq!(
            transactions
                .iter()
                .map(|t| t.rows.len() as u64)
                .sum::<u64>(),
            total.count_row_writes,
            "count rows rebuilt from the claims vs count rows the transactions held"
        );
        assert_eq!(
            (total.retries, total.function_errors),
            (0, 0),
            "no faults were armed"
        );

        let heartbeat_bytes = rows
            .iter()
            .filter(|((item, _), _)| item.starts_with("#wm#"))
            .map(|(_, row)| capacity::item_size(row))
            .max()
            .expect("shard watermarks were written");
        let (hot_tx, cold_tx): (Vec<&Transaction>, Vec<&Transaction>) = transactions
            .iter()
            .partition(|t| t.records.iter().any(|r| r.item == HOT));
        // The pulse's probe records belong to no phase's items: the phases' figures leave them
        // out (they are the per-second writes below).
        let (hot_log, cold_log): (Vec<&StreamRecord>, Vec<&StreamRecord>) = log
            .iter()
            .filter(|r| r.item != likes_store::freshness::PROBE_ITEM)
            .partition(|r| r.item == HOT);
        let mut design_hot = design_column(&hot_tx, &hot_log, &rows, &hot.counters);
        let mut design_cold = design_column(&cold_tx, &cold_log, &rows, &cold.counters);
        for column in [&mut design_hot, &mut design_cold] {
            column.heartbeat_units = column.heartbeats * capacity::write_units(heartbeat_bytes);
        }
        let mut report = Self {
            design_hot,
            naive_hot: naive_column(&hot_log, &naive_rows),
            design_cold,
            naive_cold: naive_column(&cold_log, &naive_rows),
            largest_chunk: transactions
                .iter()
                .map(|t| t.records.len())
                .max()
                .unwrap_or(0),
            hot,
            cold,
            emf,
            shards,
            heartbeat_bytes,
            freshness_half_units: 0,
            as_of_held: (0, 0),
            as_of_lag_ms: Vec::new(),
            answers: String::new(),
            emulator,
        };
        report.reads(stack, &rows, &naive_rows).await;
        report.staleness();
        report.exposure(&hot_tx, &hot_log);
        report
    }

    /// Section 3: what each count read returns, read back whole (read units bill the whole
    /// item, whatever the projection).
    async fn reads(
        &mut self,
        stack: &TestStack,
        rows: &HashMap<(String, String), Item>,
        naive_rows: &HashMap<String, Item>,
    ) {
        let cold_page: Vec<String> = (0..PAGE).map(|n| format!("cold:{n}")).collect();
        let hot_page: Vec<String> = std::iter::once(HOT.to_owned())
            .chain(cold_page.iter().take(PAGE - 1).cloned())
            .collect();
        // The cold item with the most count rows: the largest cold read.
        let mut cold_rows: HashMap<&str, usize> = HashMap::new();
        for (item, _) in rows.keys().filter(|(item, _)| item.starts_with("cold:")) {
            *cold_rows.entry(item).or_default() += 1;
        }
        let busiest_cold = cold_rows
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(item, _)| item.to_owned())
            .expect("cold count rows");
        let query = |item: &String| design_query_half_units(rows, item);
        let get = |item: &String| {
            capacity::eventually_consistent_half_units(
                naive_rows.get(item).map_or(0, capacity::item_size),
            )
        };
        for (column, one, page) in [
            (&mut self.design_hot, HOT.to_owned(), &hot_page),
            (&mut self.design_cold, busiest_cold.clone(), &cold_page),
        ] {
            column.read_one = query(&one);
            column.read_page = page.iter().map(query).sum();
        }
        for (column, one, page) in [
            (&mut self.naive_hot, HOT.to_owned(), &hot_page),
            (&mut self.naive_cold, busiest_cold.clone(), &cold_page),
        ] {
            column.read_one = get(&one);
            column.read_page = page.iter().map(get).sum();
        }
        self.freshness_half_units = capacity::eventually_consistent_half_units(
            rows.iter()
                .filter(|((item, _), _)| item.starts_with("#asof#"))
                .map(|(_, row)| capacity::item_size(row))
                .max()
                .expect("the pulse published as_of"),
        );
        self.answers = endpoint_answers(stack, &hot_page).await;
    }

    /// Section 4: event time to the first count read that includes the flip.
    fn staleness(&mut self) {
        let mut hot_events: Vec<i64> = self
            .hot
            .written
            .iter()
            .filter_map(|w| w.event_time_ms)
            .collect();
        hot_events.sort_unstable();
        let series = &self.hot.hot_series;
        self.design_hot.visible_ms = visible_after(&hot_events, &series.design);
        self.naive_hot.visible_ms = visible_after(&hot_events, &series.naive);
        (self.as_of_held, self.as_of_lag_ms) = as_of_promise(&hot_events, &series.design);
        let samples = &self.cold.samples;
        self.design_cold.visible_ms = samples
            .iter()
            .filter_map(|(_, s)| Some(s.design_ms? - s.event_time_ms))
            .collect();
        self.naive_cold.visible_ms = samples
            .iter()
            .filter_map(|(_, s)| Some(s.naive_ms? - s.event_time_ms))
            .collect();
    }

    /// Section 5: writes per second on the hot item's rows.
    fn exposure(&mut self, hot_tx: &[&Transaction], hot_log: &[&StreamRecord]) {
        let mut naive_writes: Vec<i64> = hot_log.iter().filter_map(|r| r.applied_ms).collect();
        self.naive_hot.peak_row_writes = ledger::peak_per_second(&mut naive_writes);
        let mut by_row: HashMap<&str, Vec<i64>> = HashMap::new();
        for t in hot_tx {
            for (item, shard) in &t.rows {
                if item == HOT {
                    by_row.entry(shard).or_default().push(t.sent_ms);
                }
            }
        }
        let mut all_rows: Vec<i64> = by_row.values().flatten().copied().collect();
        self.design_hot.peak_item_writes = ledger::peak_per_second(&mut all_rows);
        self.design_hot.peak_row_writes = by_row
            .values_mut()
            .map(|times| ledger::peak_per_second(times))
            .max()
            .unwrap_or(0);
    }
}

fn design_column(
    transactions: &[&Transaction],
    log: &[&StreamRecord],
    rows: &HashMap<(String, String), Item>,
    counters: &Counters,
) -> Column {
    let mut column = Column {
        design: true,
        records: log.len(),
        flips: log.iter().filter(|r| r.is_flip()).count(),
        transactions: transactions.len(),
        heartbeats: counters.invocations,
        claim_bytes: (usize::MAX, 0),
        row_bytes: (usize::MAX, 0),
        ..Column::default()
    };
    // The mapping also delivers the pulse's probe records of the phase's window, which the
    // phase's records leave out; no record is delivered twice.
    assert_eq!(
        (counters.retries, counters.duplicate_deliveries),
        (0, 0),
        "the mapping delivered each record of the phase once"
    );
    assert!(
        counters.records_delivered as usize >= column.records,
        "the mapping delivered every record of the phase's items: {} of {}",
        counters.records_delivered,
        column.records
    );
    for t in transactions {
        let (claim, updates) = ledger::transaction_units(t, rows);
        column.claim_units += claim;
        column.row_units += updates;
        column.count_writes += t.rows.len();
        column.claim_bytes = widen(column.claim_bytes, t.claim_bytes);
        for key in &t.rows {
            column.row_bytes = widen(column.row_bytes, capacity::item_size(&rows[key]));
        }
        column.applied_ms.extend(
            t.records
                .iter()
                .filter_map(|r| Some(t.sent_ms - r.event_time_ms?)),
        );
    }
    column
}

fn naive_column(log: &[&StreamRecord], rows: &HashMap<String, Item>) -> Column {
    let mut column = Column {
        records: log.len(),
        row_bytes: (usize::MAX, 0),
        ..Column::default()
    };
    for record in log.iter().filter(|r| r.is_flip()) {
        let bytes = capacity::item_size(&rows[&record.item]);
        column.flips += 1;
        column.count_writes += 1;
        column.row_units += capacity::write_units(bytes);
        column.row_bytes = widen(column.row_bytes, bytes);
        column.applied_ms.extend(Some(
            record.applied_ms.expect("applied") - record.event_time_ms.expect("a flip"),
        ));
    }
    column
}

fn widen((min, max): (usize, usize), bytes: usize) -> (usize, usize) {
    (min.min(bytes), max.max(bytes))
}

/// Half read units of the Query a count read makes: the item's count rows, summed.
fn design_query_half_units(rows: &HashMap<(String, String), Item>, item: &str) -> u64 {
    capacity::eventually_consistent_half_units(
        rows.iter()
            .filter(|((i, shard), _)| i == item && shard.starts_with("D#"))
            .map(|(_, row)| capacity::item_size(row))
            .sum(),
    )
}

/// For the n-th flip in event-time order: how long until a read showed at least n likes.
fn visible_after(events: &[i64], reads: &[HotRead]) -> Vec<i64> {
    let mut visible = Vec::with_capacity(events.len());
    let mut read = reads.iter();
    let mut current = read.next();
    for (n, event) in events.iter().enumerate() {
        while let Some(r) = current {
            if r.likes > n as u64 {
                break;
            }
            current = read.next();
        }
        match current {
            Some(r) => visible.push(r.at_ms - event),
            None => break,
        }
    }
    visible
}

/// Whether each hot read counted every like written up to its `as_of`, and how far
/// behind the read's time `as_of` was.
fn as_of_promise(events: &[i64], reads: &[HotRead]) -> ((usize, usize), Vec<i64>) {
    let mut held = 0;
    let mut lags = Vec::new();
    for read in reads {
        let Some(as_of) = read.as_of_ms else { continue };
        let promised = events.partition_point(|e| *e <= as_of) as u64;
        if read.likes >= promised {
            held += 1;
        }
        lags.push(read.at_ms - as_of);
    }
    ((held, lags.len()), lags)
}

/// The real endpoints answer what the figures are about.
async fn endpoint_answers(stack: &TestStack, page: &[String]) -> String {
    let one = stack
        .request(
            "GET",
            &format!("/v1/items/{HOT}/like-count"),
            Some("reader"),
        )
        .send()
        .await;
    assert_eq!(one.status, 200);
    let batch = stack
        .request("POST", "/v1/items/like-counts:batchGet", Some("reader"))
        .json(&json!({ "item_ids": page }))
        .send()
        .await;
    assert_eq!(batch.status, 200);
    let (one, batch) = (one.json(), batch.json());
    format!(
        "GET like-count of {HOT}: like_count {}, as_of {}; like-counts:batchGet of {} ids: {} counts",
        one["like_count"],
        one["as_of"],
        page.len(),
        batch["counts"].as_object().map_or(0, |c| c.len())
    )
}

fn percentile(values: &[i64], percent: usize) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    Some(sorted[rank - 1])
}

fn p50_p99(values: &[i64]) -> String {
    match (percentile(values, 50), percentile(values, 99)) {
        (Some(p50), Some(p99)) => format!("{p50} / {p99} ms"),
        _ => "n/a".to_owned(),
    }
}

fn half_units(half: u64) -> String {
    if half % 2 == 0 {
        format!("{}", half / 2)
    } else {
        format!("{}.5", half / 2)
    }
}

fn transitions(written: &[Written]) -> String {
    let kinds = [
        ("first like", Neutral, Like),
        ("first dislike", Neutral, Dislike),
        ("unlike", Like, Neutral),
        ("un-dislike", Dislike, Neutral),
        ("like->dislike", Like, Dislike),
        ("dislike->like", Dislike, Like),
    ];
    let mut parts: Vec<String> = kinds
        .iter()
        .map(|(name, from, to)| {
            let n = written
                .iter()
                .filter(|w| w.transition == Transition::new(*from, *to))
                .count();
            format!("{n} {name}")
        })
        .collect();
    let unchanged = written.iter().filter(|w| !w.transition.is_flip()).count();
    parts.push(format!("{unchanged} unchanged (no write, no event)"));
    parts.join(", ")
}

impl Report {
    /// The four columns: design and naive, hot and cold.
    fn columns(&self) -> [&Column; 4] {
        [
            &self.design_hot,
            &self.naive_hot,
            &self.design_cold,
            &self.naive_cold,
        ]
    }

    fn row(&self, name: &str, cell: impl Fn(&Column) -> String) {
        print!("  {name:<44}");
        for column in self.columns() {
            print!(" {:>15}", cell(column));
        }
        println!();
    }

    /// A row only the design has: the naive counter writes no claims and no watermarks.
    fn design_row(&self, name: &str, cell: impl Fn(&Column) -> String) {
        print!("  {name:<44}");
        for column in self.columns() {
            let cell = match column.design {
                true => cell(column),
                false => "-".to_owned(),
            };
            print!(" {cell:>15}");
        }
        println!();
    }

    pub fn print(&self, stack: &TestStack, run: &Run, started: Instant) {
        let mapping = stack.pipeline().config();
        // A full batch's chunk: the mapping's batch size or the aggregator's CHUNK_RECORDS,
        // whichever is smaller (a viral item's batch touches one item, so no 99-item cut).
        let chunk_capacity = mapping.environment["CHUNK_RECORDS"]
            .parse::<usize>()
            .expect("CHUNK_RECORDS is a number")
            .min(mapping.batch_size);
        let build = match cfg!(debug_assertions) {
            true => "debug",
            false => "release (cargo bench profile)",
        };
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let endpoint = match std::env::var_os("AWS_ENDPOINT_URL") {
            Some(_) => "AWS_ENDPOINT_URL (under `make bench-counts`: the offline emulator)",
            None => "an offline emulator this bench started",
        };
        let rate = |p: &Phase| p.written.len() as f64 / p.writing.as_secs_f64();
        let cold_flips = self
            .cold
            .written
            .iter()
            .filter(|w| w.transition.is_flip())
            .count();
        println!("Likes count pipeline: figures, not a timed test");
        println!("  {build} build, {cpus} CPUs; AWS endpoint: {endpoint}");
        println!(
            "  mapping from template.yaml: BatchSize {}, batching window {} s; chunks of <= {chunk_capacity} records (CHUNK_RECORDS),",
            mapping.batch_size,
            mapping.batching_window.as_secs(),
        );
        println!(
            "  and <= 99 items; the largest claim here held {} records",
            self.largest_chunk
        );
        println!(
            "  K = {} count rows per item (COUNT_SHARDS); one stream shard",
            self.shards
        );
        println!(
            "  hot:  {} distinct users like {HOT}: {} writes, {:.0}/s achieved ({} offered)",
            run.hot_users,
            self.hot.written.len(),
            rate(&self.hot),
            run.hot_rate
        );
        println!(
            "  cold: {} reactions by 3 users per item over {} items, + {} sample items liked once: {} writes,",
            run.cold_reactions,
            run.cold_items,
            run.samples,
            self.cold.written.len(),
        );
        println!(
            "        {:.0}/s achieved ({} offered); {cold_flips} flips: {}",
            rate(&self.cold),
            run.cold_rate,
            transitions(&self.cold.written)
        );
        println!("  writes: ReactionsStore::set as PUT reaction calls it; counts: the local mapping -> Aggregator");
        println!("  naive:  one row per item (key item_id), UpdateItem ADD per flip, no shard, claim or transaction;");
        println!(
            "          a second reader of the same stream, batched as the mapping, {} ADDs in flight",
            naive::WRITES_IN_FLIGHT
        );
        println!("  sizes:  attribute name + value bytes of the real items read back; WCU = ceil(size / 1 KB), x2 inside");
        println!("          TransactWriteItems; RCU (eventually consistent) = 0.5 x ceil(bytes one request reads / 4 KB)");
        let e = &self.emulator;
        println!(
            "  emulator round trips (moto, one global lock): UpdateItem {:.1} ms; TransactWriteItems of 2 updates {:.0} ms,",
            e.update_item_ms, e.small_transaction_ms
        );
        println!(
            "          of {} updates (a full cold chunk) {:.0} ms, every other request waiting meanwhile",
            likes_core::pipeline::MAX_CHUNK_ITEMS,
            e.full_transaction_ms
        );

        println!(
            "\n  {:<44} {:>15} {:>15} {:>15} {:>15}",
            "", "design hot", "naive hot", "design cold", "naive cold"
        );
        println!("1. Count writes per stream event");
        self.row("stream records (moto: 2 per new row)", |c| {
            c.records.to_string()
        });
        self.row("flips (records that change a count)", |c| {
            c.flips.to_string()
        });
        self.row("count-row writes", |c| c.count_writes.to_string());
        self.row("  per stream record", |c| {
            format!("{:.4}", c.count_writes as f64 / c.records.max(1) as f64)
        });
        self.row("  per flip", |c| {
            format!("{:.4}", c.count_writes as f64 / c.flips.max(1) as f64)
        });
        self.design_row("transactions (chunks, one claim each)", |c| {
            c.transactions.to_string()
        });
        self.design_row("invocations (one watermark write each)", |c| {
            c.heartbeats.to_string()
        });

        println!("2. Write units (WCU) per flip (hot: every flip is a like)");
        self.row("count rows", |c| c.per_flip(c.row_units));
        self.design_row("claims", |c| c.per_flip(c.claim_units));
        self.design_row("shard watermarks", |c| c.per_flip(c.heartbeat_units));
        self.row("total for counting", |c| c.per_flip(c.units()));
        self.row("count row bytes (min-max)", |c| {
            format!("{}-{}", c.row_bytes.0, c.row_bytes.1)
        });
        self.design_row("claim bytes (min-max)", |c| {
            format!("{}-{}", c.claim_bytes.0, c.claim_bytes.1)
        });
        println!(
            "     watermark row {} B, one UpdateItem per invocation. Not above: the Reactions write itself (1 WCU per",
            self.heartbeat_bytes
        );
        println!("     flip + its by_liked_at entry: `make bench-write`), the publisher's Kinesis puts, and the pulse's");
        println!("     per-second writes (16 as_of replicas and one probe per stream shard, independent of the flip rate).");
        println!("     Claims grow with stream records: moto writes 2 per new row (a keys-only INSERT first), AWS 1.");

        println!("3. Read units (RCU) per count read, eventually consistent");
        self.row("one item (design: 1 Query; naive: GetItem)", |c| {
            half_units(c.read_one)
        });
        self.row("40-id page (hot columns: hot + 39 cold)", |c| {
            half_units(c.read_page)
        });
        self.row("  requests for the page", |c| match c.design {
            true => format!("{PAGE} Query"),
            false => "1 BatchGetItem".to_owned(),
        });
        let freshness = self.freshness_half_units as f64 / 2.0;
        println!(
            "     + the design's freshness read (as_of): 1 GetItem of an as_of replica, {freshness} RCU, at most once a second per"
        );
        println!(
            "     container: +{:.3} RCU per read at 10 reads/s per container, +{:.4} at 100. The naive counter has no as_of.",
            freshness / 10.0,
            freshness / 100.0
        );

        println!("4. Staleness p50 / p99");
        self.row("event time -> visible in a count read", |c| {
            p50_p99(&c.visible_ms)
        });
        self.row("  flips measured", |c| c.visible_ms.len().to_string());
        self.row("event time -> applied (pipeline's own)", |c| {
            p50_p99(&c.applied_ms)
        });
        println!("     visible: hot, the n-th like in event-time order is visible at the first read showing >= n likes (a read");
        println!(
            "     every {} ms: GET like-count on the local front / the naive row); cold, the sample items, each read every",
            workload::HOT_READ_EVERY.as_millis()
        );
        println!(
            "     {} ms until it shows its like. A read counts when its answer arrived.",
            workload::COLD_READ_EVERY.as_millis()
        );
        println!("     applied: design, the claim's created_at (its transaction sent) - updated_at; naive, its ADD returned.");
        let emf: Vec<i64> = self.emf.staleness_ms.iter().map(|v| *v as i64).collect();
        println!(
            "     The aggregator's own StalenessMs metric (EMF, first <= 100 values per invocation): {}, n={}, {} lines",
            p50_p99(&emf),
            emf.len(),
            self.emf.lines
        );
        let (held, reads) = self.as_of_held;
        println!(
            "     as_of on the hot reads: every like written by as_of was counted in {held} of {reads} reads; read time - as_of"
        );
        println!("     {}", p50_p99(&self.as_of_lag_ms));

        println!("5. Hot item exposure: writes per second, most in any 1 s");
        println!(
            "     likes on the hot item: {:.0}/s. Naive: {} writes/s on its one row (a batch's ADDs land together).",
            rate(&self.hot),
            self.naive_hot.peak_row_writes
        );
        println!(
            "     Design: {} writes/s on the busiest of its {} count rows, {} writes/s over all of them.",
            self.design_hot.peak_row_writes, self.shards, self.design_hot.peak_item_writes
        );
        // At the viral rate every batch is full, so every chunk holds the most records a
        // chunk takes, all of them likes of the one item (AWS: one record per like).
        let chunks = VIRAL_LIKES_PER_SECOND / chunk_capacity.max(1) as f64;
        println!(
            "     At {VIRAL_LIKES_PER_SECOND:.0} likes/s (a viral item): naive, {VIRAL_LIKES_PER_SECOND:.0} WCU/s on one row, {:.0}x the ~{PARTITION_WCU_PER_SECOND:.0} WCU/s partition",
            VIRAL_LIKES_PER_SECOND / PARTITION_WCU_PER_SECOND
        );
        println!(
            "     limit. Design: full batches, one count-row write per chunk of {chunk_capacity} likes (AWS: 1 record per like):"
        );
        println!(
            "     {chunks:.0} writes/s = {:.0} WCU/s (x2, transactional) on the item's key, {:.0} writes/s per count row; the {}",
            chunks * 2.0,
            chunks / self.shards as f64,
            self.shards
        );
        println!("     rows share the partition key item_id, so one partition takes them all until DynamoDB splits it by");
        println!("     sort key. moto has no partition limits: these are figures, not failures.");
        println!("  endpoints: {}", self.answers);
        println!("\n(bench took {:.1} s)", started.elapsed().as_secs_f64());
    }
}
