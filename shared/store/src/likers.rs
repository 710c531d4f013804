//! The Likers table: who liked an item, derived from the event log. In the item's bucket
//! (PK `bucket` = `item_id#<n>`) an entry per like, keyed by its position (SK `entry`:
//! liked_at then user id), so a page reads a bucket newest first with no index; and per user
//! who dislikes the item a dislike entry (`~#<user>`, after every like). Each holds its
//! `user_id` and the order of the last flip applied to it (`row_created`, `op_id`); a liked
//! entry holds `liked_at`, a disliked one `disliked`, and an ended one is a tombstone (a
//! TTL). A like's entry also names the log records that claimed its like and its end for
//! the leaderboard (`liked_by`, `ended_by`: see [`LikersStore::claim`]). Which buckets an
//! item's likes went to, a page reads from the item's count rows
//! ([`crate::CountsStore::liked_buckets`]), so it reads only those.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::likers::{
    bucket_key, bucket_of, entry_user, LikeAt, Liker, LikerChange, LikerUpdate, PageFill, RunPart,
    RunRead, Step, LIKER_BUCKETS, LIKES_END,
};
use likes_core::{ItemId, LikersCursor};

use crate::error::condition_held;
use crate::pages::{query_until, query_while};
use crate::rows::attr::{
    BUCKET, DISLIKED, ENDED_BY, ENTRY, EXPIRES_AT, LIKED_AT, LIKED_BY, OP_ID, ROW_CREATED, USER_ID,
};
use crate::rows::{self, number, Item, LikedEntryRow, LikerKey, LikerRow};
use crate::{StoreError, Viewer};

/// Bucket Queries in flight at once when each bucket of an item is asked whether it holds a
/// like, and the entries each asks for at a time.
const BUCKETS_AT_ONCE: usize = 16;

pub use likes_core::likers::LikersPage;

#[derive(Debug, Clone)]
pub struct LikersStore {
    client: Client,
    table: String,
}

