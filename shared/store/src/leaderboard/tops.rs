//! The boards as reads see them: each window's materialized top, refreshed from the
//! board's shards through the score index.

use aws_sdk_dynamodb::types::AttributeValue;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::leaderboard::{rank, Entry, Window, TOP_SIZE};

use crate::error::condition_held;
use crate::pages::query_while;
use crate::rows::attr::{AS_OF, BOARD, ENTRIES, EXPIRES_AT, ITEM_ID, RANKED, REFRESHED_AT, SCORE};
use crate::rows::{self, number, RankedRow, ScoreRow, TopEntryRow, TopRow};
use crate::StoreError;

use super::{Board, LeaderboardStore, IN_FLIGHT, RANKED_FROM, SCORE_INDEX, TOP_BOARD};

impl LeaderboardStore {
    /// Refreshes each of `windows` at once (`refresh_board`).
    pub async fn refresh(
        &self,
        windows: impl IntoIterator<Item = &Window>,
        as_of_ms: Option<i64>,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        futures_util::future::try_join_all(
            windows
                .into_iter()
                .map(|window| self.refresh_board(window, as_of_ms, started_ms)),
        )
        .await
        .map(drop)
    }

    /// Ranks `window` from its shards' score rows and stores the top with `as_of_ms`, which
    /// the caller read before calling: every score read here is at least that recent. A
    /// refresh that began before the stored one's (`started_ms`) changes nothing.
    pub(super) async fn refresh_board(
        &self,
        window: &Window,
        as_of_ms: Option<i64>,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        let tops: Vec<Vec<Entry>> =
            stream::iter((0..self.shards).map(|s| self.shard_top(window, s)))
                .buffer_unordered(IN_FLIGHT)
                .try_collect()
                .await?;
        let mut candidates: Vec<Entry> = tops.into_iter().flatten().collect();
        let above = candidates
            .iter()
            .filter(|e| e.like_count >= RANKED_FROM)
            .count();
        if above < TOP_SIZE {
            // The top reaches down to one like, where the index leaves rows out.
            let wanted = TOP_SIZE - above;
            let unranked: Vec<Vec<Entry>> =
                stream::iter((0..self.shards).map(|s| self.unranked(window, s, wanted)))
                    .buffer_unordered(IN_FLIGHT)
                    .try_collect()
                    .await?;
            candidates.extend(unranked.into_iter().flatten());
        }
        let entries = rank(candidates, TOP_SIZE);
        let top = TopRow {
            board: TOP_BOARD.into(),
            item_id: window.key(),
            entries: entries
                .into_iter()
                .map(|e| TopEntryRow {
                    item_id: e.item_id,
                    like_count: e.like_count,
                })
                .collect(),
            as_of: as_of_ms,
            refreshed_at: started_ms,
            expires_at: window.expires_at_secs(),
        };
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&top)?))
            .condition_expression("attribute_not_exists(#board) OR #at < :at")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_names("#at", REFRESHED_AT)
            .expression_attribute_values(":at", number(started_ms))
            .send()
            .await;
        condition_held("PutItem", result).map(drop)
    }

    /// Moves the `as_of` of each of `windows`' stored tops to `as_of_ms` without ranking
    /// again: for a caller that knows no score changed since the tops were ranked (no log
    /// shard applied an intent). A board never ranked gets an empty top. A touch that began
    /// before the stored one's refresh (`started_ms`) changes nothing.
    pub async fn touch(
        &self,
        windows: impl IntoIterator<Item = &Window>,
        as_of_ms: i64,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        futures_util::future::try_join_all(windows.into_iter().map(|window| async move {
            let update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(BOARD, AttributeValue::S(TOP_BOARD.into()))
                .key(ITEM_ID, AttributeValue::S(window.key()))
                .condition_expression("attribute_not_exists(#board) OR #at < :at")
                .expression_attribute_names("#board", BOARD)
                .expression_attribute_names("#at", REFRESHED_AT)
                .expression_attribute_names("#as_of", AS_OF)
                .expression_attribute_names("#entries", ENTRIES)
                .expression_attribute_values(":at", number(started_ms))
                .expression_attribute_values(":as_of", number(as_of_ms))
                .expression_attribute_values(":none", AttributeValue::L(Vec::new()));
            let set = "SET #as_of = :as_of, #at = :at, #entries = if_not_exists(#entries, :none)";
            let update = match window.expires_at_secs() {
                None => update.update_expression(set),
                Some(expires_at) => update
                    .update_expression(format!("{set}, #expires_at = :expires_at"))
                    .expression_attribute_names("#expires_at", EXPIRES_AT)
                    .expression_attribute_values(":expires_at", number(expires_at)),
            };
            condition_held("UpdateItem", update.send().await).map(drop)
        }))
        .await
        .map(drop)
    }

    /// One board shard's top [`TOP_SIZE`] rows: the index from the highest score down, on
    /// past the last while scores tie with it (the index cannot order equal scores by item
    /// id), so the merge ranks exactly.
    pub(super) async fn shard_top(
        &self,
        window: &Window,
        shard: u32,
    ) -> Result<Vec<Entry>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SCORE_INDEX)
            .key_condition_expression("#board = :board AND #ranked > :zero")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_names("#ranked", RANKED)
            .expression_attribute_values(":board", AttributeValue::S(window.board_key(shard)))
            .expression_attribute_values(":zero", number(0))
            .scan_index_forward(false)
            .limit(TOP_SIZE as i32 + 1);
        let tie_open = |entries: &[Entry]| {
            entries.len() <= TOP_SIZE
                || entries.last().map(|e| e.like_count) == Some(entries[TOP_SIZE - 1].like_count)
        };
        let entry = |item| {
            let row: RankedRow = rows::from_item(item)?;
            Ok(Entry {
                item_id: row.item_id,
                like_count: row.ranked,
            })
        };
        query_while(query, entry, tie_open).await
    }

    /// One board shard's first `wanted` liked rows the score index leaves out, by item id
    /// (each written once, with a delta under [`RANKED_FROM`], so each scores 1): the top
    /// ranks them after every higher score and among themselves by item id, so a row past a
    /// shard's first `wanted` has that many of them ahead of it, besides the rows above one
    /// like, and cannot rank. The shard's partition is read in item id order, filtered, a
    /// page of `wanted` rows at a time, until it has them.
    async fn unranked(
        &self,
        window: &Window,
        shard: u32,
        wanted: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#board = :board")
            .filter_expression("attribute_not_exists(#ranked) AND #score > :zero")
            .projection_expression("#item_id, #score")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_names("#ranked", RANKED)
            .expression_attribute_names("#score", SCORE)
            .expression_attribute_names("#item_id", ITEM_ID)
            .expression_attribute_values(":board", AttributeValue::S(window.board_key(shard)))
            .expression_attribute_values(":zero", number(0))
            .limit(wanted as i32);
        let entry = |item| {
            let row: ScoreRow = rows::from_item(item)?;
            Ok(Entry {
                item_id: row.item_id,
                like_count: row.score,
            })
        };
        let mut entries = query_while(query, entry, |entries| entries.len() < wanted).await?;
        entries.truncate(wanted);
        Ok(entries)
    }

    /// The top `limit` of a board as last refreshed: one GetItem.
    pub async fn board(&self, window: &Window, limit: usize) -> Result<Board, StoreError> {
        // Eventually consistent: the row carries the `as_of` of whichever refresh it shows.
        let Some(item) = self.read(TOP_BOARD, &window.key(), false).await? else {
            return Ok(Board {
                entries: Vec::new(),
                as_of_ms: None,
            });
        };
        let top: TopRow = rows::from_item(item)?;
        Ok(Board {
            entries: top
                .entries
                .into_iter()
                .take(limit)
                .map(|e| Entry {
                    item_id: e.item_id,
                    like_count: e.like_count,
                })
                .collect(),
            as_of_ms: top.as_of,
        })
    }

    pub(super) async fn read(
        &self,
        board: &str,
        item_id: &str,
        consistent: bool,
    ) -> Result<Option<rows::Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(board.into()))
            .key(ITEM_ID, AttributeValue::S(item_id.into()))
            .consistent_read(consistent)
            .send()
            .await
            .map_err(|e| StoreError::aws("GetItem", e))?;
        Ok(output.item)
    }
}
