//! The Leaderboard table (PK `board`, SK `item_id`):
//!
//! - **score rows**, an item's net likes in a window, on one of the window's shards
//!   (`all#<s>`, `day#2026-12-01#<s>`, `hour#2026-12-01T13#<s>`, `week#2026-W49#<s>`, `s` by
//!   item hash), read top-down per namespace board shard (`ranked_board`: `post:all#<s>`)
//!   through the `by_score` index; each also keeps, per log shard, the last intent it took
//!   (`n#<shard>`);
//! - **event claims** `#event#<flip key>`: the log record that owns an event (`by`), so an
//!   event on the log twice scores once, for the events that end a like without saying
//!   when it was liked (every other event is claimed on its like's likers entry:
//!   [`crate::LikersStore::claim`]);
//! - per Kinesis shard, its **progress** (`#progress` / shard: the last record applied, its
//!   arrival, which `as_of` is read from, the intents applied, and the namespace boards its
//!   intents scored on lately), dropped once the shard has expired from the log, and its
//!   last **intent** (`#intent#<shard>` / `head`: the
//!   deltas of a run of records, frozen before any is applied, so a retry cut longer or
//!   shorter than the crashed invocation finishes exactly what it began; pending while its
//!   number is above the progress's, then left until the next intent is put over it);
//! - the **retired** log shards (`#retired` / `log_shards`: `markers`, the names of expired
//!   shards whose intent numbers may still be on all-time score rows), which reconciliation's
//!   cleaning pass drops from the rows it goes over and then from the set;
//! - per board, the **materialized top** (`#top` / board key: `post:all`, or `all` over every
//!   namespace) a read is one GetItem of, refreshed by a scheduled function: a namespace's
//!   from its board shards, a global one from the namespaces' tops;
//! - the **namespaces** whose boards were ever refreshed (`#namespace` / name), whose tops
//!   the global boards rank from.
//!
//! Each score row takes one ADD per intent, however many of the run's events it holds.

mod intents;
mod reconciled;
mod tops;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::leaderboard::{
    item_shard, Board, Entry, KeptWindows, ScoreDelta, Window, MAX_RUN_EPOCHS,
};
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
const NAMESPACE_BOARD: &str = "#namespace";
/// How long a progress row keeps a board its intents scored on: long past the refresher's
/// tick, which refreshes the boards scored since it last looked.
pub const SCORED_KEPT_MS: i64 = 60_000;
/// The most boards a progress row keeps; the oldest go past it, and the refresher, told
/// which intent they went with, refreshes every namespace's current boards.
pub const SCORED_MAX: usize = 128;
const RETIRED_BOARD: &str = "#retired";
const RETIRED_ROW: &str = "log_shards";
const RETIRED_MARKERS: &str = "markers";
const INTENT_HEAD: &str = "head";

/// A board's top as the route reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardTop {
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
    pub scored: Scored,
}

/// A run of a shard's records whose score deltas are frozen, as the shard's `n`-th intent.
#[derive(Debug, Clone)]
pub struct Intent {
    pub n: u64,
    pub last_seq: String,
    pub applied_through: i64,
    pub rows: Vec<ScoreDeltaRow>,
}

impl Intent {
    /// The namespace boards its rows score on.
    pub fn boards(&self) -> BTreeSet<Board> {
        self.rows
            .iter()
            .filter_map(|row| {
                let (window, _) = row.board.rsplit_once('#')?;
                Some(Board::of_item(&row.item_id, Window::parse_key(window)?))
            })
            .collect()
    }
}

/// The namespace boards a shard's intents scored on lately (by key: the intent that last
/// did, and when), and the last intent whose boards were dropped to keep it bounded.
#[derive(Debug, Clone, Default)]
pub struct Scored {
    pub boards: BTreeMap<String, (u64, i64)>,
    pub dropped: u64,
}

impl Scored {
    /// Notes that intent `n` scored on `boards` at `now_ms`, forgets what was scored more
    /// than [`SCORED_KEPT_MS`] ago, and keeps the [`SCORED_MAX`] latest.
    pub fn note(&mut self, boards: impl IntoIterator<Item = Board>, n: u64, now_ms: i64) {
        self.boards
            .retain(|_, (_, at)| *at >= now_ms - SCORED_KEPT_MS);
        for board in boards {
            self.boards.insert(board.key(), (n, now_ms));
        }
        while self.boards.len() > SCORED_MAX {
            let oldest = self
                .boards
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(key, (n, _))| (key.clone(), *n));
            let Some((key, n)) = oldest else { break };
            self.boards.remove(&key);
            self.dropped = self.dropped.max(n);
        }
    }
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
    /// The namespace boards its intents scored on lately, each with the last intent that did.
    pub scored: Vec<(Board, u64)>,
    /// The last intent whose boards it no longer names.
    pub scored_dropped: u64,
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
    kept: &KeptWindows,
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
            for window in kept.at(item, event.event_time_ms) {
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

/// A row of an intent: 3 (the map) + 6 × (1 name byte + 1 element byte) + 23 (board key,
/// at most) + 2 × 21 (the delta and a TTL, numbers of at most 21 bytes) + 2 × 3 (the lists
/// of pairs), and the item id.
const ROW_BYTES_BESIDES_ITEM: usize = 3 + 6 * 2 + 23 + 2 * 21 + 2 * 3;
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
    fn a_progress_row_keeps_a_minute_of_boards_and_says_which_intent_it_dropped_past_its_bound() {
        let board = |n: usize| Board::of_item(&format!("ns{n}:x"), Window::All);
        let mut scored = Scored::default();
        scored.note([board(0), board(1)], 1, 0);
        scored.note([board(1)], 2, SCORED_KEPT_MS);
        assert_eq!(
            scored.boards,
            [
                (board(0).key(), (1, 0)),
                (board(1).key(), (2, SCORED_KEPT_MS))
            ]
            .into()
        );
        // A minute on, the board scored at 0 goes; nothing was dropped to bound it.
        scored.note([], 2, SCORED_KEPT_MS + 1);
        assert_eq!(scored.boards.len(), 1);
        assert_eq!(scored.dropped, 0);
        for n in 0..SCORED_MAX as u64 {
            scored.note([board(10 + n as usize)], 3 + n, SCORED_KEPT_MS + 1);
        }
        assert_eq!(scored.boards.len(), SCORED_MAX);
        // The oldest intent's board went to make room: intent 2's.
        assert_eq!(scored.dropped, 2);
        assert!(!scored.boards.contains_key(&board(1).key()));
    }

    #[test]
    fn an_intent_row_counts_the_longest_board_shard_key() {
        // `LeaderboardShards` is at most 4096.
        assert_eq!(Window::hour_of(0).board_key(4095).len(), 23);
        assert!(Window::week_of(0).board_key(4095).len() <= 23);
    }
}
