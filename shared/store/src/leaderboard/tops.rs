//! The boards as reads see them: each board's materialized top, a namespace's refreshed
//! from its board shards through the score index, a global one ranked from every
//! namespace's top of the same window.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::leaderboard::{rank, Board, Entry, Window, TOP_SIZE};
use likes_core::namespace::{Namespace, DEFAULT_NAMESPACE};

use crate::batch;
use crate::error::condition_held;
use crate::pages::{query_all, query_while};
use crate::rows::attr::{
    AS_OF, BOARD, ENTRIES, EXPIRES_AT, ITEM_ID, RANKED, RANKED_BOARD, REFRESHED_AT, SCORE,
};
use crate::rows::{self, number, RankedRow, ScoreRow, ScoreRowKey, TopEntryRow, TopRow};
use crate::StoreError;

use super::{
    BoardTop, LeaderboardStore, IN_FLIGHT, NAMESPACE_BOARD, RANKED_FROM, SCORE_INDEX, TOP_BOARD,
};

/// Namespace boards a refresh ranks at once.
const BOARDS_IN_FLIGHT: usize = 4;

impl LeaderboardStore {
    /// Refreshes each of `boards`, namespaces' boards of a window before the global board
    /// of the same window, which is ranked from the tops of `namespaces` (every namespace
    /// with boards, as [`Self::namespaces`] reads them).
    pub async fn refresh(
        &self,
        boards: impl IntoIterator<Item = &Board>,
        namespaces: &BTreeSet<Namespace>,
        as_of_ms: Option<i64>,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        let (global, namespaced): (Vec<&Board>, Vec<&Board>) = boards
            .into_iter()
            .partition(|board| board.namespace.is_none());
        // A few boards at once, each reading its shards `IN_FLIGHT` at a time. Collected
        // before they are streamed, so the future stays `Send`.
        let refreshes: Vec<_> = namespaced
            .into_iter()
            .map(|board| self.refresh_namespace_board(board, as_of_ms, started_ms))
            .collect();
        stream::iter(refreshes)
            .buffer_unordered(BOARDS_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        futures_util::future::try_join_all(global.into_iter().map(|board| {
            self.refresh_global_board(&board.window, namespaces, as_of_ms, started_ms)
        }))
        .await
        .map(drop)
    }

    /// Refreshes every known namespace's all-time board, then the global one: after a
    /// repair that may have moved any item's score.
    pub async fn refresh_all_time(
        &self,
        as_of_ms: Option<i64>,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        let namespaces = self.namespaces().await?;
        let boards: Vec<Board> = namespaces
            .iter()
            .map(|namespace| Board {
                namespace: Some(namespace.clone()),
                window: Window::All,
            })
            .chain([Board::global(Window::All)])
            .collect();
        self.refresh(&boards, &namespaces, as_of_ms, started_ms)
            .await
    }

    /// Every namespace a board was refreshed for (a Query of `#namespace`, strongly
    /// consistent: a global board ranked right after a namespace was noted ranks its top).
    pub async fn namespaces(&self) -> Result<BTreeSet<Namespace>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("#board = :board")
            .projection_expression("#board, #item_id")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_names("#item_id", ITEM_ID)
            .expression_attribute_values(":board", AttributeValue::S(NAMESPACE_BOARD.into()));
        query_all(query)
            .await?
            .into_iter()
            .map(|item| {
                let row: ScoreRowKey = rows::from_item(item)?;
                Ok(Namespace::of_prefix(&format!("{}:", row.item_id)))
            })
            .collect()
    }

    /// Notes `namespaces` among those whose tops the global boards rank from.
    pub async fn register_namespaces(
        &self,
        namespaces: impl IntoIterator<Item = &Namespace>,
    ) -> Result<(), StoreError> {
        let puts = namespaces.into_iter().map(|namespace| {
            self.client
                .put_item()
                .table_name(&self.table)
                .item(BOARD, AttributeValue::S(NAMESPACE_BOARD.into()))
                .item(ITEM_ID, AttributeValue::S(namespace.as_str().to_owned()))
                .send()
        });
        futures_util::future::try_join_all(puts)
            .await
            .map_err(|e| StoreError::aws("PutItem", e))
            .map(drop)
    }

