//! The aggregator as the simulation runs it: the calls it makes per invocation, in order, each
//! decided by the real core (`likes_core::pipeline`) and costed by the table model.
//!
//! Per invocation (one stream shard's batch, in order): one strongly consistent Query of the
//! shard's progress and newest intent (`#wm#<shard>`, a read: no write units); the records
//! the progress covers are skipped (`covered`); `hot_items` of the rest. Then chunk by chunk
//! (`CHUNK_RECORDS` records, never more than `MAX_CHUNK_RECORDS`, a plain cut): the chunk's
//! count rows from `route_chunk`, in the row and overflow partition of the stream shard's
//! slot (`CountLayout::slot`), less the likers buckets the container listed already
//! (`ListedBuckets`); an overflow-marker UpdateItem, one after another, for each of
//! its overflow items this container has not marked yet; if the chunk adds anything, the
//! PutItem of its intent on `#wm#<shard>` (sized as the store encodes a `CountIntentRow`),
//! then one conditional UpdateItem per count row, 32 in flight as the store's
//! `buffer_unordered` keeps them, done when the slowest is, each billed once at its row's
//! size (the row's counts and one intent note per stream shard whose slot writes it); then,
//! for every chunk, the progress UpdateItem on `#wm#<shard>`, which also moves the shard's
//! watermark.
//!
//! No transaction: writes to one row queue on it (not waited on here) and none is cancelled,
//! so nothing is retried, no batch fails and no intent is left pending (there are no
//! crashes either). Events are not the aggregator's: the publisher puts them from a mapping
//! of its own.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};

use likes_core::pipeline::{
    counts_as_of, covered, hot_items, next_intent, route_chunk, ChangeRecord, CountLayout,
    CountTarget, Lane, ListedBuckets, RowDelta, StreamShard, MAX_CHUNK_RECORDS,
};
use likes_core::reconcile::Period;
use likes_core::{Delta, ItemId};

use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next, MS};
use crate::meter::{Histogram, WorstKey};
use crate::table::{self, CountRowSize};
use crate::traffic::{EPOCH_MS, VIRAL_ITEM};

/// Count-row UpdateItems of one intent in flight at once (the store's `IN_FLIGHT`).
const ROW_WRITES_IN_FLIGHT: usize = 32;
/// A container forgets the items it marked past this many (the aggregator's cap).
const MARKED_ITEMS_CAP: usize = 100_000;
/// How often the count's `as_of` is read, as readers would.
const AS_OF_EVERY: Micros = 100 * MS;

#[derive(Debug, Clone, Copy)]
pub struct DesignConfig {
    pub chunk_records: usize,
    pub layout: CountLayout,
    pub period: Period,
    pub stream_shards: u32,
    pub seed: u64,
}

/// Where an invocation is.
enum Step {
    /// The shard's progress and newest intent are being read.
    Reading,
    /// The first of `unmarked` is being marked; the chunk's intent is put after the last.
    Marking { chunk: Chunk, unmarked: Vec<ItemId> },
    /// The chunk's intent is being put, at `units`.
    Freezing { chunk: Chunk, units: u64 },
    /// The chunk's count rows are being written; the step ends with the slowest write.
    Adding { chunk: Chunk },
    /// The shard's progress is being moved past the chunk.
    Advancing { chunk: Chunk },
}

struct Chunk {
    /// Its records: the invocation's next `len`.
    len: usize,
    rows: BTreeMap<CountTarget, RowDelta>,
    /// The intent's number; `None` for a chunk that adds nothing (it only moves the progress).
    intent: Option<i64>,
}

struct Invocation {
    batch: Vec<ChangeRecord>,
    hot: BTreeSet<ItemId>,
    /// The first record not yet applied.
    at: usize,
}

/// How many intent notes the count rows carry, from the stream shards' slots: a base row
/// `D#k` of any item is written by every shard of row k, an overflow row by the shards of
/// its row and overflow partition.
#[derive(Debug, Clone, Copy)]
pub struct RowNotes {
    pub size: CountRowSize,
    pub most_on_base_row: usize,
    pub most_on_overflow_row: usize,
    /// Write units of a row with the most notes there are.
    pub units_at_most: u64,
}

