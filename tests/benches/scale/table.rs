//! The Counts and Claims tables as the simulation sees them: what each write costs in write
//! units (AWS's item-size rules, from the items the store writes), and which transactions
//! DynamoDB cancels because a concurrent one holds one of their rows.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
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
