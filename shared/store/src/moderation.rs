//! The Moderation table (PK `key`): retraction jobs `r#<id>`, per user a guard `u#<user>`
//! that exists exactly while one of their retractions runs, and actions without a job
//! `a#<id>`; and the suspension a retraction may put on the user's RateLimits row. Every
//! write is conditional: a job starts only where no guard is, a slice commits only at the
//! step it read, and the last slice marks the job done and drops the guard in one
//! transaction. Its stream drives the retractor and puts every action on the event log.

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};
use aws_sdk_dynamodb::Client;
use likes_core::jobs::DONE_RETENTION_S;
use likes_core::moderation::{ModerationAction, RetractionJob};
use likes_core::{ItemId, JobId, JobStatus, UserId};

use crate::jobs::{self, JobRow, JobStart};
use crate::rows::{
    self, attr, number, ActionRow, Item, ModerationGuardRow, ModerationKey, RetractionRow,
    Suspension, ACTION_PREFIX, GUARD_PREFIX, RETRACTION_PREFIX,
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

    /// Starts `job` unless a retraction of its user runs, in one transaction: the user's
    /// guard put on condition it does not exist (only checked, for a job that found nothing
    /// to retract and starts done), the job row, and with `suspend` the suspension on the
    /// user's RateLimits row. A refused guard comes back (`ALL_OLD`) naming the running job,
    /// which is answered instead.
    pub async fn start_retraction(
        &self,
        job: &RetractionJob,
    ) -> Result<JobStart<RetractionJob>, StoreError> {
        let guard_key = guard_key(&job.user_id);
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
                let job = self.retraction(&running).await?;
                Ok(job.filter(|job| job.status == JobStatus::Running))
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
        let update = Update::builder()
            .table_name(self.rate_limits_table()?)
            .key(attr::USER_ID, AttributeValue::S(job.user_id.clone()))
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
    /// after [`DONE_RETENTION_S`]), the user's guard removed, in one transaction at the step
    /// read. `false` when another delivery finished it already.
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
                key(guard_key(&job.user_id)),
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

fn guard_key(user_id: &str) -> String {
    format!("{GUARD_PREFIX}{user_id}")
}

fn key(key: String) -> Item {
    rows::to_item(&ModerationKey { key }).expect("a key of one string always serializes")
}

fn row_of(job: &RetractionJob) -> RetractionRow {
    RetractionRow {
        key: format!("{RETRACTION_PREFIX}{}", job.id),
        action: ModerationAction::Retract,
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
