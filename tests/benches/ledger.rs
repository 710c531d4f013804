//! `make bench-scale`'s ledger: what one like costs, in write and read units, by the table,
//! index or stream each part of the service writes, for a like of a cold item and a like of
//! a viral one. The production functions run unchanged on the simulator
//! (`likes-simulator`), which bills every request as DynamoDB bills it (item sizes,
//! transactions doubled, index entries, refused conditions) and meters Kinesis: the
//! handler, the write limiter, the aggregator, the publisher, the leaderboard's, the
//! likers' and the broadcaster's consumers, through the local stack's event source
//! mappings as template.yaml configures them.
//!
//! Beside it, a fair naive build of the same features, batched as the design batches: the
//! same write path (the Reactions row, its index, the limiter), one `ADD` on a counter row
//! per item per aggregator batch, one likers row per like (sorted by its time: no index),
//! and per item per leaderboard batch an `ADD` on a score row and its index entry moved (a
//! delete and a put). Its batches are the ones the design's mappings delivered in the same
//! run, and its rows are under 1 KB, one unit each.
//!
//! Reconciliation's cleaning is in it: after each phase, the reconcile function's cleaning
//! pass through a cut after the phase's likes (as a completed run asks for one), which drops
//! the subtotals the count rows and the all-time score rows kept for that cut.
//!
//! What is left out: the per-second work that does not grow with likes (the pulse's probes
//! and watermarks, the leaderboard's refresher, heartbeats), the rest of reconciliation (an
//! export and its recount a cut, whatever the likes), and reads by clients. The last line is
//! the ledger's headline.
//!
//! The stack reads its stream as one shard (the tests split it in four) with the template's
//! chunks, so a batch holds what one shard gathers in a window at this machine's rate: a
//! couple of hundred of the viral item's records. At the simulated load a shard carries
//! more, so what a batch writes once (an intent, the progress, the viral item's rows) is a
//! smaller share of a like there than here.
//!
//! The likes are in a namespace that keeps the default boards (`day` and `all`); then the
//! same again in one whose rules keep all four windows, priced beside a naive build that
//! writes each further board as it writes one of those.
//!
//! `LIKES_LEDGER_COLD` (400 cold likes, each a new user and item) and `LIKES_LEDGER_VIRAL`
//! (4,000 likes of one item by new users) size each namespace's run; `LIKES_LEDGER_CLIENTS` (16) writes
//! at once. The table is written into docs/performance.md between its markers.

use std::collections::BTreeMap;

use likes_core::clock::now_ms;
use likes_simulator::Unit;
use likes_store::pruning::PruningStore;
use likes_tests::billing::{self, units, Billed, Resources};
use likes_tests::{env_count, Aws, TestStack};

/// us-east-1 on-demand prices, per million request units.
const WRITE_UNIT_PRICE: f64 = 0.625;
const READ_UNIT_PRICE: f64 = 0.125;
/// The load `make bench-scale` simulates: a viral item's likes and the rest, per second.
const VIRAL_PER_SECOND: f64 = 50_000.0;
const COLD_PER_SECOND: f64 = 50_000.0;

/// The part reconciliation's cleaning pass is billed to, whichever table it writes.
const CLEANING: &str = "reconciliation's cleaning";

/// One phase's units per like, by (part, resource, unit).
type PerLike = Billed;

#[tokio::main]
async fn main() {
    let cold = env_count("LIKES_LEDGER_COLD", 400);
    let viral = env_count("LIKES_LEDGER_VIRAL", 4000);
    let clients = env_count("LIKES_LEDGER_CLIENTS", 16);
    let stack = TestStack::builder()
        .on(Aws::Simulator)
        .mappings(1, &[])
        .template_environment()
        .start()
        .await;
    let names = Resources::of(&stack);
    let likes = (cold, viral, clients);
    let defaults = Run::of(&stack, &names, DEFAULT_WINDOWS, likes, 0).await;
    let every = serde_json::json!({"leaderboard_windows": ["hour", "day", "week", "all"]});
    stack.set_namespace_rules(EVERY_WINDOW, &every).await;
    // Past the consumer's catalog cache, so its next batch keeps the four windows.
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let every_window = Run::of(&stack, &names, EVERY_WINDOW, likes, 2).await;
    let ledger = Ledger::of(&names, &defaults, &every_window, (cold, viral));
    let table = ledger.table();
    println!("{table}");
    likes_tests::docs::write_section("ledger", &table);
    let headline = ledger.headline();
    likes_tests::docs::write_section_of(
        likes_tests::docs::README,
        "ledger",
        &format!("```text\n{headline}\n```\n"),
    );
    println!("{headline}");
}

