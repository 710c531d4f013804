//! The aggregator as the simulation runs it: the calls it makes per batch, in order, each
//! decided by the real core (`likes_core::pipeline`) and costed by the table model.
//!
//! Per batch: `hot_items` of the whole batch; then chunk by chunk (`next_chunk_len`), the
//! chunk's count rows from `route_chunk`; an overflow-marker UpdateItem, one after another,
//! for each of its overflow items this container has not marked yet; one TransactWriteItems
//! of the claim and the rows, retried on a conflict as the store retries it (5 attempts,
//! 50/100/200/400 ms apart). Finally, if anything was applied, the shard's watermark
//! UpdateItem. A chunk that fails all its attempts ends the invocation, reporting its first
//! record, so the mapping sends the batch again from there. Events are not the aggregator's:
//! the publisher puts them from a mapping of its own.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use likes_core::pipeline::{
    counts_as_of, hot_items, match_claim, next_chunk_len, route_chunk, ChangeRecord, ClaimMatch,
    CountLayout, CountTarget, Lane, RowDelta, StreamShard,
};
use likes_core::reconcile::Period;
use likes_core::{backoff, Delta, ItemId};

use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next, MS, SECOND};
use crate::meter::{Histogram, PerSecond, WorstKey};
use crate::table::{self, Claims, RowLocks};
use crate::traffic::{EPOCH_MS, VIRAL_ITEM};

/// The store's attempts at a chunk's transaction before the chunk fails (its
/// `CONFLICT_ATTEMPTS`), waiting `backoff::delay` between them.
pub const CONFLICT_ATTEMPTS: u32 = 5;
/// A container forgets the items it marked past this many (the aggregator's cap).
const MARKED_ITEMS_CAP: usize = 100_000;
/// How often the count's `as_of` is read, as readers would.
const AS_OF_EVERY: Micros = 100 * MS;
/// Claims are kept this long: far longer than any retry here takes to come.
const CLAIMS_KEPT: Micros = 30 * SECOND;

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
    /// The first of `unmarked` is being marked; the chunk is committed after the last.
    Marking { chunk: Chunk, unmarked: Vec<ItemId> },
    /// A transaction attempt is in flight; `took` says whether it got its rows.
    Committing {
        chunk: Chunk,
        attempt: u32,
        took: bool,
    },
    /// Waiting out the backoff after a cancelled attempt.
    BackingOff { chunk: Chunk, attempt: u32 },
    /// The shard's watermark is being written; then the invocation returns `unapplied`.
    Advancing { unapplied: Vec<ChangeRecord> },
}

struct Chunk {
    len: usize,
    claim_id: String,
    rows: BTreeMap<CountTarget, RowDelta>,
}

struct Invocation {
    batch: Vec<ChangeRecord>,
    hot: BTreeSet<ItemId>,
    /// The first record not yet committed.
    at: usize,
}

/// What the aggregator did over a run.
#[derive(Debug)]
pub struct DesignTally {
    pub counts_wcu: WorstKey<String>,
    /// By claim id: each is written once, so its worst second is its largest claim.
    pub claims_wcu: WorstKey<String>,
    pub conflicts: PerSecond,
    pub chunks_committed: u64,
    pub chunks_failed: u64,
    pub chunks_already_claimed: u64,
    pub count_row_writes: u64,
    pub marker_writes: u64,
    pub watermark_writes: u64,
    pub staleness: Histogram,
    pub as_of_lag: Histogram,
    pub counted_viral: Delta,
    pub counted_total: Delta,
}

pub struct Design {
    config: DesignConfig,
    latency: Latency,
    invocations: Vec<Option<(Invocation, Step)>>,
    /// Per stream shard, the items its container marked: one warm container per shard,
    /// since the mapping keeps one batch in flight per shard.
    marked: Vec<HashSet<ItemId>>,
    locks: RowLocks,
    claims: Claims,
    stream_shards: Vec<StreamShard>,
    watermarks: BTreeMap<String, i64>,
    viral: ItemId,
    /// Write units of a count-row Update in a transaction, and of a small UpdateItem.
    count_update_units: u64,
    small_update_units: u64,
    tally: DesignTally,
}

