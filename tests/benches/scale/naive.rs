//! The naive counter on the same traffic, behind its own mapping of the same stream
//! (batched as the aggregator's): one counter row per item (partition key `item_id`), one
//! UpdateItem ADD per flip, 16 in flight at a time as a naive handler still sends them
//! concurrently, then the batch's events put to Kinesis under the item id. No chunk, intent
//! or progress: it only adds, and pays for it on the viral item's one key.

use likes_core::pipeline::ChangeRecord;
use likes_core::Delta;

use crate::kinesis::HashRanges;
use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next, MS};
use crate::meter::{Histogram, WorstKey};
use crate::publisher::{put_time, EventLogTally};
use crate::table;
use crate::traffic::EPOCH_MS;

/// UpdateItems in flight per batch.
pub const WRITES_IN_FLIGHT: usize = 16;

#[derive(Debug)]
pub struct NaiveTally {
    pub counts_wcu: WorstKey<String>,
    pub events: EventLogTally,
    pub count_row_writes: u64,
    pub staleness: Histogram,
    pub counted_total: Delta,
}

enum Step {
    /// The next `n` records' ADDs are in flight.
    Writing(usize),
    Publishing,
}

struct Invocation {
    batch: Vec<ChangeRecord>,
    at: usize,
    step: Step,
}

pub struct Naive {
    latency: Latency,
    /// Write units of one ADD.
    add_units: u64,
    events: HashRanges,
    invocations: Vec<Option<Invocation>>,
    tally: NaiveTally,
}

impl Naive {
    pub fn new(stream_shards: u32, event_shards: u32, seed: u64) -> Self {
        Self {
            latency: Latency::new(seed),
            add_units: table::small_update_units(),
            events: HashRanges::new(event_shards),
            invocations: (0..stream_shards).map(|_| None).collect(),
            tally: NaiveTally {
                counts_wcu: WorstKey::new(),
                events: EventLogTally::new(),
                count_row_writes: 0,
                staleness: Histogram::default(),
                counted_total: Delta::ZERO,
            },
        }
    }

    pub fn finish(self) -> NaiveTally {
        assert!(
            self.invocations.iter().all(Option::is_none),
            "every invocation returned"
        );
        self.tally
    }

    /// The next wave of ADDs, done when its slowest returns; or the events, once all are in.
    fn next_wave(&mut self, shard: usize, mut inv: Invocation, now: Micros) -> Next {
        let left = inv.batch.len() - inv.at;
        let end = if left == 0 {
            inv.step = Step::Publishing;
            now + put_time(&mut self.latency, inv.batch.len())
        } else {
            let wave = left.min(WRITES_IN_FLIGHT);
            inv.step = Step::Writing(wave);
            now + (0..wave)
                .map(|_| self.latency.draw(latency::UPDATE_ITEM))
                .max()
                .unwrap_or(0)
        };
        self.invocations[shard] = Some(inv);
        Next::At(end)
    }
}

impl Consumer for Naive {
    fn invoke(&mut self, shard: usize, batch: Vec<ChangeRecord>, now: Micros) -> Next {
        let inv = Invocation {
            batch,
            at: 0,
            step: Step::Publishing,
        };
        self.next_wave(shard, inv, now)
    }

    fn resume(&mut self, shard: usize, now: Micros) -> Next {
        let mut inv = self.invocations[shard]
            .take()
            .expect("an invocation in flight");
        match inv.step {
            Step::Writing(wave) => {
                let now_ms = EPOCH_MS + (now / MS) as i64;
                for change in inv.batch[inv.at..inv.at + wave]
                    .iter()
                    .filter_map(|r| r.change.as_ref())
                {
                    let units = self.add_units;
                    self.tally
                        .counts_wcu
                        .charge(now, change.item_id.as_str(), units);
                    self.tally.count_row_writes += 1;
                    self.tally.counted_total += change.transition.delta();
                    let stale = now_ms - change.event_time_ms;
                    self.tally.staleness.record(stale.max(0) as u64, 1);
                }
                inv.at += wave;
                self.next_wave(shard, inv, now)
            }
            Step::Publishing => {
                for change in inv.batch.iter().filter_map(|r| r.change.as_ref()) {
                    let shard = self.events.shard_of(change.item_id.as_str());
                    self.tally.events.put(shard, change.event_time_ms, now);
                }
                Next::Done {
                    unapplied: Vec::new(),
                }
            }
        }
    }
}
