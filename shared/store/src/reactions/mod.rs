//! The Reactions table: the source of truth. One row per (user, item).
//!
//! Row layout: `user_id` (PK), `item_id` (SK), `state`, `op_id` (bumped on every real flip),
//! `updated_at`, `created_at` (set by the write that creates the row, so the event log can
//! tell a row written again after an erasure from the one before it) and, only while LIKE,
//! `liked_at` (epoch millis; the sparse `by_liked_at` LSI).
//! Each recent idempotency key `h` (its 11-character hash) keeps three small attributes:
//! `k#h` = the requested state and time (`L|1732912345678`), `v#h` = the version the write
//! produced, `p#h` = the state it replaced. The last two are copied from the old row by the
//! update expression itself, so one write records what a replay must answer.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use likes_core::write;
use likes_core::{
    ItemId, LikedCursor, ReactionRow, ReactionState, UserId, WriteOutcome, WriteRequest,
};

use crate::rows::attr::{PREVIOUS_PREFIX, REQUEST_PREFIX, STATE, VERSION_PREFIX};
use crate::rows::{self, number, Item, LikedRow, ReactionKey, StateRow};
use crate::{batch, StoreError};

mod retraction;
mod row;

pub use retraction::{Retracted, RetractionWrite};
use row::{row_from_item, FlipExpression};

/// The sparse local secondary index on `liked_at`: only LIKE rows carry the attribute.
pub const LIKED_AT_INDEX: &str = "by_liked_at";

#[derive(Debug, Clone)]
pub struct ReactionsStore {
    client: Client,
    table: String,
}

/// One liked item, newest first in a [`LikedPage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikedItem {
    pub item_id: ItemId,
    pub liked_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikedPage {
    pub items: Vec<LikedItem>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<LikedCursor>,
}

