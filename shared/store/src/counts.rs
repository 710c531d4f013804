//! The Counts table (derived, rebuildable) and the Claims table that makes its writes
//! exactly once.
//!
//! Counts rows: partition key `item_id`, sort key `shard` = `D#<k>`, k < K, holding
//! `like_count` and `dislike_count`. An item's base partition (its id) holds the rows cold
//! writes go to, and, once the item has been hot, a marker row `H` whose `partitions` says how
//! many overflow partitions (`<item>#1..<item>#H`) its hot writes spread over (see
//! [`likes_core::pipeline::routing`]). An item's count is the sum of all those rows: one
//! Query for a cold item, one more per overflow partition for a hot one. The freshness rows
//! live here too ([`crate::freshness`]). Claims: `claim_id` = a chunk's first stream `eventID`,
//! `event_ids` = the chunk's eventIDs joined by commas, `expires_at` for TTL.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use likes_core::pipeline::{overflow_partition, CountTarget, Counts, RowDelta};
use likes_core::reconcile::{near_cut_attribute, subtotal_attributes};
use likes_core::{Delta, ItemId};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::error::{cancelled, condition_held};
use crate::freshness::FreshnessStore;
use crate::pages::query_all;
use crate::rows::attr::{CLAIM_ID, DISLIKE_COUNT, ITEM_ID, LIKE_COUNT, PARTITIONS, UPDATED_AT};
use crate::rows::{self, ClaimRow, CountKey, CountRow, Item};
use crate::StoreError;

const COUNT_ROW_PREFIX: &str = "D#";
/// The sort key of the overflow marker in an item's base partition.
pub(crate) const OVERFLOW_MARKER: &str = "H";
/// At most this many item Queries in flight for one batch read: a browse page's 40 in one go.
const READ_CONCURRENCY: usize = 40;
/// Claims outlive the stream's 24 h retention and the mapping's retries by a wide margin:
/// no delivery of their records can come after they expire.
const CLAIM_TTL_SECONDS: i64 = 3 * 24 * 3600;
/// A transaction that conflicts with a concurrent one on the same count row is retried this
/// many times (the claim makes a retry harmless) before the chunk fails.
const CONFLICT_ATTEMPTS: u32 = 5;

/// Reads counts. Cheap to clone; clones share the freshness cache.
#[derive(Debug, Clone)]
pub struct CountsStore {
    client: Client,
    table: String,
    freshness: FreshnessStore,
}

impl CountsStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        let table = table.into();
        Self {
            freshness: FreshnessStore::new(client.clone(), table.clone()),
            client,
            table,
        }
    }

    /// An item's counts: the sum of its count rows (eventually consistent), clamped at zero.
    /// The base partition says whether there are overflow partitions to add.
    pub async fn read(&self, item: &ItemId) -> Result<Counts, StoreError> {
        let base = self.rows(item.as_str()).await?;
        let mut sum = sum_counts(&base);
        let overflow = base
            .iter()
            .find(|row| row.shard == OVERFLOW_MARKER)
            .and_then(|marker| marker.partitions)
            .unwrap_or(0);
        let mut reads = JoinSet::new();
        for h in 1..=overflow {
            let store = self.clone();
            let partition = overflow_partition(item, h);
            reads.spawn(async move { store.rows(&partition).await });
        }
        while let Some(joined) = reads.join_next().await {
            let rows = joined.map_err(StoreError::Task)?;
            sum += sum_counts(&rows?);
        }
        let (counts, clamped) = Counts::clamped(sum);
        if clamped {
            crate::metrics::Report::new("Likes/Counts")
                .value("NegativeCountClamped", "Count", 1.0)
                .property("item_id", item.as_str())
                .emit();
            tracing::warn!(item_id = %item, like = sum.like, dislike = sum.dislike, "negative count clamped to zero");
        }
        Ok(counts)
    }

    /// Counts of many items, read concurrently (bounded); the first failure fails the call.
    pub async fn read_many(
        &self,
        items: &[ItemId],
    ) -> Result<BTreeMap<ItemId, Counts>, StoreError> {
        let permits = Arc::new(Semaphore::new(READ_CONCURRENCY));
        let mut reads = JoinSet::new();
        for item in items.iter().cloned() {
            let (store, permits) = (self.clone(), permits.clone());
            reads.spawn(async move {
                let _permit = permits
                    .acquire_owned()
                    .await
                    .expect("semaphore never closes");
                let counts = store.read(&item).await;
                (item, counts)
            });
        }
        let mut all = BTreeMap::new();
        while let Some(joined) = reads.join_next().await {
            let (item, counts) = joined.map_err(StoreError::Task)?;
            all.insert(item, counts?);
        }
        Ok(all)
    }

    /// Every row under one partition key: K count rows, the correction row and the overflow
    /// marker, read page by page (rows that carry many subtotals can pass 1 MB together, and
    /// `D#C` and the marker sort last).
    async fn rows(&self, partition: &str) -> Result<Vec<CountRow>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression(format!("{ITEM_ID} = :partition"))
            .expression_attribute_values(":partition", AttributeValue::S(partition.to_owned()));
        query_all(query)
            .await?
            .into_iter()
            .map(rows::from_item)
            .collect()
    }

    /// Epoch millis before which every flip is counted, or `None` when unknown (see
    /// [`FreshnessStore::as_of`]: never an error).
    pub async fn as_of(&self) -> Option<i64> {
        self.freshness.as_of().await
    }
}

