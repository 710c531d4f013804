//! The consumer's exactly-once path: a log shard's state and progress, its event claims,
//! the intent frozen before a run of records is applied and applied once, and the retired
//! shards whose intent numbers are still on rows.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::leaderboard::{item_shard, Board, ScoreDelta, Window};
use likes_core::pipeline::REPLAY_HORIZON_MS;
use likes_core::reconcile::{
    near_cut_attribute_of, subtotal_attributes, BEFORE_FIRST_LIKES, FIRST_EPOCH,
};

use crate::batch;
use crate::error::{cancelled, condition_held, progress_moved};
use crate::first_epochs::{number_of, RowKey, Start, Subtotals, Written};
use crate::pages::query_all;
use crate::rows::attr::{
    APPLIED_THROUGH, BOARD, BY, EXPIRES_AT, INTENTS, INTENT_N, ITEM_ID, RANKED, RANKED_BOARD,
    SCORE, SCORED, SCORED_DROPPED, THROUGH_SEQ,
};
use crate::rows::{
    self, number, BoardProgressRow, EventClaimRow, IntentHeadRow, ScoreDeltaRow, ScoreRowKey,
};
use crate::StoreError;

use super::{
    intent_board, marker_attribute, shard_marker, Intent, LeaderboardStore, Owned, Scored,
    ShardProgress, ShardState, EVENT_CLAIM_PREFIX, INTENT_HEAD, IN_FLIGHT, PROGRESS_BOARD,
    RANKED_FROM, RETIRED_BOARD, RETIRED_MARKERS, RETIRED_ROW,
};