fn shard_id(shard: usize) -> String {
    format!("shardId-{shard:05}")
}

impl Design {
    pub fn new(config: DesignConfig) -> Self {
        let shards = config.stream_shards as usize;
        Self {
            latency: Latency::new(config.seed),
            invocations: (0..shards).map(|_| None).collect(),
            marked: vec![HashSet::new(); shards],
            locks: RowLocks::default(),
            claims: Claims::default(),
            stream_shards: (0..shards)
                .map(|s| StreamShard {
                    shard_id: shard_id(s),
                    parent_shard_id: None,
                    closed: false,
                })
                .collect(),
            watermarks: BTreeMap::new(),
            viral: ItemId::parse(VIRAL_ITEM).expect("a valid item id"),
            count_update_units: table::count_update_units(),
            small_update_units: table::small_update_units(),
            tally: DesignTally {
                counts_wcu: WorstKey::new(),
                claims_wcu: WorstKey::new(),
                conflicts: PerSecond::default(),
                chunks_committed: 0,
                chunks_failed: 0,
                chunks_already_claimed: 0,
                count_row_writes: 0,
                marker_writes: 0,
                watermark_writes: 0,
                staleness: Histogram::default(),
                as_of_lag: Histogram::default(),
                counted_viral: Delta::ZERO,
                counted_total: Delta::ZERO,
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

    /// The next chunk of the invocation, or the watermark once the batch is applied.
    fn next_chunk(&mut self, shard: usize, inv: Invocation, now: Micros) -> Next {
        let rest = &inv.batch[inv.at..];
        if rest.is_empty() {
            return self.advance(shard, inv, Vec::new(), now);
        }
        let len = next_chunk_len(rest, self.config.chunk_records);
        let claim_id = rest[0].event_id.clone();
        let rows = route_chunk(
            &rest[..len],
            &claim_id,
            &inv.hot,
            self.config.layout,
            self.config.period,
        );
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
            claim_id,
            rows,
        };
        self.mark_or_attempt(shard, inv, chunk, unmarked, now)
    }

    fn mark_or_attempt(
        &mut self,
        shard: usize,
        inv: Invocation,
        chunk: Chunk,
        unmarked: Vec<ItemId>,
        now: Micros,
    ) -> Next {
        if unmarked.is_empty() {
            return self.attempt(shard, inv, chunk, 1, now);
        }
        let end = now + self.latency.draw(latency::UPDATE_ITEM);
        self.wait(shard, inv, Step::Marking { chunk, unmarked }, end)
    }

    fn attempt(
        &mut self,
        shard: usize,
        inv: Invocation,
        chunk: Chunk,
        attempt: u32,
        now: Micros,
    ) -> Next {
        let end = now + self.latency.draw(latency::TRANSACTION);
        let took = self.locks.try_take(chunk.rows.keys(), now, end);
        if !took {
            self.tally.conflicts.add(now, 1);
        }
        let step = Step::Committing {
            chunk,
            attempt,
            took,
        };
        self.wait(shard, inv, step, end)
    }

    /// A transaction attempt ended at `now`.
    fn committed(
        &mut self,
        shard: usize,
        mut inv: Invocation,
        chunk: Chunk,
        attempt: u32,
        took: bool,
        now: Micros,
    ) -> Next {
        let records = &inv.batch[inv.at..];
        if let Some(listed) = self.claims.get(&chunk.claim_id) {
            // The claim's condition failed: an earlier delivery committed from here.
            let ids: Vec<&str> = records.iter().map(|r| r.event_id.as_str()).collect();
            let ClaimMatch::Skip(skip) = match_claim(&ids, &listed) else {
                panic!("a retry starts at a chunk boundary, so a claim fits the batch whole");
            };
            self.tally.chunks_already_claimed += 1;
            inv.at += skip;
            return self.next_chunk(shard, inv, now);
        }
        let records = &records[..chunk.len];
        let event_ids: Vec<&str> = records.iter().map(|r| r.event_id.as_str()).collect();
        let now_ms = EPOCH_MS + (now / MS) as i64;
        let claim_units = table::claim_units(&chunk.claim_id, &event_ids, now_ms);
        if !took {
            // Assumed: a cancelled attempt is billed its prepare phase, half a committed one.
            self.tally
                .claims_wcu
                .charge(now, chunk.claim_id.as_str(), claim_units / 2);
            for target in chunk.rows.keys() {
                let units = self.count_update_units / 2;
                self.tally
                    .counts_wcu
                    .charge(now, target.partition_key().as_str(), units);
            }
            if attempt == CONFLICT_ATTEMPTS {
                self.tally.chunks_failed += 1;
                let unapplied = inv.batch.split_off(inv.at);
                return self.advance(shard, inv, unapplied, now);
            }
            let retry_at = now + backoff::delay(attempt).as_micros() as Micros;
            return self.wait(shard, inv, Step::BackingOff { chunk, attempt }, retry_at);
        }
        self.claims.put(&chunk.claim_id, &event_ids, now);
        self.tally
            .claims_wcu
            .charge(now, chunk.claim_id.as_str(), claim_units);
        for (target, written) in &chunk.rows {
            let key = target.partition_key();
            self.tally
                .counts_wcu
                .charge(now, key.as_str(), self.count_update_units);
            self.tally.count_row_writes += 1;
            self.tally.counted_total += written.total;
            if target.item == self.viral {
                self.tally.counted_viral += written.total;
            }
        }
        for change in records.iter().filter_map(|r| r.change.as_ref()) {
            let stale = now_ms - change.event_time_ms;
            self.tally.staleness.record(stale.max(0) as u64, 1);
        }
        self.tally.chunks_committed += 1;
        inv.at += chunk.len;
        self.next_chunk(shard, inv, now)
    }

    /// Writes the watermark up to the last applied record (if any), then returns.
    fn advance(
        &mut self,
        shard: usize,
        inv: Invocation,
        unapplied: Vec<ChangeRecord>,
        now: Micros,
    ) -> Next {
        if inv.at == 0 {
            return Next::Done { unapplied };
        }
        let end = now + self.latency.draw(latency::UPDATE_ITEM);
        self.wait(shard, inv, Step::Advancing { unapplied }, end)
    }
}

impl Consumer for Design {
    fn invoke(&mut self, shard: usize, batch: Vec<ChangeRecord>, now: Micros) -> Next {
        let hot = hot_items(&batch);
        self.next_chunk(shard, Invocation { batch, hot, at: 0 }, now)
    }

    fn resume(&mut self, shard: usize, now: Micros) -> Next {
        let (inv, step) = self.invocations[shard]
            .take()
            .expect("an invocation in flight");
        match step {
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
                self.mark_or_attempt(shard, inv, chunk, unmarked, now)
            }
            Step::Committing {
                chunk,
                attempt,
                took,
            } => self.committed(shard, inv, chunk, attempt, took, now),
            Step::BackingOff { chunk, attempt } => {
                self.attempt(shard, inv, chunk, attempt + 1, now)
            }
            Step::Advancing { unapplied } => {
                let id = shard_id(shard);
                let units = self.small_update_units;
                self.tally
                    .counts_wcu
                    .charge(now, format!("#wm#{id}").as_str(), units);
                self.tally.watermark_writes += 1;
                let last = inv.batch[..inv.at].last().expect("something was applied");
                self.watermarks.insert(id, last.stream_time_ms);
                Next::Done { unapplied }
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
        if now % SECOND == 0 {
            self.locks.release_before(now);
            self.claims.forget_before(now.saturating_sub(CLAIMS_KEPT));
        }
    }
}