/// The sum of the count rows among `rows` (other rows, like the marker, add nothing).
fn sum_counts(rows: &[CountRow]) -> Delta {
    rows.iter()
        .filter(|row| row.shard.starts_with(COUNT_ROW_PREFIX))
        .map(|row| Delta {
            like: row.like_count,
            dislike: row.dislike_count,
        })
        .fold(Delta::ZERO, |sum, row| sum + row)
}

/// One chunk of a stream batch, ready to commit.
#[derive(Debug, Clone)]
pub struct Chunk<'a> {
    /// The chunk's first `eventID`: the claim's key.
    pub claim_id: &'a str,
    pub event_ids: Vec<&'a str>,
    /// What the chunk adds to each count row; may be empty (the claim alone is still written).
    pub deltas: &'a BTreeMap<CountTarget, RowDelta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    /// The deltas were added and the claim written, in one transaction.
    Committed,
    /// An earlier delivery committed a chunk starting at the same record: here is what its
    /// claim lists.
    AlreadyClaimed(Vec<String>),
}

/// Writes counts exactly once: each chunk's deltas and its claim in one transaction.
#[derive(Debug, Clone)]
pub struct CountsWriter {
    client: Client,
    counts_table: String,
    claims_table: String,
}

impl CountsWriter {
    pub fn new(
        client: Client,
        counts_table: impl Into<String>,
        claims_table: impl Into<String>,
    ) -> Self {
        Self {
            client,
            counts_table: counts_table.into(),
            claims_table: claims_table.into(),
        }
    }