impl ReactionsStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Sets a reaction with one conditional UpdateItem (no read first, no transaction).
    ///
    /// The condition is the request's [`WriteRequest::clauses`]. Either way DynamoDB returns
    /// the old row (`ALL_OLD`), and `likes-core` reads the outcome from it.
    pub async fn set(
        &self,
        user: &UserId,
        item: &ItemId,
        request: &WriteRequest,
        now_ms: i64,
    ) -> Result<WriteOutcome, StoreError> {
        let write = FlipExpression::new(request, now_ms);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(user, item)))
            .update_expression(write.update)
            .condition_expression(write.condition)
            .set_expression_attribute_names(Some(write.names))
            .set_expression_attribute_values(Some(write.values))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(output) => {
                let old = row_from_item(output.attributes.unwrap_or_default())?;
                let (outcome, after) = write::applied(old, request, now_ms);
                self.trim_keys(user, item, &after).await;
                Ok(outcome)
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let old = row_from_item(failed.item().cloned().unwrap_or_default())?;
                    Ok(write::refused(&old, request))
                }
                _ => Err(StoreError::aws("UpdateItem", err)),
            },
        }
    }

    /// Drops the oldest idempotency keys once the row holds too many, so it stays under 1 KB.
    ///
    /// Conditional on the version just written: if another flip landed meanwhile, that writer
    /// trims instead. The user's write already succeeded, so a failure here must not turn its
    /// answer into an error (the client would retry and get a replay anyway); it is logged,
    /// counted as the `KeyTrimFailures` metric, and the next flip of the row tries again.
    async fn trim_keys(&self, user: &UserId, item: &ItemId, row: &ReactionRow) {
        let stale = row.keys_to_trim();
        if stale.is_empty() {
            return;
        }
        let mut names = HashMap::new();
        let mut paths = Vec::new();
        for (i, key) in stale.iter().enumerate() {
            for prefix in [REQUEST_PREFIX, VERSION_PREFIX, PREVIOUS_PREFIX] {
                let placeholder = format!("#{}{i}", &prefix[..1]);
                names.insert(placeholder.clone(), format!("{prefix}{}", key.as_str()));
                paths.push(placeholder);
            }
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(user, item)))
            .update_expression(format!("REMOVE {}", paths.join(", ")))
            .condition_expression("op_id = :version")
            .set_expression_attribute_names(Some(names))
            .expression_attribute_values(":version", number(row.version))
            .send()
            .await;
        match result {
            Ok(_) => tracing::debug!(trimmed = stale.len(), "trimmed idempotency keys"),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(UpdateItemError::ConditionalCheckFailedException(_))
                ) => {}
            Err(err) => {
                tracing::error!(
                    error = %StoreError::aws("UpdateItem (trim keys)", err),
                    "could not trim idempotency keys; the next flip of this row retries"
                );
                crate::metrics::Report::new("Likes/Reactions")
                    .value("KeyTrimFailures", "Count", 1.0)
                    .emit();
            }
        }
    }

    /// The caller's reaction to an item, strongly consistent (read-your-writes).
    pub async fn get(&self, user: &UserId, item: &ItemId) -> Result<ReactionRow, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(user, item)))
            .consistent_read(true)
            .projection_expression("#s, op_id, updated_at")
            .expression_attribute_names("#s", STATE)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem", err))?;
        row_from_item(output.item.unwrap_or_default())
    }

    /// The caller's state for each of `items` (strongly consistent, so a reaction just set
    /// shows on the next browse page). Items never reacted to read as NONE.
    pub async fn states(
        &self,
        user: &UserId,
        items: &[ItemId],
    ) -> Result<HashMap<ItemId, ReactionState>, StoreError> {
        let mut states: HashMap<ItemId, ReactionState> = items
            .iter()
            .map(|item| (item.clone(), ReactionState::None))
            .collect();
        let keys = items.iter().map(|item| key(user, item)).collect();
        let found = batch::get_all(&self.client, &self.table, keys, |request| {
            request
                .consistent_read(true)
                .projection_expression("item_id, #s")
                .expression_attribute_names("#s", STATE)
        })
        .await?;
        for row in found {
            let row: StateRow = rows::from_item(row)?;
            states.insert(item_id(&row.item_id)?, row.state);
        }
        Ok(states)
    }

    /// One page of the caller's liked items, newest first, from the sparse `liked_at` LSI
    /// (strongly consistent: an LSI allows it).
    pub async fn liked_page(
        &self,
        user: &UserId,
        limit: usize,
        after: Option<&LikedCursor>,
    ) -> Result<LikedPage, StoreError> {
        let start = after
            .map(|cursor| {
                rows::to_item(&LikedRow {
                    user_id: user.as_str().to_owned(),
                    item_id: cursor.item_id.clone(),
                    liked_at: cursor.liked_at_ms,
                })
            })
            .transpose()?;
        // One more than asked for tells whether a next page exists, so the last page
        // carries no cursor.
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(LIKED_AT_INDEX)
            .key_condition_expression("user_id = :user")
            .expression_attribute_values(":user", string(user.as_str()))
            .scan_index_forward(false)
            .consistent_read(true)
            .limit(limit as i32 + 1)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| StoreError::aws("Query", err))?;
        let mut items = output
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|row| {
                let row: LikedRow = rows::from_item(row)?;
                Ok(LikedItem {
                    item_id: item_id(&row.item_id)?,
                    liked_at_ms: row.liked_at,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let next = (items.len() > limit).then(|| {
            items.truncate(limit);
            let last = &items[limit - 1];
            LikedCursor::new(last.liked_at_ms, &last.item_id)
        });
        Ok(LikedPage { items, next })
    }
}

impl ReactionsStore {
    /// Up to `limit` item ids of `user`'s rows after `after` (from the start with `None`),
    /// in key order: keys only, strongly consistent, so a row just written is seen.
    pub async fn item_keys(
        &self,
        user: &UserId,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let start = after
            .map(|item_id| {
                rows::to_item(&ReactionKey {
                    user_id: user.as_str().to_owned(),
                    item_id: item_id.to_owned(),
                })
            })
            .transpose()?;
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("user_id = :user")
            .expression_attribute_values(":user", string(user.as_str()))
            .projection_expression("user_id, item_id")
            .consistent_read(true)
            .limit(limit as i32)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| StoreError::aws("Query", err))?;
        output
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|row| Ok(rows::from_item::<ReactionKey>(row)?.item_id))
            .collect()
    }

    /// Deletes `user`'s rows of `items` (account erasure), 25 a BatchWriteItem, what
    /// DynamoDB leaves unprocessed sent again within bounds. Deleting a row that is gone
    /// already is no change, so a retry is harmless. Each removed row's REMOVE record takes
    /// its reaction out of the counts.
    pub async fn delete_rows(&self, user: &UserId, items: &[String]) -> Result<(), StoreError> {
        let requests = items
            .iter()
            .map(|item_id| {
                batch::delete(rows::to_item(&ReactionKey {
                    user_id: user.as_str().to_owned(),
                    item_id: item_id.clone(),
                })?)
            })
            .collect::<Result<_, _>>()?;
        batch::write_all(&self.client, &self.table, requests).await
    }
}

fn key(user: &UserId, item: &ItemId) -> Item {
    rows::to_item(&ReactionKey {
        user_id: user.as_str().to_owned(),
        item_id: item.as_str().to_owned(),
    })
    .expect("a key of two strings always serializes")
}

pub(super) fn string(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn item_id(stored: &str) -> Result<ItemId, StoreError> {
    ItemId::parse(stored).map_err(StoreError::Id)
}
