//! What the paced jobs' stores share (account erasure, a moderator's retraction): a job
//! starts in one transaction with its user's guard, which exists exactly while one of the
//! user's jobs runs and names it (`active_id`); each slice commits at the step it read; and
//! the last slice finishes the job and drops the guard in one transaction.

use std::future::Future;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use likes_aws::AwsError;
use likes_core::jobs::DONE_RETENTION_S;
use likes_core::{JobId, JobStatus};
use serde::Deserialize;

use crate::error::cancelled;
use crate::rows::{self, attr, number, Item};
use crate::StoreError;

/// Starts one request tries: a guard met may be dropped by its job finishing before it is
/// read (the next try then starts this one), and two requests of one user at once conflict.
const START_ATTEMPTS: u32 = 3;

/// What a request for a job came to: a new job, or the one of the user's that was running.
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

/// A guard as its refusal returns it (`ALL_OLD`).
#[derive(Deserialize)]
struct Guard {
    active_id: String,
}

/// Runs `actions` in one transaction, its first the user's guard on condition it does not
/// exist (returning the row it meets), and answers `started` when it applies. A refused
/// guard names the running job: `running` reads it, and a job still running is answered
/// instead; one that finished since has dropped its guard, and the next try starts this one.
pub(crate) async fn start_guarded<J, F, Fut>(
    client: &Client,
    operation: &'static str,
    actions: Vec<TransactWriteItem>,
    started: J,
    mut running: F,
) -> Result<JobStart<J>, StoreError>
where
    F: FnMut(JobId) -> Fut,
    Fut: Future<Output = Result<Option<J>, StoreError>>,
{
    let mut last_cancelled = None;
    for attempt in 1..=START_ATTEMPTS {
        let result = client
            .transact_write_items()
            .set_transact_items(Some(actions.clone()))
            .send()
            .await;
        let Some((reasons, err)) = cancelled(operation, result)? else {
            return Ok(JobStart::Started(started));
        };
        let guard = reasons
            .first()
            .filter(|r| r.code() == Some("ConditionalCheckFailed"))
            .and_then(|r| r.item());
        let Some(guard) = guard else {
            // Two requests of one user at once conflict on the guard, or a throttled item
            // cancelled the transaction; nothing was written, so trying again is safe (and
            // meets the winner's guard).
            if reasons
                .iter()
                .any(|r| matches!(r.code(), Some("TransactionConflict" | "ThrottlingError")))
            {
                last_cancelled = Some(err);
                tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
                continue;
            }
            return Err(StoreError::aws(operation, err));
        };
        let guard: Guard = rows::from_item(guard.clone())?;
        let id = JobId::parse(&guard.active_id).map_err(StoreError::Id)?;
        if let Some(job) = running(id).await? {
            return Ok(JobStart::AlreadyRunning(job));
        }
        last_cancelled = Some(err);
    }
    // Every try met another start of this user's at the guard, or throttling: contention.
    let err = last_cancelled.expect("every try that did not return was cancelled");
    Err(AwsError::new(operation, err).as_throttled().into())
}

/// Where a job's row is and what it counts: its table, key, and the attribute of the rows
/// its slices committed (`reactions_erased`, `reactions_retracted`).
pub(crate) struct JobRow<'a> {
    pub client: &'a Client,
    pub table: &'a str,
    pub key: Item,
    pub counter: &'static str,
    /// The step the slice read the job at.
    pub step: u64,
}

impl JobRow<'_> {
    /// Commits a slice: `added` more rows counted, `next` planned for the following slice.
    /// Applies only while the job is running at the step read; `false` when another delivery
    /// committed that step already.
    pub(crate) async fn checkpoint(
        self,
        operation: &'static str,
        added: u64,
        next: &[String],
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(self.table)
            .set_key(Some(self.key))
            .update_expression(
                "SET #step = #step + :one, #counter = #counter + :added, #planned = :planned",
            )
            .condition_expression("#step = :step AND #status = :running")
            .expression_attribute_names("#step", attr::STEP)
            .expression_attribute_names("#counter", self.counter)
            .expression_attribute_names("#planned", attr::PLANNED)
            .expression_attribute_names("#status", attr::STATUS)
            .expression_attribute_values(":one", number(1))
            .expression_attribute_values(":added", number(added))
            .expression_attribute_values(":planned", rows::to_attribute(&next)?)
            .expression_attribute_values(":step", number(self.step))
            .expression_attribute_values(":running", status(JobStatus::Running))
            .send()
            .await;
        crate::error::condition_held(operation, result)
    }

    /// Commits the last slice: `added` more rows, the job done, and the user's guard
    /// (`guard`, in the same table) dropped, in one transaction at the step read; a job with
    /// a guard is forgotten [`DONE_RETENTION_S`] later (one without is named by what it
    /// guards for good). `false` when another delivery finished it already.
    pub(crate) async fn finish(
        self,
        operation: &'static str,
        added: u64,
        guard: Option<Item>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut done = Update::builder()
            .table_name(self.table)
            .set_key(Some(self.key))
            .condition_expression("#step = :step AND #status = :running")
            .expression_attribute_names("#step", attr::STEP)
            .expression_attribute_names("#counter", self.counter)
            .expression_attribute_names("#status", attr::STATUS)
            .expression_attribute_names("#planned", attr::PLANNED)
            .expression_attribute_values(":one", number(1))
            .expression_attribute_values(":added", number(added))
            .expression_attribute_values(":done", status(JobStatus::Done))
            .expression_attribute_values(":step", number(self.step))
            .expression_attribute_values(":running", status(JobStatus::Running));
        let set = "SET #step = #step + :one, #counter = #counter + :added, #status = :done";
        done = if guard.is_some() {
            done.update_expression(format!("{set}, #exp = :exp REMOVE #planned"))
                .expression_attribute_names("#exp", attr::EXPIRES_AT)
                .expression_attribute_values(":exp", number(now_ms / 1000 + DONE_RETENTION_S))
        } else {
            done.update_expression(format!("{set} REMOVE #planned"))
        };
        let mut actions = vec![TransactWriteItem::builder()
            .update(done.build().map_err(StoreError::Request)?)
            .build()];
        if let Some(guard) = guard {
            let delete = Delete::builder()
                .table_name(self.table)
                .set_key(Some(guard))
                .build()
                .map_err(StoreError::Request)?;
            actions.push(TransactWriteItem::builder().delete(delete).build());
        }
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(actions))
            .send()
            .await;
        match cancelled(operation, result)? {
            None => Ok(true),
            Some((reasons, _))
                if reasons
                    .first()
                    .is_some_and(|r| r.code() == Some("ConditionalCheckFailed")) =>
            {
                Ok(false)
            }
            Some((_, err)) => Err(StoreError::aws(operation, err)),
        }
    }
}

/// A job status as an expression value.
pub(crate) fn status(status: JobStatus) -> AttributeValue {
    AttributeValue::S(status.as_str().to_owned())
}