/// The namespace of the headline's likes: it keeps the default windows (`day`, `all`).
const DEFAULT_WINDOWS: &str = "ledger";
/// A namespace whose rules keep all four windows (`hour` and `week` besides).
const EVERY_WINDOW: &str = "ranked";
/// The windows `EVERY_WINDOW` keeps beyond the default two.
const EXTRA_WINDOWS: f64 = 2.0;

/// A cold phase and a viral phase of likes in one namespace, each followed by
/// reconciliation's cleaning pass, and what each billed per like.
struct Run {
    cold_units: PerLike,
    viral_units: PerLike,
    /// The consumers' invocations for the viral likes.
    viral_batches: Batches,
    /// The usage at the end of the run.
    usage: likes_simulator::Usage,
}

impl Run {
    /// Plays `cold` likes (each a new user and item) and `viral` likes of one item by new
    /// users in `namespace`, `clients` at once; the cleaning passes go through cuts
    /// `cleaned + 1` and `cleaned + 2` epochs on.
    async fn of(
        stack: &TestStack,
        names: &Resources,
        namespace: &str,
        (cold, viral, clients): (usize, usize, usize),
        cleaned: i64,
    ) -> Self {
        let cold_likes = (0..cold).map(|i| {
            (
                format!("{namespace}-cold-user{i}"),
                format!("{namespace}:cold{i}"),
            )
        });
        let (cold_units, after_cold, _) =
            phase(stack, names, cold_likes, (cold, clients), cleaned + 1).await;
        let viral_likes = (0..viral).map(|i| {
            (
                format!("{namespace}-viral-user{i}"),
                format!("{namespace}:viral"),
            )
        });
        let (viral_units, after_viral, usage) =
            phase(stack, names, viral_likes, (viral, clients), cleaned + 2).await;
        Self {
            cold_units,
            viral_units,
            viral_batches: after_viral.since(&after_cold),
            usage,
        }
    }
}

/// Plays `likes` (`n` of them, `clients` at once), waits for the consumers, then runs the
/// cleaning pass through the cut `epochs_on` epochs on: the units per like (the pass's
/// billed to its own part), the consumers' invocations once the likes were applied, and the
/// usage after the pass.
async fn phase(
    stack: &TestStack,
    names: &Resources,
    likes: impl Iterator<Item = (String, String)>,
    (n, clients): (usize, usize),
    epochs_on: i64,
) -> (PerLike, Batches, likes_simulator::Usage) {
    let before = stack.usage();
    stack.like_all(clients, likes).await;
    stack.settle_consumers().await;
    let applied = stack.usage();
    let batches = Batches::read(stack);
    clean(stack, epochs_on).await;
    let cleaned = stack.usage();
    let mut units = names.per(&before, &applied, n);
    units.extend(cleaning(names.per(&applied, &cleaned, n)));
    (units, batches, cleaned)
}

/// Runs reconciliation's cleaning pass through the cut `epochs_on` epochs after the current
/// one, as a completed run of that cut asks for (each phase's pass goes further than the
/// last, so it is a new one).
async fn clean(stack: &TestStack, epochs_on: i64) {
    let period = stack.reconcile_period();
    let through = period.epoch(now_ms()) + epochs_on;
    PruningStore::new(stack.dynamodb(), stack.name("CountsTable"))
        .want(through)
        .await
        .expect("a run asks for a cleaning pass");
    stack
        .reconciler()
        .clean(now_ms() + 600_000, &mut |_| {})
        .await
        .expect("the cleaning pass runs");
}