/// What the aggregator did over a run.
#[derive(Debug)]
pub struct DesignTally {
    pub counts_wcu: WorstKey<String>,
    /// The `#wm#<shard>` keys alone (intents and progress), also in `counts_wcu`.
    pub progress_wcu: WorstKey<String>,
    pub chunks: u64,
    pub intents: u64,
    pub count_row_writes: u64,
    pub marker_writes: u64,
    pub progress_writes: u64,
    pub staleness: Histogram,
    pub as_of_lag: Histogram,
    pub counted_viral: Delta,
    pub counted_total: Delta,
    pub row_notes: RowNotes,
}

/// Where a stream shard is: the last record it applied, and its last intent completed.
#[derive(Default)]
struct Progress {
    through_seq: Option<String>,
    intent: Option<i64>,
}

pub struct Design {
    config: DesignConfig,
    latency: Latency,
    invocations: Vec<Option<(Invocation, Step)>>,
    /// Per stream shard, the items its container marked: one warm container per shard,
    /// since the mapping keeps one batch in flight per shard.
    marked: Vec<HashSet<ItemId>>,
    /// Per stream shard, the likers buckets its container's intents listed.
    listed: Vec<ListedBuckets>,
    progress: Vec<Progress>,
    stream_shards: Vec<StreamShard>,
    watermarks: BTreeMap<String, i64>,
    viral: ItemId,
    /// Write units of an UpdateItem of each count row a shard's slot writes.
    row_units: HashMap<(Lane, u32), u64>,
    small_update_units: u64,
    tally: DesignTally,
}

/// A stream shard's id, as long as DynamoDB Streams' are.
fn shard_id(shard: usize) -> String {
    format!(
        "shardId-{:020}-{shard:08x}",
        1_536_019_433_613 + shard as u64
    )
}

/// Per count row (lane and row index) the stream shards whose slot writes it, and so the
/// notes it carries, with the write units that costs.
fn row_units(layout: CountLayout, shard_ids: &[String]) -> (HashMap<(Lane, u32), u64>, RowNotes) {
    let mut writers: HashMap<(Lane, u32), usize> = HashMap::new();
    for id in shard_ids {
        let (row, overflow) = layout.slot(id);
        *writers.entry((Lane::Base, row)).or_default() += 1;
        *writers.entry((Lane::Overflow(overflow), row)).or_default() += 1;
    }
    let most = |base: bool| {
        writers
            .iter()
            .filter(|((lane, _), _)| (*lane == Lane::Base) == base)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0)
    };
    let size = CountRowSize::new();
    let notes = RowNotes {
        size,
        most_on_base_row: most(true),
        most_on_overflow_row: most(false),
        units_at_most: size.units(most(true).max(most(false))),
    };
    let units = writers
        .into_iter()
        .map(|(row, n)| (row, size.units(n)))
        .collect();
    (units, notes)
}

impl Design {
    pub fn new(config: DesignConfig) -> Self {
        let shards = config.stream_shards as usize;
        let ids: Vec<String> = (0..shards).map(shard_id).collect();
        let (row_units, row_notes) = row_units(config.layout, &ids);
        Self {
            latency: Latency::new(config.seed),
            invocations: (0..shards).map(|_| None).collect(),
            marked: vec![HashSet::new(); shards],
            listed: (0..shards).map(|_| ListedBuckets::default()).collect(),
            progress: (0..shards).map(|_| Progress::default()).collect(),
            stream_shards: ids
                .into_iter()
                .map(|shard_id| StreamShard {
                    shard_id,
                    parent_shard_id: None,
                    closed: false,
                })
                .collect(),
            watermarks: BTreeMap::new(),
            viral: ItemId::parse(VIRAL_ITEM).expect("a valid item id"),
            row_units,
            small_update_units: table::small_update_units(),
            tally: DesignTally {
                counts_wcu: WorstKey::new(),
                progress_wcu: WorstKey::new(),
                chunks: 0,
                intents: 0,
                count_row_writes: 0,
                marker_writes: 0,
                progress_writes: 0,
                staleness: Histogram::default(),
                as_of_lag: Histogram::default(),
                counted_viral: Delta::ZERO,
                counted_total: Delta::ZERO,
                row_notes,
            },
            config,
        }
    }