impl LeaderboardStore {
    /// The shard's progress and pending intent, read strongly consistent.
    pub async fn shard_state(&self, shard: &str) -> Result<ShardState, StoreError> {
        let intents = intent_board(shard);
        let (progress, head) = tokio::try_join!(
            self.get(PROGRESS_BOARD, shard),
            self.get(&intents, INTENT_HEAD)
        )?;
        let (through_seq, applied, scored) = match progress {
            Some(item) => {
                let row: BoardProgressRow = rows::from_item(item)?;
                let scored = Scored {
                    boards: row.scored,
                    dropped: row.scored_dropped,
                };
                (row.through_seq, row.intents, scored)
            }
            None => (None, 0, Scored::default()),
        };
        // A head stays after its intent completes, until the next intent's put replaces it:
        // pending only while the progress has not reached its number.
        let pending = head
            .map(rows::from_item::<IntentHeadRow>)
            .transpose()?
            .filter(|head| head.n > applied)
            .map(|head| Intent {
                n: head.n,
                last_seq: head.last_seq,
                applied_through: head.applied_through,
                rows: head.rows,
            });
        Ok(ShardState {
            through_seq,
            intents: applied,
            pending,
            scored,
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
    /// `last_seq`) as the shard's intent number `n`, one row, on condition none is pending:
    /// the head is new, or holds an earlier intent (one the progress has reached, since a
    /// shard finishes its pending intent before it begins the next).
    /// A run is cut by [`run_length`](super::run_length) to fit [`MAX_INTENT_BYTES`](super::MAX_INTENT_BYTES).
    pub async fn begin(
        &self,
        shard: &str,
        n: u64,
        deltas: &BTreeMap<(Window, String), ScoreDelta>,
        last_seq: &str,
        applied_through: i64,
    ) -> Result<Intent, StoreError> {
        debug_assert!(
            super::intent_row_bytes(deltas) <= super::MAX_INTENT_BYTES,
            "a run is cut to fit its intent's row"
        );
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
        let head = IntentHeadRow {
            board: intent_board(shard),
            item_id: INTENT_HEAD.into(),
            n,
            last_seq: last_seq.to_owned(),
            applied_through,
            rows,
        };
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&head)?))
            .condition_expression("attribute_not_exists(#board) OR #n < :n")
            .expression_attribute_names("#board", BOARD)
            .expression_attribute_names("#n", INTENT_N)
            .expression_attribute_values(":n", number(n))
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
        })
    }

    /// Applies each score row of `intent` that has not taken it yet, then moves the shard's
    /// progress to its last record and to the intent's number, which ends it, noting the
    /// boards it scored on in `scored` (the shard's, as read with its state): the head
    /// stays, no longer pending, until the next intent's put replaces it (a write of the
    /// progress alone, where deleting the head with it took a transaction, twice the units
    /// of both). `through_seq` is the progress as read before (`None`: the shard's first).
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
        scored: &mut Scored,
    ) -> Result<(), StoreError> {
        let marker = marker_attribute(shard_marker(shard));
        let all_time = all_time_prefix();
        let mut items: BTreeMap<&str, ItemRows> = BTreeMap::new();
        for row in &intent.rows {
            let rows = items.entry(&row.item_id).or_default();
            if row.board.starts_with(&all_time) {
                rows.all_time = Some(row);
            } else {
                rows.windowed.push(row);
            }
        }
        self.read_first_epochs(items.values().filter_map(|rows| rows.all_time))
            .await?;
        // Collected first, as in `claim`, so the future stays `Send`.
        let adds: Vec<_> = items
            .into_values()
            .map(|rows| self.add_item(rows, &marker, intent.n))
            .collect();
        stream::iter(adds)
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        scored.note(intent.boards(), intent.n, likes_core::clock::now_ms());
        let progress = self.progress_update(
            shard,
            through_seq,
            &intent.last_seq,
            intent.applied_through,
            (intent.n, Some(scored)),
        )?;
        self.move_progress(shard, progress).await
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
        self.move_progress(shard, update).await
    }

    /// Sends a [`Self::progress_update`] as one UpdateItem.
    async fn move_progress(&self, shard: &str, update: Update) -> Result<(), StoreError> {
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
        progress_moved(shard, result)
    }

    /// The progress write: the last record, its arrival, the intents applied and, after an
    /// intent, the boards scored on lately; on condition the progress is still
    /// `through_seq`, since a shard has one consumer at a time and a retry reads the
    /// progress afresh.
    pub(super) fn progress_update(
        &self,
        shard: &str,
        through_seq: Option<&str>,
        last_seq: &str,
        applied_through: i64,
        (intents, scored): (u64, Option<&Scored>),
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
        let update = match scored {
            None => update.update_expression(set),
            Some(scored) => update
                .update_expression(format!("{set}, #scored = :scored, #dropped = :dropped"))
                .expression_attribute_names("#scored", SCORED)
                .expression_attribute_names("#dropped", SCORED_DROPPED)
                .expression_attribute_values(":scored", scored_value(&scored.boards))
                .expression_attribute_values(":dropped", number(scored.dropped)),
        };
        let update = match through_seq {
            None => update.condition_expression("attribute_not_exists(#seq)"),
            Some(seq) => update
                .condition_expression("#seq = :was")
                .expression_attribute_values(":was", AttributeValue::S(seq.into())),
        };
        update.build().map_err(StoreError::Request)
    }

    /// Reads the all-time score rows among `rows` this container does not know (one
    /// BatchGetItem per 100, eventually consistent: a row once written stays, and its first
    /// epoch never changes) and remembers those that exist. So a write asks a row to begin
    /// only where it was absent a moment before, and is refused only where another log
    /// shard began it since: read units instead of a refused write per row.
    async fn read_first_epochs(
        &self,
        rows: impl Iterator<Item = &ScoreDeltaRow>,
    ) -> Result<(), StoreError> {
        let keys: Vec<RowKey> = rows
            .map(|row| (row.board.clone(), row.item_id.clone()))
            .collect();
        let unknown: Vec<rows::Item> = self
            .first_epochs
            .unknown(&keys)
            .into_iter()
            .map(|(board, item_id)| {
                [
                    (BOARD.to_owned(), AttributeValue::S(board.clone())),
                    (ITEM_ID.to_owned(), AttributeValue::S(item_id.clone())),
                ]
                .into()
            })
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let found = batch::get_all(&self.client, &self.table, unknown, |keys| {
            keys.projection_expression("#board, #item_id, #first")
                .expression_attribute_names("#board", BOARD)
                .expression_attribute_names("#item_id", ITEM_ID)
                .expression_attribute_names("#first", FIRST_EPOCH)
        })
        .await?;
        for row in found {
            let first = number_of(&row, FIRST_EPOCH);
            let key: ScoreRowKey = rows::from_item(row)?;
            self.first_epochs.learn((key.board, key.item_id), first);
        }
        Ok(())
    }

    /// An item's score rows' ADDs of intent `n`: its all-time row, then its windows' rows.
    /// A window's row begins out of the score index only where the all-time row just did (the item's
    /// first like: no day row of it was written before); any other is written into it.
    async fn add_item(&self, rows: ItemRows<'_>, marker: &str, n: u64) -> Result<(), StoreError> {
        let first_like = match rows.all_time {
            Some(row) => self.add_all_time(row, marker, n).await?,
            None => false,
        };
        for row in rows.windowed {
            if first_like {
                match self.write(row, Meets::New(None), marker, n).await? {
                    Written::Took | Written::Refused { noted: true, .. } => continue,
                    // Another log shard's first like of the item began it.
                    Written::Refused { noted: false, .. } => {}
                }
            }
            self.write(row, Meets::Existing(Subtotals::Every), marker, n)
                .await?;
        }
        Ok(())
    }

    /// An all-time score row's ADD of intent `n` (to its score, and to its subtotals and
    /// near-cut counts), unless the row took it already. A row this container does not know
    /// is asked to begin with the write ([`Self::write`]); refused, it is written as it is.
    /// Whether the row began with this write out of the score index. A run spans at most
    /// [`likes_core::leaderboard::MAX_RUN_EPOCHS`] epochs, so the expression stays small.
    async fn add_all_time(
        &self,
        row: &ScoreDeltaRow,
        marker: &str,
        n: u64,
    ) -> Result<bool, StoreError> {
        let earliest = row.by_epoch.iter().map(|(epoch, _)| *epoch).min();
        let key = (row.board.clone(), row.item_id.clone());
        let begin = |first| self.write(row, Meets::New(Some(first)), marker, n);
        match self.first_epochs.start(key, earliest, begin).await? {
            Start::Took => Ok(row.delta < RANKED_FROM),
            Start::Known { noted: true, .. } => Ok(false),
            Start::Known { first, .. } => {
                let subtotals = first.map_or(Subtotals::Every, Subtotals::After);
                self.write(row, Meets::Existing(subtotals), marker, n)
                    .await
                    .map(|_| false)
            }
        }
    }

    /// One conditional UpdateItem of a score row: its score, the subtotals the row keeps
    /// (and the likes from epochs before the row's first, summed), its near-cut counts.
    ///
    /// A write that begins a row ([`Meets::New`]) with a delta under [`RANKED_FROM`] leaves
    /// it out of the score index, on condition the row is new; every other write keeps the
    /// row's index key (`ranked`) equal to its score, so one of a larger delta may meet a
    /// row that exists (begun at the same first epoch). So a row out of the index was
    /// written once, with a delta under [`RANKED_FROM`], and scores under it, and only a
    /// container's first write of such a delta to a row that exists is refused for it.
    async fn write(
        &self,
        row: &ScoreDeltaRow,
        meets: Meets,
        marker: &str,
        n: u64,
    ) -> Result<Written, StoreError> {
        let subtotals = match meets {
            Meets::New(Some(first)) => Subtotals::Begin(first),
            Meets::New(None) => Subtotals::Every,
            Meets::Existing(subtotals) => subtotals,
        };
        let mut adds = Vec::new();
        let mut sets = vec!["#n = :n"];
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(row.board.clone()))
            .key(ITEM_ID, AttributeValue::S(row.item_id.clone()))
            .expression_attribute_names("#score", SCORE)
            .expression_attribute_names("#n", marker)
            .expression_attribute_values(":delta", number(row.delta))
            .expression_attribute_values(":n", number(n))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        // Whether this write puts the row in the index (or keeps it there) at its new score.
        let ranks = match meets {
            Meets::New(_) => row.delta >= RANKED_FROM,
            Meets::Existing(_) => true,
        };
        if ranks {
            sets.push("#score = if_not_exists(#score, :zero) + :delta");
            sets.push("#ranked = if_not_exists(#score, :zero) + :delta");
            sets.push("#ranked_board = :ranked_board");
            update = update
                .expression_attribute_names("#ranked", RANKED)
                .expression_attribute_names("#ranked_board", RANKED_BOARD)
                .expression_attribute_values(":zero", number(0))
                .expression_attribute_values(
                    ":ranked_board",
                    AttributeValue::S(Board::ranked_key(&row.item_id, &row.board)),
                );
        } else {
            adds.push("#score :delta".to_owned());
        }
        let noted = "(attribute_not_exists(#n) OR #n < :n)";
        update = match meets {
            // One like begins the row out of the index: only a new row may take it.
            Meets::New(_) if !ranks => update.condition_expression("attribute_not_exists(#score)"),
            Meets::New(Some(_)) => update.condition_expression(format!(
                "{noted} AND {}",
                Subtotals::begin_condition("#score")
            )),
            Meets::New(None) | Meets::Existing(_) => update.condition_expression(noted),
        };
        if let Meets::New(Some(first)) = meets {
            sets.push("#first = :first");
            update = update
                .expression_attribute_names("#first", FIRST_EPOCH)
                .expression_attribute_values(":first", number(first));
        }
        let implicit = subtotals.implicit();
        let mut before_first = 0;
        for (at, (epoch, delta)) in row.by_epoch.iter().enumerate() {
            if Some(*epoch) == implicit {
                continue;
            }
            if implicit.is_some_and(|first| *epoch < first) {
                before_first += delta;
            }
            adds.push(format!("#e{at} :e{at}"));
            update = update
                .expression_attribute_names(format!("#e{at}"), subtotal_attributes(*epoch).0)
                .expression_attribute_values(format!(":e{at}"), number(*delta));
        }
        if before_first != 0 {
            adds.push("#before :before".to_owned());
            update = update
                .expression_attribute_names("#before", BEFORE_FIRST_LIKES)
                .expression_attribute_values(":before", number(before_first));
        }
        for (at, (cut, flips)) in row.near_cuts.iter().enumerate() {
            adds.push(format!("#c{at} :c{at}"));
            update = update
                .expression_attribute_names(
                    format!("#c{at}"),
                    near_cut_attribute_of(*cut, implicit),
                )
                .expression_attribute_values(format!(":c{at}"), number(*flips));
        }
        if let Some(expires_at) = row.expires_at {
            sets.push("#expires_at = :expires_at");
            update = update
                .expression_attribute_names("#expires_at", EXPIRES_AT)
                .expression_attribute_values(":expires_at", number(expires_at));
        }
        let add = if adds.is_empty() {
            String::new()
        } else {
            format!(" ADD {}", adds.join(", "))
        };
        let result = update
            .update_expression(format!("SET {}{add}", sets.join(", ")))
            .send()
            .await;
        Written::of(result, marker, n as i64)
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
                    scored: row
                        .scored
                        .iter()
                        .filter_map(|(key, (n, _))| Some((Board::parse_key(key)?, *n)))
                        .collect(),
                    scored_dropped: row.scored_dropped,
                })
            })
            .collect()
    }

    /// Retires a log shard that has expired from the log: its marker joins the retired set
    /// and its progress row and intent head go, in one transaction, on condition the
    /// progress is still `through_seq` and no intent of it is pending (a head beyond the
    /// `intents` the progress holds keeps it). `false` when a condition failed.
    pub async fn retire(
        &self,
        shard: &str,
        through_seq: Option<&str>,
        intents: u64,
    ) -> Result<bool, StoreError> {
        self.retire_with(shard, through_seq, Head::Done(intents))
            .await
    }

    /// Retires a log shard that has expired from the log with its intent `pending` never
    /// finished, which is given up: no record of the shard is delivered again, so no
    /// consumer would ever finish it, and its head would refuse [`Self::retire`] for ever.
    /// As `retire`, the head going on condition it is still intent `pending`. The score rows
    /// that took the intent keep its number until reconciliation's cleaning pass; what it
    /// did not add, reconciliation repairs on the all-time board. `false` when a condition
    /// failed.
    pub async fn abandon(
        &self,
        shard: &str,
        through_seq: Option<&str>,
        pending: u64,
    ) -> Result<bool, StoreError> {
        self.retire_with(shard, through_seq, Head::Pending(pending))
            .await
    }

    async fn retire_with(
        &self,
        shard: &str,
        through_seq: Option<&str>,
        expected: Head,
    ) -> Result<bool, StoreError> {
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
        let head = Delete::builder()
            .table_name(&self.table)
            .key(BOARD, AttributeValue::S(intent_board(shard)))
            .key(ITEM_ID, AttributeValue::S(INTENT_HEAD.into()))
            .expression_attribute_names("#n", INTENT_N);
        let head = match expected {
            Head::Done(intents) => head
                .condition_expression("attribute_not_exists(#board) OR #n <= :intents")
                .expression_attribute_names("#board", BOARD)
                .expression_attribute_values(":intents", number(intents)),
            Head::Pending(n) => head
                .condition_expression("#n = :n")
                .expression_attribute_values(":n", number(n)),
        }
        .build()
        .map_err(build)?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(retired).build())
            .transact_items(TransactWriteItem::builder().delete(progress).build())
            .transact_items(TransactWriteItem::builder().delete(head).build())
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
}

