//! A moderator's retraction on the Reactions table: finding a user's reactions that are not
//! NONE, and turning one to NONE as an ordinary flip (its `op_id` bumped), marked with the
//! job and the reason so its stream record, and the event made of it, carry them.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use likes_core::moderation::Cause;
use likes_core::{ItemId, ReactionState, UserId};

use super::{key, string, ReactionsStore};
use crate::rows::attr::{CAUSE, REASON, RETRACTED_IN, RETRACTION, STATE, UPDATED_AT};
use crate::rows::{self, number, ReactionImage, ReactionKey};
use crate::StoreError;

/// What one retraction write came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retracted {
    /// This write turned the reaction to NONE.
    Now,
    /// This slice of the job had turned it already (the slice retried).
    Before,
    /// Nothing to retract: the row is NONE (an earlier slice's work among it), gone, or
    /// written after the cut.
    Nothing,
}

/// A retraction as each of its row writes states it.
#[derive(Debug, Clone, Copy)]
pub struct RetractionWrite<'a> {
    pub job_id: &'a str,
    pub reason: &'a str,
    pub cause: Cause,
    /// The job's step (its slice) making the write.
    pub step: u64,
    /// Rows written after this time are left alone (`None`: every row).
    pub cut_ms: Option<i64>,
}

impl ReactionsStore {
    /// Up to `limit` item ids of `user`'s reactions that are not NONE (and were written by
    /// the cut, when there is one), after `after` in key order; only `only`'s row when it is
    /// given. Strongly consistent, reading on past pages the filter emptied.
    pub async fn retractable_keys(
        &self,
        user: &UserId,
        only: Option<&ItemId>,
        after: Option<&str>,
        limit: u32,
        cut_ms: Option<i64>,
    ) -> Result<Vec<String>, StoreError> {
        let mut start = after
            .map(|item_id| {
                rows::to_item(&ReactionKey {
                    user_id: user.as_str().to_owned(),
                    item_id: item_id.to_owned(),
                })
            })
            .transpose()?;
        let mut filter = "attribute_exists(#state) AND #state <> :none".to_owned();
        if cut_ms.is_some() {
            filter.push_str(" AND #updated <= :cut");
        }
        let mut found = Vec::new();
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_values(":user", string(user.as_str()))
                .filter_expression(&filter)
                .expression_attribute_names("#state", STATE)
                .expression_attribute_values(":none", string(ReactionState::None.as_str()))
                .projection_expression("user_id, item_id")
                .consistent_read(true)
                .limit((limit as usize - found.len()) as i32)
                .set_exclusive_start_key(start);
            query = match only {
                Some(item) => query
                    .key_condition_expression("user_id = :user AND item_id = :item")
                    .expression_attribute_values(":item", string(item.as_str())),
                None => query.key_condition_expression("user_id = :user"),
            };
            if let Some(cut) = cut_ms {
                query = query
                    .expression_attribute_names("#updated", UPDATED_AT)
                    .expression_attribute_values(":cut", number(cut));
            }
            let output = query
                .send()
                .await
                .map_err(|err| StoreError::aws("Query (retractable)", err))?;
            for row in output.items.unwrap_or_default() {
                found.push(rows::from_item::<ReactionKey>(row)?.item_id);
            }
            start = output.last_evaluated_key;
            if start.is_none() || found.len() >= limit as usize {
                return Ok(found);
            }
        }
    }

    /// Turns `user`'s reaction to `item` to NONE for a retraction, unless it is NONE already
    /// or (with a cut) was written after it: one conditional UpdateItem, so a write of the
    /// user's that lands first wins and is judged again by the next sweep.
    pub async fn retract(
        &self,
        user: &str,
        item: &str,
        write: RetractionWrite<'_>,
        now_ms: i64,
    ) -> Result<Retracted, StoreError> {
        let user = UserId::parse(user).map_err(StoreError::Id)?;
        let item = ItemId::parse(item).map_err(StoreError::Id)?;
        let mut condition = "attribute_exists(#state) AND #state <> :none".to_owned();
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(&user, &item)))
            .update_expression(
                "SET #state = :none, op_id = op_id + :one, #updated = :now, #retraction = :job, #reason = :reason, #cause = :cause, #retracted_in = :step REMOVE liked_at",
            )
            .expression_attribute_names("#cause", CAUSE)
            .expression_attribute_names("#retracted_in", RETRACTED_IN)
            .expression_attribute_values(":cause", string(write.cause.as_str()))
            .expression_attribute_values(":step", number(write.step))
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#updated", UPDATED_AT)
            .expression_attribute_names("#retraction", RETRACTION)
            .expression_attribute_names("#reason", REASON)
            .expression_attribute_values(":none", string(ReactionState::None.as_str()))
            .expression_attribute_values(":one", number(1))
            .expression_attribute_values(":now", number(now_ms))
            .expression_attribute_values(":job", string(write.job_id))
            .expression_attribute_values(":reason", string(write.reason))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some(cut) = write.cut_ms {
            condition.push_str(" AND #updated <= :cut");
            request = request.expression_attribute_values(":cut", number(cut));
        }
        match request.condition_expression(condition).send().await {
            Ok(_) => Ok(Retracted::Now),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let old: ReactionImage =
                        rows::from_item(failed.item().cloned().unwrap_or_default())?;
                    let ours = old.state == Some(ReactionState::None)
                        && old.retraction.as_deref() == Some(write.job_id)
                        && old.retracted_in == Some(write.step);
                    Ok(if ours {
                        Retracted::Before
                    } else {
                        Retracted::Nothing
                    })
                }
                _ => Err(StoreError::aws("UpdateItem (retract)", err)),
            },
        }
    }
}
