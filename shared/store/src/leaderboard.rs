//! The Leaderboard table: score rows per board and item (PK `board` = `all` or
//! `day#2026-12-01`, SK `item_id`), read top-down through the `by_score` index; one claim
//! row per applied event (`#event#<flip key>`), so an event delivered twice scores once;
//! and the consumer's progress per Kinesis shard (`#progress` / shard id), which `as_of`
//! is read from.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use likes_core::leaderboard::{rank, score_deltas, Entry, Window};
use likes_core::pipeline::{ReactionEvent, REPLAY_HORIZON_MS};

use crate::error::{cancelled, condition_held};
use crate::rows::attr::{APPLIED_THROUGH, BOARD, EXPIRES_AT, ITEM_ID, SCORE};
use crate::rows::{self, number, BoardProgressRow, EventClaimRow, ScoreRow};
use crate::StoreError;

/// The index of score rows by board, sorted by score.
pub const SCORE_INDEX: &str = "by_score";
/// TransactWriteItems takes at most 100 actions: an event's claim and its score rows.
pub const MAX_ACTIONS: usize = 100;
const PROGRESS_BOARD: &str = "#progress";
const EVENT_CLAIM_PREFIX: &str = "#event#";
/// Attempts at a transaction that conflicts with another shard's on a score row.
const CONFLICT_ATTEMPTS: u32 = 8;

/// A board as the route reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    pub entries: Vec<Entry>,
    /// Every event that reached the log before this time (epoch ms), on every shard that
    /// carried events, is applied; `None` before any was.
    pub as_of_ms: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct LeaderboardStore {
    client: Client,
    table: String,
}

