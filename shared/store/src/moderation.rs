//! The Moderation table (PK `key`): retraction jobs `r#<id>` (of a user's reactions, or of
//! every reaction to a removed item), per user a guard `u#<user>` that exists exactly while
//! one of their retractions runs, per removed item its mark `i#<item>` (kept for good, naming
//! its removal), and actions without a job `a#<id>`; and the suspension a retraction may put
//! on the user's RateLimits row. Every write is conditional: a job starts only where no guard
//! (or mark) is, a slice commits only at the step it read, and the last slice of a user's
//! retraction marks the job done and drops the guard in one transaction. Its stream drives
//! the retractor and puts every action on the event log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};
use aws_sdk_dynamodb::Client;
use likes_core::jobs::DONE_RETENTION_S;
use likes_core::moderation::{ModerationAction, RetractionJob, Target, REMOVAL_CACHE_MS};
use likes_core::{ItemId, JobId, JobStatus, UserId};

use crate::jobs::{self, JobRow, JobStart};
use crate::rows::{
    self, attr, number, ActionRow, Item, ModerationGuardRow, ModerationKey, RetractionRow,
    Suspension, ACTION_PREFIX, GUARD_PREFIX, REMOVED_PREFIX, RETRACTION_PREFIX,
};
use crate::StoreError;

#[derive(Debug, Clone)]
pub struct ModerationStore {
    client: Client,
    table: String,
    /// Where suspensions live: the RateLimits table, which every write of the user meets
    /// (only the moderation endpoints that suspend or lift are given it).
    rate_limits_table: Option<String>,
}

