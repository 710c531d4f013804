//! The printed table: the run's conditions, then the five sections, one row per figure and
//! one column per counter and phase, said (`say!`) for docs/performance.md.

use std::time::Instant;

use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_core::Transition;
use likes_tests::{say, TestStack};

use crate::capacity::{self, READ_UNIT_BYTES};
use crate::column::Column;
use crate::figures::{Report, PAGE};
use crate::workload::{self, Written};
use crate::{emulator, naive, Phase, Run, HOT};

/// DynamoDB's write throughput per partition.
const PARTITION_WCU_PER_SECOND: f64 = 1000.0;
/// The viral item the service is sized for: 50K likes/s on one item.
const VIRAL_LIKES_PER_SECOND: f64 = 50_000.0;

fn p50_p99(values: &[i64]) -> String {
    if values.is_empty() {
        return "n/a".to_owned();
    }
    format!(
        "{} / {} ms",
        likes_tests::percentile(values, 50.0),
        likes_tests::percentile(values, 99.0)
    )
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
        let cells: String = self
            .columns()
            .into_iter()
            .map(|column| format!(" {:>15}", cell(column)))
            .collect();
        say!("  {name:<44}{cells}");
    }

    /// A row only the design has: the naive counter writes no intents and no watermarks.
    fn design_row(&self, name: &str, cell: impl Fn(&Column) -> String) {
        self.row(name, |column| match column.design {
            true => cell(column),
            false => "-".to_owned(),
        });
    }

    pub fn print(&self, stack: &TestStack, run: &Run, started: Instant) {
        let mapping = stack.pipeline().config();
        // A full batch's chunk: the whole batch (never above the aggregator's chunk size).
        let chunk_capacity = self.chunk_records.min(mapping.batch_size);
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
        say!("Likes count pipeline: figures, not a timed test");
        say!("  {build} build, {cpus} CPUs; AWS endpoint: {endpoint}");
        say!(
            "  mapping from template.yaml: BatchSize {}, batching window {} s; chunks of <= {chunk_capacity} records (CHUNK_RECORDS),",
            mapping.batch_size,
            mapping.batching_window.as_secs(),
        );
        say!(
            "  so one chunk per batch; intents here applied at most {} flips and added to at most {} count rows",
            self.largest_intent.0, self.largest_intent.1
        );
        say!(
            "  K = {} count rows per item (COUNT_SHARDS), H = {} overflow partitions for an item hot in a batch;",
            self.layout.rows, self.layout.overflow_partitions
        );
        say!(
            "  {} stream shards (the local mapping's, split by user_id), each always writing one row of an item",
            self.stream_shards
        );
        say!(
            "  hot:  {} distinct users like {HOT}: {} writes, {:.0}/s achieved ({} offered)",
            run.hot_users,
            self.hot.written.len(),
            rate(&self.hot),
            run.hot_rate
        );
        say!(
            "  cold: {} reactions by 3 users per item over {} items, + {} sample items liked once: {} writes,",
            run.cold_reactions,
            run.cold_items,
            run.samples,
            self.cold.written.len(),
        );
        say!(
            "        {:.0}/s achieved ({} offered); {cold_flips} flips: {}",
            rate(&self.cold),
            run.cold_rate,
            transitions(&self.cold.written)
        );
        say!("  writes: ReactionsStore::set as PUT reaction calls it; counts: the local mapping -> Aggregator");
        say!("  naive:  one row per item (key item_id), UpdateItem ADD per flip, no shard, intent or watermark;");
        say!(
            "          a second reader of the same stream, batched as the mapping, {} ADDs in flight",
            naive::WRITES_IN_FLIGHT
        );
        say!("  sizes:  attribute name + value bytes of the real items read back; WCU = ceil(size / 1 KB), each write");
        say!("          billed once (no transactions); RCU (eventually consistent) = 0.5 x ceil(bytes one request reads / 4 KB)");
        let e = &self.emulator;
        say!(
            "  emulator round trips (moto, one global lock): count-row UpdateItem {:.1} ms, intent PutItem of {} B {:.1} ms",
            e.update_item_ms,
            emulator::INTENT_BYTES,
            e.intent_put_ms
        );

        say!(
            "\n  {:<44} {:>15} {:>15} {:>15} {:>15}",
            "",
            "design hot",
            "naive hot",
            "design cold",
            "naive cold"
        );
        say!("1. Count writes per stream event");
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
        self.design_row("intents (chunks, one per shard batch)", |c| {
            c.intents.to_string()
        });
        self.design_row("invocations (one watermark write each)", |c| {
            c.heartbeats.to_string()
        });

        say!("2. Write units (WCU) per flip (hot: every flip is a like)");
        self.row("count rows", |c| c.per_flip(c.row_units));
        self.design_row("intents", |c| c.per_flip(c.intent_units));
        self.design_row("shard watermarks", |c| c.per_flip(c.heartbeat_units));
        self.row("total for counting", |c| c.per_flip(c.units()));
        self.row("count row bytes (min-max)", |c| {
            format!("{}-{}", c.row_bytes.0, c.row_bytes.1)
        });
        self.design_row("intent bytes (min-max)", |c| {
            format!("{}-{}", c.intent_bytes.0, c.intent_bytes.1)
        });
        say!(
            "     watermark row {} B, one UpdateItem per invocation. Not above: the Reactions write itself (1 WCU per",
            self.heartbeat_bytes
        );
        say!("     flip + its by_liked_at entry: `make bench-write`), the publisher's Kinesis puts, and the pulse's");
        say!("     per-second writes (16 as_of replicas and one probe per stream shard, independent of the flip rate),");
        say!("     and the overflow marker (once per hot item and container). A count row's UpdateItem is billed on the row");
        say!("     as read back (the largest it has been); an intent's PutItem on its size, which grows with the count rows");
        say!("     its chunk adds to, not with its records.");
        let largest_intent = self
            .design_hot
            .intent_bytes
            .1
            .max(self.design_cold.intent_bytes.1);
        say!(
            "     Reads, not above: each invocation first Queries its shard's progress and newest intent, strongly consistent:"
        );
        say!(
            "     <= {} RCU (the watermark row and the largest intent here: {} B).",
            (self.heartbeat_bytes + largest_intent).div_ceil(READ_UNIT_BYTES),
            self.heartbeat_bytes + largest_intent
        );

        say!("3. Read units (RCU) per count read, eventually consistent");
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
        say!(
            "     + the design's freshness read (as_of): 1 GetItem of an as_of replica, {freshness} RCU, at most once a second per"
        );
        say!(
            "     container: +{:.3} RCU per read at 10 reads/s per container, +{:.4} at 100. The naive counter has no as_of.",
            freshness / 10.0,
            freshness / 100.0
        );

        say!("4. Staleness p50 / p99");
        self.row("event time -> visible in a count read", |c| {
            p50_p99(&c.visible_ms)
        });
        self.row("  flips measured", |c| c.visible_ms.len().to_string());
        self.row("event time -> applied (pipeline's own)", |c| {
            p50_p99(&c.applied_ms)
        });
        self.row("  flips measured", |c| c.applied_ms.len().to_string());
        say!("     visible: hot, the n-th like in event-time order is visible at the first read showing >= n likes (a read");
        say!(
            "     every {} ms: GET like-count on the local front / the naive row); cold, the sample items, each read every",
            workload::HOT_READ_EVERY.as_millis()
        );
        say!(
            "     {} ms until it shows its like. A read counts when its answer arrived.",
            workload::COLD_READ_EVERY.as_millis()
        );
        say!("     applied: design, the intent's number n (the aggregator's clock in ms when it froze the chunk, just before");
        say!("     its count-row writes; checked against the intent's TTL, written within seconds) - updated_at, for the");
        say!("     flips joined to their intent by shard and sequence number; naive, when its ADD returned.");
        let emf: Vec<i64> = self.emf.staleness_ms.iter().map(|v| *v as i64).collect();
        say!(
            "     The aggregator's own StalenessMs metric (EMF, first <= 100 values per invocation): {}, n={}, {} lines",
            p50_p99(&emf),
            emf.len(),
            self.emf.lines
        );
        let (held, reads) = self.as_of_held;
        say!(
            "     as_of on the hot reads: every like written by as_of was counted in {held} of {reads} reads; read time - as_of"
        );
        say!("     {}", p50_p99(&self.as_of_lag_ms));

        say!("5. Hot item exposure: writes per second, most in any 1 s");
        say!(
            "     likes on the hot item: {:.0}/s. Naive: {} writes/s on its one row (a batch's ADDs land together).",
            rate(&self.hot),
            self.naive_hot.peak_row_writes
        );
        let (rows, partitions) = self.hot_rows;
        say!(
            "     Design: {} writes/s on the busiest of the {rows} count rows written (in {partitions} partitions, base and overflow),",
            self.design_hot.peak_row_writes
        );
        say!(
            "     {} writes/s over all of them; a row's write timed by its intent's number.",
            self.design_hot.peak_item_writes
        );
        // At the viral rate every batch is full, so every chunk holds the most records a
        // chunk takes, all of them likes of the one item (AWS: one record per like).
        let chunks = VIRAL_LIKES_PER_SECOND / chunk_capacity.max(1) as f64;
        let row_units = capacity::write_units(self.design_hot.row_bytes.1);
        let overflow = self.layout.overflow_partitions;
        say!(
            "     At {VIRAL_LIKES_PER_SECOND:.0} likes/s (a viral item): naive, {VIRAL_LIKES_PER_SECOND:.0} WCU/s on one row, {:.0}x the ~{PARTITION_WCU_PER_SECOND:.0} WCU/s partition",
            VIRAL_LIKES_PER_SECOND / PARTITION_WCU_PER_SECOND
        );
        say!(
            "     limit. Design: full batches, one count-row UpdateItem per chunk of {chunk_capacity} likes (AWS: 1 record per like):"
        );
        say!(
            "     {chunks:.0} writes/s = {:.0} WCU/s ({row_units} WCU each, billed once) on the item's rows. The item is hot in such a",
            chunks * row_units as f64
        );
        say!(
            "     batch, so each goes to the shard's own overflow partition of H = {overflow}: with its likes on >= {overflow} shards,"
        );
        say!(
            "     ~{:.0} writes/s per partition key. Each chunk's intent and watermark go to its shard's own partition.",
            chunks / f64::from(overflow.max(1))
        );
        say!("     moto has no partition limits: these are figures, not failures.");
        say!("  endpoints: {}", self.answers);
        say!("\n(bench took {:.1} s)", started.elapsed().as_secs_f64());
    }
}
