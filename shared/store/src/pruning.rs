//! The cleaning passes that drop epoch subtotals from the count rows and the all-time score
//! rows.
//!
//! A completed run starts a pass dropping the subtotals of epochs before its cut. When no
//! run completes (exports failing, a stalled shard), busy rows would grow by two attributes
//! an epoch until they pass DynamoDB's 400 KB, so the reconcile function also starts, on a
//! schedule of its own, a pass dropping every subtotal and near-cut count older than a
//! horizon no run can still need. A pass goes over the Counts table a page at a time, and
//! any invocation advances it:
//!
//! - `#reconcile` / `P`: `through` (the pass drops epochs before it), one cursor per Scan
//!   segment (`seg<i>`: absent before the segment starts, the next page's key while it goes,
//!   `done` after it), the all-time board's cursor (`board_shard`, the board shard it
//!   reads, and `board_at`, as a segment's cursor), `done` once every segment and the board
//!   are, `retiring` (the retired log shards whose intent numbers the pass drops from the
//!   all-time score rows: no row keeps them once it is done), `cleaned` (the latest epoch before
//!   which a finished pass dropped everything) and `wanted` (the latest cut a completed run
//!   asked a pass through).

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use crate::error::condition_held;
use crate::rows::{attr, Item};
use crate::StoreError;

const STATE_KEY: &str = "#reconcile";
const PRUNE_SORT_KEY: &str = "P";
const THROUGH: &str = "through";
const DONE: &str = "done";
const CLEANED: &str = "cleaned";
const WANTED: &str = "wanted";
const SEGMENT_DONE: &str = "done";
const BOARD_SHARD: &str = "board_shard";
const BOARD_AT: &str = "board_at";
const RETIRING: &str = "retiring";

/// Where one Scan segment of a pass is.
#[derive(Debug, Clone, PartialEq)]
pub enum SegmentCursor {
    Start,
    At(Item),
    Done,
}

/// The pruning pass in progress, or the last one.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneState {
    /// Epochs before this are dropped by the pass.
    pub through: i64,
    pub segments: Vec<SegmentCursor>,
    /// The all-time board: the board shard the pass reads, and where in it.
    pub board: (u32, SegmentCursor),
    /// The retired log shards' markers the pass drops from the all-time score rows.
    pub retiring: BTreeSet<String>,
    pub done: bool,
    /// Every count row holds nothing before this epoch (the last finished pass's `through`).
    pub cleaned: i64,
    /// The latest cut a completed run asked a pass through.
    pub wanted: i64,
}

/// The `P` row. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PruningStore {
    client: Client,
    counts_table: String,
}

fn segment_attribute(segment: usize) -> String {
    format!("seg{segment}")
}

impl PruningStore {
    pub fn new(client: Client, counts_table: impl Into<String>) -> Self {
        Self {
            client,
            counts_table: counts_table.into(),
        }
    }

