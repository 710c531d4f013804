//! The rows `as_of` is made of, on the Counts table beside the counts (none of their partition
//! keys is a valid item id, since `#` never appears in one):
//!
//! - `#wm#<shard id>` / `W`: a stream shard's watermark, written by the aggregator with its
//!   progress after each chunk (`stream_time`, and the last probe key it saw on that shard;
//!   see [`crate::counts::CountsWriter`]). One partition key per shard, so hundreds of shards
//!   never share one. A stream's shards roll over every few
//!   hours, so each row carries a TTL (`expires_at`) past the stream's retention from its last
//!   write: the rows of shards long gone leave the table.
//! - `#asof#<r>` / `A`, r < [`AS_OF_REPLICAS`]: the `as_of` the pulse computed from every
//!   shard's watermark, copied R times so a million count reads a second, each container
//!   reading at most once a second, spread over R partition keys.
//!
//! And on the Reactions table, the pulse's probe rows: `user_id` `#probe#<n>`, `item_id`
//! `#probe` (never a reaction: item ids cannot hold `#`), whose writes keep a quiet shard's
//! watermark moving.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;

use crate::batch;
use crate::rows::{self, AsOfRow, CountKey, Item, ProbeRow, WatermarkRow};
use crate::StoreError;

/// Copies of the computed `as_of`; readers pick one by the clock.
pub const AS_OF_REPLICAS: u32 = 16;
/// The item id of every probe row: not a valid item id, so no reaction collides with it.
pub const PROBE_ITEM: &str = "#probe";
/// Probe rows' user ids start with this.
pub const PROBE_USER_PREFIX: &str = "#probe#";
/// A container re-reads `as_of` at most this often.
const AS_OF_CACHE: Duration = Duration::from_secs(1);

/// When `as_of` was last read, and what it was.
type AsOfCache = Arc<Mutex<Option<(Instant, Option<i64>)>>>;

/// What the aggregator last recorded for one shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    /// Stream time (epoch millis) of the last record applied on the shard.
    pub stream_time_ms: i64,
    /// The last probe row seen on the shard: the pulse keeps writing it.
    pub probe_key: Option<String>,
}

const WATERMARK_PREFIX: &str = "#wm#";
/// The sort key of a shard's watermark row; its intents sort before it.
pub(crate) const WATERMARK_ROW: &str = "W";

fn key(item_id: String, shard: &str) -> Item {
    rows::to_item(&CountKey {
        item_id,
        shard: shard.to_owned(),
    })
    .expect("a key of two strings always serializes")
}

/// The partition key of a shard's watermark row and intents.
pub(crate) fn watermark_partition(shard_id: &str) -> String {
    format!("{WATERMARK_PREFIX}{shard_id}")
}

fn watermark_key(shard_id: &str) -> Item {
    key(watermark_partition(shard_id), WATERMARK_ROW)
}

fn as_of_id(replica: u32) -> String {
    format!("#asof#{replica}")
}

/// Reads and writes the freshness rows. Cheap to clone; clones share the `as_of` cache.
#[derive(Debug, Clone)]
pub struct FreshnessStore {
    client: Client,
    counts_table: String,
    cached: AsOfCache,
}

impl FreshnessStore {
    pub fn new(client: Client, counts_table: impl Into<String>) -> Self {
        Self {
            client,
            counts_table: counts_table.into(),
            cached: Arc::default(),
        }
    }

    /// The watermarks of the given shards (shards with none are absent).
    pub async fn watermarks(
        &self,
        shard_ids: &[String],
    ) -> Result<BTreeMap<String, Watermark>, StoreError> {
        let mut found = BTreeMap::new();
        let keys = shard_ids.iter().map(|id| watermark_key(id)).collect();
        for row in batch::get_all(&self.client, &self.counts_table, keys, |request| request).await?
        {
            let row: WatermarkRow = rows::from_item(row)?;
            found.insert(
                row.item_id.trim_start_matches(WATERMARK_PREFIX).to_owned(),
                Watermark {
                    stream_time_ms: row.stream_time,
                    probe_key: row.probe_key,
                },
            );
        }
        Ok(found)
    }

    /// Writes `as_of` to every replica, in one request. Unconditional: two pulses
    /// overlapping for a moment may leave a replica a little older than the other, which is
    /// still true (every flip before an older `as_of` is counted too).
    pub async fn publish_as_of(&self, as_of_ms: i64, now_ms: i64) -> Result<(), StoreError> {
        let rows = (0..AS_OF_REPLICAS)
            .map(|replica| {
                rows::to_item(&AsOfRow {
                    item_id: as_of_id(replica),
                    shard: "A".into(),
                    as_of: as_of_ms,
                    computed_at: now_ms,
                })
            })
            .collect::<Result<_, _>>()?;
        self.batch_put(&self.counts_table, rows).await
    }

    /// The last published `as_of`, read from one replica at most once a second per container.
    /// Never fails a count read: when the read fails the answer is `None` ("unknown"),
    /// reported as a metric, and tried again on the next request.
    pub async fn as_of(&self) -> Option<i64> {
        if let Some((read_at, as_of)) = *self.cached.lock().expect("cache lock") {
            if read_at.elapsed() < AS_OF_CACHE {
                return as_of;
            }
        }
        let replica =
            (likes_core::clock::now_ms().unsigned_abs() % u64::from(AS_OF_REPLICAS)) as u32;
        let read = self
            .client
            .get_item()
            .table_name(&self.counts_table)
            .set_key(Some(key(as_of_id(replica), "A")))
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem", err))
            .and_then(|out| {
                out.item
                    .map(|row| rows::from_item::<AsOfRow>(row).map(|row| row.as_of))
                    .transpose()
            });
        match read {
            Ok(as_of) => {
                *self.cached.lock().expect("cache lock") = Some((Instant::now(), as_of));
                as_of
            }
            Err(err) => {
                tracing::error!(error = %err, "could not read as_of; answering counts without it");
                crate::metrics::Report::new("Likes/Counts")
                    .value("FreshnessReadFailures", "Count", 1.0)
                    .emit();
                None
            }
        }
    }

    /// Writes probe rows (`#probe#<n>`, `#probe`) on the Reactions table: one stream record
    /// on whichever shard owns each key.
    pub async fn probe(
        &self,
        reactions_table: &str,
        probe_keys: &[String],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let rows = probe_keys
            .iter()
            .map(|key| {
                rows::to_item(&ProbeRow {
                    user_id: key,
                    item_id: PROBE_ITEM,
                    probed_at: now_ms,
                })
            })
            .collect::<Result<_, _>>()?;
        self.batch_put(reactions_table, rows).await
    }

    /// Puts `rows` with BatchWriteItem, asking again for what DynamoDB left unprocessed.
    async fn batch_put(&self, table: &str, rows: Vec<Item>) -> Result<(), StoreError> {
        let requests = rows.into_iter().map(batch::put).collect::<Result<_, _>>()?;
        batch::write_all(&self.client, table, requests).await
    }
}
