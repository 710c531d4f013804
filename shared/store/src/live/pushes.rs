//! The LivePushes table: an item's watch row and its buckets' push claims, as the
//! [`live`](super) module describes them.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use likes_core::live::watch_key;
use likes_core::pipeline::Counts;
use likes_core::ItemId;

use super::CONNECTION_TTL_SECONDS;
use crate::batch;
use crate::error::condition_held;
use crate::rows::attr::{
    self, CLAIMED_AT, EXPIRES_AT, FINISHED, FINISHED_AT, ITEM_ID, PUSHED_AS_OF,
    PUSHED_DISLIKE_COUNT, PUSHED_LIKE_COUNT,
};
use crate::rows::{self, number, Item, PushRow, WatchRow};
use crate::StoreError;

/// An item is pushed at most once in this long.
pub const PUSH_INTERVAL_MS: i64 = 1000;
/// A push claim whose fan-out never finished (its invocation died) is taken over after this.
pub const PUSH_LEASE_MS: i64 = 10_000;
/// Push claims of items that stopped changing are dropped a day on.
const PUSH_TTL_SECONDS: i64 = 24 * 3600;

/// What taking a bucket's push claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushClaim {
    /// This caller pushes to the bucket now, then calls [`PushClaims::finish`]; `pushed` is
    /// what the bucket's last finished counts push sent (`None` after a stale push, or before
    /// any).
    Won { pushed: Option<Counts> },
    /// A finished push already carried counts honest up to the `as_of` asked for.
    Covered,
    /// The last push finished less than a second ago, or still runs: try again at `retry_at`
    /// (epoch millis).
    Busy { retry_at: i64 },
}

/// The items' watch rows and their buckets' push claims (LivePushes). Cheap to clone.
#[derive(Debug, Clone)]
pub struct PushClaims {
    client: Client,
    table: String,
}

impl PushClaims {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// The buckets of each of `items` that may hold an open subscription at `now_s`, read
    /// strongly consistent (a subscribe writes the row just before its subscriptions). Items
    /// nobody watches are absent.
    pub async fn watched(
        &self,
        items: &[ItemId],
        now_s: i64,
    ) -> Result<BTreeMap<ItemId, Vec<u32>>, StoreError> {
        let keys = items
            .iter()
            .map(|item| Item::from([(ITEM_ID.to_owned(), AttributeValue::S(item.to_string()))]))
            .collect();
        let found = batch::get_all(&self.client, &self.table, keys, |request| {
            request.consistent_read(true)
        })
        .await?;
        let mut watched = BTreeMap::new();
        for row in found {
            let row: WatchRow = rows::from_item(row)?;
            let buckets = row.watched(now_s);
            if !buckets.is_empty() {
                let item = ItemId::parse(&row.item_id)
                    .map_err(|err| StoreError::Corrupt(format!("watch row: {err}")))?;
                watched.insert(item, buckets);
            }
        }
        Ok(watched)
    }