impl ModerationStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            rate_limits_table: None,
        }
    }

    /// The same, able to suspend users and lift suspensions on `rate_limits_table`.
    pub fn with_suspensions(mut self, rate_limits_table: impl Into<String>) -> Self {
        self.rate_limits_table = Some(rate_limits_table.into());
        self
    }

    fn rate_limits_table(&self) -> Result<&str, StoreError> {
        self.rate_limits_table
            .as_deref()
            .ok_or(StoreError::Unconfigured("RateLimits"))
    }

    /// Starts `job` unless a retraction of its user runs (or its item was removed), in one
    /// transaction: the user's guard or the item's mark put on condition it does not exist
    /// (a guard only checked, for a job that found nothing to retract and starts done), the
    /// job row, and with `suspend` the suspension on the user's RateLimits row. A refused
    /// guard comes back (`ALL_OLD`) naming the job, which is answered instead: the user's
    /// running retraction, or the item's removal whatever its state.
    pub async fn start_retraction(
        &self,
        job: &RetractionJob,
    ) -> Result<JobStart<RetractionJob>, StoreError> {
        let guard_key = guard_key(job);
        let guard = if job.status == JobStatus::Running {
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(rows::to_item(&ModerationGuardRow {
                    key: guard_key,
                    active_id: job.id.as_str().to_owned(),
                })?))
                .condition_expression("attribute_not_exists(#key)")
                .expression_attribute_names("#key", attr::KEY)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(StoreError::Request)?;
            TransactWriteItem::builder().put(put).build()
        } else {
            let check = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(key(guard_key)))
                .condition_expression("attribute_not_exists(#key)")
                .expression_attribute_names("#key", attr::KEY)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(StoreError::Request)?;
            TransactWriteItem::builder().condition_check(check).build()
        };
        let put_job = Put::builder()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&row_of(job))?))
            .condition_expression("attribute_not_exists(#key)")
            .expression_attribute_names("#key", attr::KEY)
            .build()
            .map_err(StoreError::Request)?;
        let mut actions = vec![guard, TransactWriteItem::builder().put(put_job).build()];
        if job.suspend {
            actions.push(self.suspend(job)?);
        }
        jobs::start_guarded(
            &self.client,
            "TransactWriteItems (retraction)",
            actions,
            job.clone(),
            |running| async move {
                let met = self.retraction(&running).await?;
                Ok(met.filter(|met| {
                    met.status == JobStatus::Running || matches!(met.target(), Target::Item { .. })
                }))
            },
        )
        .await
    }

    /// The suspension of `job`'s user: set on their RateLimits row, which stops expiring
    /// while it holds one.
    fn suspend(&self, job: &RetractionJob) -> Result<TransactWriteItem, StoreError> {
        let suspension = rows::to_attribute(&Suspension {
            by: job.requested_by.clone(),
            reason: job.reason.clone(),
            at: job.requested_at_ms,
            retraction: job.id.as_str().to_owned(),
        })?;
        let Target::User { user_id, .. } = job.target() else {
            unreachable!("only a user's retraction suspends");
        };
        let update = Update::builder()
            .table_name(self.rate_limits_table()?)
            .key(attr::USER_ID, AttributeValue::S(user_id.to_owned()))
            .update_expression("SET #susp = :susp REMOVE #exp")
            .expression_attribute_names("#susp", attr::SUSPENDED)
            .expression_attribute_names("#exp", attr::EXPIRES_AT)
            .expression_attribute_values(":susp", suspension)
            .build()
            .map_err(StoreError::Request)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Lets `user` write again, and keeps the action (`id`, by `by`) for the event log, in
    /// one transaction. Lifting no suspension is no change but still an action on record.
    pub async fn lift_suspension(
        &self,
        user: &UserId,
        id: &JobId,
        by: &UserId,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let lift = Update::builder()
            .table_name(self.rate_limits_table()?)
            .key(attr::USER_ID, AttributeValue::S(user.as_str().to_owned()))
            .update_expression("REMOVE #susp SET #exp = :exp")
            .expression_attribute_names("#susp", attr::SUSPENDED)
            .expression_attribute_names("#exp", attr::EXPIRES_AT)
            // The bucket it kept is forgotten: a user let back in starts with a full one.
            .expression_attribute_values(":exp", number(now_ms / 1000))
            .build()
            .map_err(StoreError::Request)?;
        let action = Put::builder()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&ActionRow {
                key: format!("{ACTION_PREFIX}{id}"),
                action: ModerationAction::LiftSuspension,
                user_id: user.as_str().to_owned(),
                by: by.as_str().to_owned(),
                created_at: now_ms,
                expires_at: now_ms / 1000 + DONE_RETENTION_S,
            })?))
            .build()
            .map_err(StoreError::Request)?;
        self.client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(lift).build())
            .transact_items(TransactWriteItem::builder().put(action).build())
            .send()
            .await
            .map_err(|err| StoreError::aws("TransactWriteItems (lift suspension)", err))?;
        Ok(())
    }

    /// Whether `item` was removed: its mark exists (strongly consistent).
    pub async fn is_removed(&self, item: &ItemId) -> Result<bool, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(removal_key(item))))
            .consistent_read(true)
            .projection_expression("#key")
            .expression_attribute_names("#key", attr::KEY)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem (removed item)", err))?;
        Ok(output.item.is_some())
    }

    /// Every removed item with the id of its removal: the marks, by a Scan of the table (a
    /// few rows per moderation action), page by page.
    pub async fn removals(&self) -> Result<Vec<(ItemId, JobId)>, StoreError> {
        let mut removals = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("begins_with(#key, :removed)")
                .expression_attribute_names("#key", attr::KEY)
                .expression_attribute_values(":removed", AttributeValue::S(REMOVED_PREFIX.into()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| StoreError::aws("Scan (removed items)", err))?;
            for row in page.items.unwrap_or_default() {
                let mark: ModerationGuardRow = rows::from_item(row)?;
                let corrupt =
                    |err| StoreError::Corrupt(format!("removal mark {}: {err}", mark.key));
                let item = ItemId::parse(&mark.key[REMOVED_PREFIX.len()..]).map_err(corrupt)?;
                let job = JobId::parse(&mark.active_id).map_err(corrupt)?;
                removals.push((item, job));
            }
            start = page.last_evaluated_key.filter(|key| !key.is_empty());
            if start.is_none() {
                return Ok(removals);
            }
        }
    }

    /// Retraction `id`, strongly consistent; `None` when it never existed or was forgotten.
    pub async fn retraction(&self, id: &JobId) -> Result<Option<RetractionJob>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(format!("{RETRACTION_PREFIX}{id}"))))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem (retraction)", err))?;
        output
            .item
            .map(|item| job_of(rows::from_item(item)?))
            .transpose()
    }

    /// Commits a slice of `job`: `retracted` more reactions, `next` planned for the
    /// following slice. Applies only while the job is at the step it was read at; `false`
    /// when another delivery committed that step already.
    pub async fn checkpoint(
        &self,
        job: &RetractionJob,
        retracted: u64,
        next: &[String],
    ) -> Result<bool, StoreError> {
        self.row(job)
            .checkpoint("UpdateItem (retraction checkpoint)", retracted, next)
            .await
    }

    /// Commits the last slice: `retracted` more reactions, the job done (and forgotten
    /// after [`DONE_RETENTION_S`], but for a removal, which its item's mark names for good),
    /// a user's guard removed, in one transaction at the step read. `false` when another
    /// delivery finished it already.
    pub async fn finish(
        &self,
        job: &RetractionJob,
        retracted: u64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.row(job)
            .finish(
                "TransactWriteItems (retraction done)",
                retracted,
                match job.target() {
                    Target::User { .. } => Some(key(guard_key(job))),
                    Target::Item { .. } => None,
                },
                now_ms,
            )
            .await
    }

    fn row(&self, job: &RetractionJob) -> JobRow<'_> {
        JobRow {
            client: &self.client,
            table: &self.table,
            key: key(format!("{RETRACTION_PREFIX}{}", job.id)),
            counter: attr::REACTIONS_RETRACTED,
            step: job.step,
        }
    }
}

