//! The Erasures table: one row per erasure job (`user_id`, `erasure_id`), and per user a
//! guard row `#active` that exists exactly while one of their jobs runs. Every write here is
//! conditional: a job starts only where no guard is, a slice commits only at the step it
//! read, and the last slice marks the job done and drops the guard in one transaction.

use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use likes_aws::AwsError;
use likes_core::erasure::ACTIVE_GUARD;
use likes_core::jobs::DONE_RETENTION_S;
use likes_core::{ErasureJob, JobId, JobStatus, UserId};

use crate::error::cancelled;
use crate::rows::{self, attr, number, ErasureGuardRow, ErasureKey, ErasureRow, Item};
use crate::StoreError;

/// Starts one request tries: a guard met on the first try may be dropped by its job
/// finishing before it is read (the next try then starts a new job), and two requests of
/// one user at once conflict.
const START_ATTEMPTS: usize = 3;

#[derive(Debug, Clone)]
pub struct ErasuresStore {
    client: Client,
    table: String,
}

/// What a request for a job (an erasure, a retraction) came to: a new job, or the one of
/// the user's that was running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStart<J> {
    Started(J),
    AlreadyRunning(J),
}

impl<J> JobStart<J> {
    pub fn job(&self) -> &J {
        match self {
            Self::Started(job) | Self::AlreadyRunning(job) => job,
        }
    }
}

