//! The likers' consumer of the event log, behind its own mapping of the log's shards: per
//! batch, `liker_updates` of each event, and for each update one conditional UpdateItem of
//! its entry, `CONCURRENT_WRITES` in flight (modelled as waves, each done when its slowest
//! returns). Entries are keyed by their position in their bucket: no index.
//!
//! The naive design beside it makes the same writes keyed by `item_id` alone: one partition
//! key for the viral item.

use std::collections::BTreeMap;

use likes_consumers::likers::CONCURRENT_WRITES;
use likes_core::likers::{liker_updates, LikerChange, LikerUpdate};

use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next, MS};
use crate::meter::WorstKey;
use crate::publisher::LoggedEvent;
use crate::table;
use crate::traffic::{EPOCH_MS, VIRAL_ITEM};

#[derive(Debug)]
pub struct LikersTally {
    /// By bucket.
    pub table_wcu: WorstKey<String>,
    /// By item id.
    pub naive_table_wcu: WorstKey<String>,
    pub writes: u64,
    /// Per bucket of the viral item: entries liked, less entries unliked.
    pub viral_liked: BTreeMap<String, i64>,
}

struct Invocation {
    /// Each update with its event's item id.
    updates: Vec<(LikerUpdate, String)>,
    at: usize,
    wave: usize,
}

pub struct Likers {
    latency: Latency,
    entry_units: u64,
    invocations: Vec<Option<Invocation>>,
    tally: LikersTally,
}

impl Likers {
    pub fn new(event_shards: u32, seed: u64) -> Self {
        Self {
            latency: Latency::new(seed),
            entry_units: table::liker_units(),
            invocations: (0..event_shards).map(|_| None).collect(),
            tally: LikersTally {
                table_wcu: WorstKey::new(),
                naive_table_wcu: WorstKey::new(),
                writes: 0,
                viral_liked: BTreeMap::new(),
            },
        }
    }

    pub fn finish(self) -> LikersTally {
        assert!(
            self.invocations.iter().all(Option::is_none),
            "every invocation returned"
        );
        self.tally
    }

    /// The next wave of writes, or the end of the invocation once all are in.
    fn next_wave(&mut self, shard: usize, mut inv: Invocation, now: Micros) -> Next<LoggedEvent> {
        inv.wave = (inv.updates.len() - inv.at).min(CONCURRENT_WRITES);
        if inv.wave == 0 {
            return Next::Done {
                unapplied: Vec::new(),
            };
        }
        let end = now
            + (0..inv.wave)
                .map(|_| self.latency.draw(latency::UPDATE_ITEM))
                .max()
                .unwrap_or(0);
        self.invocations[shard] = Some(inv);
        Next::At(end)
    }
}

impl Consumer<LoggedEvent> for Likers {
    fn invoke(&mut self, shard: usize, batch: Vec<LoggedEvent>, now: Micros) -> Next<LoggedEvent> {
        let now_ms = EPOCH_MS + (now / MS) as i64;
        let updates = batch
            .iter()
            .flat_map(|r| {
                liker_updates(&r.event, now_ms)
                    .into_iter()
                    .map(|update| (update, r.event.item_id.clone()))
            })
            .collect();
        let inv = Invocation {
            updates,
            at: 0,
            wave: 0,
        };
        self.next_wave(shard, inv, now)
    }

    fn resume(&mut self, shard: usize, now: Micros) -> Next<LoggedEvent> {
        let mut inv = self.invocations[shard]
            .take()
            .expect("an invocation in flight");
        for (update, item) in &inv.updates[inv.at..inv.at + inv.wave] {
            let tally = &mut self.tally;
            let bucket = update.bucket_key();
            tally.table_wcu.charge(now, &bucket, self.entry_units);
            tally
                .naive_table_wcu
                .charge(now, item.as_str(), self.entry_units);
            tally.writes += 1;
            if item == VIRAL_ITEM {
                let liked = match update.change {
                    LikerChange::Liked { .. } => 1,
                    LikerChange::Unliked { .. } => -1,
                    LikerChange::Disliked | LikerChange::Undisliked { .. } => 0,
                };
                *tally.viral_liked.entry(bucket).or_insert(0) += liked;
            }
        }
        inv.at += inv.wave;
        self.next_wave(shard, inv, now)
    }
}
