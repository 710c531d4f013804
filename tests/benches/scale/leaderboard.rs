//! The leaderboard's consumer of the event log (which writes the likers entries too), behind
//! its own mapping of the log's shards, and its scheduled refresher, as
//! `Leaderboard::apply`, `BoardRefresher::tick`, `LeaderboardStore` and `LikersStore` make
//! their calls.
//!
//! Per consumer invocation:
//!
//! 1. two consistent GetItems at once, the shard's progress and its intent head (reads, no
//!    write);
//! 2. the batch in runs as the consumer cuts it (`run_length`, the real function: as many
//!    records as one intent's row holds), one after another; per run: the `liker_updates`
//!    of its events, a conditional UpdateItem of each one's entry in its bucket
//!    (`item_id#<hash(user) mod LIKER_BUCKETS>`, keyed by position: no index), a like's and a like
//!    end's with its claim, `IN_FLIGHT` at once as they finish (`buffer_unordered`);
//! 3. `score_deltas` of the claimed events, one score row per board and item, on the board
//!    shard `item_shard` gives it (`Window::board_key`). None: one UpdateItem of the
//!    progress (`#progress`). Else the run's rows frozen in the head (a PutItem on
//!    `#intent#<shard>`, sized from the run's own rows and days), then a plain conditional
//!    UpdateItem per score row (ADD the delta, SET `n#<shard>`), `IN_FLIGHT` at once as they
//!    finish (`buffer_unordered`, each call its own event here). A row's write is billed at
//!    the row's size: its keys, and one `n#<shard>` per log shard that ever wrote it (the
//!    viral item's rows, and a popular item's, carry one per log shard), so a hot row costs
//!    more per write than a cold one. The all-time rows a shard has not written before (its
//!    container does not know them) are read first, one BatchGetItem's round trip after
//!    the head's (a read: not metered), so a write asks only a new row to begin and none is
//!    refused (two shards beginning one row at once, which would refuse one, is left out).
//!    The `by_score` index is sparse: a row begun with a delta under `RANKED_FROM` stays out of it (an all-time
//!    row, and the day row of an item whose all-time row the run begins so), a row out of
//!    it enters at its next write (a put), and a row in it has its entry deleted and put
//!    again on every new score (its sort key; the index projects only `item_id`).
//!    Production writes an item's day rows after its all-time row; here all of a run's
//!    rows are in flight at once.
//!    How many writes are in flight on one row at once is measured (at each write's start,
//!    itself included), not slowed;
//! 4. one conditional UpdateItem: the progress moved to the intent (its `days` set to the
//!    intent's day windows). The head stays, done, until the shard's next intent's put
//!    replaces it (billed at the larger of the two heads).
//!
//! The invocation returns after its last run's progress write: nothing in it waits
//! for, or performs, a refresh.
//!
//! The refresher (`LeaderboardRefreshFunction`) is an actor of its own: one invocation at a
//! time, started on the schedule's `rate(...)` (at a seeded phase; the invocation under way
//! when the run begins had read only an empty table), ticking every `REFRESH_TICK_MS` from
//! the start of its last tick (a tick that takes longer starts the next at its end) while
//! the next tick is due before `REFRESH_SECONDS` have passed, as `tick_for` does; then
//! nothing until the next scheduled start. Per tick: a strongly consistent Query of
//! `#progress` (read as it is at the tick's start; RCU, no WCU); when some shard's progress
//! moved since the invocation's last tick (at its first, every shard with progress), the
//! boards `all`, today's and the moved shards' last intents' days, all at once: per board a
//! Query per board shard on `by_score` (S of them, `IN_FLIGHT` at once, `buffer_unordered`),
//! then the conditional PutItem of its `#top` row, billed at the largest `TopRow` there can
//! be (`TOP_SIZE` entries). A tick takes the progress Query and its slowest board's Queries
//! and PutItem. Staleness is an event's arrival on the log to the start of the first tick
//! after its intent finished that refreshed both of its boards.
//!
//! Every decision is the real one (`score_deltas`, `item_shard`, `board_key`,
//! `run_length`, `IN_FLIGHT`, `TOP_SIZE`, the refresher's boards and
//! its schedule, tick and run from template.yaml); heads and score rows are sized from the
//! run's own ids, every other row at the largest it can be (`table::leaderboard_units`),
//! and intent markers at a year's intents (`table::ScoreRowSize`). GetItem, PutItem and
//! Query take an UpdateItem's latency.
//!
//! The naive design beside it applies each event alone as it reaches the log: an UpdateItem
//! ADD on each of its score rows, on one unsharded partition key per board, no claim, no
//! intent, no refresh; and the same likers entries keyed by `item_id` alone, one partition
//! key for the viral item.
//!
//! Left out: DynamoDB's serialization of one item's writes (writes in flight on one row take
//! no longer for it: the queue is measured, not waited on); adaptive capacity and split for
//! heat (one key stays at its limit); the index's propagation delay (a refresh reads the
//! index as the table is); the refresher's Query latency beyond the uniform range (no tail
//! on any of a tick's S Queries), where in its progress Query the read lands, the
//! scheduler's jitter and the refresher's cold starts; failures (no batch retried, no head
//! left pending, no event on the log twice, so no entry's condition fails); every entry
//! write billed as the largest entry's; the reads' capacity (GetItems and
//! Queries are counted, no RCU metered); paging of a board shard's Query on tied scores, and
//! the refresher's reads of the rows the index leaves out (only a board whose top reaches
//! down to one like reads them); the round trip of a refused first write (its units are
//! billed, its latency not added); a container forgetting rows (it keeps 100,000).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use std::collections::BTreeMap;

