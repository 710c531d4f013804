//! The Likers table: who liked an item, derived from the event log. One entry per (item,
//! user) in the item's bucket (PK `bucket` = `item_id#<n>`, SK `user_id`) holding the order
//! of the last flip applied to it (`row_created`, `op_id`); while the user likes the item it also holds its
//! `position` (liked_at then user id) and `liked_at`, which put it in the `by_position`
//! index the pages read. An unliked entry is a tombstone (no position, a TTL). Beside them,
//! per item, the occupancy row (`item_id#occupied` / `#`) lists the buckets that ever held a
//! liked entry, so a page reads only those.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::likers::{
    bucket_key, bucket_of, occupancy_key, position, LikeAt, Liker, LikerChange, LikerUpdate,
    PageFill, RunPart, RunRead, Step, LIKER_BUCKETS,
};
use likes_core::{ItemId, LikersCursor};

use crate::error::condition_held;
use crate::rows::attr::{
    BUCKET, DISLIKED, EXPIRES_AT, LIKED_AT, OCCUPIED, OP_ID, POSITION, ROW_CREATED, USER_ID,
};
use crate::rows::{self, number, Item, LikedEntryRow, LikerKey, LikerRow, OccupancyRow};
use crate::{StoreError, Viewer};

/// The index of liked entries per bucket, by position.
pub const POSITION_INDEX: &str = "by_position";
/// The occupancy row's sort key.
const OCCUPANCY_SORT_KEY: &str = "#";
/// Buckets a container remembers as marked occupied; past it, it forgets them all and marks
/// again (an idempotent write each).
const MARKED_CAPACITY: usize = 100_000;

pub use likes_core::likers::LikersPage;

#[derive(Debug, Clone)]
pub struct LikersStore {
    client: Client,
    table: String,
    /// Buckets this container marked occupied: a viral item's are marked once per
    /// container, not once per like.
    marked: Arc<Mutex<HashSet<String>>>,
}

