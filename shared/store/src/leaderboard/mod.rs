//! The Leaderboard table (PK `board`, SK `item_id`):
//!
//! - **score rows**, an item's net likes on a board, on one of the board's shards
//!   (`all#<s>`, `day#2026-12-01#<s>`, `s` by item hash), read top-down per shard through the
//!   `by_score` index; each also keeps, per log shard, the last intent it took (`n#<shard>`);
//! - **event claims** `#event#<flip key>`: the log record that owns an event (`by`), so an
//!   event on the log twice scores once, for the events that end a like without saying
//!   when it was liked (every other event is claimed on its like's likers entry:
//!   [`crate::LikersStore::claim`]);
//! - per Kinesis shard, its **progress** (`#progress` / shard: the last record applied, its
//!   arrival, which `as_of` is read from, and the intents applied), dropped once the shard
//!   has expired from the log, and its last **intent** (`#intent#<shard>` / `head`: the
//!   deltas of a run of records, frozen before any is applied, so a retry cut longer or
//!   shorter than the crashed invocation finishes exactly what it began; pending while its
//!   number is above the progress's, then left until the next intent is put over it);
//! - the **retired** log shards (`#retired` / `log_shards`: `markers`, the names of expired
//!   shards whose intent numbers may still be on all-time score rows), which reconciliation's
//!   cleaning pass drops from the rows it goes over and then from the set;
//! - per board, the **materialized top** (`#top` / window key) a read is one GetItem of,
//!   refreshed by a scheduled function from the board's shards.
//!
//! Each score row takes one ADD per intent, however many of the run's events it holds.

mod intents;
mod reconciled;
mod tops;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::leaderboard::{item_shard, Entry, ScoreDelta, Window, MAX_RUN_EPOCHS};
use likes_core::pipeline::ReactionEvent;
use likes_core::reconcile::{CountRowState, Period};

use crate::first_epochs::FirstEpochs;
use crate::rows::attr::INTENT_N;
use crate::rows::{self, ScoreDeltaRow};
use crate::StoreError;

/// The index of score rows by board shard, sorted by score (`ranked`): a sparse index,
/// which a row written once with a delta under [`RANKED_FROM`] stays out of.
pub const SCORE_INDEX: &str = "by_score";
/// The least delta that puts a new score row in the score index. An item liked once (the
/// long tail, most of the board's rows) costs no index write; a refresh whose top reaches
/// down to scores under it reads the rows left out too.
pub const RANKED_FROM: i64 = 2;
/// What one intent's row may take of DynamoDB's 400 KB item, as [`run_length`] counts.
pub const MAX_INTENT_BYTES: usize = 300_000;
// The rest of the head (its keys, `n`, `last_seq`, `days`) fits in what is left.
const _: () = assert!(MAX_INTENT_BYTES + 4 * 1024 < 400 * 1024);
/// Claims, score row writes and shard queries in flight at once.
pub const IN_FLIGHT: usize = 32;
const PROGRESS_BOARD: &str = "#progress";
const EVENT_CLAIM_PREFIX: &str = "#event#";
const TOP_BOARD: &str = "#top";
const RETIRED_BOARD: &str = "#retired";
const RETIRED_ROW: &str = "log_shards";
const RETIRED_MARKERS: &str = "markers";
const INTENT_HEAD: &str = "head";

/// A board as the route reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    pub entries: Vec<Entry>,
    /// Every event that reached the log before this time (epoch ms), on any of its shards,
    /// is on the board; `None` before the first refresh
    /// ([`likes_core::leaderboard::board_as_of`]).
    pub as_of_ms: Option<i64>,
}

/// Where one Kinesis shard's consumer stands: the last record applied, the intents applied,
/// and an intent a crashed invocation left to finish.
#[derive(Debug, Clone, Default)]
pub struct ShardState {
    pub through_seq: Option<String>,
    pub intents: u64,
    pub pending: Option<Intent>,
}