impl LeaderboardStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Applies a chunk of events exactly once: one TransactWriteItems puts a claim per event
    /// (on condition it does not exist) and ADDs one delta per board and item. A claim that
    /// exists means an earlier delivery applied that event: it is dropped from the chunk and
    /// the rest is tried again. Returns how many events this call applied. The chunk must
    /// fit one transaction ([`actions_for`] ≤ [`MAX_ACTIONS`]) and hold each event once.
    pub async fn apply(&self, events: &[&ReactionEvent], now_ms: i64) -> Result<usize, StoreError> {
        let mut pending: Vec<&ReactionEvent> = events.to_vec();
        let mut conflicts = 0;
        while !pending.is_empty() {
            let actions = self.actions(&pending, now_ms)?;
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions))
                .send()
                .await;
            // Reasons come in action order: the claims first, one per pending event.
            let Some((reasons, err)) = cancelled("TransactWriteItems", result)? else {
                return Ok(pending.len());
            };
            let claimed: Vec<bool> = (0..pending.len())
                .map(|at| reasons.get(at).and_then(|r| r.code()) == Some("ConditionalCheckFailed"))
                .collect();
            if claimed.iter().any(|c| *c) {
                let mut at = 0;
                pending.retain(|_| {
                    at += 1;
                    !claimed[at - 1]
                });
                continue;
            }
            conflicts += 1;
            if conflicts >= CONFLICT_ATTEMPTS {
                return Err(StoreError::aws("TransactWriteItems", err));
            }
            tokio::time::sleep(likes_core::backoff::delay(conflicts)).await;
        }
        Ok(0)
    }

    fn actions(
        &self,
        events: &[&ReactionEvent],
        now_ms: i64,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut actions = Vec::new();
        let claim_expires_at = (now_ms + REPLAY_HORIZON_MS) / 1000;
        for event in events {
            let claim = EventClaimRow {
                board: format!("{EVENT_CLAIM_PREFIX}{}", event.flip_key()),
                item_id: event.item_id.clone(),
                expires_at: claim_expires_at,
            };
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(rows::to_item(&claim)?))
                .condition_expression(format!("attribute_not_exists({BOARD})"))
                .build()
                .map_err(|e| StoreError::Request(e.to_string()))?;
            actions.push(TransactWriteItem::builder().put(put).build());
        }
        for ((window, item), delta) in score_deltas(events.iter().copied()) {
            let mut update = Update::builder()
                .table_name(&self.table)
                .key(BOARD, AttributeValue::S(window.key()))
                .key(ITEM_ID, AttributeValue::S(item))
                .expression_attribute_names("#score", SCORE)
                .expression_attribute_values(":delta", number(delta));
            update = match window.expires_at_secs() {
                None => update.update_expression("ADD #score :delta"),
                Some(expires_at) => update
                    .update_expression("ADD #score :delta SET #expires_at = :expires_at")
                    .expression_attribute_names("#expires_at", EXPIRES_AT)
                    .expression_attribute_values(":expires_at", number(expires_at)),
            };
            let update = update
                .build()
                .map_err(|e| StoreError::Request(e.to_string()))?;
            actions.push(TransactWriteItem::builder().update(update).build());
        }
        Ok(actions)
    }

    /// Records that a shard's events up to `applied_through_ms` (their arrival on the log) are
    /// applied. Progress only moves forward: an older report (a retry) changes nothing.
    pub async fn advance(&self, shard: &str, applied_through_ms: i64) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(PROGRESS_BOARD.into()))
            .key(ITEM_ID, AttributeValue::S(shard.into()))
            .update_expression("SET #through = :through")
            .condition_expression("attribute_not_exists(#through) OR #through < :through")
            .expression_attribute_names("#through", APPLIED_THROUGH)
            .expression_attribute_values(":through", number(applied_through_ms))
            .send()
            .await;
        condition_held("UpdateItem", result).map(drop)
    }

    /// The top `limit` of a board, ties by item id: reads the index from the highest score
    /// down, on past the `limit`-th row while scores tie with it (the index cannot order
    /// equal scores by item id), then ranks exactly.
    pub async fn board(&self, window: &Window, limit: usize) -> Result<Board, StoreError> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(SCORE_INDEX)
                .key_condition_expression("#board = :board AND #score > :zero")
                .expression_attribute_names("#board", BOARD)
                .expression_attribute_names("#score", SCORE)
                .expression_attribute_values(":board", AttributeValue::S(window.key()))
                .expression_attribute_values(":zero", number(0))
                .scan_index_forward(false)
                .limit(limit as i32 + 1)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| StoreError::aws("Query", e))?;
            for item in output.items.unwrap_or_default() {
                let row: ScoreRow = rows::from_item(item)?;
                entries.push(Entry {
                    item_id: row.item_id,
                    like_count: row.score,
                });
            }
            let tie_open = entries.len() <= limit
                || entries.last().map(|e| e.like_count) == Some(entries[limit - 1].like_count);
            match output.last_evaluated_key {
                Some(key) if tie_open => start = Some(key),
                _ => break,
            }
        }
        Ok(Board {
            entries: rank(entries, limit),
            as_of_ms: self.as_of().await?,
        })
    }

    /// The lowest progress over the shards that carried events.
    async fn as_of(&self) -> Result<Option<i64>, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#board = :board")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_values(":board", AttributeValue::S(PROGRESS_BOARD.into()))
            .send()
            .await
            .map_err(|e| StoreError::aws("Query", e))?;
        let mut lowest = None;
        for item in output.items.unwrap_or_default() {
            let row: BoardProgressRow = rows::from_item(item)?;
            lowest = Some(lowest.map_or(row.applied_through, |l: i64| l.min(row.applied_through)));
        }
        Ok(lowest)
    }
}

/// The actions a chunk of events takes in one transaction: a claim each, and a score row per
/// board and item.
pub fn actions_for<'a>(events: impl IntoIterator<Item = &'a ReactionEvent> + Clone) -> usize {
    let claims = events.clone().into_iter().count();
    let scores: BTreeMap<_, _> = score_deltas(events);
    claims + scores.len()
}
