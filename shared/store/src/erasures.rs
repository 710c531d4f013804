//! The Erasures table: one row per erasure job (`user_id`, `erasure_id`), and per user a
//! guard row `#active` that exists exactly while one of their jobs runs. Every write here is
//! conditional: a job starts only where no guard is, a slice commits only at the step it
//! read, and the last slice marks the job done and drops the guard in one transaction.

use aws_sdk_dynamodb::types::{Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use likes_core::erasure::ACTIVE_GUARD;
use likes_core::{ErasureJob, JobId, JobStatus, UserId};

use crate::jobs::{self, JobRow, JobStart};
use crate::rows::{self, attr, ErasureGuardRow, ErasureKey, ErasureRow, Item};
use crate::StoreError;

#[derive(Debug, Clone)]
pub struct ErasuresStore {
    client: Client,
    table: String,
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
        jobs::start_guarded(
            &self.client,
            "TransactWriteItems (erasure)",
            actions,
            job_of(job)?,
            |running| async move {
                let job = self.get(user, &running).await?;
                Ok(job.filter(|job| job.status == JobStatus::Running))
            },
        )
        .await
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
        self.row(user, job)
            .checkpoint("UpdateItem (erasure checkpoint)", erased, next)
            .await
    }

    /// Commits the last slice: `erased` more rows, the job done (and forgotten after
    /// [`likes_core::jobs::DONE_RETENTION_S`]), the user's guard removed, in one transaction
    /// at the step read. `false` when another delivery finished it already.
    pub async fn finish(
        &self,
        user: &UserId,
        job: &ErasureJob,
        erased: u64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.row(user, job)
            .finish(
                "TransactWriteItems (erasure done)",
                erased,
                Some(key(user.as_str(), ACTIVE_GUARD)),
                now_ms,
            )
            .await
    }

    fn row(&self, user: &UserId, job: &ErasureJob) -> JobRow<'_> {
        JobRow {
            client: &self.client,
            table: &self.table,
            key: key(user.as_str(), job.id.as_str()),
            counter: attr::REACTIONS_ERASED,
            step: job.step,
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
