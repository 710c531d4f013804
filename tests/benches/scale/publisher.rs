//! The design's event log: the publisher, a consumer of the Reactions stream on a mapping
//! of its own, puts one event per flip under `event_partition_key(user, item)`, one
//! PutRecords per batch (of at most 500). Nothing the aggregator does waits for it. What it
//! puts goes on to the log's readers, each behind a mapping of its own.

use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use likes_core::pipeline::{event_partition_key, ChangeRecord, ReactionEvent};

use crate::kinesis::HashRanges;
use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next, StreamRecord, MS};
use crate::meter::{Histogram, WorstKey};
use crate::traffic::{Arrival, EPOCH_MS};

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

    /// An event of a flip at `event_time_ms` was put on `shard` at `now`.
    pub fn put(&mut self, shard: usize, event_time_ms: i64, now: Micros) {
        let now_ms = EPOCH_MS + (now / MS) as i64;
        self.kinesis.charge(now, &shard, 1);
        self.lag.record((now_ms - event_time_ms).max(0) as u64, 1);
    }
}

/// An event on the log, as its readers' mappings see it: the shard it was put on and when,
/// and the event, shared by every reader.
#[derive(Debug, Clone)]
pub struct LoggedEvent {
    pub shard: usize,
    pub arrived_ms: i64,
    pub event: Arc<ReactionEvent>,
}

impl StreamRecord for LoggedEvent {
    fn shard(&self, shards: u32) -> usize {
        assert!(
            self.shard < shards as usize,
            "put on one of the log's shards"
        );
        self.shard
    }

    fn arrived_ms(&self) -> i64 {
        self.arrived_ms
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
    /// The log's readers: each put goes to every one, in put order.
    readers: Vec<SyncSender<Arrival<LoggedEvent>>>,
    tally: EventLogTally,
}

impl Publisher {
    pub fn new(
        stream_shards: u32,
        event_shards: u32,
        readers: Vec<SyncSender<Arrival<LoggedEvent>>>,
        seed: u64,
    ) -> Self {
        Self {
            latency: Latency::new(seed),
            events: HashRanges::new(event_shards),
            in_flight: (0..stream_shards).map(|_| None).collect(),
            readers,
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
        let arrived_ms = EPOCH_MS + (now / MS) as i64;
        let logged: Vec<LoggedEvent> = batch
            .iter()
            .filter_map(|record| {
                let change = record.change.as_ref()?;
                let shard = self
                    .events
                    .shard_of(&event_partition_key(&change.user_id, &change.item_id));
                self.tally.put(shard, change.event_time_ms, now);
                Some(LoggedEvent {
                    shard,
                    arrived_ms,
                    event: Arc::new(ReactionEvent::new(change, &record.sequence_number)),
                })
            })
            .collect();
        for reader in &self.readers {
            let records = logged.clone();
            reader
                .send(Arrival { at: now, records })
                .expect("the log's readers read to its end");
        }
        Next::Done {
            unapplied: Vec::new(),
        }
    }
}