    pub fn finish(self) -> DesignTally {
        assert!(
            self.invocations.iter().all(Option::is_none),
            "every invocation returned"
        );
        self.tally
    }

    fn wait(&mut self, shard: usize, inv: Invocation, step: Step, until: Micros) -> Next {
        self.invocations[shard] = Some((inv, step));
        Next::At(until)
    }

    /// Charges a write on the `#wm#<shard>` key.
    fn charge_progress_key(&mut self, shard: usize, now: Micros, units: u64) {
        let key = table::progress_key(&self.stream_shards[shard].shard_id);
        self.tally.counts_wcu.charge(now, key.as_str(), units);
        self.tally.progress_wcu.charge(now, key.as_str(), units);
    }

    /// `n` calls, [`ROW_WRITES_IN_FLIGHT`] at once in any order (`buffer_unordered`): how
    /// long until the last is done.
    fn unordered(&mut self, n: usize, call: (Micros, Micros)) -> Micros {
        let mut ends = BinaryHeap::new();
        let mut last = 0;
        for _ in 0..n {
            let start = if ends.len() < ROW_WRITES_IN_FLIGHT {
                0
            } else {
                let Reverse(end) = ends.pop().expect("calls in flight");
                end
            };
            let end = start + self.latency.draw(call);
            last = last.max(end);
            ends.push(Reverse(end));
        }
        last
    }

    /// The next chunk of the invocation, or its return once the batch is applied.
    fn next_chunk(&mut self, shard: usize, inv: Invocation, now: Micros) -> Next {
        let rest = &inv.batch[inv.at..];
        if rest.is_empty() {
            return Next::Done {
                unapplied: Vec::new(),
            };
        }
        let len = rest
            .len()
            .min(self.config.chunk_records.clamp(1, MAX_CHUNK_RECORDS));
        let mut rows = route_chunk(
            &rest[..len],
            &self.stream_shards[shard].shard_id,
            &inv.hot,
            self.config.layout,
            self.config.period,
        );
        self.listed[shard].drop_listed(&mut rows);
        if rows.is_empty() {
            let chunk = Chunk {
                len,
                rows,
                intent: None,
            };
            return self.advance(shard, inv, chunk, now);
        }
        let marked = &self.marked[shard];
        let unmarked: Vec<ItemId> = rows
            .keys()
            .filter(|t| matches!(t.lane, Lane::Overflow(_)) && !marked.contains(&t.item))
            .map(|t| t.item.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let chunk = Chunk {
            len,
            rows,
            intent: None,
        };
        self.mark_or_freeze(shard, inv, chunk, unmarked, now)
    }

    fn mark_or_freeze(
        &mut self,
        shard: usize,
        inv: Invocation,
        mut chunk: Chunk,
        unmarked: Vec<ItemId>,
        now: Micros,
    ) -> Next {
        if !unmarked.is_empty() {
            let end = now + self.latency.draw(latency::UPDATE_ITEM);
            return self.wait(shard, inv, Step::Marking { chunk, unmarked }, end);
        }
        let now_ms = EPOCH_MS + (now / MS) as i64;
        let n = next_intent(self.progress[shard].intent, now_ms);
        let last = &inv.batch[inv.at + chunk.len - 1];
        let units = table::intent_units(
            &self.stream_shards[shard].shard_id,
            n,
            last.stream_time_ms,
            &chunk.rows,
            now_ms,
        );
        chunk.intent = Some(n);
        // A conditional PutItem takes an UpdateItem's time.
        let end = now + self.latency.draw(latency::UPDATE_ITEM);
        self.wait(shard, inv, Step::Freezing { chunk, units }, end)
    }

    /// The chunk's count rows were written at `now`: they count from here.
    fn added(&mut self, shard: usize, inv: Invocation, chunk: Chunk, now: Micros) -> Next {
        self.listed[shard].remember(&chunk.rows);
        for (target, written) in &chunk.rows {
            let units = self.row_units[&(target.lane, target.row)];
            let key = target.partition_key();
            self.tally.counts_wcu.charge(now, key.as_str(), units);
            self.tally.count_row_writes += 1;
            self.tally.counted_total += written.total;
            if target.item == self.viral {
                self.tally.counted_viral += written.total;
            }
        }
        let now_ms = EPOCH_MS + (now / MS) as i64;
        let records = &inv.batch[inv.at..inv.at + chunk.len];
        for change in records.iter().filter_map(|r| r.change.as_ref()) {
            let stale = now_ms - change.event_time_ms;
            self.tally.staleness.record(stale.max(0) as u64, 1);
        }
        self.advance(shard, inv, chunk, now)
    }

    /// Moves the shard's progress (and watermark) past the chunk.
    fn advance(&mut self, shard: usize, inv: Invocation, chunk: Chunk, now: Micros) -> Next {
        let end = now + self.latency.draw(latency::UPDATE_ITEM);
        self.wait(shard, inv, Step::Advancing { chunk }, end)
    }
}

impl Consumer for Design {
    fn invoke(&mut self, shard: usize, batch: Vec<ChangeRecord>, now: Micros) -> Next {
        let end = now + self.latency.draw(latency::QUERY);
        let inv = Invocation {
            batch,
            hot: BTreeSet::new(),
            at: 0,
        };
        self.wait(shard, inv, Step::Reading, end)
    }

