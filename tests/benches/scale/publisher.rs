//! The design's event log: the publisher, a consumer of the Reactions stream on a mapping
//! of its own, puts one event per flip under `event_partition_key(user, item)`, one
//! PutRecords per batch (of at most 500). Nothing the aggregator does waits for it.

use likes_core::pipeline::{event_partition_key, ChangeRecord};

use crate::kinesis::HashRanges;
use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next, MS};
use crate::meter::{Histogram, WorstKey};
use crate::traffic::EPOCH_MS;

/// Kinesis PutRecords takes at most 500 records.
pub const PUT_RECORDS_MAX: usize = 500;

#[derive(Debug)]
pub struct EventLogTally {
    /// Records per Kinesis shard per second.
    pub kinesis: WorstKey<usize>,
    /// Event time to on the log.
    pub lag: Histogram,
}

impl EventLogTally {
    pub fn new() -> Self {
        Self {
            kinesis: WorstKey::new(),
            lag: Histogram::default(),
        }
    }

    /// `records` were put at `now`, each under its partition key.
    pub fn put(
        &mut self,
        events: &HashRanges,
        records: &[ChangeRecord],
        partition_key: impl Fn(&likes_core::pipeline::Change) -> String,
        now: Micros,
    ) {
        let now_ms = EPOCH_MS + (now / MS) as i64;
        for change in records.iter().filter_map(|r| r.change.as_ref()) {
            let shard = events.shard_of(&partition_key(change));
            self.kinesis.charge(now, &shard, 1);
            self.lag
                .record((now_ms - change.event_time_ms).max(0) as u64, 1);
        }
    }
}

/// The time `records` take to put, 500 a call, one call after another.
pub fn put_time(latency: &mut Latency, records: usize) -> Micros {
    (0..records.div_ceil(PUT_RECORDS_MAX))
        .map(|_| latency.draw(latency::PUT_RECORDS))
        .sum()
}

pub struct Publisher {
    latency: Latency,
    events: HashRanges,
    in_flight: Vec<Option<Vec<ChangeRecord>>>,
    tally: EventLogTally,
}

impl Publisher {
    pub fn new(stream_shards: u32, event_shards: u32, seed: u64) -> Self {
        Self {
            latency: Latency::new(seed),
            events: HashRanges::new(event_shards),
            in_flight: (0..stream_shards).map(|_| None).collect(),
            tally: EventLogTally::new(),
        }
    }

    pub fn finish(self) -> EventLogTally {
        assert!(
            self.in_flight.iter().all(Option::is_none),
            "every put returned"
        );
        self.tally
    }
}

impl Consumer for Publisher {
    fn invoke(&mut self, shard: usize, batch: Vec<ChangeRecord>, now: Micros) -> Next {
        let end = now + put_time(&mut self.latency, batch.len());
        self.in_flight[shard] = Some(batch);
        Next::At(end)
    }

    fn resume(&mut self, shard: usize, now: Micros) -> Next {
        let batch = self.in_flight[shard].take().expect("a put in flight");
        self.tally.put(
            &self.events,
            &batch,
            |change| event_partition_key(&change.user_id, &change.item_id),
            now,
        );
        Next::Done {
            unapplied: Vec::new(),
        }
    }
}
