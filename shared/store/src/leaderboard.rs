//! The Leaderboard table (PK `board`, SK `item_id`):
//!
//! - **score rows**, an item's net likes on a board, on one of the board's shards
//!   (`all#<s>`, `day#2026-12-01#<s>`, `s` by item hash), read top-down per shard through the
//!   `by_score` index; each also keeps, per log shard, the last intent it took (`n#<shard>`);
//! - **event claims** `#event#<flip key>`: the log record that owns an event (`by`), so an
//!   event on the log twice scores once;
//! - per Kinesis shard, its **progress** (`#progress` / shard: the last record applied, its
//!   arrival, which `as_of` is read from, and the intents applied), dropped once the shard
//!   has expired from the log, and its pending
//!   **intent** (`#intent#<shard>` / `head`: the deltas of a run of records, frozen before
//!   any is applied, so a retry cut longer or shorter than the crashed invocation finishes
//!   exactly what it began);
//! - the **retired** log shards (`#retired` / `log_shards`: `markers`, the names of expired
//!   shards whose intent numbers may still be on all-time score rows), which reconciliation's
//!   cleaning pass drops from the rows it goes over and then from the set;
//! - per board, the **materialized top** (`#top` / window key) a read is one GetItem of,
//!   refreshed by a scheduled function from the board's shards.
//!
//! Each score row takes one ADD per intent, however many of the run's events it holds.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::leaderboard::{days, item_shard, rank, Entry, ScoreDelta, Window, TOP_SIZE};
use likes_core::pipeline::{ReactionEvent, REPLAY_HORIZON_MS};
use likes_core::reconcile::{near_cut_attribute, subtotal_attributes, CountRowState};
use likes_core::Delta;

use crate::error::{cancelled, condition_held};
use crate::pages::query_all;
use crate::reconciliation::{remove_attributes, row_state};
use crate::rows::attr::{
    APPLIED_THROUGH, AS_OF, BOARD, BY, DAYS, ENTRIES, EXPIRES_AT, INTENTS, INTENT_N, ITEM_ID,
    LAST_CUT, REFRESHED_AT, SCORE, THROUGH_SEQ,
};
use crate::rows::{
    self, number, BoardProgressRow, EventClaimRow, IntentHeadRow, ReconciledScoreRow,
    ScoreDeltaRow, ScoreRow, TopEntryRow, TopRow,
};
use crate::StoreError;

/// The index of score rows by board shard, sorted by score.
pub const SCORE_INDEX: &str = "by_score";
/// What one intent's row may take of DynamoDB's 400 KB item, as [`intent_bytes`] counts.
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
    /// Every event that reached the log before this time (epoch ms), on every shard that
    /// carried events, is on the board; `None` before any was.
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

/// An event the batch scores, and the log record (`<shard>:<sequence number>`) it came in.
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
}