/// What a retirement expects of a log shard's intent head.
#[derive(Debug, Clone, Copy)]
enum Head {
    /// None, or one done: its number is at most the progress's intents.
    Done(u64),
    /// This intent, pending: it is given up with the shard.
    Pending(u64),
}

/// An item's score rows in an intent.
#[derive(Debug, Default)]
struct ItemRows<'r> {
    all_time: Option<&'r ScoreDeltaRow>,
    windowed: Vec<&'r ScoreDeltaRow>,
}

/// The partition keys of the all-time board's rows begin with this.
fn all_time_prefix() -> String {
    format!("{}#", Window::All.key())
}

/// How a score row's write meets the row.
#[derive(Debug, Clone, Copy)]
enum Meets {
    /// A row that may be new: the write begins it (an all-time row at this first epoch),
    /// on condition it is new, or, where the delta ranks it anyway, that it began there.
    New(Option<i64>),
    /// A row that exists, keeping these subtotals: the write adds to it, on condition it
    /// holds a lower intent of the shard.
    Existing(Subtotals),
}

/// A progress row's `scored` map: board key → `[intent, at]`.
fn scored_value(boards: &BTreeMap<String, (u64, i64)>) -> AttributeValue {
    AttributeValue::M(
        boards
            .iter()
            .map(|(key, (n, at))| {
                (
                    key.clone(),
                    AttributeValue::L(vec![number(*n), number(*at)]),
                )
            })
            .collect(),
    )
}