impl LikersStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            marked: Arc::default(),
        }
    }

    /// Lists the buckets the liked entries among `updates` go to in their items' occupancy
    /// rows, before any is written, so a reader that skips unlisted buckets never skips a
    /// liked entry: one ADD per item for the buckets this container has not marked yet. A
    /// batch of a viral item's likes marks most of its buckets at once, so the item's row
    /// takes about one write per container, not one per bucket or like. A bucket is never
    /// unlisted: one emptied later costs a reader an empty Query.
    pub async fn mark_occupied<'u>(
        &self,
        updates: impl IntoIterator<Item = &'u LikerUpdate>,
    ) -> Result<(), StoreError> {
        let mut unmarked: BTreeMap<&ItemId, BTreeSet<u32>> = BTreeMap::new();
        {
            let marked = self.marked.lock().expect("marked buckets");
            for update in updates {
                if matches!(update.change, LikerChange::Liked { .. })
                    && !marked.contains(&update.bucket_key())
                {
                    unmarked
                        .entry(&update.item_id)
                        .or_default()
                        .insert(update.bucket);
                }
            }
        }
        for (item, buckets) in unmarked {
            self.client
                .update_item()
                .table_name(&self.table)
                .key(BUCKET, AttributeValue::S(occupancy_key(item)))
                .key(USER_ID, AttributeValue::S(OCCUPANCY_SORT_KEY.into()))
                .update_expression("ADD #occupied :buckets")
                .expression_attribute_names("#occupied", OCCUPIED)
                .expression_attribute_values(
                    ":buckets",
                    AttributeValue::Ns(buckets.iter().map(u32::to_string).collect()),
                )
                .send()
                .await
                .map_err(|err| StoreError::aws("UpdateItem", err))?;
            let mut marked = self.marked.lock().expect("marked buckets");
            if marked.len() + buckets.len() > MARKED_CAPACITY {
                marked.clear();
            }
            marked.extend(buckets.into_iter().map(|n| bucket_key(item, n)));
        }
        Ok(())
    }

    /// The buckets of `item` that ever held a liked entry.
    async fn occupied(&self, item: &ItemId) -> Result<Vec<u32>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(BUCKET, AttributeValue::S(occupancy_key(item)))
            .key(USER_ID, AttributeValue::S(OCCUPANCY_SORT_KEY.into()))
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem", err))?;
        match output.item {
            None => Ok(Vec::new()),
            Some(item) => Ok(rows::from_item::<OccupancyRow>(item)?.occupied),
        }
    }

    /// Applies one flip to its entry, only over an older one (an earlier life of the row, or
    /// a lower `op_id` in the same life): `Ok(false)` when the entry already holds this flip
    /// or a later one (a duplicate, or a delivery out of order),
    /// which changes nothing. One conditional UpdateItem, so flips of one entry may be
    /// applied concurrently and in any order. An entry written before entries kept
    /// `row_created` is of a row's first life (0), so it is updatable too.
    pub async fn apply(&self, update: &LikerUpdate) -> Result<bool, StoreError> {
        // A no-op when the caller marked the batch first, as the consumer does.
        self.mark_occupied([update]).await?;
        let older_layout = if update.row_created_ms > 0 {
            "attribute_not_exists(#row_created)"
        } else {
            "(attribute_not_exists(#row_created) AND #op_id < :op_id)"
        };
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(BUCKET, AttributeValue::S(update.bucket_key()))
            .key(USER_ID, AttributeValue::S(update.user_id.clone()))
            .condition_expression(format!(
                "attribute_not_exists(#op_id) OR #row_created < :row_created \
                 OR (#row_created = :row_created AND #op_id < :op_id) OR {older_layout}"
            ))
            .expression_attribute_names("#op_id", OP_ID)
            .expression_attribute_names("#row_created", ROW_CREATED)
            .expression_attribute_values(":row_created", number(update.row_created_ms))
            .expression_attribute_names("#position", POSITION)
            .expression_attribute_names("#liked_at", LIKED_AT)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_names("#disliked", DISLIKED)
            .expression_attribute_values(":op_id", number(update.op_id));
        let request = match update.change {
            LikerChange::Liked { liked_at_ms } => request
                .update_expression(
                    "SET #op_id = :op_id, #row_created = :row_created, #position = :position, \
                     #liked_at = :liked_at REMOVE #expires_at, #disliked",
                )
                .expression_attribute_values(
                    ":position",
                    AttributeValue::S(position(liked_at_ms, &update.user_id)),
                )
                .expression_attribute_values(":liked_at", number(liked_at_ms)),
            LikerChange::Unliked { keep_until_ms } => request
                .update_expression(
                    "SET #op_id = :op_id, #row_created = :row_created, #expires_at = :expires_at \
                     REMOVE #position, #liked_at, #disliked",
                )
                .expression_attribute_values(":expires_at", number(keep_until_ms / 1000)),
            // Kept while it holds: no expiry, and no position (the likers' index skips it).
            LikerChange::Disliked => request
                .update_expression(
                    "SET #op_id = :op_id, #row_created = :row_created, #disliked = :true \
                     REMOVE #position, #liked_at, #expires_at",
                )
                .expression_attribute_values(":true", AttributeValue::Bool(true)),
        };
        condition_held("UpdateItem", request.send().await)
    }

    /// One page of a Scan of every liked entry (those with a position), from `start`: each as
    /// (item, user, its like), and where the next page starts (`None` after the last).
    pub async fn liked_page(
        &self,
        start: Option<Item>,
    ) -> Result<(Vec<(ItemId, String, LikeAt)>, Option<Item>), StoreError> {
        let output = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("attribute_exists(#position)")
            .expression_attribute_names("#position", POSITION)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| StoreError::aws("Scan", err))?;
        let entries = output
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|item| {
                let row: LikedEntryRow = rows::from_item(item)?;
                let item_id = row
                    .bucket
                    .rsplit_once('#')
                    .and_then(|(item, _)| ItemId::parse(item).ok())
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!("{:?} is no likers bucket", row.bucket))
                    })?;
                let like = LikeAt {
                    row_created_ms: row.row_created,
                    op_id: row.op_id,
                    liked_at_ms: row.liked_at,
                };
                Ok((item_id, row.user_id, like))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok((entries, output.last_evaluated_key))
    }

    /// Up to `limit` users who like or dislike `item` (their entries have a position or are
    /// disliked), in (bucket, user) order after the user `after` (from the first bucket with
    /// `None`): each bucket's partition Queried in turn, strongly consistent, reading on past
    /// pages the filter emptied. How an item's removal finds its reactors without an index
    /// on the item: every bucket holds a 64th of them.
    pub async fn reactors(
        &self,
        item: &ItemId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        let first = after.map_or(0, bucket_of);
        for n in first..LIKER_BUCKETS {
            let bucket = bucket_key(item, n);
            let mut start = after.filter(|_| n == first).map(|user| {
                HashMap::from([
                    (BUCKET.to_owned(), AttributeValue::S(bucket.clone())),
                    (USER_ID.to_owned(), AttributeValue::S(user.to_owned())),
                ])
            });
            loop {
                let output = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("#bucket = :bucket")
                    .filter_expression("attribute_exists(#position) OR attribute_exists(#disliked)")
                    .expression_attribute_names("#bucket", BUCKET)
                    .expression_attribute_names("#position", POSITION)
                    .expression_attribute_names("#disliked", DISLIKED)
                    .expression_attribute_values(":bucket", AttributeValue::S(bucket.clone()))
                    .projection_expression("#bucket, user_id")
                    .consistent_read(true)
                    .limit((limit - found.len()) as i32)
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .map_err(|err| StoreError::aws("Query (reactors)", err))?;
                for row in output.items.unwrap_or_default() {
                    found.push(rows::from_item::<LikerKey>(row)?.user_id);
                }
                if found.len() >= limit {
                    return Ok(found);
                }
                start = output.last_evaluated_key;
                if start.is_none() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The newest `limit` likers of `item` after `after` that `viewer` may see
    /// ([`PageFill`]): the occupancy row, then one Query of each occupied bucket's index
    /// (concurrently) for its newest `limit + 1` entries, merged; when the viewer may not
    /// see some, further Queries of the buckets the merge ran through.
    pub async fn page(
        &self,
        item: &ItemId,
        limit: usize,
        after: Option<&LikersCursor>,
        viewer: &mut Viewer<'_>,
    ) -> Result<LikersPage, StoreError> {
        let buckets: Vec<String> = self
            .occupied(item)
            .await?
            .into_iter()
            .map(|n| bucket_key(item, n))
            .collect();
        let mut fill = PageFill::new(buckets.len(), limit, after);
        loop {
            match fill.step() {
                Step::Read(reads) => {
                    let parts = self.read_runs(&buckets, &reads).await?;
                    fill.read(reads, parts);
                }
                Step::Judge(likers) => {
                    let shown = viewer.shown(likers).await?;
                    fill.judged(shown);
                }
                Step::Done(page) => return Ok(page),
            }
        }
    }

    /// Each read's bucket Queried on the `by_position` index, all at once: its newest
    /// `limit` entries after the position, and whether the Query stopped short of the end.
    async fn read_runs(
        &self,
        buckets: &[String],
        reads: &[RunRead],
    ) -> Result<Vec<RunPart>, StoreError> {
        let mut queries = tokio::task::JoinSet::new();
        for (n, read) in reads.iter().enumerate() {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(POSITION_INDEX)
                .expression_attribute_names("#bucket", BUCKET)
                .expression_attribute_values(
                    ":bucket",
                    AttributeValue::S(buckets[read.run].clone()),
                )
                .scan_index_forward(false)
                .limit(read.limit as i32);
            let query = match read.after.clone() {
                None => query.key_condition_expression("#bucket = :bucket"),
                Some(after) => query
                    .key_condition_expression("#bucket = :bucket AND #position < :after")
                    .expression_attribute_names("#position", POSITION)
                    .expression_attribute_values(":after", AttributeValue::S(after)),
            };
            queries.spawn(async move { (n, query.send().await) });
        }
        let mut parts = vec![(Vec::new(), false); queries.len()];
        while let Some(read) = queries.join_next().await {
            let (n, output) = read.map_err(StoreError::Task)?;
            let output = output.map_err(|err| StoreError::aws("Query", err))?;
            let likers = output
                .items
                .unwrap_or_default()
                .into_iter()
                .map(|item| {
                    let row: LikerRow = rows::from_item(item)?;
                    Ok(Liker {
                        user_id: row.user_id,
                        liked_at_ms: row.liked_at,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            // DynamoDB names a last key whenever it stopped at the Limit (or 1 MB).
            let more = output.last_evaluated_key.is_some_and(|key| !key.is_empty());
            parts[n] = (likers, more);
        }
        Ok(parts)
    }
}