use likes_core::leaderboard::{item_shard, score_deltas, KeptWindows, Window};
use likes_core::likers::{liker_updates, LikerChange, LikerUpdate};
use likes_core::reconcile::Period;
use likes_store::leaderboard::{run_length, IN_FLIGHT, RANKED_FROM};
use likes_store::rows::ScoreDeltaRow;

use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next, MS};
use crate::meter::{Histogram, PerSecond, WorstKey};
use crate::publisher::LoggedEvent;
use crate::table::{self, LeaderboardUnits, ScoreRowSize};
use crate::traffic::{Arrival, EPOCH_MS, VIRAL_ITEM};

/// Where every shard's progress is written, and every board's top: the partition keys the
/// store gives them.
const PROGRESS_KEY: &str = "#progress";
const TOP_KEY: &str = "#top";
/// Ticks the refresher runs after the last consumer returned, at most, for the last intents
/// to be refreshed.
const DRAIN_TICKS: u64 = 600;

/// `LeaderboardRefreshFunction` as template.yaml deploys it.
#[derive(Debug, Clone, Copy)]
pub struct RefresherConfig {
    /// The schedule starts an invocation this often (`rate(...)`)...
    pub every: Micros,
    /// ...which ticks for this long (`REFRESH_SECONDS`)...
    pub run_for: Micros,
    /// ...every this long (`REFRESH_TICK_MS`).
    pub tick: Micros,
}

#[derive(Debug)]
pub struct LeaderboardTally {
    /// By score row: `<board shard key>/<item_id>`.
    pub row_wcu: WorstKey<String>,
    /// Score rows by the table's partition key, their board shard.
    pub board_wcu: WorstKey<String>,
    /// The `by_score` index, by board shard.
    pub index_wcu: WorstKey<String>,
    /// By `#intent#<shard>`: heads and their deletes.
    pub intent_wcu: WorstKey<String>,
    pub progress_wcu: WorstKey<String>,
    pub top_wcu: WorstKey<String>,
    /// Likers entries by bucket, and the naive design's by item id.
    pub likers_wcu: WorstKey<String>,
    pub naive_likers_wcu: WorstKey<String>,
    pub likers_writes: u64,
    /// Per bucket of the viral item: entries liked, less entries unliked.
    pub viral_liked: BTreeMap<String, i64>,
    /// Score-row UpdateItems, by the second they finished.
    pub score_writes: PerSecond,
    /// Per score-row write, the writes in flight on its row when it began (itself included);
    /// and the same over the viral item's rows only.
    pub queued: Histogram,
    pub viral_queued: Histogram,
    /// Boards refreshed (`#top` PutItems), by the second they were put.
    pub refreshes: PerSecond,
    /// The refresher's Queries (`#progress` and `by_score`), by the second its tick began.
    pub refresher_queries: PerSecond,
    /// The refresher's ticks, and how long each took.
    pub ticks: u64,
    pub tick_ms: Histogram,
    /// A scoring event's arrival on the log to the start of the first tick after its
    /// intent finished that refreshed both of its boards.
    pub staleness: Histogram,
    /// Scoring events no tick refreshed the boards of by the end of the drain.
    pub never_refreshed: u64,
    /// When the refresher's last write landed (it ticks on after the consumers are done).
    pub end: Micros,
    /// Score deltas added on the `all` board, and on the viral item's `all` row.
    pub scored_all: i64,
    pub scored_viral: i64,
    /// The viral item's `all` row at the end: its intent markers, its bytes, and the write
    /// units of one write of it.
    pub viral_row: (usize, usize, u64),
}

