//! The erasure job's worker: the Erasures stream's consumer. Each record of a running job
//! triggers one slice of it: delete the rows the job planned, read the page after them,
//! wait out the pace, and checkpoint, whose own MODIFY record triggers the next slice.
//!
//! A crashed or failed slice is retried by the mapping from the same record; the job row
//! says what it planned, and deleting a row twice is no change, so the retry deletes the
//! same rows and commits once (a checkpoint applies only at the step it read). Records that
//! are not of a running job at its current step (the guard, a done job, a stale step, a
//! REMOVE) are ignored.

use std::time::Instant;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_runtime::LambdaEvent;
use likes_core::erasure::ACTIVE_GUARD;
use likes_core::jobs::{paced, query_after, slice_end, slice_rows, SliceEnd};
use likes_core::{ErasureJob, JobId, JobStatus, UserId};
use likes_store::metrics::Report;
use likes_store::rows::ErasureImage;
use likes_store::{ErasuresStore, ReactionsStore, StoreError};
use tracing::Instrument;

use crate::ConfigError;

#[derive(Debug, Clone)]
pub struct EraserConfig {
    pub erasures_table: String,
    pub reactions_table: String,
    /// Rows one job deletes a second at most (`ErasureRowsPerSecond`).
    pub rows_per_second: u32,
}

impl EraserConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any source of variables (the local stack resolves them from template.yaml).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name| ConfigError::var(&lookup, name);
        let rows_per_second = ConfigError::whole(&lookup, "ERASURE_ROWS_PER_SECOND")? as u32;
        Ok(Self {
            erasures_table: var("ERASURES_TABLE")?,
            reactions_table: var("REACTIONS_TABLE")?,
            rows_per_second,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Eraser {
    erasures: ErasuresStore,
    reactions: ReactionsStore,
    rows_per_second: u32,
}

/// What one record came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slice {
    /// Not a running job at its current step.
    Ignored,
    /// The slice deleted this many rows and committed them (0 when it met its step
    /// committed already).
    Committed { erased: usize, done: bool },
}

impl Eraser {
    pub fn new(config: EraserConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            erasures: ErasuresStore::new(dynamodb.clone(), config.erasures_table),
            reactions: ReactionsStore::new(dynamodb, config.reactions_table),
            rows_per_second: config.rows_per_second,
        }
    }

    /// Works the batch's records in order. A failure is a `batchItemFailures` entry at its
    /// record, so Lambda retries from there; the records after it are retried with it.
    pub async fn handle(
        &self,
        event: LambdaEvent<Event>,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        let records = event.payload.records;
        let mut response = DynamoDbEventResponse::default();
        let (mut slices, mut erased, mut finished) = (0, 0, 0);
        for record in &records {
            let span = tracing::info_span!("erasure slice", event_id = %record.event_id);
            match self.record(record).instrument(span).await {
                Ok(Slice::Ignored) => {}
                Ok(Slice::Committed { erased: rows, done }) => {
                    slices += 1;
                    erased += rows;
                    finished += usize::from(done);
                }
                Err(err) => {
                    tracing::error!(event_id = %record.event_id, error = %err, "erasure slice failed; Lambda retries from this record");
                    let mut failed = DynamoDbBatchItemFailure::default();
                    failed.item_identifier = record.change.sequence_number.clone();
                    response.batch_item_failures.push(failed);
                    break;
                }
            }
        }
        Report::new("Likes/Erasure")
            .value("SlicesCommitted", "Count", slices as f64)
            .value("RowsErased", "Count", erased as f64)
            .value("ErasuresDone", "Count", finished as f64)
            .emit();
        Ok(response)
    }

    async fn record(&self, record: &EventRecord) -> Result<Slice, StoreError> {
        // A REMOVE (the guard dropped, a job forgotten by TTL) has no new image.
        if record.change.new_image.is_empty() {
            return Ok(Slice::Ignored);
        }
        let image: ErasureImage = match serde_dynamo::from_item(record.change.new_image.clone()) {
            Ok(image) => image,
            Err(err) => {
                tracing::warn!(error = %err, "not an erasure row; ignored");
                return Ok(Slice::Ignored);
            }
        };
        if image.erasure_id == ACTIVE_GUARD || image.status == Some(JobStatus::Done) {
            return Ok(Slice::Ignored);
        }
        let (Ok(user), Ok(id)) = (
            UserId::parse(&image.user_id),
            JobId::parse(&image.erasure_id),
        ) else {
            tracing::warn!(erasure_id = %image.erasure_id, "not an erasure job's key; ignored");
            return Ok(Slice::Ignored);
        };
        let Some(job) = self.erasures.get(&user, &id).await? else {
            return Ok(Slice::Ignored);
        };
        // A keys-only image (moto's first INSERT) names no step: the job's current one.
        let current = image.step.is_none_or(|step| step == job.step);
        if job.status != JobStatus::Running || !current {
            return Ok(Slice::Ignored);
        }
        self.slice(&user, &job).await
    }

    /// One slice: the planned rows deleted, the next page read, the pace kept, one
    /// conditional checkpoint (or the finishing transaction).
    async fn slice(&self, user: &UserId, job: &ErasureJob) -> Result<Slice, StoreError> {
        let started = Instant::now();
        self.reactions.delete_rows(user, &job.planned).await?;
        let page = self
            .reactions
            .item_keys(
                user,
                query_after(&job.planned),
                slice_rows(self.rows_per_second),
            )
            .await?;
        let pace = paced(job.planned.len(), self.rows_per_second);
        tokio::time::sleep(pace.saturating_sub(started.elapsed())).await;
        let erased = job.planned.len() as u64;
        let end = slice_end(&job.planned, page);
        let (applied, done) = match &end {
            SliceEnd::Continue { next } => (
                self.erasures.checkpoint(user, job, erased, next).await?,
                false,
            ),
            SliceEnd::Done => (
                self.erasures
                    .finish(user, job, erased, likes_core::clock::now_ms())
                    .await?,
                true,
            ),
        };
        tracing::info!(
            erasure_id = %job.id,
            step = job.step,
            erased,
            done,
            applied,
            "erasure slice"
        );
        // A step committed by another delivery erased these rows in its own count.
        Ok(Slice::Committed {
            erased: if applied { job.planned.len() } else { 0 },
            done: done && applied,
        })
    }
}