/// A run of a shard's records whose score deltas are frozen, as the shard's `n`-th intent.
#[derive(Debug, Clone)]
pub struct Intent {
    pub n: u64,
    pub last_seq: String,
    pub applied_through: i64,
    pub rows: Vec<ScoreDeltaRow>,
    /// The boards the deltas score on.
    pub windows: Vec<Window>,
}

/// One log shard's progress as a refresh reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardProgress {
    pub shard: String,
    pub through_seq: Option<String>,
    /// The arrival on the log of the last record applied.
    pub applied_through_ms: i64,
    /// The intents it applied: unchanged while its records score nothing.
    pub intents: u64,
    /// The boards its last intent scored on.
    pub windows: Vec<Window>,
}

/// An all-time score row as a cleaning pass reads it.
#[derive(Debug, Clone)]
pub struct AllTimeRow {
    pub item_id: String,
    /// Its score, subtotals and near-cut counts, as reconciliation judges them.
    pub state: CountRowState,
    /// The log shards that left their last intent's number on it, by their name there.
    pub markers: Vec<String>,
}

impl AllTimeRow {
    /// The attributes of the intent numbers it keeps for shards in `retired`.
    pub fn retired_attributes(&self, retired: &BTreeSet<String>) -> Vec<String> {
        self.markers
            .iter()
            .filter(|marker| retired.contains(*marker))
            .map(|marker| marker_attribute(marker))
            .collect()
    }
}

/// An event of the batch, and the log record (`<shard>:<sequence number>`) it came in: the
/// claim of the event, where it scores.
#[derive(Debug, Clone, Copy)]
pub struct Owned<'e> {
    pub event: &'e ReactionEvent,
    pub by: &'e str,
}

#[derive(Debug, Clone)]
pub struct LeaderboardStore {
    client: Client,
    table: String,
    shards: u32,
    /// The first epochs of the all-time score rows this container wrote.
    first_epochs: FirstEpochs,
}

impl LeaderboardStore {
    /// A store that reads boards; [`Self::with_board_shards`] for one that writes them.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            shards: 1,
            first_epochs: FirstEpochs::default(),
        }
    }

    /// The number of shards each board's score rows spread over (the template's
    /// `LeaderboardShards`).
    pub fn with_board_shards(mut self, shards: u32) -> Self {
        self.shards = shards.max(1);
        self
    }

    /// The partition of an item's all-time score row.
    fn all_time_board(&self, item_id: &str) -> AttributeValue {
        AttributeValue::S(Window::All.board_key(item_shard(item_id, self.shards)))
    }

    /// The shards each board's score rows spread over.
    pub fn board_shards(&self) -> u32 {
        self.shards
    }

    /// A strongly consistent GetItem.
    async fn get(&self, board: &str, item_id: &str) -> Result<Option<rows::Item>, StoreError> {
        self.read(board, item_id, true).await
    }
}

/// How many of `events` (a batch's, in order, from the first not yet applied) the next run
/// takes: as many as its intent's row holds in [`MAX_INTENT_BYTES`] (at least one), spanning
/// at most [`MAX_RUN_EPOCHS`] epochs. The intent holds a run's net deltas, so an event adds
/// only what the run has not yet got ([`score_deltas`](likes_core::leaderboard::score_deltas)
/// keeps): a row per board and item (`all` and the day of its event time), and on `all` an
/// `[epoch, delta]` pair per epoch and a `[cut, flips]` pair per cut it is near. A viral
/// item's events, repeating one item, add almost nothing after its first, so a run holds
/// as many distinct items as the row takes, however many events of the viral item come
/// between them, and its score rows take one write per run.
pub fn run_length<'e>(
    events: impl IntoIterator<Item = &'e ReactionEvent>,
    period: Period,
) -> usize {
    let mut bytes = 0;
    let mut rows: HashSet<(Window, &str)> = HashSet::new();
    let mut pairs: HashSet<(&str, bool, i64)> = HashSet::new();
    let mut epochs = BTreeSet::new();
    let mut taken = 0;
    for event in events {
        let epoch = period.epoch(event.event_time_ms);
        if taken > 0 && !epochs.contains(&epoch) && epochs.len() == MAX_RUN_EPOCHS {
            break;
        }
        let item = event.item_id.as_str();
        let mut more = 0;
        let mut new_rows = Vec::new();
        let mut new_pairs = Vec::new();
        if event.like_delta != 0 {
            for window in [Window::All, Window::day_of(event.event_time_ms)] {
                let row = (window, item);
                if !rows.contains(&row) {
                    more += item.len() + ROW_BYTES_BESIDES_ITEM;
                    new_rows.push(row);
                }
            }
            let near = period.near_cut(event.event_time_ms);
            for pair in
                std::iter::once((item, false, epoch)).chain(near.map(|cut| (item, true, cut)))
            {
                if !pairs.contains(&pair) {
                    more += PAIR_BYTES;
                    new_pairs.push(pair);
                }
            }
        }
        if taken > 0 && bytes + more > MAX_INTENT_BYTES {
            break;
        }
        bytes += more;
        rows.extend(new_rows);
        pairs.extend(new_pairs);
        epochs.insert(epoch);
        taken += 1;
    }
    taken
}