/// The log shards that wrote a score row (their `n#<shard>` markers).
enum Writers {
    One(u32),
    /// A bitset over the log's shards.
    Many(Vec<u64>),
}

impl Writers {
    /// Adds `shard`: whether the row did not have its marker yet.
    fn insert(&mut self, shard: usize) -> bool {
        match self {
            Self::One(one) if *one as usize == shard => false,
            Self::One(one) => {
                let mut bits = vec![0u64; (shard.max(*one as usize) + 64) / 64];
                bits[*one as usize / 64] |= 1 << (*one % 64);
                bits[shard / 64] |= 1 << (shard % 64);
                *self = Self::Many(bits);
                true
            }
            Self::Many(bits) => {
                if bits.len() <= shard / 64 {
                    bits.resize(shard / 64 + 1, 0);
                }
                let had = bits[shard / 64] & (1 << (shard % 64)) != 0;
                bits[shard / 64] |= 1 << (shard % 64);
                !had
            }
        }
    }

    /// Whether `shard` wrote the row.
    fn has(&self, shard: usize) -> bool {
        match self {
            Self::One(one) => *one as usize == shard,
            Self::Many(bits) => bits
                .get(shard / 64)
                .is_some_and(|word| word & (1 << (shard % 64)) != 0),
        }
    }

    fn shards(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        match self {
            Self::One(one) => Box::new(std::iter::once(*one as usize)),
            Self::Many(bits) => Box::new(bits.iter().enumerate().flat_map(|(word, bits)| {
                (0..64)
                    .filter(move |bit| bits & (1 << bit) != 0)
                    .map(move |bit| word * 64 + bit)
            })),
        }
    }
}

