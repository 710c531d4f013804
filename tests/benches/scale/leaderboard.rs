//! The leaderboard's consumer of the event log, behind its own mapping of the log's shards:
//! per batch, the real cut (`likes_aggregator::leaderboard::chunk`, at most `MAX_ACTIONS`
//! transaction actions), one TransactWriteItems per chunk of a claim per event and an ADD
//! per board and item (`score_deltas`), then the shard's progress UpdateItem. A score row's
//! partition key is its board (`all`, `day#<date>`), and so is its `by_score` index entry's;
//! each claim is a partition key of its own (`#event#<event_id>`); every shard's progress is
//! on `#progress`.
//!
//! The naive design beside it applies each event alone: an UpdateItem ADD on each of its
//! score rows, no claim, no chunk.

use std::collections::BTreeMap;

use likes_aggregator::leaderboard::chunk;
use likes_core::leaderboard::{score_deltas, Window};

use crate::latency::{self, Latency};
use crate::mapping::{Consumer, Micros, Next};
use crate::meter::WorstKey;
use crate::publisher::LoggedEvent;
use crate::table;
use crate::traffic::VIRAL_ITEM;

/// Where every shard's progress is written: the partition key the store gives it.
const PROGRESS_KEY: &str = "#progress";

#[derive(Debug)]
pub struct LeaderboardTally {
    /// By score row: `board/item_id`.
    pub row_wcu: WorstKey<String>,
    /// By the table's partition key: the board, or `#progress`.
    pub board_wcu: WorstKey<String>,
    /// The `by_score` index, by board.
    pub index_wcu: WorstKey<String>,
    /// By event id: each claim is its own partition key.
    pub claims_wcu: WorstKey<String>,
    /// The naive design's score rows, by row.
    pub naive_row_wcu: WorstKey<String>,
    pub transactions: u64,
    /// Score deltas summed over the `all` board, and on the viral item's `all` row.
    pub scored_all: i64,
    pub scored_viral: i64,
}

/// One chunk's transaction: the records it covers, its events' claims and its score rows.
struct Chunk {
    len: usize,
    event_ids: Vec<String>,
    deltas: BTreeMap<(Window, String), i64>,
    /// The naive design's rows for the same events: one per event and board.
    naive_rows: Vec<String>,
}

enum Step {
    /// The chunk's transaction is in flight.
    Committing(Chunk),
    /// The shard's progress is being written; then the invocation returns.
    Advancing,
}

struct Invocation {
    batch: Vec<LoggedEvent>,
    at: usize,
}

pub struct Leaderboard {
    latency: Latency,
    score_units: u64,
    claim_units: u64,
    index_units: u64,
    progress_units: u64,
    invocations: Vec<Option<(Invocation, Step)>>,
    tally: LeaderboardTally,
}

fn row_key(window: &Window, item: &str) -> String {
    format!("{}/{item}", window.key())
}

impl Leaderboard {
    pub fn new(event_shards: u32, seed: u64) -> Self {
        let (score_units, claim_units, index_units) = table::leaderboard_units();
        Self {
            latency: Latency::new(seed),
            score_units,
            claim_units,
            index_units,
            progress_units: table::small_update_units(),
            invocations: (0..event_shards).map(|_| None).collect(),
            tally: LeaderboardTally {
                row_wcu: WorstKey::new(),
                board_wcu: WorstKey::new(),
                index_wcu: WorstKey::new(),
                claims_wcu: WorstKey::new(),
                naive_row_wcu: WorstKey::new(),
                transactions: 0,
                scored_all: 0,
                scored_viral: 0,
            },
        }
    }

    pub fn finish(self) -> LeaderboardTally {
        assert!(
            self.invocations.iter().all(Option::is_none),
            "every invocation returned"
        );
        self.tally
    }

    /// The next chunk's transaction, or the progress once the batch is applied.
    fn next_chunk(&mut self, shard: usize, inv: Invocation, now: Micros) -> Next<LoggedEvent> {
        let rest = &inv.batch[inv.at..];
        let (step, call) = if rest.is_empty() {
            (Step::Advancing, latency::UPDATE_ITEM)
        } else {
            let (events, len) = chunk(rest.iter().map(|r| &*r.event));
            let naive_rows = events
                .iter()
                .filter(|e| e.like_delta != 0)
                .flat_map(|e| {
                    [Window::All, Window::day_of(e.event_time_ms)]
                        .map(|window| row_key(&window, &e.item_id))
                })
                .collect();
            let chunk = Chunk {
                len,
                event_ids: events.iter().map(|e| e.event_id.clone()).collect(),
                deltas: score_deltas(events.iter().copied()),
                naive_rows,
            };
            (Step::Committing(chunk), latency::TRANSACTION)
        };
        self.invocations[shard] = Some((inv, step));
        Next::At(now + self.latency.draw(call))
    }

    /// The chunk's transaction committed at `now`.
    fn commit(&mut self, chunk: Chunk, now: Micros) {
        let tally = &mut self.tally;
        tally.transactions += 1;
        for event_id in &chunk.event_ids {
            tally
                .claims_wcu
                .charge(now, event_id.as_str(), self.claim_units);
        }
        for row in &chunk.naive_rows {
            tally.naive_row_wcu.charge(now, row.as_str(), 1);
        }
        for ((window, item), delta) in chunk.deltas {
            let board = window.key();
            tally
                .row_wcu
                .charge(now, row_key(&window, &item).as_str(), self.score_units);
            tally
                .board_wcu
                .charge(now, board.as_str(), self.score_units);
            if delta != 0 {
                // The score is the index's sort key: a new score deletes the entry and puts
                // it again.
                tally
                    .index_wcu
                    .charge(now, board.as_str(), 2 * self.index_units);
            }
            if window == Window::All {
                tally.scored_all += delta;
                if item == VIRAL_ITEM {
                    tally.scored_viral += delta;
                }
            }
        }
    }
}

impl Consumer<LoggedEvent> for Leaderboard {
    fn invoke(&mut self, shard: usize, batch: Vec<LoggedEvent>, now: Micros) -> Next<LoggedEvent> {
        self.next_chunk(shard, Invocation { batch, at: 0 }, now)
    }

    fn resume(&mut self, shard: usize, now: Micros) -> Next<LoggedEvent> {
        let (mut inv, step) = self.invocations[shard]
            .take()
            .expect("an invocation in flight");
        match step {
            Step::Committing(chunk) => {
                inv.at += chunk.len;
                self.commit(chunk, now);
                self.next_chunk(shard, inv, now)
            }
            Step::Advancing => {
                self.tally
                    .board_wcu
                    .charge(now, PROGRESS_KEY, self.progress_units);
                Next::Done {
                    unapplied: Vec::new(),
                }
            }
        }
    }
}