/// A cleaning pass's units, billed to its own part.
fn cleaning(units: PerLike) -> PerLike {
    units
        .into_iter()
        .map(|((_, resource, unit), value)| ((CLEANING.to_owned(), resource, unit), value))
        .collect()
}

/// The (batch, item) pairs of the aggregator's and the leaderboard consumer's batches: a
/// naive build writes once for each. Read as the mappings' invocations where every batch
/// holds the one item.
#[derive(Debug, Clone, Copy, Default)]
struct Batches {
    counts: u64,
    leaderboard: u64,
}

impl Batches {
    fn read(stack: &TestStack) -> Self {
        Self {
            counts: stack.pipeline().counters().invocations,
            leaderboard: stack.leaderboard().counters().invocations,
        }
    }

    fn since(self, earlier: &Self) -> Self {
        Self {
            counts: self.counts - earlier.counts,
            leaderboard: self.leaderboard - earlier.leaderboard,
        }
    }
}

/// One phase's totals per like.
struct Side {
    design_writes: f64,
    design_reads: f64,
    naive_writes: f64,
}

impl Side {
    /// `extra_windows`: the windows the likes' namespace keeps beyond `day` and `all`, each
    /// of which adds a board the naive build writes as it writes one of those.
    fn of(units: &PerLike, batches: &Batches, likes: usize, extra_windows: f64) -> Self {
        let sum = |unit: Unit, part: Option<&str>| -> f64 {
            units
                .iter()
                .filter(|((p, _, u), _)| *u == unit && part.is_none_or(|part| p == part))
                .map(|(_, v)| v)
                .sum()
        };
        let per_like = |n: u64| n as f64 / likes as f64;
        // The same write path and live counts; a counter ADD per item per batch; a likers
        // row per like; a score ADD and its index entry moved per item per batch.
        let naive_writes = sum(Unit::Writes, Some("write path"))
            + sum(Unit::Writes, Some("live counts"))
            + per_like(batches.counts)
            + 1.0
            + 3.0 * (1.0 + extra_windows / 2.0) * per_like(batches.leaderboard);
        Self {
            design_writes: sum(Unit::Writes, None),
            design_reads: sum(Unit::Reads, None),
            naive_writes,
        }
    }
}

struct Ledger {
    cold: Side,
    viral: Side,
    /// The same in a namespace that keeps every window.
    every_window: (Side, Side),
    cold_units: PerLike,
    viral_units: PerLike,
    /// Cold and viral likes played.
    likes: (usize, usize),
    /// The consumers' invocations for the viral likes.
    viral_batches: Batches,
    throttled: u64,
    peaks: BTreeMap<(String, Unit), likes_simulator::Peak>,
}

impl Ledger {
    fn of(
        names: &Resources,
        defaults: &Run,
        every_window: &Run,
        (cold, viral): (usize, usize),
    ) -> Self {
        // Cold: every like is its own item, in one batch of each consumer. Viral: one item,
        // in every batch.
        let cold_batches = Batches {
            counts: cold as u64,
            leaderboard: cold as u64,
        };
        let sides = |run: &Run, extra| {
            (
                Side::of(&run.cold_units, &cold_batches, cold, extra),
                Side::of(&run.viral_units, &run.viral_batches, viral, extra),
            )
        };
        let (cold_side, viral_side) = sides(defaults, 0.0);
        let usage = &every_window.usage;
        Self {
            cold: cold_side,
            viral: viral_side,
            every_window: sides(every_window, EXTRA_WINDOWS),
            cold_units: defaults.cold_units.clone(),
            viral_units: defaults.viral_units.clone(),
            likes: (cold, viral),
            viral_batches: defaults.viral_batches,
            throttled: usage.throttled.values().sum(),
            peaks: usage
                .peaks
                .iter()
                .map(|((resource, unit), peak)| ((names.label(resource).1, *unit), peak.clone()))
                .collect(),
        }
    }