    /// Commits a chunk: one TransactWriteItems that puts the claim (on condition it does not
    /// exist) and ADDs each item's delta to its count row. A claim that exists already means
    /// an earlier delivery committed this chunk: nothing is added, and its list comes back.
    pub async fn commit(
        &self,
        chunk: &Chunk<'_>,
        now_ms: i64,
    ) -> Result<CommitOutcome, StoreError> {
        let mut actions = vec![self.claim_put(chunk.claim_id, &chunk.event_ids, now_ms)?];
        for (target, written) in chunk.deltas {
            let update = row_update(&self.counts_table, target, written, now_ms)?;
            actions.push(TransactWriteItem::builder().update(update).build());
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions.clone()))
                .send()
                .await;
            let Some((reasons, err)) = cancelled("TransactWriteItems", result)? else {
                return Ok(CommitOutcome::Committed);
            };
            if let Some(claim) = reasons
                .first()
                .filter(|r| r.code() == Some("ConditionalCheckFailed"))
                .and_then(|r| r.item())
            {
                let claim: ClaimRow = rows::from_item(claim.clone())?;
                return Ok(CommitOutcome::AlreadyClaimed(
                    claim.listed().map(str::to_owned).collect(),
                ));
            }
            // A concurrent chunk of another stream shard touched the same count row, or
            // DynamoDB throttled one of them: nothing was written, so trying again is safe.
            let retryable = reasons.iter().any(|r| {
                matches!(
                    r.code(),
                    Some(
                        "TransactionConflict" | "ThrottlingError" | "ProvisionedThroughputExceeded"
                    )
                )
            });
            if !retryable || attempt >= CONFLICT_ATTEMPTS {
                return Err(StoreError::aws("TransactWriteItems", err));
            }
            tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
        }
    }

    /// Hands the rest of a claim to the next batch: a continuation claim keyed by the first
    /// listed record this batch did not hold. An existing one (an earlier attempt wrote it)
    /// is left as it is.
    pub async fn continue_claim(&self, rest: &[String], now_ms: i64) -> Result<(), StoreError> {
        let Some(claim_id) = rest.first() else {
            return Ok(());
        };
        let ids: Vec<&str> = rest.iter().map(String::as_str).collect();
        let put = self.claim_put(claim_id, &ids, now_ms)?;
        let put = put.put.expect("claim_put builds a Put");
        let result = self
            .client
            .put_item()
            .table_name(put.table_name)
            .set_item(Some(put.item))
            .condition_expression(format!("attribute_not_exists({CLAIM_ID})"))
            .send()
            .await;
        condition_held("PutItem", result).map(drop)
    }

    /// Tells readers of `item` to add its overflow partitions `1..=partitions`. Written before
    /// the first chunk that writes one of them, so no overflow row is ever invisible to a
    /// reader; the marker only grows, so raising H later is safe.
    pub async fn mark_overflow(&self, item: &ItemId, partitions: u32) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.counts_table)
            .set_key(Some(count_key(
                item.as_str().to_owned(),
                OVERFLOW_MARKER.to_owned(),
            )))
            .update_expression("SET #partitions = :h")
            .condition_expression("attribute_not_exists(#partitions) OR #partitions < :h")
            .expression_attribute_names("#partitions", PARTITIONS)
            .expression_attribute_values(":h", AttributeValue::N(partitions.to_string()))
            .send()
            .await;
        // Refused: the marker already names as many partitions or more.
        condition_held("UpdateItem", result).map(drop)
    }

    fn claim_put(
        &self,
        claim_id: &str,
        event_ids: &[&str],
        now_ms: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let claim = ClaimRow {
            claim_id: claim_id.to_owned(),
            event_ids: event_ids.join(","),
            created_at: now_ms,
            expires_at: now_ms / 1000 + CLAIM_TTL_SECONDS,
        };
        let put = Put::builder()
            .table_name(&self.claims_table)
            .set_item(Some(rows::to_item(&claim)?))
            .condition_expression(format!("attribute_not_exists({CLAIM_ID})"))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(StoreError::Request)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}

/// The update one chunk makes to one count row: ADD to its totals, to the subtotal of each
/// epoch its changes were committed in, and to its count of changes near each cut.
fn row_update(
    table: &str,
    target: &CountTarget,
    written: &RowDelta,
    now_ms: i64,
) -> Result<Update, StoreError> {
    let mut adds = vec![
        (LIKE_COUNT.to_owned(), written.total.like),
        (DISLIKE_COUNT.to_owned(), written.total.dislike),
    ];
    for (epoch, delta) in &written.by_epoch {
        let (like, dislike) = subtotal_attributes(*epoch);
        adds.push((like, delta.like));
        adds.push((dislike, delta.dislike));
    }
    for (cut, changes) in &written.near_cuts {
        adds.push((near_cut_attribute(*cut), *changes as i64));
    }
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(count_key(
            target.partition_key(),
            format!("{COUNT_ROW_PREFIX}{}", target.row),
        )))
        .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()));
    let mut clauses = Vec::with_capacity(adds.len());
    for (i, (name, value)) in adds.into_iter().enumerate() {
        clauses.push(format!("#a{i} :a{i}"));
        update = update
            .expression_attribute_names(format!("#a{i}"), name)
            .expression_attribute_values(format!(":a{i}"), AttributeValue::N(value.to_string()));
    }
    update
        .update_expression(format!(
            "ADD {} SET {UPDATED_AT} = :now",
            clauses.join(", ")
        ))
        .build()
        .map_err(StoreError::Request)
}

fn count_key(item_id: String, shard: String) -> Item {
    rows::to_item(&CountKey { item_id, shard }).expect("a key of two strings always serializes")
}
