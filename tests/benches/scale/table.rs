//! The tables as the simulation sees them: what each write costs in write units (AWS's
//! item-size rules, from the items the stores write: the Counts table's count rows, intents
//! and progress, and the event log's read models).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::ids::{ITEM_ID_MAX_LEN, USER_ID_MAX_LEN};
use likes_core::leaderboard::{Window, TOP_SIZE};
use likes_core::likers::{position, LIKER_BUCKETS};
use likes_core::pipeline::{CountTarget, RowDelta};
use likes_store::counts::{encode_intent, intent_note, CountIntent};
use likes_store::rows::attr::LIKED_BUCKETS;
use likes_store::rows::{to_item, IntentHeadRow, ScoreDeltaRow, TopEntryRow, TopRow};
use likes_store::StoreError;

use crate::capacity::{self, Item};

/// A DynamoDB Streams sequence number at its widest (they run 21 to 40 digits): what an
/// intent's `last_seq` holds.
const STREAM_SEQUENCE_NUMBER: &str = "4000000000000000000000123456789012345678";

/// The partition key of a stream shard's progress and intents, as the store names it
/// (`likes_store::freshness`'s watermark partition).
pub fn progress_key(shard_id: &str) -> String {
    format!("#wm#{shard_id}")
}

/// Write units of the PutItem of intent `n` of stream shard `shard_id`, as
/// `CountsWriter::begin` writes it (the store's own encoding), at the widest stream sequence
/// number and without a probe key (the pulse's probes are not modelled).
pub fn intent_units(
    shard_id: &str,
    n: i64,
    stream_time_ms: i64,
    deltas: &BTreeMap<CountTarget, RowDelta>,
    now_ms: i64,
) -> u64 {
    let intent = CountIntent {
        n,
        last_seq: STREAM_SEQUENCE_NUMBER.to_owned(),
        stream_time_ms,
        probe_key: None,
        deltas: deltas.clone(),
    };
    put_units(encode_intent(shard_id, Some(n - 1), &intent, now_ms).and_then(|row| to_item(&row)))
}

/// The largest count row there can be, without intent notes: a 128-character item id with
/// an overflow suffix, counts and a timestamp at the widest number DynamoDB stores (38
/// significant digits, negative: 21 bytes), and every likers bucket listed.
fn largest_count_row() -> Item {
    let widest = AttributeValue::N(format!("-{}", "9".repeat(38)));
    let every_bucket = (0..LIKER_BUCKETS).collect();
    Item::from([
        (
            LIKED_BUCKETS.to_owned(),
            likes_store::rows::listed_buckets(&every_bucket),
        ),
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

/// The number a count row's intent note holds: an intent number is a clock in milliseconds
/// (`next_intent`), 13 digits, here with none of them a trailing zero (8 bytes).
const NOTED_INTENT: i64 = 1_796_119_234_567;

/// A count row's size as its UpdateItem bills it: the largest row without notes, and one
/// `i#<12 hex digits>` intent note per stream shard that writes it.
#[derive(Debug, Clone, Copy)]
pub struct CountRowSize {
    /// The largest row without notes.
    pub bare: usize,
    /// One note, its name and its number.
    pub note: usize,
}

impl CountRowSize {
    pub fn new() -> Self {
        let note = Item::from([(
            intent_note("shardId-00000001536019433613-c6a8f3e4"),
            AttributeValue::N(NOTED_INTENT.to_string()),
        )]);
        Self {
            bare: capacity::item_size(&largest_count_row()),
            note: capacity::item_size(&note),
        }
    }

    /// Write units of one UpdateItem of a row holding `notes` notes.
    pub fn units(&self, notes: usize) -> u64 {
        capacity::write_units(self.bare + notes * self.note)
    }

    /// The most notes a row holds while its write still costs one unit.
    pub fn notes_in_one_unit(&self) -> usize {
        capacity::WRITE_UNIT_BYTES.saturating_sub(self.bare) / self.note
    }
}

/// Write units of one standard UpdateItem on a small row (a naive counter's ADD, the
/// overflow marker, a shard's progress): every such row stays far below 1 KB.
pub fn small_update_units() -> u64 {
    capacity::write_units(capacity::item_size(&largest_count_row()))
}

/// The widest number DynamoDB stores: 38 significant digits, negative (21 bytes).
fn widest_number() -> AttributeValue {
    AttributeValue::N(format!("-{}", "9".repeat(38)))
}

/// The largest likers entry there can be: a 128-character item id's last bucket, its
/// position (key) with a 128-character user id, the user id, the widest numbers, and both
/// claims (its like's and its end's log records; a liked entry holds the first, a
/// tombstone both and no `liked_at`).
fn largest_liker_entry() -> Item {
    let user = "u".repeat(USER_ID_MAX_LEN);
    let by = || {
        AttributeValue::S(format!(
            "{}:{SEQUENCE_NUMBER}",
            kinesis_shard_id(u32::MAX as usize)
        ))
    };
    Item::from([
        ("liked_by".to_owned(), by()),
        ("ended_by".to_owned(), by()),
        (
            "bucket".to_owned(),
            AttributeValue::S("x".repeat(ITEM_ID_MAX_LEN) + "#127"),
        ),
        (
            "entry".to_owned(),
            AttributeValue::S(position(i64::MAX / 1000, &user)),
        ),
        ("user_id".to_owned(), AttributeValue::S(user)),
        ("op_id".to_owned(), widest_number()),
        ("row_created".to_owned(), widest_number()),
        ("liked_at".to_owned(), widest_number()),
    ])
}

/// Write units of one likers entry's UpdateItem.
fn liker_units() -> u64 {
    capacity::write_units(capacity::item_size(&largest_liker_entry()))
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
    /// A likers entry's UpdateItem (a like's or its end's with its claim).
    pub entry: u64,
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
    let board = Window::day_of(LAST_DAY_MS).board_key(LAST_BOARD_SHARD);
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
        entry: liker_units(),
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
/// them), a PutItem (over the shard's last head, billed at the larger).
pub fn intent_head_units(shard: usize, rows: &[ScoreDeltaRow]) -> u64 {
    let head = IntentHeadRow {
        board: intent_key(shard),
        item_id: "head".into(),
        n: u64::MAX,
        last_seq: SEQUENCE_NUMBER.into(),
        applied_through: i64::MAX,
        rows: rows.to_vec(),
    };
    put_units(to_item(&head))
}