impl LeaderboardStore {
    /// A store that reads boards; [`Self::with_board_shards`] for one that writes them.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            shards: 1,
        }
    }

    /// The number of shards each board's score rows spread over (the template's
    /// `LeaderboardShards`).
    pub fn with_board_shards(mut self, shards: u32) -> Self {
        self.shards = shards.max(1);
        self
    }

    /// The shard's progress and pending intent, read strongly consistent.
    pub async fn shard_state(&self, shard: &str) -> Result<ShardState, StoreError> {
        let intents = intent_board(shard);
        let (progress, head) = tokio::try_join!(
            self.get(PROGRESS_BOARD, shard),
            self.get(&intents, INTENT_HEAD)
        )?;
        let (through_seq, applied) = match progress {
            Some(item) => {
                let row: BoardProgressRow = rows::from_item(item)?;
                (row.through_seq, row.intents)
            }
            None => (None, 0),
        };
        let pending = match head {
            Some(item) => {
                let head: IntentHeadRow = rows::from_item(item)?;
                Some(Intent {
                    n: head.n,
                    last_seq: head.last_seq,
                    applied_through: head.applied_through,
                    rows: head.rows,
                    windows: windows_of(&head.days),
                })
            }
            None => None,
        };
        Ok(ShardState {
            through_seq,
            intents: applied,
            pending,
        })
    }

    /// Claims each event for the record it came in: `true` where the claim is the record's
    /// (new, or taken by an earlier attempt at the same record), `false` where another
    /// record of the log holds it (the event was on the log twice).
    pub async fn claim(&self, events: &[Owned<'_>], now_ms: i64) -> Result<Vec<bool>, StoreError> {
        let expires_at = (now_ms + REPLAY_HORIZON_MS) / 1000;
        // Collected before they are streamed: a stream over a closure that borrows its
        // argument is a future the compiler cannot prove `Send`.
        let puts: Vec<_> = events
            .iter()
            .map(|owned| {
                let claim = EventClaimRow {
                    board: format!("{EVENT_CLAIM_PREFIX}{}", owned.event.flip_key()),
                    item_id: owned.event.item_id.clone(),
                    by: owned.by.to_owned(),
                    expires_at,
                };
                async move {
                    let result = self
                        .client
                        .put_item()
                        .table_name(&self.table)
                        .set_item(Some(rows::to_item(&claim)?))
                        .condition_expression("attribute_not_exists(#board) OR #by = :by")
                        .expression_attribute_names("#board", BOARD)
                        .expression_attribute_names("#by", BY)
                        .expression_attribute_values(":by", AttributeValue::S(claim.by.clone()))
                        .send()
                        .await;
                    condition_held("PutItem", result)
                }
            })
            .collect();
        stream::iter(puts).buffered(IN_FLIGHT).try_collect().await
    }

    /// Freezes `deltas` (a run's net like deltas per board and item, its records up to
    /// `last_seq`) as the shard's intent number `n`, one row, on condition none is pending.
    /// A run's events must add up to at most [`MAX_INTENT_BYTES`] of [`intent_bytes`].
    pub async fn begin(
        &self,
        shard: &str,
        n: u64,
        deltas: &BTreeMap<(Window, String), ScoreDelta>,
        last_seq: &str,
        applied_through: i64,
    ) -> Result<Intent, StoreError> {
        let rows: Vec<ScoreDeltaRow> = deltas
            .iter()
            .filter(|(_, delta)| !delta.is_empty())
            .map(|((window, item), delta)| ScoreDeltaRow {
                board: window.board_key(item_shard(item, self.shards)),
                item_id: item.clone(),
                delta: delta.total,
                expires_at: window.expires_at_secs(),
                by_epoch: delta.by_epoch.iter().map(|(e, d)| (*e, *d)).collect(),
                near_cuts: delta.near_cuts.iter().map(|(k, n)| (*k, *n)).collect(),
            })
            .collect();
        let days = days(deltas.keys().map(|(window, _)| window));
        let head = IntentHeadRow {
            board: intent_board(shard),
            item_id: INTENT_HEAD.into(),
            n,
            last_seq: last_seq.to_owned(),
            applied_through,
            days: days.clone(),
            rows,
        };
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&head)?))
            .condition_expression("attribute_not_exists(#board)")
            .expression_attribute_names("#board", BOARD)
            .send()
            .await;
        if !condition_held("PutItem", result)? {
            return Err(StoreError::Corrupt(format!(
                "shard {shard} already has a pending intent"
            )));
        }
        Ok(Intent {
            n,
            last_seq: head.last_seq,
            applied_through,
            rows: head.rows,
            windows: windows_of(&days),
        })
    }

    /// Applies each score row of `intent` that has not taken it yet, then moves the shard's
    /// progress to its last record and drops the head, in one transaction. `through_seq` is
    /// the progress as read before (`None`: the shard's first).
    ///
    /// A score row remembers, per log shard, the last intent it took (`n#<shard>`): a
    /// shard's intents apply in order, so the row takes intent `n` once, on condition it
    /// holds a lower one. Plain conditional writes, not transactions: hundreds of shards
    /// adding to a viral item's row at once queue on it instead of cancelling each other.
    pub async fn complete(
        &self,
        shard: &str,
        intent: &Intent,
        through_seq: Option<&str>,
    ) -> Result<(), StoreError> {
        let marker = marker_attribute(shard_marker(shard));
        // Collected first, as in `claim`, so the future stays `Send`.
        let adds: Vec<_> = intent
            .rows
            .iter()
            .map(|row| self.add(row, &marker, intent.n))
            .collect();
        stream::iter(adds)
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        let days = days(&intent.windows);
        let progress = self.progress_update(
            shard,
            through_seq,
            &intent.last_seq,
            intent.applied_through,
            (intent.n, Some(days)),
        )?;
        let head = Delete::builder()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(intent_board(shard)))
            .key(ITEM_ID, AttributeValue::S(INTENT_HEAD.into()))
            .condition_expression("#n = :n")
            .expression_attribute_names("#n", INTENT_N)
            .expression_attribute_values(":n", number(intent.n))
            .build()
            .map_err(StoreError::Request)?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(progress).build())
            .transact_items(TransactWriteItem::builder().delete(head).build())
            .send()
            .await;
        match cancelled("TransactWriteItems", result)? {
            None => Ok(()),
            Some((_, err)) => Err(StoreError::aws("TransactWriteItems", err)),
        }
    }

    /// Moves the shard's progress over records that score nothing.
    pub async fn advance(
        &self,
        shard: &str,
        through_seq: Option<&str>,
        last_seq: &str,
        applied_through: i64,
        intents: u64,
    ) -> Result<(), StoreError> {
        let update = self.progress_update(
            shard,
            through_seq,
            last_seq,
            applied_through,
            (intents, None),
        )?;
        let result = self
            .client
            .update_item()
            .table_name(update.table_name())
            .set_key(Some(update.key().clone()))
            .update_expression(update.update_expression())
            .set_condition_expression(update.condition_expression().map(str::to_owned))
            .set_expression_attribute_names(update.expression_attribute_names().cloned())
            .set_expression_attribute_values(update.expression_attribute_values().cloned())
            .send()
            .await;
        if condition_held("UpdateItem", result)? {
            Ok(())
        } else {
            Err(StoreError::Corrupt(format!(
                "shard {shard}'s progress moved under its consumer"
            )))
        }
    }

    /// The progress write: the last record, its arrival, the intents applied and, after an
    /// intent, the day windows it scored on; on condition the progress is still
    /// `through_seq`, since a shard has one consumer at a time and a retry reads the
    /// progress afresh.
    fn progress_update(
        &self,
        shard: &str,
        through_seq: Option<&str>,
        last_seq: &str,
        applied_through: i64,
        (intents, days): (u64, Option<Vec<i64>>),
    ) -> Result<Update, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(PROGRESS_BOARD.into()))
            .key(ITEM_ID, AttributeValue::S(shard.into()))
            .expression_attribute_names("#seq", THROUGH_SEQ)
            .expression_attribute_names("#through", APPLIED_THROUGH)
            .expression_attribute_names("#intents", INTENTS)
            .expression_attribute_values(":seq", AttributeValue::S(last_seq.into()))
            .expression_attribute_values(":through", number(applied_through))
            .expression_attribute_values(":intents", number(intents));
        let set = "SET #seq = :seq, #through = :through, #intents = :intents";
        let update = match days {
            None => update.update_expression(set),
            Some(days) => update
                .update_expression(format!("{set}, #days = :days"))
                .expression_attribute_names("#days", DAYS)
                .expression_attribute_values(
                    ":days",
                    AttributeValue::L(days.into_iter().map(number).collect()),
                ),
        };
        let update = match through_seq {
            None => update.condition_expression("attribute_not_exists(#seq)"),
            Some(seq) => update
                .condition_expression("#seq = :was")
                .expression_attribute_values(":was", AttributeValue::S(seq.into())),
        };
        update.build().map_err(StoreError::Request)
    }

    /// One score row's ADD of intent `n` (to its score, and to its subtotals and near-cut
    /// counts), unless the row took it already. A run spans at most
    /// [`likes_core::leaderboard::MAX_RUN_EPOCHS`]
    /// epochs, so the expression stays small.
    async fn add(&self, row: &ScoreDeltaRow, marker: &str, n: u64) -> Result<(), StoreError> {
        let mut adds = vec!["#score :delta".to_owned()];
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(row.board.clone()))
            .key(ITEM_ID, AttributeValue::S(row.item_id.clone()))
            .condition_expression("attribute_not_exists(#n) OR #n < :n")
            .expression_attribute_names("#score", SCORE)
            .expression_attribute_names("#n", marker)
            .expression_attribute_values(":delta", number(row.delta))
            .expression_attribute_values(":n", number(n));
        for (at, (epoch, delta)) in row.by_epoch.iter().enumerate() {
            adds.push(format!("#e{at} :e{at}"));
            update = update
                .expression_attribute_names(format!("#e{at}"), subtotal_attributes(*epoch).0)
                .expression_attribute_values(format!(":e{at}"), number(*delta));
        }
        for (at, (cut, flips)) in row.near_cuts.iter().enumerate() {
            adds.push(format!("#c{at} :c{at}"));
            update = update
                .expression_attribute_names(format!("#c{at}"), near_cut_attribute(*cut))
                .expression_attribute_values(format!(":c{at}"), number(*flips));
        }
        let adds = adds.join(", ");
        let update = match row.expires_at {
            None => update.update_expression(format!("ADD {adds} SET #n = :n")),
            Some(expires_at) => update
                .update_expression(format!("ADD {adds} SET #n = :n, #expires_at = :expires_at"))
                .expression_attribute_names("#expires_at", EXPIRES_AT)
                .expression_attribute_values(":expires_at", number(expires_at)),
        };
        condition_held("UpdateItem", update.send().await).map(drop)
    }

    /// Every shard's progress (Query of `#progress`, strongly consistent).
    pub async fn progress(&self) -> Result<Vec<ShardProgress>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#board = :board")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_values(":board", AttributeValue::S(PROGRESS_BOARD.into()))
            .consistent_read(true);
        query_all(query)
            .await?
            .into_iter()
            .map(|item| {
                let row: BoardProgressRow = rows::from_item(item)?;
                Ok(ShardProgress {
                    shard: row.item_id,
                    through_seq: row.through_seq,
                    applied_through_ms: row.applied_through,
                    intents: row.intents,
                    windows: windows_of(&row.days),
                })
            })
            .collect()
    }

    /// Retires a log shard that has expired from the log: its marker joins the retired set
    /// and its progress row goes, in one transaction, on condition the progress is still
    /// `through_seq` and no intent of it is pending (one that is keeps it). `false` when a
    /// condition failed.
    pub async fn retire(&self, shard: &str, through_seq: Option<&str>) -> Result<bool, StoreError> {
        let build = StoreError::Request;
        let retired = Update::builder()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(RETIRED_BOARD.into()))
            .key(ITEM_ID, AttributeValue::S(RETIRED_ROW.into()))
            .update_expression("ADD #markers :marker")
            .expression_attribute_names("#markers", RETIRED_MARKERS)
            .expression_attribute_values(
                ":marker",
                AttributeValue::Ss(vec![shard_marker(shard).to_owned()]),
            )
            .build()
            .map_err(build)?;
        let progress = Delete::builder()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(PROGRESS_BOARD.into()))
            .key(ITEM_ID, AttributeValue::S(shard.into()))
            .expression_attribute_names("#seq", THROUGH_SEQ);
        let progress = match through_seq {
            None => progress.condition_expression("attribute_not_exists(#seq)"),
            Some(seq) => progress
                .condition_expression("#seq = :seq")
                .expression_attribute_values(":seq", AttributeValue::S(seq.into())),
        }
        .build()
        .map_err(build)?;
        let no_intent = ConditionCheck::builder()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(intent_board(shard)))
            .key(ITEM_ID, AttributeValue::S(INTENT_HEAD.into()))
            .condition_expression("attribute_not_exists(#board)")
            .expression_attribute_names("#board", BOARD)
            .build()
            .map_err(build)?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(retired).build())
            .transact_items(TransactWriteItem::builder().delete(progress).build())
            .transact_items(
                TransactWriteItem::builder()
                    .condition_check(no_intent)
                    .build(),
            )
            .send()
            .await;
        Ok(cancelled("TransactWriteItems", result)?.is_none())
    }

    /// The retired log shards' markers (strongly consistent).
    pub async fn retired(&self) -> Result<BTreeSet<String>, StoreError> {
        let row = self.get(RETIRED_BOARD, RETIRED_ROW).await?;
        match row.as_ref().and_then(|row| row.get(RETIRED_MARKERS)) {
            None => Ok(BTreeSet::new()),
            Some(AttributeValue::Ss(markers)) => Ok(markers.iter().cloned().collect()),
            Some(other) => Err(StoreError::Corrupt(format!(
                "the retired log shards are {other:?}"
            ))),
        }
    }

    /// Forgets `markers` once no score row keeps them.
    pub async fn forget_retired(&self, markers: &BTreeSet<String>) -> Result<(), StoreError> {
        if markers.is_empty() {
            return Ok(());
        }
        self.client
            .update_item()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(RETIRED_BOARD.into()))
            .key(ITEM_ID, AttributeValue::S(RETIRED_ROW.into()))
            .update_expression("DELETE #markers :markers")
            .expression_attribute_names("#markers", RETIRED_MARKERS)
            .expression_attribute_values(
                ":markers",
                AttributeValue::Ss(markers.iter().cloned().collect()),
            )
            .send()
            .await
            .map_err(|e| StoreError::aws("UpdateItem", e))
            .map(drop)
    }

    /// Refreshes each of `windows` at once ([`Self::refresh_board`]).
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
    async fn refresh_board(
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
        let entries = rank(tops.into_iter().flatten().collect(), TOP_SIZE);
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
    async fn shard_top(&self, window: &Window, shard: u32) -> Result<Vec<Entry>, StoreError> {
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
                .expression_attribute_values(":board", AttributeValue::S(window.board_key(shard)))
                .expression_attribute_values(":zero", number(0))
                .scan_index_forward(false)
                .limit(TOP_SIZE as i32 + 1)
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
            let tie_open = entries.len() <= TOP_SIZE
                || entries.last().map(|e| e.like_count) == Some(entries[TOP_SIZE - 1].like_count);
            match output.last_evaluated_key {
                Some(key) if tie_open => start = Some(key),
                _ => break,
            }
        }
        Ok(entries)
    }

    /// The partition of an item's all-time score row.
    fn all_time_board(&self, item_id: &str) -> AttributeValue {
        AttributeValue::S(Window::All.board_key(item_shard(item_id, self.shards)))
    }

    /// The shards each board's score rows spread over.
    pub fn board_shards(&self) -> u32 {
        self.shards
    }

    /// A page of the all-time board's shard `shard` (a Query of `all#<shard>`, strongly
    /// consistent, from `start`), and where the next page starts.
    pub async fn all_time_page(
        &self,
        shard: u32,
        start: Option<rows::Item>,
    ) -> Result<(Vec<AllTimeRow>, Option<rows::Item>), StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#board = :board")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_values(":board", AttributeValue::S(Window::All.board_key(shard)))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| StoreError::aws("Query", e))?;
        let rows = output
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|item| {
                let row: ReconciledScoreRow = rows::from_item(item)?;
                let markers = row
                    .others
                    .keys()
                    .filter_map(|name| attribute_marker(name))
                    .map(str::to_owned)
                    .collect();
                Ok(AllTimeRow {
                    item_id: row.item_id.clone(),
                    state: score_row_state(row),
                    markers,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok((rows, output.last_evaluated_key))
    }

    /// One item's all-time score row as [`Self::all_time_page`] reads it (strongly
    /// consistent); `None` when the item has none.
    pub async fn all_time_row(&self, item_id: &str) -> Result<Option<CountRowState>, StoreError> {
        let Some(item) = self
            .get(
                &Window::All.board_key(item_shard(item_id, self.shards)),
                item_id,
            )
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(score_row_state(rows::from_item(item)?)))
    }

    /// Every all-time score row, as [`Self::all_time_page`] reads them: each board shard a
    /// page at a time, [`IN_FLIGHT`] shards at once, no page asked for once `out_of_time()`.
    /// The rows read, and whether every shard was read whole.
    pub async fn all_time_rows(
        &self,
        out_of_time: impl Fn() -> bool + Sync,
    ) -> Result<(Vec<(String, CountRowState)>, bool), StoreError> {
        let out_of_time = &out_of_time;
        stream::iter(0..self.board_shards())
            .map(|shard| async move {
                let mut rows = Vec::new();
                let mut start = None;
                loop {
                    if out_of_time() {
                        return Ok::<_, StoreError>((rows, false));
                    }
                    let (page, next) = self.all_time_page(shard, start).await?;
                    rows.extend(page.into_iter().map(|row| (row.item_id, row.state)));
                    match next {
                        None => return Ok((rows, true)),
                        next => start = next,
                    }
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_fold(
                (Vec::new(), true),
                |(mut all, whole), (rows, read)| async move {
                    all.extend(rows);
                    Ok((all, whole && read))
                },
            )
            .await
    }

    /// Adds `delta` to an item's all-time score as reconciliation's correction at cut
    /// `cut_epoch`, attributed to the epoch before it (so a run at an earlier cut leaves it
    /// out), once: on condition no run at this cut or a later one corrected the row.
    /// `false` when one did.
    pub async fn correct_all_time(
        &self,
        item_id: &str,
        delta: i64,
        cut_epoch: i64,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(BOARD, self.all_time_board(item_id))
            .key(ITEM_ID, AttributeValue::S(item_id.into()))
            .update_expression("SET #last = :cut ADD #score :delta, #epoch :delta")
            .condition_expression("attribute_not_exists(#last) OR #last < :cut")
            .expression_attribute_names("#last", LAST_CUT)
            .expression_attribute_names("#score", SCORE)
            .expression_attribute_names("#epoch", subtotal_attributes(cut_epoch - 1).0)
            .expression_attribute_values(":cut", number(cut_epoch))
            .expression_attribute_values(":delta", number(delta))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Drops `attributes` (subtotals and near-cut counts no cut needs, retired shards'
    /// intent numbers) from an item's all-time score row.
    pub async fn drop_reconciled(
        &self,
        item_id: &str,
        attributes: &[String],
    ) -> Result<(), StoreError> {
        let key = [
            (BOARD.to_owned(), self.all_time_board(item_id)),
            (ITEM_ID.to_owned(), AttributeValue::S(item_id.into())),
        ];
        remove_attributes(&self.client, &self.table, &key, attributes).await
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

    /// A strongly consistent GetItem.
    async fn get(&self, board: &str, item_id: &str) -> Result<Option<rows::Item>, StoreError> {
        self.read(board, item_id, true).await
    }

    async fn read(
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

/// A score row as reconciliation judges it: its score is the like total.
fn score_row_state(row: ReconciledScoreRow) -> CountRowState {
    let total = Delta {
        like: row.score,
        dislike: 0,
    };
    row_state(total, &row.others)
}

/// At most what one event adds to an intent's row, in DynamoDB's item size: a delta on each
/// of its two boards, each a map of six named values (the board shard key, at most 19
/// bytes; the item id; the delta and a TTL, numbers of at most 21 bytes; two lists) with 3
/// bytes for the map or a list and 1 per element; and on `all` one `[epoch, delta]` and
/// one `[cut, flips]` pair.
pub fn intent_bytes(event: &ReactionEvent) -> usize {
    2 * (event.item_id.len() + ROW_BYTES_BESIDES_ITEM) + PAIR_BYTES * 2
}

/// 3 (the map) + 6 × (1 name byte + 1 element byte) + 19 (board key) + 2 × 21 (numbers)
/// + 2 × 3 (the lists).
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
    fn intent_bytes_counts_the_longest_board_shard_key() {
        // `LeaderboardShards` is at most 4096.
        assert_eq!(Window::day_of(0).board_key(4095).len(), 19);
    }
}
