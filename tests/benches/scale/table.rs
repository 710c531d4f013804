//! The tables as the simulation sees them: what each write costs in write units (AWS's
//! item-size rules, from the items the stores write: Counts, Claims, and the event log's
//! read models), and which transactions DynamoDB cancels because a concurrent one holds one
//! of their rows.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::ids::{ITEM_ID_MAX_LEN, USER_ID_MAX_LEN};
use likes_core::leaderboard::{Window, TOP_SIZE};
use likes_core::likers::position;
use likes_core::pipeline::CountTarget;
use likes_store::rows::{
    to_item, EventClaimRow, IntentHeadRow, ScoreDeltaRow, TopEntryRow, TopRow,
};
use likes_store::StoreError;

use crate::capacity::{self, Item};
use crate::mapping::Micros;

/// The claim the store puts with each chunk, as `CountsWriter::claim_put` builds it: the
/// chunk's first eventID, every eventID joined by commas, and two epoch times.
pub fn claim_item(claim_id: &str, event_ids: &[&str], now_ms: i64) -> Item {
    const CLAIM_TTL_SECONDS: i64 = 3 * 24 * 3600;
    Item::from([
        (
            "claim_id".to_owned(),
            AttributeValue::S(claim_id.to_owned()),
        ),
        (
            "event_ids".to_owned(),
            AttributeValue::S(event_ids.join(",")),
        ),
        (
            "created_at".to_owned(),
            AttributeValue::N(now_ms.to_string()),
        ),
        (
            "expires_at".to_owned(),
            AttributeValue::N((now_ms / 1000 + CLAIM_TTL_SECONDS).to_string()),
        ),
    ])
}

/// The claim put inside the chunk's transaction.
pub fn claim_units(claim_id: &str, event_ids: &[&str], now_ms: i64) -> u64 {
    capacity::transactional_write_units(capacity::item_size(&claim_item(
        claim_id, event_ids, now_ms,
    )))
}

/// The largest count row there can be: a 128-character item id with an overflow suffix,
/// and counts and a timestamp at the widest number DynamoDB stores (38 significant digits,
/// negative: 21 bytes). Every count row is at most this, so its write costs what this costs.
fn largest_count_row() -> Item {
    let widest = AttributeValue::N(format!("-{}", "9".repeat(38)));
    Item::from([
        (
            "item_id".to_owned(),
            AttributeValue::S("x".repeat(128) + "#64"),
        ),
        ("shard".to_owned(), AttributeValue::S("D#63".to_owned())),
        ("like_count".to_owned(), widest.clone()),
        ("dislike_count".to_owned(), widest.clone()),
        ("updated_at".to_owned(), widest),
    ])
}

/// Write units of one count-row Update inside a chunk's transaction.
pub fn count_update_units() -> u64 {
    capacity::transactional_write_units(capacity::item_size(&largest_count_row()))
}

/// Write units of one standard UpdateItem on a small row (a naive counter's ADD, the
/// overflow marker, a watermark): every such row stays far below 1 KB.
pub fn small_update_units() -> u64 {
    capacity::write_units(capacity::item_size(&largest_count_row()))
}

/// Count rows held by committing transactions. DynamoDB cancels a transaction with a
/// `TransactionConflict` when another transaction is in progress on one of its items; here
/// the one that arrives while the other holds the row is cancelled, and a cancelled attempt
/// holds nothing.
#[derive(Debug, Default)]
pub struct RowLocks {
    held_until: HashMap<CountTarget, Micros>,
}

impl RowLocks {
    /// Takes every row for `[start, end)` unless one is held past `start`; on a conflict
    /// nothing is taken.
    pub fn try_take<'r>(
        &mut self,
        rows: impl Iterator<Item = &'r CountTarget> + Clone,
        start: Micros,
        end: Micros,
    ) -> bool {
        let conflict = rows
            .clone()
            .any(|row| self.held_until.get(row).is_some_and(|until| *until > start));
        if !conflict {
            for row in rows {
                self.held_until.insert(row.clone(), end);
            }
        }
        !conflict
    }

    /// Forgets rows released before `now`: no later transaction can meet them.
    pub fn release_before(&mut self, now: Micros) {
        self.held_until.retain(|_, until| *until > now);
    }
}