/// A row key's hash: what the per-row state is kept under (millions of rows; a collision
/// among them is as good as impossible).
fn row_hash(key: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// One run's score row: its delta, whether it is on `all`, and its key
/// (`<board shard key>/<item_id>`) and the key's `row_hash`; whether its write begins it
/// out of the `by_score` index: an all-time row with a delta under `RANKED_FROM`, or a
/// day row of an item whose all-time row this run begins so (the item's first like).
struct RunRow {
    row: ScoreDeltaRow,
    all: bool,
    key: String,
    hash: u64,
    begins_out: bool,
}

/// A score-row write in flight: when it finishes, and which of the run's rows.
struct InFlight {
    end: Micros,
    row: usize,
}

enum Step {
    /// The progress and the intent head are being read.
    ReadingState,
    /// The run's likers entries (a like's and its end's with its claim) are in flight.
    WritingEntries,
    /// The run scored nothing: the progress is being moved.
    Advancing,
    /// The run's head is being put.
    WritingHead,
    /// The run's score-row writes are in flight (`Invocation::in_flight`).
    Scoring,
    /// The progress is being moved to the intent.
    Finishing,
}

struct Invocation {
    batch: Vec<LoggedEvent>,
    /// The run under way: its records `run_start..run_end` of `batch`, its score rows and
    /// the day windows they score on.
    run_start: usize,
    run_end: usize,
    /// The run's likers entries, written before its intent.
    entries: Vec<LikerUpdate>,
    rows: Vec<RunRow>,
    days: Vec<i64>,
    head_units: u64,
    next_row: usize,
    in_flight: Vec<InFlight>,
}

/// A shard's `#progress` row, as the refresher reads it: a number that moves with its
/// `through_seq`, and the day windows of its last intent.
#[derive(Debug, Clone, Default)]
struct Progress {
    moves: u64,
    days: Vec<i64>,
}

/// An intent that finished at `finished`, its scoring events' arrivals (epoch ms) by their
/// day board, each group taken out once a tick refreshed its day and `all`.
struct Finished {
    finished: Micros,
    by_day: Vec<(Window, Vec<i64>)>,
}

/// The refresher's invocation under way and its next tick.
struct Refresher {
    config: RefresherConfig,
    /// When the invocation under way began: before the run for the one the run begins in.
    started: i128,
    next: Micros,
    /// Each shard's progress at the invocation's last tick; `None` before its first.
    seen: Option<Vec<Option<u64>>>,
}

impl Refresher {
    /// The refresher as the run finds it: its schedule at `phase` within a period, the
    /// invocation under way (if any) having ticked on an empty table.
    fn new(config: RefresherConfig, event_shards: u32, phase: Micros) -> Self {
        let started = i128::from(phase) - i128::from(config.every);
        let tick = i128::from(config.tick.max(1));
        // The invocation's first tick at or after the run's start.
        let k = (-started + tick - 1) / tick;
        if k * tick < i128::from(config.run_for) {
            Self {
                config,
                started,
                next: (started + k * tick) as Micros,
                seen: Some(vec![None; event_shards as usize]),
            }
        } else {
            Self {
                config,
                started: i128::from(phase),
                next: phase,
                seen: None,
            }
        }
    }

    /// The tick that began at `at` ended at `end`: the next one, in this invocation or the
    /// next scheduled one.
    fn schedule_next(&mut self, at: Micros, end: Micros) {
        let next = i128::from(at + self.config.tick);
        if next >= self.started + i128::from(self.config.run_for) {
            self.started += i128::from(self.config.every);
            self.next = (self.started.max(i128::from(end))) as Micros;
            self.seen = None;
        } else {
            self.next = next.max(i128::from(end)) as Micros;
        }
    }
}

pub struct Leaderboard {
    latency: Latency,
    board_shards: u32,
    /// Reconciliation's epochs, which all-time score rows keep subtotals by.
    period: Period,
    units: LeaderboardUnits,
    /// A standard write of a small row: the progress.
    small_units: u64,
    sizes: ScoreRowSize,
    invocations: Vec<Option<(Invocation, Step)>>,
    /// Per log shard, its progress row once it has one.
    progress: Vec<Option<Progress>>,
    /// Per log shard, the units of the head its last intent left (0: none yet): the next
    /// intent's put over it is billed at the larger of the two.
    heads: Vec<u64>,
    /// Intents whose boards no tick refreshed yet.
    finished: Vec<Finished>,
    refresher: Refresher,
    /// Per score row (by `row_hash`), the log shards that wrote it, and the writes in flight
    /// on it.
    writers: HashMap<u64, Writers>,
    /// The score rows in the `by_score` index (by `row_hash`).
    ranked: HashSet<u64>,
    in_flight_on: HashMap<u64, u64>,
    tally: LeaderboardTally,
}

impl Leaderboard {
    pub fn new(
        event_shards: u32,
        (board_shards, period): (u32, Period),
        refresher: RefresherConfig,
        seed: u64,
    ) -> Self {
        let mut latency = Latency::new(seed);
        let phase = latency.draw((0, refresher.every.max(1) - 1));
        Self {
            latency,
            board_shards,
            period,
            units: table::leaderboard_units(),
            small_units: table::small_update_units(),
            sizes: ScoreRowSize::new(event_shards),
            invocations: (0..event_shards).map(|_| None).collect(),
            progress: vec![None; event_shards as usize],
            heads: vec![0; event_shards as usize],
            finished: Vec::new(),
            refresher: Refresher::new(refresher, event_shards, phase),
            writers: HashMap::new(),
            ranked: HashSet::new(),
            in_flight_on: HashMap::new(),
            tally: LeaderboardTally {
                row_wcu: WorstKey::new(),
                board_wcu: WorstKey::new(),
                index_wcu: WorstKey::new(),
                intent_wcu: WorstKey::new(),
                progress_wcu: WorstKey::new(),
                top_wcu: WorstKey::new(),
                likers_wcu: WorstKey::new(),
                naive_likers_wcu: WorstKey::new(),
                likers_writes: 0,
                viral_liked: BTreeMap::new(),
                score_writes: PerSecond::default(),
                queued: Histogram::default(),
                viral_queued: Histogram::default(),
                refreshes: PerSecond::default(),
                refresher_queries: PerSecond::default(),
                ticks: 0,
                tick_ms: Histogram::default(),
                staleness: Histogram::default(),
                never_refreshed: 0,
                end: 0,
                scored_all: 0,
                scored_viral: 0,
                viral_row: (0, 0, 0),
            },
        }
    }

    /// The consumers are done (at `end`, the mapping's last return): the refresher ticks on
    /// until every intent's boards were refreshed.
    pub fn finish(mut self, end: Micros) -> LeaderboardTally {
        assert!(
            self.invocations.iter().all(Option::is_none),
            "every invocation returned"
        );
        assert!(
            self.in_flight_on.is_empty(),
            "every score-row write returned"
        );
        self.refresh_until(end);
        let mut drained = 0;
        while !self.finished.is_empty() && drained < DRAIN_TICKS {
            let at = self.refresher.next;
            self.refresh_tick(at);
            drained += 1;
        }
        self.tally.never_refreshed = self
            .finished
            .iter()
            .flat_map(|f| &f.by_day)
            .map(|(_, arrivals)| arrivals.len() as u64)
            .sum();
        self.tally.end = self.tally.end.max(end);
        let viral = ScoreDeltaRow {
            board: Window::All.board_key(item_shard(VIRAL_ITEM, self.board_shards)),
            item_id: VIRAL_ITEM.into(),
            delta: 0,
            expires_at: None,
            by_epoch: Vec::new(),
            near_cuts: Vec::new(),
        };
        if let Some(writers) = self
            .writers
            .get(&row_hash(&format!("{}/{}", viral.board, viral.item_id)))
        {
            let bytes = self.sizes.bytes(&viral, writers.shards());
            self.tally.viral_row = (writers.shards().count(), bytes, table::write_units(bytes));
        }
        self.tally
    }

    /// `n` calls of `call`'s latency, `IN_FLIGHT` at once, each next one begun as soon as
    /// any finishes (`buffer_unordered`): how long they all take.
    fn unordered(&mut self, n: usize, call: (Micros, Micros)) -> Micros {
        let mut ends = BinaryHeap::new();
        let mut last = 0;
        for _ in 0..n {
            let start = if ends.len() < IN_FLIGHT {
                0
            } else {
                let std::cmp::Reverse(end) = ends.pop().expect("IN_FLIGHT ends");
                end
            };
            let end = start + self.latency.draw(call);
            last = last.max(end);
            ends.push(std::cmp::Reverse(end));
        }
        last
    }

    /// Every refresher tick that begins by `now`, before anything the consumers do at `now`.
    fn refresh_until(&mut self, now: Micros) {
        while self.refresher.next <= now {
            let at = self.refresher.next;
            self.refresh_tick(at);
        }
    }

    /// `BoardRefresher::tick`, begun at `at`: the progress as it is now; when a shard moved,
    /// its boards refreshed, each `#top` put when its board's Queries are done.
    fn refresh_tick(&mut self, at: Micros) {
        let today = Window::day_of(EPOCH_MS + (at / MS) as i64);
        let mut boards = BTreeSet::new();
        let seen = self.refresher.seen.take();
        for (shard, progress) in self.progress.iter().enumerate() {
            let Some(progress) = progress else { continue };
            let moved = seen
                .as_ref()
                .is_none_or(|seen| seen[shard] != Some(progress.moves));
            if moved {
                boards.insert(Window::All);
                boards.insert(today.clone());
                boards.extend(progress.days.iter().map(|d| Window::Day(*d)));
            }
        }
        self.refresher.seen = Some(
            self.progress
                .iter()
                .map(|p| p.as_ref().map(|p| p.moves))
                .collect(),
        );
        let read = at + self.latency.draw(latency::UPDATE_ITEM);
        let shards = self.board_shards as usize;
        let mut puts: Vec<Micros> = (0..boards.len())
            .map(|_| {
                read + self.unordered(shards, latency::UPDATE_ITEM)
                    + self.latency.draw(latency::UPDATE_ITEM)
            })
            .collect();
        puts.sort_unstable();
        for put in &puts {
            self.tally.top_wcu.charge(*put, TOP_KEY, self.units.top);
            self.tally.refreshes.add(*put, 1);
        }
        let end = puts.last().copied().unwrap_or(read);
        let tally = &mut self.tally;
        tally
            .refresher_queries
            .add(at, 1 + (boards.len() * shards) as u64);
        tally.ticks += 1;
        tally.tick_ms.record((end - at) / MS, 1);
        tally.end = tally.end.max(end);
        self.record_staleness(&boards, at);
        self.refresher.schedule_next(at, end);
    }

    /// The tick that began at `at` refreshed `boards`: the events of every intent that
    /// finished before it whose boards are among them are on a board from `at`.
    fn record_staleness(&mut self, boards: &BTreeSet<Window>, at: Micros) {
        if !boards.contains(&Window::All) {
            return;
        }
        let staleness = &mut self.tally.staleness;
        for intent in &mut self.finished {
            if intent.finished >= at {
                continue;
            }
            intent.by_day.retain(|(day, arrivals)| {
                if !boards.contains(day) {
                    return true;
                }
                for arrived in arrivals {
                    let arrived = (arrived - EPOCH_MS) as Micros * MS;
                    staleness.record(at.saturating_sub(arrived) / MS, 1);
                }
                false
            });
        }
        self.finished.retain(|intent| !intent.by_day.is_empty());
    }

    /// The invocation waits for its next call, due at `at`.
    fn wait(&mut self, shard: usize, inv: Invocation, step: Step, at: Micros) -> Next<LoggedEvent> {
        self.invocations[shard] = Some((inv, step));
        Next::At(at)
    }

    /// The next run's likers entries, or the end of the invocation once every run finished.
    fn next_run(&mut self, shard: usize, mut inv: Invocation, now: Micros) -> Next<LoggedEvent> {
        if inv.run_start >= inv.batch.len() {
            return Next::Done {
                unapplied: Vec::new(),
            };
        }
        inv.run_end = inv.run_start
            + run_length(
                inv.batch[inv.run_start..].iter().map(|r| &*r.event),
                self.period,
                &KeptWindows::default(),
            );
        let now_ms = EPOCH_MS + (now / MS) as i64;
        inv.entries = inv.batch[inv.run_start..inv.run_end]
            .iter()
            .flat_map(|r| liker_updates(&r.event, now_ms))
            .collect();
        let end = now + self.unordered(inv.entries.len(), latency::UPDATE_ITEM);
        self.wait(shard, inv, Step::WritingEntries, end)
    }

    /// The run's likers entries returned (each claim the record's: nothing is on the log
    /// twice here): its score rows, and the head, or the progress alone.
    fn entries_written(
        &mut self,
        shard: usize,
        mut inv: Invocation,
        now: Micros,
    ) -> Next<LoggedEvent> {
        for update in std::mem::take(&mut inv.entries) {
            let item = update.item_id.as_str();
            let tally = &mut self.tally;
            let bucket = update.bucket_key();
            tally.likers_wcu.charge(now, &bucket, self.units.entry);
            tally.naive_likers_wcu.charge(now, item, self.units.entry);
            tally.likers_writes += 1;
            if item == VIRAL_ITEM {
                let liked = match update.change {
                    LikerChange::Liked { .. } => 1,
                    LikerChange::Unliked { .. } => -1,
                    LikerChange::Disliked | LikerChange::Undisliked { .. } => 0,
                };
                *tally.viral_liked.entry(bucket).or_insert(0) += liked;
            }
        }
        let run = &inv.batch[inv.run_start..inv.run_end];
        let scoring = run.iter().filter(|r| r.event.like_delta != 0);
        let deltas = score_deltas(
            scoring.map(|r| &*r.event),
            self.period,
            &KeptWindows::default(),
        );
        inv.days = deltas
            .keys()
            .filter_map(|(window, _)| window.start_ms())
            .collect::<BTreeSet<i64>>()
            .into_iter()
            .collect();
        let board_key = |window: &Window, item: &str| {
            let board = window.board_key(item_shard(item, self.board_shards));
            let key = format!("{board}/{item}");
            (board, key)
        };
        let first_likes: HashSet<String> = deltas
            .iter()
            .filter(|((window, item), delta)| {
                *window == Window::All
                    && delta.total < RANKED_FROM
                    && !self
                        .writers
                        .contains_key(&row_hash(&board_key(window, item).1))
            })
            .map(|((_, item), _)| item.clone())
            .collect();
        inv.rows = deltas
            .into_iter()
            .map(|((window, item), delta)| {
                let (board, key) = board_key(&window, &item);
                let all = window == Window::All;
                RunRow {
                    begins_out: delta.total < RANKED_FROM && (all || first_likes.contains(&item)),
                    all,
                    hash: row_hash(&key),
                    key,
                    row: ScoreDeltaRow {
                        board,
                        item_id: item,
                        delta: delta.total,
                        expires_at: window.expires_at_secs(),
                        by_epoch: delta.by_epoch.into_iter().collect(),
                        near_cuts: delta.near_cuts.into_iter().collect(),
                    },
                }
            })
            .collect();
        let end = now + self.latency.draw(latency::UPDATE_ITEM);
        if inv.rows.is_empty() {
            return self.wait(shard, inv, Step::Advancing, end);
        }
        let rows: Vec<ScoreDeltaRow> = inv.rows.iter().map(|r| r.row.clone()).collect();
        inv.head_units = table::intent_head_units(shard, &rows);
        // The all-time rows this shard has not written are read (a BatchGetItem) after the
        // head is put, before the score rows are written.
        let unknown = inv.rows.iter().any(|r| {
            r.all
                && self
                    .writers
                    .get(&r.hash)
                    .is_none_or(|writers| !writers.has(shard))
        });
        let end = if unknown {
            end + self.latency.draw(latency::UPDATE_ITEM)
        } else {
            end
        };
        self.wait(shard, inv, Step::WritingHead, end)
    }

    /// Score-row writes that finished at `now` apply; the next ones begin, `IN_FLIGHT` at
    /// once; the progress write once every row is written.
    fn score(&mut self, shard: usize, mut inv: Invocation, now: Micros) -> Next<LoggedEvent> {
        let mut k = 0;
        while k < inv.in_flight.len() {
            if inv.in_flight[k].end <= now {
                let done = inv.in_flight.swap_remove(k);
                self.apply(shard, &inv.rows[done.row], now);
            } else {
                k += 1;
            }
        }
        while inv.in_flight.len() < IN_FLIGHT && inv.next_row < inv.rows.len() {
            let run_row = &inv.rows[inv.next_row];
            let on_row = self.in_flight_on.entry(run_row.hash).or_insert(0);
            *on_row += 1;
            self.tally.queued.record(*on_row, 1);
            if run_row.row.item_id == VIRAL_ITEM {
                self.tally.viral_queued.record(*on_row, 1);
            }
            inv.in_flight.push(InFlight {
                end: now + self.latency.draw(latency::UPDATE_ITEM),
                row: inv.next_row,
            });
            inv.next_row += 1;
        }
        match inv.in_flight.iter().map(|w| w.end).min() {
            Some(end) => self.wait(shard, inv, Step::Scoring, end),
            None => {
                let end = now + self.latency.draw(latency::UPDATE_ITEM);
                self.wait(shard, inv, Step::Finishing, end)
            }
        }
    }

    /// One score row's ADD, at `now`: billed at the row's size with this shard's marker.
    fn apply(&mut self, shard: usize, run_row: &RunRow, now: Micros) {
        let hash = run_row.hash;
        let on_row = self.in_flight_on.get_mut(&hash).expect("a write in flight");
        *on_row -= 1;
        if *on_row == 0 {
            self.in_flight_on.remove(&hash);
        }
        let row = &run_row.row;
        let existed = match self.writers.get_mut(&hash) {
            None => {
                self.writers.insert(hash, Writers::One(shard as u32));
                false
            }
            Some(writers) => {
                writers.insert(shard);
                true
            }
        };
        let writers = &self.writers[&hash];
        let units = table::write_units(self.sizes.bytes(row, writers.shards()));
        let tally = &mut self.tally;
        tally.score_writes.add(now, 1);
        tally.row_wcu.charge(now, &run_row.key, units);
        tally.board_wcu.charge(now, &row.board, units);
        // The index is sparse: a new row enters it only with a delta of `RANKED_FROM` or
        // more, a row out of it enters at its next write (one put), and a row in it moves
        // on every new score (its sort key): the entry deleted and put again.
        let index_writes = if !existed {
            u64::from(!run_row.begins_out)
        } else if self.ranked.insert(hash) {
            1
        } else {
            2
        };
        if !existed && !run_row.begins_out {
            self.ranked.insert(hash);
        }
        if index_writes > 0 {
            tally
                .index_wcu
                .charge(now, &row.board, index_writes * self.units.index);
        }
        if run_row.all {
            tally.scored_all += row.delta;
            if row.item_id == VIRAL_ITEM {
                tally.scored_viral += row.delta;
            }
        }
    }

    /// The run's progress moved at `now` (`intent`: to the intent, its days set, and
    /// its events wait for a tick); the next run.
    fn committed(
        &mut self,
        shard: usize,
        mut inv: Invocation,
        intent: bool,
        now: Micros,
    ) -> Next<LoggedEvent> {
        let progress = self.progress[shard].get_or_insert_with(Progress::default);
        progress.moves += 1;
        if intent {
            progress.days = std::mem::take(&mut inv.days);
            let mut by_day: Vec<(Window, Vec<i64>)> = Vec::new();
            for record in inv.batch[inv.run_start..inv.run_end]
                .iter()
                .filter(|r| r.event.like_delta != 0)
            {
                let day = Window::day_of(record.event.event_time_ms);
                match by_day.iter_mut().find(|(d, _)| *d == day) {
                    Some((_, arrivals)) => arrivals.push(record.arrived_ms),
                    None => by_day.push((day, vec![record.arrived_ms])),
                }
            }
            self.finished.push(Finished {
                finished: now,
                by_day,
            });
        }
        inv.run_start = inv.run_end;
        inv.rows.clear();
        inv.days.clear();
        inv.next_row = 0;
        self.next_run(shard, inv, now)
    }
}

impl Consumer<LoggedEvent> for Leaderboard {
    fn invoke(&mut self, shard: usize, batch: Vec<LoggedEvent>, now: Micros) -> Next<LoggedEvent> {
        self.refresh_until(now);
        let end = now
            + self
                .latency
                .draw(latency::UPDATE_ITEM)
                .max(self.latency.draw(latency::UPDATE_ITEM));
        let inv = Invocation {
            batch,
            run_start: 0,
            run_end: 0,
            entries: Vec::new(),
            rows: Vec::new(),
            days: Vec::new(),
            head_units: 0,
            next_row: 0,
            in_flight: Vec::new(),
        };
        self.wait(shard, inv, Step::ReadingState, end)
    }

    fn resume(&mut self, shard: usize, now: Micros) -> Next<LoggedEvent> {
        self.refresh_until(now);
        let (inv, step) = self.invocations[shard]
            .take()
            .expect("an invocation in flight");
        match step {
            Step::ReadingState => self.next_run(shard, inv, now),
            Step::WritingEntries => self.entries_written(shard, inv, now),
            Step::Advancing => {
                self.tally
                    .progress_wcu
                    .charge(now, PROGRESS_KEY, self.small_units);
                self.committed(shard, inv, false, now)
            }
            Step::WritingHead => {
                let units = inv.head_units.max(self.heads[shard]);
                self.heads[shard] = inv.head_units;
                self.tally
                    .intent_wcu
                    .charge(now, &table::intent_key(shard), units);
                self.score(shard, inv, now)
            }
            Step::Scoring => self.score(shard, inv, now),
            Step::Finishing => {
                self.tally
                    .progress_wcu
                    .charge(now, PROGRESS_KEY, self.small_units);
                self.committed(shard, inv, true, now)
            }
        }
    }

    fn tick(&mut self, now: Micros) {
        self.refresh_until(now);
    }
}

/// The naive design's writes, by score row (`<board>/<item_id>`), board and index key.
#[derive(Debug)]
pub struct NaiveBoards {
    add_units: u64,
    index_units: u64,
    pub row_wcu: WorstKey<String>,
    pub board_wcu: WorstKey<String>,
    pub index_wcu: WorstKey<String>,
}

impl NaiveBoards {
    pub fn new() -> Self {
        Self {
            add_units: table::small_update_units(),
            index_units: table::leaderboard_units().index,
            row_wcu: WorstKey::new(),
            board_wcu: WorstKey::new(),
            index_wcu: WorstKey::new(),
        }
    }

    /// The ADDs of a put's events, as they reach the log.
    pub fn put(&mut self, put: &Arrival<LoggedEvent>) {
        for record in put.records.iter().filter(|r| r.event.like_delta != 0) {
            for window in [Window::All, Window::day_of(record.event.event_time_ms)] {
                let board = window.key();
                let row = format!("{board}/{}", record.event.item_id);
                self.row_wcu.charge(put.at, &row, self.add_units);
                self.board_wcu.charge(put.at, &board, self.add_units);
                // A new score deletes the index entry and puts it again.
                self.index_wcu.charge(put.at, &board, 2 * self.index_units);
            }
        }
    }
}