/// The key of what guards `job`: its user's guard, or its item's mark.
fn guard_key(job: &RetractionJob) -> String {
    match job.target() {
        Target::User { user_id, .. } => format!("{GUARD_PREFIX}{user_id}"),
        Target::Item { item_id } => removal_key(item_id),
    }
}

fn removal_key(item: &ItemId) -> String {
    format!("{REMOVED_PREFIX}{item}")
}

fn key(key: String) -> Item {
    rows::to_item(&ModerationKey { key }).expect("a key of one string always serializes")
}

fn row_of(job: &RetractionJob) -> RetractionRow {
    RetractionRow {
        key: format!("{RETRACTION_PREFIX}{}", job.id),
        action: match job.target() {
            Target::User { .. } => ModerationAction::Retract,
            Target::Item { .. } => ModerationAction::RemoveItem,
        },
        user_id: job.user_id.clone(),
        item_id: job.item_id.as_ref().map(|item| item.as_str().to_owned()),
        reason: job.reason.clone(),
        suspend: job.suspend,
        by: job.requested_by.clone(),
        created_at: job.requested_at_ms,
        status: job.status,
        step: job.step,
        reactions_retracted: job.reactions_retracted,
        planned: job.planned.clone(),
        // A job that starts done is forgotten as one that finished.
        expires_at: (job.status == JobStatus::Done)
            .then_some(job.requested_at_ms / 1000 + DONE_RETENTION_S),
    }
}

/// The job a retraction row holds.
fn job_of(row: RetractionRow) -> Result<RetractionJob, StoreError> {
    let id = row
        .key
        .strip_prefix(RETRACTION_PREFIX)
        .ok_or_else(|| StoreError::Corrupt(format!("{} is not a retraction's key", row.key)))?;
    Ok(RetractionJob {
        id: JobId::parse(id).map_err(StoreError::Id)?,
        user_id: row.user_id,
        item_id: row
            .item_id
            .map(|item| ItemId::parse(&item))
            .transpose()
            .map_err(StoreError::Id)?,
        reason: row.reason,
        suspend: row.suspend,
        requested_by: row.by,
        requested_at_ms: row.created_at,
        status: row.status,
        step: row.step,
        reactions_retracted: row.reactions_retracted,
        planned: row.planned,
    })
}

/// Items' removals as this container last read them, each trusted for
/// [`REMOVAL_CACHE_MS`]: a viral item's writes and reads cost one read of its mark a second
/// per container, not one each. A removal is answered only after that long, so every write
/// that starts after its answer finds the mark.
#[derive(Debug, Clone)]
pub struct RemovedItems {
    store: ModerationStore,
    /// Shared by every clone in this container; never held across a call.
    seen: Arc<Mutex<HashMap<ItemId, (bool, i64)>>>,
}

/// Items a container remembers before it forgets the stale ones.
const REMOVALS_KEPT: usize = 10_000;

impl RemovedItems {
    pub fn new(store: ModerationStore) -> Self {
        Self {
            store,
            seen: Arc::default(),
        }
    }

    /// Whether `item` is removed, as read at most [`REMOVAL_CACHE_MS`] before `now_ms`.
    pub async fn is_removed(&self, item: &ItemId, now_ms: i64) -> Result<bool, StoreError> {
        let fresh = |at: i64| now_ms - at < REMOVAL_CACHE_MS;
        if let Some((removed, at)) = self.seen.lock().expect("removals").get(item) {
            if fresh(*at) {
                return Ok(*removed);
            }
        }
        let removed = self.store.is_removed(item).await?;
        let mut seen = self.seen.lock().expect("removals");
        if seen.len() >= REMOVALS_KEPT {
            seen.retain(|_, (_, at)| fresh(*at));
        }
        seen.insert(item.clone(), (removed, now_ms));
        Ok(removed)
    }
}