    /// Ranks a namespace's board from its shards' score rows and stores the top with
    /// `as_of_ms`, which the caller read before calling: every score read here is at least
    /// that recent. A refresh that began before the stored one's (`started_ms`) changes
    /// nothing.
    async fn refresh_namespace_board(
        &self,
        board: &Board,
        as_of_ms: Option<i64>,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        let tops: Vec<Vec<Entry>> =
            stream::iter((0..self.shards).map(|s| self.shard_top(board, s)))
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
                stream::iter((0..self.shards).map(|s| self.unranked(board, s, wanted)))
                    .buffer_unordered(IN_FLIGHT)
                    .try_collect()
                    .await?;
            candidates.extend(unranked.into_iter().flatten());
        }
        self.put_top(board, rank(candidates, TOP_SIZE), as_of_ms, started_ms)
            .await
    }

    /// Ranks a global board from `namespaces`' tops of `window` (strongly consistent
    /// reads, after the caller refreshed those that changed): the top of the union of the
    /// namespaces' tops is the top of every item.
    async fn refresh_global_board(
        &self,
        window: &Window,
        namespaces: &BTreeSet<Namespace>,
        as_of_ms: Option<i64>,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        let keys = namespaces
            .iter()
            .map(|namespace| {
                let board = Board {
                    namespace: Some(namespace.clone()),
                    window: window.clone(),
                };
                [
                    (BOARD.to_owned(), AttributeValue::S(TOP_BOARD.into())),
                    (ITEM_ID.to_owned(), AttributeValue::S(board.key())),
                ]
                .into()
            })
            .collect();
        let tops = batch::get_all(&self.client, &self.table, keys, |keys| {
            keys.consistent_read(true)
        })
        .await?;
        let mut candidates = Vec::new();
        for item in tops {
            let top: TopRow = rows::from_item(item)?;
            candidates.extend(top.entries.into_iter().map(|e| Entry {
                item_id: e.item_id,
                like_count: e.like_count,
            }));
        }
        let board = Board::global(window.clone());
        self.put_top(&board, rank(candidates, TOP_SIZE), as_of_ms, started_ms)
            .await
    }

    /// Stores `entries` as `board`'s top, unless a refresh that began later stored one.
    async fn put_top(
        &self,
        board: &Board,
        entries: Vec<Entry>,
        as_of_ms: Option<i64>,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        let window = &board.window;
        let top = TopRow {
            board: TOP_BOARD.into(),
            item_id: board.key(),
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

    /// Moves the `as_of` of each of `windows`' stored global tops to `as_of_ms` without
    /// ranking again: for a caller that knows no score changed since the tops were ranked
    /// (no log shard applied an intent). A board never ranked gets an empty top. A touch that
    /// began before the stored one's refresh (`started_ms`) changes nothing. A namespace's
    /// board reads its `as_of` from the global all-time board's too ([`Self::board`]).
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

    /// One namespace board shard's top [`TOP_SIZE`] rows: the index from the highest score
    /// down, on past the last while scores tie with it (the index cannot order equal scores
    /// by item id), so the merge ranks exactly.
    pub(super) async fn shard_top(
        &self,
        board: &Board,
        shard: u32,
    ) -> Result<Vec<Entry>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SCORE_INDEX)
            .key_condition_expression("#board = :board AND #ranked > :zero")
            .expression_attribute_names("#board", RANKED_BOARD)
            .expression_attribute_names("#ranked", RANKED)
            .expression_attribute_values(":board", AttributeValue::S(board.shard_key(shard)))
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
    /// like, and cannot rank. The window shard's partition is read in item id order from the
    /// namespace's prefix, filtered, a page of `wanted` rows at a time, until it has them.
    /// The `default` namespace's items (no prefix, or `default:`) are spread through the
    /// partition, and a Query may not filter on its key: its read keeps them from every
    /// namespace's rows as they come.
    async fn unranked(
        &self,
        board: &Board,
        shard: u32,
        wanted: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let namespace = board.namespace.as_ref().map_or("", Namespace::as_str);
        let prefix = format!("{namespace}:");
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .filter_expression("attribute_not_exists(#ranked) AND #score > :zero")
            .projection_expression("#item_id, #score")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_names("#ranked", RANKED)
            .expression_attribute_names("#score", SCORE)
            .expression_attribute_names("#item_id", ITEM_ID)
            .expression_attribute_values(":board", AttributeValue::S(board.window.board_key(shard)))
            .expression_attribute_values(":zero", number(0))
            .limit(wanted as i32);
        let (query, in_namespace): (_, fn(&str, &str) -> bool) = if namespace == DEFAULT_NAMESPACE {
            let in_default =
                |item: &str, prefix: &str| !item.contains(':') || item.starts_with(prefix);
            (
                query.key_condition_expression("#board = :board"),
                in_default,
            )
        } else {
            let query = query
                .key_condition_expression("#board = :board AND begins_with(#item_id, :prefix)")
                .expression_attribute_values(":prefix", AttributeValue::S(prefix.clone()));
            (query, |_, _| true)
        };
        let entry = |item| {
            let row: ScoreRow = rows::from_item(item)?;
            Ok(in_namespace(&row.item_id, &prefix).then_some(Entry {
                item_id: row.item_id,
                like_count: row.score,
            }))
        };
        let short = |entries: &[Option<Entry>]| entries.iter().flatten().count() < wanted;
        let mut entries: Vec<Entry> = query_while(query, entry, short)
            .await?
            .into_iter()
            .flatten()
            .collect();
        entries.truncate(wanted);
        Ok(entries)
    }

    /// The top `limit` of a board as last refreshed: one GetItem, and for a namespace's
    /// board a second, of the global all-time board, whose `as_of` every refresh moves: a
    /// namespace board no intent scored on since it was ranked holds every score as of it.
    pub async fn board(&self, board: &Board, limit: usize) -> Result<BoardTop, StoreError> {
        let global = Board::global(Window::All);
        let (top, global) = match &board.namespace {
            None => (self.top(board).await?, None),
            Some(_) => {
                let (top, global) = tokio::try_join!(self.top(board), self.top(&global))?;
                (top, global)
            }
        };
        let (entries, as_of) = top.map_or((Vec::new(), None), |top| (top.entries, top.as_of));
        let as_of_ms = as_of.max(global.and_then(|global| global.as_of));
        Ok(BoardTop {
            entries: entries
                .into_iter()
                .take(limit)
                .map(|e| Entry {
                    item_id: e.item_id,
                    like_count: e.like_count,
                })
                .collect(),
            as_of_ms,
        })
    }

    /// A board's stored top, eventually consistent: the row carries the `as_of` of
    /// whichever refresh it shows.
    async fn top(&self, board: &Board) -> Result<Option<TopRow>, StoreError> {
        self.read(TOP_BOARD, &board.key(), false)
            .await?
            .map(rows::from_item)
            .transpose()
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
