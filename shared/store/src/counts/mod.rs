//! The Counts table (derived, rebuildable): its reads here, the aggregator's exactly-once
//! writes in [`CountsWriter`].
//!
//! Counts rows: partition key `item_id`, sort key `shard` = `D#<k>`, k < K, holding
//! `like_count` and `dislike_count`, and `lbs`, the set of the item's likers buckets its likes
//! went to (an item's likers pages read the buckets its rows list). An item's base
//! partition (its id) holds the rows cold writes go to, and, once the item has been hot, a
//! marker row `H` whose `partitions` says how many overflow partitions
//! (`<item>#1..<item>#H`) its hot writes spread over (see
//! [`likes_core::pipeline::routing`]). An item's count is the sum of all those rows: one
//! Query for a cold item, one more per overflow partition for a hot one. Each stream shard's
//! progress and intents live here too, beside its watermark ([`crate::freshness`]).

mod intents;

pub use intents::{
    decode_intent, encode_intent, intent_note, Advance, CountIntent, CountsWriter, ShardCounting,
    ShardProgress, INTENT_NOTE_PREFIX, INTENT_PREFIX,
};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::pipeline::{overflow_partition, Counts};
use likes_core::{Delta, ItemId};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::freshness::FreshnessStore;
use crate::pages::query_all;
use crate::rows::attr::ITEM_ID;
use crate::rows::{self, CountKey, CountRow, Item};
use crate::StoreError;

const COUNT_ROW_PREFIX: &str = "D#";
/// The sort key of the overflow marker in an item's base partition.
pub(crate) const OVERFLOW_MARKER: &str = "H";
/// At most this many item Queries in flight for one batch read: a browse page's 40 in one go.
const READ_CONCURRENCY: usize = 40;

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
    pub async fn read(&self, item: &ItemId) -> Result<Counts, StoreError> {
        let sum = sum_counts(&self.item_rows(item, false).await?);
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

    /// The likers buckets of `item` its count rows list (eventually consistent): every
    /// bucket a counted like went to, in order. A bucket is never unlisted; one emptied later
    /// costs a likers page an empty Query.
    pub async fn liked_buckets(&self, item: &ItemId) -> Result<Vec<u32>, StoreError> {
        let rows = self.item_rows(item, false).await?;
        let listed: BTreeSet<u32> = rows.iter().flat_map(CountRow::liked_buckets).collect();
        Ok(listed.into_iter().collect())
    }

    /// An item's likes and dislikes as its count rows hold them now: read strongly consistent
    /// and summed as stored, not clamped (a removal's last check, which a drifted count must
    /// not pass).
    pub async fn stored_sum(&self, item: &ItemId) -> Result<Delta, StoreError> {
        Ok(sum_counts(&self.item_rows(item, true).await?))
    }

    /// Every row of an item: its base partition's, and those of the overflow partitions its
    /// marker names, read concurrently (strongly consistent when `consistent`).
    async fn item_rows(
        &self,
        item: &ItemId,
        consistent: bool,
    ) -> Result<Vec<CountRow>, StoreError> {
        let mut rows = self.rows(item.as_str(), consistent).await?;
        let overflow = rows
            .iter()
            .find(|row| row.shard == OVERFLOW_MARKER)
            .and_then(|marker| marker.partitions)
            .unwrap_or(0);
        let mut reads = JoinSet::new();
        for h in 1..=overflow {
            let store = self.clone();
            let partition = overflow_partition(item, h);
            reads.spawn(async move { store.rows(&partition, consistent).await });
        }
        while let Some(joined) = reads.join_next().await {
            rows.extend(joined.map_err(StoreError::Task)??);
        }
        Ok(rows)
    }

    /// Every row under one partition key: K count rows, the correction row and the overflow
    /// marker, read page by page (rows that carry many subtotals can pass 1 MB together, and
    /// `D#C` and the marker sort last).
    async fn rows(&self, partition: &str, consistent: bool) -> Result<Vec<CountRow>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(consistent)
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

fn count_key(item_id: String, shard: String) -> Item {
    rows::to_item(&CountKey { item_id, shard }).expect("a key of two strings always serializes")
}