impl LikersStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Applies one write to its entry, only over an older flip's (an earlier life of the
    /// row, or a lower `op_id` in the same life): `Ok(false)` when the entry already holds
    /// this flip or a later one (a duplicate, or a delivery out of order), which changes
    /// nothing. One conditional UpdateItem, so the writes of one entry may be applied
    /// concurrently and in any order.
    pub async fn apply(&self, update: &LikerUpdate) -> Result<bool, StoreError> {
        let request = self.entry_write(update, "");
        condition_held("UpdateItem", request.send().await)
    }

    /// Applies a like's write or its end's (as [`apply`](Self::apply)) as the claim of the
    /// log record `by` it came in: `true` where the flip is this record's to score, `false`
    /// where another record of the log took it (the event was on the log twice). An entry
    /// is written by its like and by the like's end, so it keeps one claim for each
    /// (`liked_by`, `ended_by`): the write that applies the flip claims it, and a flip the
    /// entry is already past (its end came first, or a repair wrote it) is claimed on its
    /// own. A retry of the same record finds its own claim. One conditional UpdateItem; a
    /// second one only where the flip's write was refused and its claim is free.
    pub async fn claim(&self, update: &LikerUpdate, by: &str) -> Result<bool, StoreError> {
        let slot = match update.change {
            LikerChange::Liked { .. } => LIKED_BY,
            LikerChange::Unliked { .. } => ENDED_BY,
            LikerChange::Disliked | LikerChange::Undisliked { .. } => {
                return Err(StoreError::Corrupt(format!(
                    "{}'s dislike entry claims no flip",
                    update.user_id
                )))
            }
        };
        let write = self
            .entry_write(update, ", #slot = :by")
            .expression_attribute_names("#slot", slot)
            .expression_attribute_values(":by", AttributeValue::S(by.to_owned()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let held = match write.send().await {
            Ok(_) => return Ok(true),
            Err(err) => claim_held(err, slot)?,
        };
        match held {
            Some(holder) => Ok(holder == by),
            None => {
                let request = self
                    .update_entry(update)
                    .update_expression("SET #slot = :by")
                    .condition_expression(
                        "attribute_exists(#entry) AND (attribute_not_exists(#slot) OR #slot = :by)",
                    )
                    .expression_attribute_names("#entry", ENTRY)
                    .expression_attribute_names("#slot", slot)
                    .expression_attribute_values(":by", AttributeValue::S(by.to_owned()))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    );
                match request.send().await {
                    Ok(_) => Ok(true),
                    Err(err) => Ok(claim_held(err, slot)?.is_some_and(|holder| holder == by)),
                }
            }
        }
    }

    /// An UpdateItem of `update`'s entry.
    fn update_entry(&self, update: &LikerUpdate) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(BUCKET, AttributeValue::S(update.bucket_key()))
            .key(ENTRY, AttributeValue::S(update.entry()))
    }

    /// The conditional UpdateItem of `update`'s entry, over an older flip's only, with
    /// `more_sets` appended to its SET clause.
    fn entry_write(&self, update: &LikerUpdate, more_sets: &str) -> UpdateItemFluentBuilder {
        let request = self
            .update_entry(update)
            .condition_expression(
                "attribute_not_exists(#op_id) OR #row_created < :row_created \
                 OR (#row_created = :row_created AND #op_id < :op_id)",
            )
            .expression_attribute_names("#op_id", OP_ID)
            .expression_attribute_names("#row_created", ROW_CREATED)
            .expression_attribute_names("#user_id", USER_ID)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_values(":row_created", number(update.row_created_ms))
            .expression_attribute_values(":op_id", number(update.op_id))
            .expression_attribute_values(":user_id", AttributeValue::S(update.user_id.clone()));
        let set = format!(
            "SET #op_id = :op_id, #row_created = :row_created, #user_id = :user_id{more_sets}"
        );
        match update.change {
            LikerChange::Liked { liked_at_ms } => request
                .update_expression(format!("{set}, #liked_at = :liked_at REMOVE #expires_at"))
                .expression_attribute_names("#liked_at", LIKED_AT)
                .expression_attribute_values(":liked_at", number(liked_at_ms)),
            LikerChange::Unliked { keep_until_ms, .. } => request
                .update_expression(format!("{set}, #expires_at = :expires_at REMOVE #liked_at"))
                .expression_attribute_names("#liked_at", LIKED_AT)
                .expression_attribute_values(":expires_at", number(keep_until_ms / 1000)),
            // Kept while it holds: no expiry.
            LikerChange::Disliked => request
                .update_expression(format!("{set}, #disliked = :true REMOVE #expires_at"))
                .expression_attribute_names("#disliked", DISLIKED)
                .expression_attribute_values(":true", AttributeValue::Bool(true)),
            LikerChange::Undisliked { keep_until_ms } => request
                .update_expression(format!("{set}, #expires_at = :expires_at REMOVE #disliked"))
                .expression_attribute_names("#disliked", DISLIKED)
                .expression_attribute_values(":expires_at", number(keep_until_ms / 1000)),
        }
    }

    /// One page of a Scan of every liked entry (those with `liked_at`), from `start`: each as
    /// (item, user, its like), and where the next page starts (`None` after the last).
    pub async fn liked_page(
        &self,
        start: Option<Item>,
    ) -> Result<(Vec<(ItemId, String, LikeAt)>, Option<Item>), StoreError> {
        let output = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("attribute_exists(#liked_at)")
            .expression_attribute_names("#liked_at", LIKED_AT)
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

    /// Up to `limit` entries of users who like or dislike `item` (liked or disliked
    /// entries), in (bucket, entry) order after the entry `after` (from the first bucket with
    /// `None`); [`entry_user`] names each one's user. Each bucket's partition is Queried in
    /// turn, strongly consistent, reading on past pages the filter emptied. How an item's
    /// removal finds its reactors without an index on the item: the buckets hold them in
    /// even shares.
    pub async fn reactors(
        &self,
        item: &ItemId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        let first = after.map_or(0, |entry| bucket_of(entry_user(entry)));
        for n in first..LIKER_BUCKETS {
            let bucket = bucket_key(item, n);
            let start = after.filter(|_| n == first).map(|entry| {
                HashMap::from([
                    (BUCKET.to_owned(), AttributeValue::S(bucket.clone())),
                    (ENTRY.to_owned(), AttributeValue::S(entry.to_owned())),
                ])
            });
            let wanted = limit - found.len();
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#bucket = :bucket")
                .filter_expression("attribute_exists(#liked_at) OR attribute_exists(#disliked)")
                .expression_attribute_names("#bucket", BUCKET)
                .expression_attribute_names("#entry", ENTRY)
                .expression_attribute_names("#liked_at", LIKED_AT)
                .expression_attribute_names("#disliked", DISLIKED)
                .expression_attribute_values(":bucket", AttributeValue::S(bucket))
                .projection_expression("#entry")
                .consistent_read(true)
                .limit(wanted as i32)
                .set_exclusive_start_key(start);
            let entry = |row| Ok(rows::from_item::<LikerKey>(row)?.entry);
            found.extend(query_while(query, entry, |rows| rows.len() < wanted).await?);
            if found.len() >= limit {
                found.truncate(limit);
                return Ok(found);
            }
        }
        Ok(found)
    }

    /// The buckets of `item` that hold a liked entry: each bucket Queried (a few at once)
    /// until its first like, past its tombstones. How a repair that corrects an item's count
    /// lists the buckets of likes the aggregator never took (see
    /// [`crate::reconciliation::ReconciliationStore::list_liked_buckets`]).
    pub async fn buckets_with_likes(&self, item: &ItemId) -> Result<BTreeSet<u32>, StoreError> {
        let asks = (0..LIKER_BUCKETS).map(|n| {
            let query = self
                .likes_below(bucket_key(item, n), LIKES_END.to_owned())
                .projection_expression("#entry")
                .limit(BUCKETS_AT_ONCE as i32);
            async move {
                let likes = query_while(query, Ok, |likes| likes.is_empty()).await?;
                Ok::<_, StoreError>((n, !likes.is_empty()))
            }
        });
        let answers: Vec<(u32, bool)> = stream::iter(asks)
            .buffer_unordered(BUCKETS_AT_ONCE)
            .try_collect()
            .await?;
        Ok(answers
            .into_iter()
            .filter(|(_, liked)| *liked)
            .map(|(n, _)| n)
            .collect())
    }

    /// The newest `limit` likers of `item` after `after` that `viewer` may see
    /// ([`PageFill`]), from the buckets `listed` (the ones the item's count rows list): one
    /// Query of each (concurrently) for its newest `limit + 1` likes, merged; when the viewer
    /// may not see some, further Queries of the buckets the merge ran through.
    pub async fn page(
        &self,
        item: &ItemId,
        listed: &[u32],
        limit: usize,
        after: Option<&LikersCursor>,
        viewer: &mut Viewer<'_>,
    ) -> Result<LikersPage, StoreError> {
        let buckets: Vec<String> = listed.iter().map(|n| bucket_key(item, *n)).collect();
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

    /// Each read's bucket Queried, all at once: its newest `limit` likes below the position
    /// (below every like with `None`), and whether the bucket holds more past them.
    async fn read_runs(
        &self,
        buckets: &[String],
        reads: &[RunRead],
    ) -> Result<Vec<RunPart>, StoreError> {
        let mut queries = tokio::task::JoinSet::new();
        for (n, read) in reads.iter().enumerate() {
            let store = self.clone();
            let (bucket, read) = (buckets[read.run].clone(), read.clone());
            queries.spawn(async move { (n, store.newest_likes(bucket, read).await) });
        }
        let mut parts = vec![(Vec::new(), false); queries.len()];
        while let Some(read) = queries.join_next().await {
            let (n, part) = read.map_err(StoreError::Task)?;
            parts[n] = part?;
        }
        Ok(parts)
    }

    /// A Query of `bucket`'s liked entries below the entry `below` (tombstones filtered
    /// out): what a page and a repair's bucket check read.
    fn likes_below(&self, bucket: String, below: String) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#bucket = :bucket AND #entry < :below")
            .filter_expression("attribute_exists(#liked_at)")
            .expression_attribute_names("#bucket", BUCKET)
            .expression_attribute_names("#entry", ENTRY)
            .expression_attribute_names("#liked_at", LIKED_AT)
            .expression_attribute_values(":bucket", AttributeValue::S(bucket))
            .expression_attribute_values(":below", AttributeValue::S(below))
    }

    /// One bucket's newest `read.limit` likes below `read.after`, Queried newest first; the
    /// ended likes (tombstones) among them are read and left out, and the Query goes on past
    /// them until it has the likes or reaches the bucket's first entry.
    async fn newest_likes(&self, bucket: String, read: RunRead) -> Result<RunPart, StoreError> {
        let below = read.after.unwrap_or_else(|| LIKES_END.to_owned());
        let query = self
            .likes_below(bucket, below)
            .scan_index_forward(false)
            .limit(read.limit as i32);
        let liker = |item| {
            let row: LikerRow = rows::from_item(item)?;
            Ok(Liker {
                user_id: row.user_id,
                liked_at_ms: row.liked_at,
            })
        };
        let (mut likers, stopped) =
            query_until(query, liker, |likers| likers.len() < read.limit).await?;
        let more = stopped || likers.len() > read.limit;
        likers.truncate(read.limit);
        Ok((likers, more))
    }
}

/// Who holds the claim `slot` of an entry whose claiming write was refused: the record
/// named there, `None` where it is free. Any other failure is the write's error.
fn claim_held(
    err: SdkError<UpdateItemError, HttpResponse>,
    slot: &str,
) -> Result<Option<String>, StoreError> {
    match err.as_service_error() {
        Some(UpdateItemError::ConditionalCheckFailedException(failed)) => Ok(failed
            .item()
            .and_then(|old| old.get(slot))
            .and_then(|holder| holder.as_s().ok())
            .cloned()),
        _ => Err(StoreError::aws("UpdateItem", err)),
    }
}