/// The Claims table: a chunk whose claim exists was committed by an earlier delivery. Kept
/// as the store keeps it (the eventIDs joined by commas), and only for a while: a retry
/// comes within seconds of its failure, so an older claim can no longer be met here.
#[derive(Debug, Default)]
pub struct Claims {
    by_id: HashMap<String, (Micros, String)>,
}

impl Claims {
    /// The eventIDs the claim lists, if it exists.
    pub fn get(&self, claim_id: &str) -> Option<Vec<String>> {
        let (_, joined) = self.by_id.get(claim_id)?;
        Some(joined.split(',').map(str::to_owned).collect())
    }

    pub fn put(&mut self, claim_id: &str, event_ids: &[&str], now: Micros) {
        let previous = self
            .by_id
            .insert(claim_id.to_owned(), (now, event_ids.join(",")));
        assert!(previous.is_none(), "claim {claim_id} put twice");
    }

    /// Forgets claims put before `horizon`.
    pub fn forget_before(&mut self, horizon: Micros) {
        self.by_id.retain(|_, (put, _)| *put >= horizon);
    }
}

/// The widest number DynamoDB stores: 38 significant digits, negative (21 bytes).
fn widest_number() -> AttributeValue {
    AttributeValue::N(format!("-{}", "9".repeat(38)))
}

/// The largest likers entry there can be, liked (a tombstone holds less): a 128-character
/// item id's last bucket, a 128-character user id, its position and the widest numbers.
fn largest_liker_entry() -> Item {
    let user = "u".repeat(USER_ID_MAX_LEN);
    Item::from([
        (
            "bucket".to_owned(),
            AttributeValue::S("x".repeat(ITEM_ID_MAX_LEN) + "#63"),
        ),
        ("user_id".to_owned(), AttributeValue::S(user.clone())),
        ("op_id".to_owned(), widest_number()),
        (
            "position".to_owned(),
            AttributeValue::S(position(i64::MAX / 1000, &user)),
        ),
        ("liked_at".to_owned(), widest_number()),
        ("expires_at".to_owned(), widest_number()),
    ])
}

/// Write units of one likers entry's UpdateItem, and of the `by_position` index entry it
/// puts or deletes (the index holds the entry's keys, its position and `liked_at`: at most
/// the whole entry).
pub fn liker_units() -> (u64, u64) {
    let size = capacity::item_size(&largest_liker_entry());
    (
        capacity::write_units(size),
        capacity::index_entry_units(size),
    )
}

/// A Kinesis sequence number as wide as the log's are (56 digits).
const SEQUENCE_NUMBER: &str = "49590338271490256608559692540925702759324208523137515618";

/// The first millisecond of the last day there is, 9999-12-31: its board keys are the widest.
const LAST_DAY_MS: i64 = 253_402_214_400_000;
/// The highest board shard: `LeaderboardShards` is at most 4096 (likes_core's range of
/// `LEADERBOARD_SHARDS`, which the template declares).
const LAST_BOARD_SHARD: u32 = 4095;
/// The intent number a score row's `n#<shard>` holds: a shard's count of intents after a year
/// at about one a second (8 significant digits, 5 bytes), as a long-lived table's rows carry
/// it, not the few a fresh run reaches.
const MARKED_INTENT: u64 = 31_556_952;

/// Write units of a PutItem of a leaderboard row, as the store converts it.
fn put_units(item: Result<Item, StoreError>) -> u64 {
    let item = item.expect("a leaderboard row converts to an item");
    capacity::write_units(capacity::item_size(&item))
}

/// Write units of the leaderboard's rows that do not depend on the run's items: each the
/// largest there can be (128-character item and user ids, the widest numbers, the highest
/// board shard).
#[derive(Debug, Clone, Copy)]
pub struct LeaderboardUnits {
    /// One `by_score` index entry: the row's keys, its score and `item_id` (the index
    /// projects nothing else, so not the row's intent markers).
    pub index: u64,
    /// An event's claim, a PutItem.
    pub claim: u64,
    /// A materialized board of `TOP_SIZE` entries, a PutItem.
    pub top: u64,
}

