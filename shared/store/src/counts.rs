//! The Counts table (derived, rebuildable) and the Claims table that makes its writes
//! exactly once.
//!
//! Counts rows: `item_id` (PK) and `shard` (SK) `D#<k>`, k < K, holding `like_count` and
//! `dislike_count`; an item's count is the sum of its rows (one Query of at most K small
//! rows). Pipeline heartbeats live beside them under the item id `#pipeline` (never a valid
//! item id) with sort keys `H#<k>`. Claims: `claim_id` = a chunk's first stream `eventID`,
//! `event_ids` = the chunk's eventIDs joined by commas, `expires_at` for TTL.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use likes_core::pipeline::{counts_as_of, Counts, Heartbeat};
use likes_core::{Delta, ItemId};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::StoreError;

const PIPELINE_ITEM: &str = "#pipeline";
const COUNT_ROW_PREFIX: &str = "D#";
const HEARTBEAT_ROW_PREFIX: &str = "H#";
const HEARTBEAT_ROWS: i64 = 16;
/// Heartbeats this far before the newest still bound the lag `as_of` subtracts.
const LAG_WINDOW_MS: i64 = 60_000;
/// A container re-reads the heartbeats at most this often: at a million count reads a
/// second, freshness must not cost a read per request.
const FRESHNESS_CACHE: Duration = Duration::from_secs(1);
/// At most this many item Queries in flight for one batch read.
const READ_CONCURRENCY: usize = 32;
/// Claims outlive the stream's 24 h retention and the mapping's retries by a wide margin:
/// no delivery of their records can come after they expire.
const CLAIM_TTL_SECONDS: i64 = 3 * 24 * 3600;
/// A transaction that conflicts with a concurrent one on the same count row is retried this
/// many times (the claim makes a retry harmless) before the chunk fails.
const CONFLICT_ATTEMPTS: u32 = 5;

type Item = HashMap<String, AttributeValue>;
/// When `as_of` was last computed, and its value.
type FreshnessCache = Arc<Mutex<Option<(Instant, Option<i64>)>>>;

/// Reads counts. Cheap to clone; clones share the freshness cache.
#[derive(Debug, Clone)]
pub struct CountsStore {
    client: Client,
    table: String,
    freshness: FreshnessCache,
}