    fn update(
        &self,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, AttributeValue::S(STATE_KEY.into()))
            .key(attr::SHARD, AttributeValue::S(PRUNE_SORT_KEY.into()))
    }

    /// The pass state (strongly consistent), with `segments` cursors; `None` before the first
    /// pass or cleanup.
    pub async fn state(&self, segments: usize) -> Result<Option<PruneState>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, AttributeValue::S(STATE_KEY.into()))
            .key(attr::SHARD, AttributeValue::S(PRUNE_SORT_KEY.into()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem", err))?;
        let Some(row) = output.item else {
            return Ok(None);
        };
        let number = |name: &str| -> Result<i64, StoreError> {
            match row.get(name) {
                None => Ok(i64::MIN),
                Some(AttributeValue::N(n)) => n
                    .parse()
                    .map_err(|_| StoreError::Corrupt(format!("prune state {name} is {n:?}"))),
                Some(other) => Err(StoreError::Corrupt(format!(
                    "prune state {name} is {other:?}"
                ))),
            }
        };
        let cursor = |name: &str| match row.get(name) {
            None => Ok(SegmentCursor::Start),
            Some(AttributeValue::S(s)) if s == SEGMENT_DONE => Ok(SegmentCursor::Done),
            Some(AttributeValue::M(key)) => Ok(SegmentCursor::At(key.clone())),
            Some(other) => Err(StoreError::Corrupt(format!(
                "prune cursor {name} is {other:?}"
            ))),
        };
        let segments = (0..segments)
            .map(|segment| cursor(&segment_attribute(segment)))
            .collect::<Result<_, _>>()?;
        let board = (number(BOARD_SHARD)?.max(0) as u32, cursor(BOARD_AT)?);
        let retiring = match row.get(RETIRING) {
            None => BTreeSet::new(),
            Some(AttributeValue::Ss(markers)) => markers.iter().cloned().collect(),
            Some(other) => {
                return Err(StoreError::Corrupt(format!(
                    "prune state {RETIRING} is {other:?}"
                )))
            }
        };
        Ok(Some(PruneState {
            through: number(THROUGH)?,
            segments,
            board,
            retiring,
            // A row with no pass yet (a run's `wanted` alone) has none going.
            done: !row.contains_key(THROUGH)
                || matches!(row.get(DONE), Some(AttributeValue::Bool(true))),
            cleaned: number(CLEANED)?,
            wanted: number(WANTED)?,
        }))
    }

    /// Starts a pass dropping epochs before `through`, and the intent numbers of the
    /// `retiring` log shards, unless a pass is still going (it goes on to its end, however
    /// long the table takes: a pass is never restarted) or the last one reached `through`
    /// already. `false` when nothing was started.
    pub async fn begin(
        &self,
        through: i64,
        segments: usize,
        retiring: &BTreeSet<String>,
    ) -> Result<bool, StoreError> {
        let mut cleared: Vec<String> = (0..segments)
            .map(segment_attribute)
            .chain([BOARD_SHARD.to_owned(), BOARD_AT.to_owned()])
            .collect();
        let mut set = "SET #through = :through, #done = :false".to_owned();
        let mut update = self
            .update()
            .expression_attribute_names("#retiring", RETIRING);
        if retiring.is_empty() {
            cleared.push("#retiring".to_owned());
        } else {
            set.push_str(", #retiring = :retiring");
            update = update.expression_attribute_values(
                ":retiring",
                AttributeValue::Ss(retiring.iter().cloned().collect()),
            );
        }
        let result = update
            .update_expression(format!("{set} REMOVE {}", cleared.join(", ")))
            .condition_expression(
                "attribute_not_exists(#through) OR (#done = :true AND #through < :through)",
            )
            .expression_attribute_names("#through", THROUGH)
            .expression_attribute_names("#done", DONE)
            .expression_attribute_values(":through", AttributeValue::N(through.to_string()))
            .expression_attribute_values(":false", AttributeValue::Bool(false))
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Records where segment `segment` of the pass for `through` goes on.
    pub async fn advance(
        &self,
        through: i64,
        segment: usize,
        cursor: &SegmentCursor,
    ) -> Result<bool, StoreError> {
        let value = match cursor {
            SegmentCursor::Start => return Ok(true),
            SegmentCursor::At(key) => AttributeValue::M(key.clone()),
            SegmentCursor::Done => AttributeValue::S(SEGMENT_DONE.into()),
        };
        let result = self
            .update()
            .update_expression("SET #cursor = :cursor")
            .condition_expression("#through = :through")
            .expression_attribute_names("#cursor", segment_attribute(segment))
            .expression_attribute_names("#through", THROUGH)
            .expression_attribute_values(":cursor", value)
            .expression_attribute_values(":through", AttributeValue::N(through.to_string()))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Records where the pass for `through` goes on in the all-time board: board shard
    /// `shard`, at `cursor` (`Done` once every shard is read).
    pub async fn advance_board(
        &self,
        through: i64,
        shard: u32,
        cursor: &SegmentCursor,
    ) -> Result<bool, StoreError> {
        let (expression, value) = match cursor {
            SegmentCursor::Start => ("SET #shard = :shard REMOVE #at", None),
            SegmentCursor::At(key) => (
                "SET #shard = :shard, #at = :at",
                Some(AttributeValue::M(key.clone())),
            ),
            SegmentCursor::Done => (
                "SET #shard = :shard, #at = :at",
                Some(AttributeValue::S(SEGMENT_DONE.into())),
            ),
        };
        let result = self
            .update()
            .update_expression(expression)
            .condition_expression("#through = :through")
            .expression_attribute_names("#shard", BOARD_SHARD)
            .expression_attribute_names("#at", BOARD_AT)
            .expression_attribute_names("#through", THROUGH)
            .set_expression_attribute_values(Some(
                [(
                    ":through".to_owned(),
                    AttributeValue::N(through.to_string()),
                )]
                .into_iter()
                .chain(value.map(|v| (":at".to_owned(), v)))
                .chain([(":shard".to_owned(), AttributeValue::N(shard.to_string()))])
                .collect(),
            ))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// The pass for `through` read every segment: every row is clean before it.
    pub async fn finish(&self, through: i64) -> Result<bool, StoreError> {
        let result = self
            .update()
            .update_expression("SET #done = :true, #cleaned = :through")
            .condition_expression(
                "#through = :through AND (attribute_not_exists(#cleaned) OR #cleaned < :through)",
            )
            .expression_attribute_names("#done", DONE)
            .expression_attribute_names("#cleaned", CLEANED)
            .expression_attribute_names("#through", THROUGH)
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":through", AttributeValue::N(through.to_string()))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// A completed run asks for a pass through its cut `through` (one starts once the pass
    /// going, if any, ends).
    pub async fn want(&self, through: i64) -> Result<(), StoreError> {
        let result = self
            .update()
            .update_expression("SET #wanted = :through")
            .condition_expression("attribute_not_exists(#wanted) OR #wanted < :through")
            .expression_attribute_names("#wanted", WANTED)
            .expression_attribute_values(":through", AttributeValue::N(through.to_string()))
            .send()
            .await;
        condition_held("UpdateItem", result).map(drop)
    }
}