    /// Records that a subscription in `bucket` of `item`'s watchers may be open until
    /// `until_s`, unless the row already covers `end_s` (when its connection closes at the
    /// latest). Returns until when the bucket is now known to be watched. The row expires
    /// (TTL) a connection's lifetime after its last write, when none of its buckets can
    /// still be watched.
    pub async fn watch(
        &self,
        item: &ItemId,
        bucket: u32,
        until_s: i64,
        end_s: i64,
        now_s: i64,
    ) -> Result<i64, StoreError> {
        let watched = attr::watched(bucket);
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(ITEM_ID, AttributeValue::S(item.to_string()))
            .update_expression("SET #watched = :until, #expires = :expires")
            .condition_expression("attribute_not_exists(#watched) OR #watched < :end")
            .expression_attribute_names("#watched", &watched)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":until", number(until_s))
            .expression_attribute_values(":end", number(end_s))
            .expression_attribute_values(":expires", number(now_s + CONNECTION_TTL_SECONDS))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match update {
            Ok(_) => Ok(until_s),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(refused)) => {
                    // Refused only when the bucket's cover exists and reaches `end_s`.
                    let row: WatchRow =
                        rows::from_item(refused.item().cloned().unwrap_or_default())?;
                    row.numbers.get(&watched).copied().ok_or_else(|| {
                        StoreError::Corrupt(format!("a refused watch row has no {watched}"))
                    })
                }
                _ => Err(StoreError::aws("UpdateItem", err)),
            },
        }
    }

    /// Takes the claim of `bucket` of `item`'s watchers at `now_ms`: on condition that its
    /// last push finished at least [`PUSH_INTERVAL_MS`] ago (or its lease ran out), so a
    /// watcher's messages of one item are a second apart however long a fan-out takes, and,
    /// with `needed_as_of`, that no finished push already covered it. One conditional write,
    /// whichever way it goes; a refusal returns the row, which tells the two apart.
    pub async fn claim(
        &self,
        item: &ItemId,
        bucket: u32,
        now_ms: i64,
        needed_as_of: Option<i64>,
    ) -> Result<PushClaim, StoreError> {
        let mut condition = "(attribute_not_exists(#at) OR #at < :abandoned OR \
             (#finished = #at AND #finished_at <= :interval))"
            .to_owned();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(ITEM_ID, AttributeValue::S(watch_key(item, bucket)))
            .update_expression("SET #at = :now, #expires = :expires")
            .expression_attribute_names("#at", CLAIMED_AT)
            .expression_attribute_names("#finished", FINISHED)
            .expression_attribute_names("#finished_at", FINISHED_AT)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":now", number(now_ms))
            .expression_attribute_values(":interval", number(now_ms - PUSH_INTERVAL_MS))
            .expression_attribute_values(":abandoned", number(now_ms - PUSH_LEASE_MS))
            .expression_attribute_values(":expires", number(now_ms / 1000 + PUSH_TTL_SECONDS))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some(needed) = needed_as_of {
            condition.push_str(" AND (attribute_not_exists(#pushed) OR #pushed < :needed)");
            update = update
                .expression_attribute_names("#pushed", PUSHED_AS_OF)
                .expression_attribute_values(":needed", number(needed));
        }
        match update.condition_expression(condition).send().await {
            Ok(output) => {
                let row = match output.attributes {
                    Some(row) => rows::from_item::<PushRow>(row)?,
                    None => PushRow::default(),
                };
                let pushed = match (row.pushed_like_count, row.pushed_dislike_count) {
                    (Some(like_count), Some(dislike_count)) => Some(Counts {
                        like_count,
                        dislike_count,
                    }),
                    _ => None,
                };
                Ok(PushClaim::Won { pushed })
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(refused)) => {
                    let row = match refused.item() {
                        Some(row) => rows::from_item::<PushRow>(row.clone())?,
                        None => PushRow::default(),
                    };
                    let covered =
                        matches!((row.pushed_as_of, needed_as_of), (Some(p), Some(n)) if p >= n);
                    let claimed_at = row.claimed_at.unwrap_or(now_ms);
                    let retry_at = match (row.finished, row.finished_at) {
                        (Some(finished), Some(at)) if finished == claimed_at => at,
                        _ => claimed_at,
                    } + PUSH_INTERVAL_MS;
                    Ok(if covered {
                        PushClaim::Covered
                    } else {
                        PushClaim::Busy { retry_at }
                    })
                }
                _ => Err(StoreError::aws("UpdateItem", err)),
            },
        }
    }

    /// Marks the bucket's push claimed at `claimed_at` finished at `now_ms`. A counts push
    /// (`Some`) records what it sent and its `as_of` (never lowering the newest one
    /// recorded); a stale push (`None`) forgets both, so the next event's counts are pushed
    /// whatever they hold.
    pub async fn finish(
        &self,
        item: &ItemId,
        bucket: u32,
        claimed_at: i64,
        now_ms: i64,
        pushed: Option<(Counts, Option<i64>)>,
    ) -> Result<(), StoreError> {
        let finish = |raise: bool| {
            let mut update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(ITEM_ID, AttributeValue::S(watch_key(item, bucket)))
                .expression_attribute_names("#at", CLAIMED_AT)
                .expression_attribute_names("#finished", FINISHED)
                .expression_attribute_names("#finished_at", FINISHED_AT)
                .expression_attribute_values(":now", number(now_ms))
                .expression_attribute_names("#likes", PUSHED_LIKE_COUNT)
                .expression_attribute_names("#dislikes", PUSHED_DISLIKE_COUNT)
                .expression_attribute_values(":claimed", number(claimed_at))
                .condition_expression("#at = :claimed");
            match pushed {
                Some((counts, as_of)) => {
                    update = update
                        .expression_attribute_values(":l", number(counts.like_count))
                        .expression_attribute_values(":d", number(counts.dislike_count));
                    match as_of.filter(|_| raise) {
                        Some(as_of) => update
                            .update_expression(
                                "SET #finished = :claimed, #finished_at = :now, #likes = :l, #dislikes = :d, #pushed = :a",
                            )
                            .condition_expression(
                                "#at = :claimed AND (attribute_not_exists(#pushed) OR #pushed <= :a)",
                            )
                            .expression_attribute_names("#pushed", PUSHED_AS_OF)
                            .expression_attribute_values(":a", number(as_of)),
                        None => update
                            .update_expression("SET #finished = :claimed, #finished_at = :now, #likes = :l, #dislikes = :d"),
                    }
                }
                None => update
                    .update_expression(
                        "SET #finished = :claimed, #finished_at = :now REMOVE #likes, #dislikes, #pushed",
                    )
                    .expression_attribute_names("#pushed", PUSHED_AS_OF),
            }
            .send()
        };
        let has_as_of = pushed.is_some_and(|(_, as_of)| as_of.is_some());
        if has_as_of && condition_held("UpdateItem", finish(true).await)? {
            return Ok(());
        }
        // Refused: a newer as_of is recorded already, or the lease ran out and another push
        // took the claim (then there is nothing of ours to finish).
        condition_held("UpdateItem", finish(false).await).map(drop)
    }
}