/// What an intent's row holds for `deltas` (a run's), as [`run_length`] counts it.
pub fn intent_row_bytes(deltas: &BTreeMap<(Window, String), ScoreDelta>) -> usize {
    deltas
        .iter()
        .map(|((_, item), delta)| {
            item.len()
                + ROW_BYTES_BESIDES_ITEM
                + PAIR_BYTES * (delta.by_epoch.len() + delta.near_cuts.len())
        })
        .sum()
}

/// A row of an intent: 3 (the map) + 6 × (1 name byte + 1 element byte) + 19 (board key,
/// at most) + 2 × 21 (the delta and a TTL, numbers of at most 21 bytes) + 2 × 3 (the lists
/// of pairs), and the item id.
const ROW_BYTES_BESIDES_ITEM: usize = 3 + 6 * 2 + 19 + 2 * 21 + 2 * 3;
/// A list of two numbers in a list: 3 + 2 × (1 + 21) + 1.
const PAIR_BYTES: usize = 3 + 2 * (1 + 21) + 1;

/// How a score row names a log shard's intent number: `n#<marker>`.
fn marker_attribute(marker: &str) -> String {
    format!("{INTENT_N}#{marker}")
}

/// The marker a score row's attribute names, if it is an intent number.
fn attribute_marker(name: &str) -> Option<&str> {
    name.strip_prefix(INTENT_N)?.strip_prefix('#')
}

fn intent_board(shard: &str) -> String {
    format!("#intent#{shard}")
}

/// A log shard's name on the score rows it writes: the number of a Kinesis shard id
/// (`shardId-000000000079` is `79`), short because a viral item's rows carry one per shard;
/// another id whole.
fn shard_marker(shard: &str) -> &str {
    match shard.strip_prefix("shardId-") {
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            let trimmed = digits.trim_start_matches('0');
            if trimmed.is_empty() {
                "0"
            } else {
                trimmed
            }
        }
        _ => shard,
    }
}

/// `all`, and the day windows starting at `days`.
fn windows_of(days: &[i64]) -> Vec<Window> {
    std::iter::once(Window::All)
        .chain(days.iter().map(|d| Window::Day(*d)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kinesis_shard_is_named_by_its_number_on_score_rows() {
        assert_eq!(shard_marker("shardId-000000000079"), "79");
        assert_eq!(shard_marker("shardId-000000000000"), "0");
        assert_eq!(shard_marker("shardId-000000000010"), "10");
        // Another id is kept whole, so two shards never share a marker.
        assert_eq!(shard_marker("shardId-0001-v2"), "shardId-0001-v2");
        assert_eq!(shard_marker("local"), "local");
    }

    #[test]
    fn an_intent_row_counts_the_longest_board_shard_key() {
        // `LeaderboardShards` is at most 4096.
        assert_eq!(Window::day_of(0).board_key(4095).len(), 19);
    }
}
