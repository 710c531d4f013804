//! The tables as the simulation sees them: what each write costs in write units (AWS's
//! item-size rules, from the items the stores write: Counts, Claims, and the event log's
//! read models), and which transactions DynamoDB cancels because a concurrent one holds one
//! of their rows.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::ids::{ITEM_ID_MAX_LEN, USER_ID_MAX_LEN};
use likes_core::likers::position;
use likes_core::pipeline::CountTarget;

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

/// The largest leaderboard rows there can be: a day board's score row of a 128-character
/// item, and the claim of an event of a 128-character user on it at the widest `op_id`.
fn largest_leaderboard_rows() -> [Item; 2] {
    let item = "x".repeat(ITEM_ID_MAX_LEN);
    let event_id = format!("{}#{item}#{}", "u".repeat(USER_ID_MAX_LEN), u64::MAX);
    let score = Item::from([
        (
            "board".to_owned(),
            AttributeValue::S("day#9999-12-31".into()),
        ),
        ("item_id".to_owned(), AttributeValue::S(item.clone())),
        ("score".to_owned(), widest_number()),
        ("expires_at".to_owned(), widest_number()),
    ]);
    let claim = Item::from([
        (
            "board".to_owned(),
            AttributeValue::S(format!("#event#{event_id}")),
        ),
        ("item_id".to_owned(), AttributeValue::S(item)),
        ("expires_at".to_owned(), widest_number()),
    ]);
    [score, claim]
}

/// Write units, inside a chunk's transaction, of a score row's ADD and of an event's claim;
/// and of one `by_score` index entry (the row's keys, its score and `item_id`: at most the
/// whole row).
pub fn leaderboard_units() -> (u64, u64, u64) {
    let [score, claim] = largest_leaderboard_rows().map(|row| capacity::item_size(&row));
    (
        capacity::transactional_write_units(score),
        capacity::transactional_write_units(claim),
        capacity::index_entry_units(score),
    )
}