    fn resume(&mut self, shard: usize, now: Micros) -> Next {
        let (mut inv, step) = self.invocations[shard]
            .take()
            .expect("an invocation in flight");
        match step {
            Step::Reading => {
                let through = self.progress[shard].through_seq.as_deref();
                inv.at = covered(&inv.batch, through);
                inv.hot = hot_items(&inv.batch[inv.at..]);
                self.next_chunk(shard, inv, now)
            }
            Step::Marking {
                chunk,
                mut unmarked,
            } => {
                // A conditional UpdateItem on the item's base partition.
                let item = unmarked.remove(0);
                let units = self.small_update_units;
                self.tally.counts_wcu.charge(now, item.as_str(), units);
                self.tally.marker_writes += 1;
                let marked = &mut self.marked[shard];
                if marked.len() >= MARKED_ITEMS_CAP {
                    marked.clear();
                }
                marked.insert(item);
                self.mark_or_freeze(shard, inv, chunk, unmarked, now)
            }
            Step::Freezing { chunk, units } => {
                self.charge_progress_key(shard, now, units);
                self.tally.intents += 1;
                let end = now + self.unordered(chunk.rows.len(), latency::UPDATE_ITEM);
                self.wait(shard, inv, Step::Adding { chunk }, end)
            }
            Step::Adding { chunk } => self.added(shard, inv, chunk, now),
            Step::Advancing { chunk } => {
                let units = self.small_update_units;
                self.charge_progress_key(shard, now, units);
                self.tally.progress_writes += 1;
                self.tally.chunks += 1;
                let last = &inv.batch[inv.at + chunk.len - 1];
                let progress = &mut self.progress[shard];
                progress.through_seq = Some(last.sequence_number.clone());
                if chunk.intent.is_some() {
                    progress.intent = chunk.intent;
                }
                self.watermarks.insert(
                    self.stream_shards[shard].shard_id.clone(),
                    last.stream_time_ms,
                );
                inv.at += chunk.len;
                self.next_chunk(shard, inv, now)
            }
        }
    }

    fn tick(&mut self, now: Micros) {
        if now % AS_OF_EVERY == 0 {
            if let Some(as_of) = counts_as_of(&self.stream_shards, &self.watermarks) {
                let lag = EPOCH_MS + (now / MS) as i64 - as_of;
                self.tally.as_of_lag.record(lag.max(0) as u64, 1);
            }
        }
    }
}