impl ErasuresStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Starts a job `id` for `user` unless one is running: the guard and the job row are put
    /// in one transaction, each on condition it does not exist. A refused guard comes back
    /// (`ALL_OLD`) naming the running job, which is answered instead.
    pub async fn start(
        &self,
        user: &UserId,
        id: &JobId,
        now_ms: i64,
    ) -> Result<JobStart<ErasureJob>, StoreError> {
        let job = ErasureRow {
            user_id: user.as_str().to_owned(),
            erasure_id: id.as_str().to_owned(),
            status: JobStatus::Running,
            step: 0,
            reactions_erased: 0,
            planned: Vec::new(),
            created_at: now_ms,
            expires_at: None,
        };
        let guard = ErasureGuardRow {
            user_id: user.as_str().to_owned(),
            erasure_id: ACTIVE_GUARD.to_owned(),
            active_id: id.as_str().to_owned(),
        };
        let actions = vec![self.put_new(&guard)?, self.put_new(&job)?];
        let mut last_cancelled = None;
        for attempt in 1..=START_ATTEMPTS as u32 {
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions.clone()))
                .send()
                .await;
            let Some((reasons, err)) = cancelled("TransactWriteItems (erasure)", result)? else {
                return Ok(JobStart::Started(job_of(job)?));
            };
            let running = reasons
                .first()
                .filter(|r| r.code() == Some("ConditionalCheckFailed"))
                .and_then(|r| r.item());
            let Some(running) = running else {
                // Two requests of one user at once conflict on the guard; neither wrote
                // anything, so trying again is safe (and meets the winner's guard).
                if reasons
                    .iter()
                    .any(|r| r.code() == Some("TransactionConflict"))
                {
                    last_cancelled = Some(err);
                    tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
                    continue;
                }
                return Err(StoreError::aws("TransactWriteItems (erasure)", err));
            };
            let running: ErasureGuardRow = rows::from_item(running.clone())?;
            let running = JobId::parse(&running.active_id).map_err(StoreError::Id)?;
            if let Some(job) = self.get(user, &running).await? {
                if job.status == JobStatus::Running {
                    return Ok(JobStart::AlreadyRunning(job));
                }
            }
            // That job finished since: its guard is gone, and the next try starts this one.
            last_cancelled = Some(err);
        }
        // Every try met another start of this user's at the guard: contention.
        let err = last_cancelled.expect("every try that did not return was cancelled");
        Err(AwsError::new("TransactWriteItems (erasure)", err)
            .as_throttled()
            .into())
    }

    /// The caller's job `id`, strongly consistent; `None` when it is not theirs, never
    /// existed or was forgotten.
    pub async fn get(&self, user: &UserId, id: &JobId) -> Result<Option<ErasureJob>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), id.as_str())))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem (erasure)", err))?;
        output
            .item
            .map(|item| job_of(rows::from_item(item)?))
            .transpose()
    }

    /// Commits a slice of `job`: `erased` more rows removed, `next` planned for the following
    /// slice. Applies only while the job is at the step it was read at; `false` when another
    /// delivery committed that step already.
    pub async fn checkpoint(
        &self,
        user: &UserId,
        job: &ErasureJob,
        erased: u64,
        next: &[String],
    ) -> Result<bool, StoreError> {
        let planned = serde_dynamo::to_attribute_value(next).map_err(StoreError::Row)?;
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), job.id.as_str())))
            .update_expression(
                "SET #step = #step + :one, #erased = #erased + :erased, #planned = :planned",
            )
            .condition_expression("#step = :step AND #status = :running")
            .expression_attribute_names("#step", attr::STEP)
            .expression_attribute_names("#erased", attr::REACTIONS_ERASED)
            .expression_attribute_names("#planned", attr::PLANNED)
            .expression_attribute_names("#status", attr::STATUS)
            .expression_attribute_values(":one", number(1))
            .expression_attribute_values(":erased", number(erased))
            .expression_attribute_values(":planned", planned)
            .expression_attribute_values(":step", number(job.step))
            .expression_attribute_values(":running", running())
            .send()
            .await;
        crate::error::condition_held("UpdateItem (erasure checkpoint)", result)
    }

    /// Commits the last slice: `erased` more rows, the job done (and forgotten after
    /// [`DONE_RETENTION_S`]), the user's guard removed, in one transaction at the step read.
    /// `false` when another delivery finished it already.
    pub async fn finish(
        &self,
        user: &UserId,
        job: &ErasureJob,
        erased: u64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), job.id.as_str())))
            .update_expression(
                "SET #step = #step + :one, #erased = #erased + :erased, #status = :done, #exp = :exp REMOVE #planned",
            )
            .condition_expression("#step = :step AND #status = :running")
            .expression_attribute_names("#step", attr::STEP)
            .expression_attribute_names("#erased", attr::REACTIONS_ERASED)
            .expression_attribute_names("#status", attr::STATUS)
            .expression_attribute_names("#exp", attr::EXPIRES_AT)
            .expression_attribute_names("#planned", attr::PLANNED)
            .expression_attribute_values(":one", number(1))
            .expression_attribute_values(":erased", number(erased))
            .expression_attribute_values(":done", AttributeValue::S(JobStatus::Done.as_str().into()))
            .expression_attribute_values(":exp", number(now_ms / 1000 + DONE_RETENTION_S))
            .expression_attribute_values(":step", number(job.step))
            .expression_attribute_values(":running", running())
            .build()
            .map_err(StoreError::Request)?;
        let guard = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), ACTIVE_GUARD)))
            .build()
            .map_err(StoreError::Request)?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(done).build())
            .transact_items(TransactWriteItem::builder().delete(guard).build())
            .send()
            .await;
        match cancelled("TransactWriteItems (erasure done)", result)? {
            None => Ok(true),
            Some((reasons, _))
                if reasons
                    .first()
                    .is_some_and(|r| r.code() == Some("ConditionalCheckFailed")) =>
            {
                Ok(false)
            }
            Some((_, err)) => Err(StoreError::aws("TransactWriteItems (erasure done)", err)),
        }
    }

    fn put_new<T: serde::Serialize>(&self, row: &T) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(row)?))
            .condition_expression("attribute_not_exists(#user)")
            .expression_attribute_names("#user", attr::USER_ID)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(StoreError::Request)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}

fn running() -> AttributeValue {
    AttributeValue::S(JobStatus::Running.as_str().into())
}

fn key(user: &str, erasure_id: &str) -> Item {
    rows::to_item(&ErasureKey {
        user_id: user.to_owned(),
        erasure_id: erasure_id.to_owned(),
    })
    .expect("a key of two strings always serializes")
}

fn job_of(row: ErasureRow) -> Result<ErasureJob, StoreError> {
    Ok(ErasureJob {
        id: JobId::parse(&row.erasure_id).map_err(StoreError::Id)?,
        status: row.status,
        step: row.step,
        reactions_erased: row.reactions_erased,
        planned: row.planned,
    })
}