/// A score row without its intent markers: board key and item id empty (their bytes are
/// added per row), the widest score, and on a day board the widest TTL.
fn bare_score_row(ttl: bool) -> Item {
    let mut row = Item::from([
        ("board".to_owned(), AttributeValue::S(String::new())),
        ("item_id".to_owned(), AttributeValue::S(String::new())),
        ("score".to_owned(), widest_number()),
    ]);
    if ttl {
        row.insert("expires_at".to_owned(), widest_number());
    }
    row
}

pub fn leaderboard_units() -> LeaderboardUnits {
    let item = "x".repeat(ITEM_ID_MAX_LEN);
    let widest = i64::MAX;
    let event_id = format!("{}#{item}#{}", "u".repeat(USER_ID_MAX_LEN), u64::MAX);
    let board = Window::day_of(LAST_DAY_MS).board_key(LAST_BOARD_SHARD);
    let claim = EventClaimRow {
        board: format!("#event#{event_id}@{widest}"),
        item_id: item.clone(),
        by: format!("{}:{SEQUENCE_NUMBER}", kinesis_shard_id(u32::MAX as usize)),
        expires_at: widest,
    };
    let top = TopRow {
        board: "#top".into(),
        item_id: Window::day_of(LAST_DAY_MS).key(),
        entries: vec![
            TopEntryRow {
                item_id: item.clone(),
                like_count: widest,
            };
            TOP_SIZE
        ],
        as_of: Some(widest),
        refreshed_at: widest,
        expires_at: Some(widest),
    };
    let index_entry = capacity::item_size(&bare_score_row(false)) + board.len() + item.len();
    LeaderboardUnits {
        index: capacity::index_entry_units(index_entry),
        claim: put_units(to_item(&claim)),
        top: put_units(to_item(&top)),
    }
}

/// A score row's size in bytes, as its UpdateItem bills it: the row's own keys, the widest
/// score and TTL, and one `n#<shard>` marker per log shard that ever wrote it.
#[derive(Debug, Clone)]
pub struct ScoreRowSize {
    bare: usize,
    bare_with_ttl: usize,
    /// Per log shard, the bytes of its marker: `n#79` and the intent number.
    marker: Vec<usize>,
}

impl ScoreRowSize {
    pub fn new(event_shards: u32) -> Self {
        let marker = (0..event_shards as usize)
            .map(|shard| {
                capacity::item_size(&Item::from([(
                    format!("n#{shard}"),
                    AttributeValue::N(MARKED_INTENT.to_string()),
                )]))
            })
            .collect();
        Self {
            bare: capacity::item_size(&bare_score_row(false)),
            bare_with_ttl: capacity::item_size(&bare_score_row(true)),
            marker,
        }
    }

    /// The bytes of `row` holding the markers of `writers`.
    pub fn bytes(&self, row: &ScoreDeltaRow, writers: impl Iterator<Item = usize>) -> usize {
        let bare = match row.expires_at {
            Some(_) => self.bare_with_ttl,
            None => self.bare,
        };
        bare + row.board.len() + row.item_id.len() + writers.map(|s| self.marker[s]).sum::<usize>()
    }
}

/// A standard write of `bytes`.
pub fn write_units(bytes: usize) -> u64 {
    capacity::write_units(bytes)
}

/// The id Kinesis gives a shard: `shardId-000000000042`.
fn kinesis_shard_id(shard: usize) -> String {
    format!("shardId-{shard:012}")
}

/// The partition key of a log shard's intent, as the store names it.
pub fn intent_key(shard: usize) -> String {
    format!("#intent#{}", kinesis_shard_id(shard))
}

/// Write units of the intent head holding a run's `rows` (their ids as the traffic makes
/// them) and `days`, a PutItem; its delete in the finishing transaction costs twice this.
pub fn intent_head_units(shard: usize, rows: &[ScoreDeltaRow], days: &[i64]) -> u64 {
    let head = IntentHeadRow {
        board: intent_key(shard),
        item_id: "head".into(),
        n: u64::MAX,
        last_seq: SEQUENCE_NUMBER.into(),
        applied_through: i64::MAX,
        days: days.to_vec(),
        rows: rows.to_vec(),
    };
    put_units(to_item(&head))
}
