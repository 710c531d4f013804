//! The all-time board as reconciliation reads and corrects it.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::leaderboard::{item_shard, Board, Window};
use likes_core::reconcile::{subtotal_attributes, CountRowState, BEFORE_FIRST_LIKES, FIRST_EPOCH};
use likes_core::Delta;

use crate::error::condition_held;
use crate::first_epochs::Written;
use crate::reconciliation::{remove_attributes, row_state};
use crate::rows::attr::{BOARD, ITEM_ID, LAST_CUT, RANKED, RANKED_BOARD, SCORE};
use crate::rows::{self, number, ReconciledScoreRow};
use crate::StoreError;

use super::{attribute_marker, AllTimeRow, LeaderboardStore, IN_FLIGHT};

impl LeaderboardStore {
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
    /// `false` when one did. A row first written after that epoch also sums it with its
    /// likes from before its first epoch.
    pub async fn correct_all_time(
        &self,
        item_id: &str,
        delta: i64,
        cut_epoch: i64,
    ) -> Result<bool, StoreError> {
        let epoch = cut_epoch - 1;
        let shard = item_shard(item_id, self.shards);
        // The corrected row is in the score index, whatever its score.
        let score = "if_not_exists(#score, :zero) + :delta";
        let correct = |before_first: bool| {
            let (before, first) = if before_first {
                (", #before :delta", "#first > :epoch")
            } else {
                ("", "(attribute_not_exists(#first) OR #first <= :epoch)")
            };
            let update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(BOARD, AttributeValue::S(Window::All.board_key(shard)))
                .key(ITEM_ID, AttributeValue::S(item_id.into()))
                .update_expression(format!(
                    "SET #last = :cut, #score = {score}, #ranked = {score}, #ranked_board = :ranked_board ADD #epoch :delta{before}"
                ))
                .condition_expression(format!(
                    "(attribute_not_exists(#last) OR #last < :cut) AND {first}"
                ))
                .expression_attribute_names("#last", LAST_CUT)
                .expression_attribute_names("#score", SCORE)
                .expression_attribute_names("#ranked", RANKED)
                .expression_attribute_names("#ranked_board", RANKED_BOARD)
                .expression_attribute_values(
                    ":ranked_board",
                    AttributeValue::S(Board::ranked_key(item_id, &Window::All.board_key(shard))),
                )
                .expression_attribute_names("#first", FIRST_EPOCH)
                .expression_attribute_names("#epoch", subtotal_attributes(epoch).0)
                .expression_attribute_values(":cut", number(cut_epoch))
                .expression_attribute_values(":epoch", number(epoch))
                .expression_attribute_values(":delta", number(delta))
                .expression_attribute_values(":zero", number(0))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                );
            if before_first {
                update.expression_attribute_names("#before", BEFORE_FIRST_LIKES)
            } else {
                update
            }
        };
        match Written::of(correct(false).send().await, LAST_CUT, cut_epoch)? {
            Written::Took => Ok(true),
            Written::Refused { noted: true, .. } => Ok(false),
            Written::Refused {
                first,
                noted: false,
            } => {
                if first.is_none_or(|first| first <= epoch) {
                    return Err(StoreError::Corrupt(format!(
                        "all-time score row of {item_id} refused a correction at cut {cut_epoch} \
                         with neither a later cut nor a later first epoch"
                    )));
                }
                condition_held("UpdateItem", correct(true).send().await)
            }
        }
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
        remove_attributes(&self.client, &self.table, &key, attributes, (&[], 0)).await
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