    /// The ledger as markdown: units per like by part and resource, the totals beside the
    /// naive build's, and what both cost an hour at the simulated load.
    fn table(&self) -> String {
        let rows = billing::side_by_side(&self.cold_units, &self.viral_units);
        let mut out = format!(
            "{} cold likes (each a new user and item) and {} likes of one viral item by new \
             users, through the production functions on the simulator, on one stream shard \
             with the template's mappings and chunks: the viral likes came in {} batches of \
             the aggregator ({:.0} records each) and {} of the leaderboard's consumer.\n\n\
             | part | table, index or stream | cold WCU | viral WCU | cold RCU | viral RCU | \
             cold records | viral records |\n|---|---|---|---|---|---|---|---|\n",
            self.likes.0,
            self.likes.1,
            self.viral_batches.counts,
            self.likes.1 as f64 / self.viral_batches.counts as f64,
            self.viral_batches.leaderboard,
        );
        for ((part, label), v) in &rows {
            out += &format!(
                "| {part} | {label} | {} | {} | {} | {} | {} | {} |\n",
                units(v[0]),
                units(v[1]),
                units(v[2]),
                units(v[3]),
                units(v[4]),
                units(v[5])
            );
        }
        out += &format!(
            "| **design** | **per like** | **{}** | **{}** | **{}** | **{}** | | |\n\
             | **fair batched naive** | **per like** | **{}** | **{}** | | | | |\n\
             | | design / naive | {:.2}× | {:.2}× | | | | |\n\n",
            units(self.cold.design_writes),
            units(self.viral.design_writes),
            units(self.cold.design_reads),
            units(self.viral.design_reads),
            units(self.naive_cold()),
            units(self.naive_viral()),
            self.cold.design_writes / self.naive_cold(),
            self.viral.design_writes / self.naive_viral(),
        );
        let hourly = |cold: f64, viral: f64, price: f64| {
            (cold * COLD_PER_SECOND + viral * VIRAL_PER_SECOND) * 3600.0 * price / 1e6
        };
        out +=
            &format!(
            "At {}K cold and {}K viral likes a second (us-east-1 on demand, ${WRITE_UNIT_PRICE} \
             per million write units, ${READ_UNIT_PRICE} per million read units): the design \
             ${:.0} an hour in writes and ${:.0} in reads, the naive build ${:.0} in writes.\n\n",
            COLD_PER_SECOND / 1000.0,
            VIRAL_PER_SECOND / 1000.0,
            hourly(self.cold.design_writes, self.viral.design_writes, WRITE_UNIT_PRICE),
            hourly(self.cold.design_reads, self.viral.design_reads, READ_UNIT_PRICE),
            hourly(self.naive_cold(), self.naive_viral(), WRITE_UNIT_PRICE),
        );
        let (cold, viral) = &self.every_window;
        out += &format!(
            "In a namespace whose rules keep every window (`hour` and `week` besides), the \
             same likes: cold {} WCU per like (naive {}, {:.2}×), viral {} (naive {}, {:.2}×); \
             the naive build writes each further board as it writes one of the two.\n\n",
            units(cold.design_writes),
            units(cold.naive_writes),
            cold.design_writes / cold.naive_writes,
            units(viral.design_writes),
            units(viral.naive_writes),
            viral.design_writes / viral.naive_writes,
        );
        out += &format!(
            "Requests throttled in the run: {}. The busiest key of each resource in any \
             second of the run (this machine's rate, not the simulated load):",
            self.throttled
        );
        for ((resource, unit), peak) in &self.peaks {
            if matches!(unit, Unit::Writes | Unit::RecordsIn) {
                out += &format!(
                    " {resource}: {:.0} {unit:?}/s of {:.0};",
                    peak.per_second,
                    unit.limit()
                );
            }
        }
        out.pop();
        out + ".\n"
    }

    fn naive_cold(&self) -> f64 {
        self.cold.naive_writes
    }

    fn naive_viral(&self) -> f64 {
        self.viral.naive_writes
    }

    fn headline(&self) -> String {
        format!(
            "ledger: cold {} WCU per like (naive {}), viral {} (naive {})",
            units(self.cold.design_writes),
            units(self.naive_cold()),
            units(self.viral.design_writes),
            units(self.naive_viral())
        )
    }
}