impl CountsStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            freshness: Arc::default(),
        }
    }

    /// An item's counts: the sum of its count rows (eventually consistent), clamped at zero.
    pub async fn read(&self, item: &ItemId) -> Result<Counts, StoreError> {
        let mut sum = Delta::ZERO;
        for row in &self.rows(item.as_str(), COUNT_ROW_PREFIX).await? {
            sum += Delta {
                like: number(row, "like_count")?,
                dislike: number(row, "dislike_count")?,
            };
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
            let (item, counts) =
                joined.map_err(|err| StoreError::Corrupt(format!("read task: {err}")))?;
            all.insert(item, counts?);
        }
        Ok(all)
    }

    /// The rows under one partition key whose sort key starts with `prefix`: an item's count
    /// rows, or the pipeline's heartbeats. At most K small rows: one page.
    async fn rows(&self, partition: &str, prefix: &str) -> Result<Vec<Item>, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("item_id = :partition AND begins_with(#shard, :prefix)")
            .expression_attribute_names("#shard", "shard")
            .expression_attribute_values(":partition", AttributeValue::S(partition.to_owned()))
            .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_owned()))
            .send()
            .await
            .map_err(|err| StoreError::aws("Query", err))?;
        Ok(output.items.unwrap_or_default())
    }

    /// Epoch millis up to which counts are known complete (see
    /// [`likes_core::pipeline::counts_as_of`]); `None` before the pipeline applied anything.
    pub async fn as_of(&self) -> Result<Option<i64>, StoreError> {
        if let Some((read_at, as_of)) = *self.freshness.lock().expect("cache lock") {
            if read_at.elapsed() < FRESHNESS_CACHE {
                return Ok(as_of);
            }
        }
        let heartbeats = self
            .rows(PIPELINE_ITEM, HEARTBEAT_ROW_PREFIX)
            .await?
            .iter()
            .map(|row| {
                Ok(Heartbeat {
                    applied_at_ms: number(row, "applied_at")?,
                    lag_ms: number(row, "lag_ms")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let as_of = counts_as_of(&heartbeats, LAG_WINDOW_MS);
        *self.freshness.lock().expect("cache lock") = Some((Instant::now(), as_of));
        Ok(as_of)
    }
}

/// One chunk of a stream batch, ready to commit.
#[derive(Debug, Clone)]
pub struct Chunk<'a> {
    /// The chunk's first `eventID`: the claim's key.
    pub claim_id: &'a str,
    pub event_ids: Vec<&'a str>,
    /// Nonzero deltas per item; may be empty (the claim alone is still written).
    pub deltas: &'a BTreeMap<ItemId, Delta>,
    /// The count row (`D#<shard>`) this chunk adds to.
    pub shard: u32,
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
        for (item, delta) in chunk.deltas {
            let update = Update::builder()
                .table_name(&self.counts_table)
                .key("item_id", AttributeValue::S(item.as_str().to_owned()))
                .key(
                    "shard",
                    AttributeValue::S(format!("{COUNT_ROW_PREFIX}{}", chunk.shard)),
                )
                .update_expression(
                    "ADD like_count :like, dislike_count :dislike SET updated_at = :now",
                )
                .expression_attribute_values(":like", AttributeValue::N(delta.like.to_string()))
                .expression_attribute_values(
                    ":dislike",
                    AttributeValue::N(delta.dislike.to_string()),
                )
                .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
                .build()
                .map_err(|err| StoreError::Corrupt(err.to_string()))?;
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
            let err = match result {
                Ok(_) => return Ok(CommitOutcome::Committed),
                Err(err) => err,
            };
            let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
                err.as_service_error()
            else {
                return Err(StoreError::aws("TransactWriteItems", err));
            };
            let reasons = cancelled.cancellation_reasons();
            if let Some(claim) = reasons
                .first()
                .filter(|r| r.code() == Some("ConditionalCheckFailed"))
                .and_then(|r| r.item())
            {
                return Ok(CommitOutcome::AlreadyClaimed(listed_event_ids(claim)?));
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
            tokio::time::sleep(Duration::from_millis(25 << attempt)).await;
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
            .condition_expression("attribute_not_exists(claim_id)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(())
            }
            Err(err) => Err(StoreError::aws("PutItem", err)),
        }
    }

    /// Records that a batch was applied and how stale its oldest change was by then.
    pub async fn heartbeat(&self, beat: Heartbeat) -> Result<(), StoreError> {
        let row = beat.applied_at_ms.rem_euclid(HEARTBEAT_ROWS);
        self.client
            .update_item()
            .table_name(&self.counts_table)
            .key("item_id", AttributeValue::S(PIPELINE_ITEM.to_owned()))
            .key(
                "shard",
                AttributeValue::S(format!("{HEARTBEAT_ROW_PREFIX}{row}")),
            )
            .update_expression("SET applied_at = :at, lag_ms = :lag")
            .expression_attribute_values(":at", AttributeValue::N(beat.applied_at_ms.to_string()))
            .expression_attribute_values(":lag", AttributeValue::N(beat.lag_ms.to_string()))
            .send()
            .await
            .map_err(|err| StoreError::aws("UpdateItem", err))?;
        Ok(())
    }

    fn claim_put(
        &self,
        claim_id: &str,
        event_ids: &[&str],
        now_ms: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.claims_table)
            .item("claim_id", AttributeValue::S(claim_id.to_owned()))
            .item("event_ids", AttributeValue::S(event_ids.join(",")))
            .item("created_at", AttributeValue::N(now_ms.to_string()))
            .item(
                "expires_at",
                AttributeValue::N((now_ms / 1000 + CLAIM_TTL_SECONDS).to_string()),
            )
            .condition_expression("attribute_not_exists(claim_id)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|err| StoreError::Corrupt(err.to_string()))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}

fn listed_event_ids(claim: &Item) -> Result<Vec<String>, StoreError> {
    match claim.get("event_ids") {
        Some(AttributeValue::S(ids)) => Ok(ids.split(',').map(str::to_owned).collect()),
        other => Err(StoreError::Corrupt(format!("claim event_ids is {other:?}"))),
    }
}

fn number(row: &Item, name: &str) -> Result<i64, StoreError> {
    match row.get(name) {
        Some(AttributeValue::N(n)) => n
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("{name} = {n:?}"))),
        None => Ok(0),
        Some(other) => Err(StoreError::Corrupt(format!("{name} is {other:?}"))),
    }
}
