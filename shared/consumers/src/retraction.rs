//! The Moderation stream's consumer: every action a moderator takes is put on the event log
//! (`LogRecord::Moderation`) when its row is inserted, and each record of a running
//! retraction triggers one slice of it: turn the planned reactions to NONE, read the page
//! after them, wait out the pace, and checkpoint, whose own MODIFY record triggers the next
//! slice. Each retracted reaction is an ordinary flip, so the counts, likers, leaderboard and
//! liked lists drop it through their own pipelines, and its event says `retracted` (or
//! `removed`). A user's reactions are found in their partition of the Reactions table; a
//! removed item's in its likers entries (which keep dislikes too), bucket by bucket.
//!
//! A crashed or failed slice is retried by the mapping from the same record: the job row says
//! what it planned, a row this job retracted already is told apart by its mark, and a
//! checkpoint applies only at the step it read, so a retry counts every reaction once.

use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use futures_util::{stream, StreamExt, TryStreamExt};
use lambda_runtime::LambdaEvent;
use likes_aws::AwsError;
use likes_core::jobs::{paced, query_after, slice_end, slice_rows, SliceEnd};
use likes_core::likers;
use likes_core::moderation::{
    counted_out, ModerationAction, ModerationEvent, RetractionJob, Target,
};
use likes_core::{JobId, JobStatus, UserId};
use likes_store::metrics::Report;
use likes_store::reactions::{Retracted, RetractionWrite};
use likes_store::rows::{ModerationImage, ACTION_PREFIX, RETRACTION_PREFIX};
use likes_store::{CountsStore, LikersStore, ModerationStore, ReactionsStore, StoreError};
use tracing::Instrument;

use crate::{ConfigError, EventPublisher};

/// Reaction rows one slice writes at once.
const CONCURRENT_WRITES: usize = 8;
/// How long a slice that found nothing waits before it sweeps again: for the job's settling,
/// or, once settled, for a removed item's counts to show that nothing is left.
const SETTLE_WAIT_MS: i64 = 2_000;

#[derive(Debug, Clone)]
pub struct RetractorConfig {
    pub moderation_table: String,
    pub reactions_table: String,
    pub likers_table: String,
    /// A removal ends on the item's counts (`as_of` and its count rows).
    pub counts_table: String,
    pub events_stream: String,
    /// Reactions one job turns to NONE a second at most (`ModerationRowsPerSecond`).
    pub rows_per_second: u32,
}

impl RetractorConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any source of variables (the local stack resolves them from template.yaml).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name| ConfigError::var(&lookup, name);
        let rows_per_second = ConfigError::whole(&lookup, "MODERATION_ROWS_PER_SECOND")? as u32;
        Ok(Self {
            moderation_table: var("MODERATION_TABLE")?,
            reactions_table: var("REACTIONS_TABLE")?,
            likers_table: var("LIKERS_TABLE")?,
            counts_table: var("COUNTS_TABLE")?,
            events_stream: var("EVENTS_STREAM")?,
            rows_per_second,
        })
    }
}

#[derive(Debug, thiserror::Error)]
enum SliceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Log(#[from] AwsError),
}

#[derive(Debug, Clone)]
pub struct Retractor {
    moderation: ModerationStore,
    reactions: ReactionsStore,
    likers: LikersStore,
    counts: CountsStore,
    log: EventPublisher,
    rows_per_second: u32,
}

/// What one record came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Worked {
    actions_logged: usize,
    slices: usize,
    retracted: u64,
    finished: usize,
}

impl Retractor {
    pub fn new(
        config: RetractorConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        kinesis: aws_sdk_kinesis::Client,
    ) -> Self {
        Self {
            moderation: ModerationStore::new(dynamodb.clone(), config.moderation_table),
            reactions: ReactionsStore::new(dynamodb.clone(), config.reactions_table),
            likers: LikersStore::new(dynamodb.clone(), config.likers_table),
            counts: CountsStore::new(dynamodb, config.counts_table),
            log: EventPublisher::new(kinesis, config.events_stream),
            rows_per_second: config.rows_per_second,
        }
    }

    /// Works the batch's records in order. A failure is a `batchItemFailures` entry at its
    /// record, so Lambda retries from there; the records after it are retried with it.
    pub async fn handle(
        &self,
        event: LambdaEvent<Event>,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        let mut response = DynamoDbEventResponse::default();
        let mut total = Worked::default();
        for record in &event.payload.records {
            let span = tracing::info_span!("moderation record", event_id = %record.event_id);
            match self.record(record).instrument(span).await {
                Ok(worked) => {
                    total.actions_logged += worked.actions_logged;
                    total.slices += worked.slices;
                    total.retracted += worked.retracted;
                    total.finished += worked.finished;
                }
                Err(err) => {
                    tracing::error!(event_id = %record.event_id, error = %err, "moderation record failed; Lambda retries from this record");
                    let mut failed = DynamoDbBatchItemFailure::default();
                    failed.item_identifier = record.change.sequence_number.clone();
                    response.batch_item_failures.push(failed);
                    break;
                }
            }
        }
        Report::new("Likes/Moderation")
            .value("ActionsLogged", "Count", total.actions_logged as f64)
            .value("SlicesCommitted", "Count", total.slices as f64)
            .value("ReactionsRetracted", "Count", total.retracted as f64)
            .value("RetractionsDone", "Count", total.finished as f64)
            .emit();
        Ok(response)
    }

    async fn record(&self, record: &EventRecord) -> Result<Worked, SliceError> {
        // A REMOVE (the guard dropped, a row forgotten by TTL) has no new image.
        if record.change.new_image.is_empty() {
            return Ok(Worked::default());
        }
        let image: ModerationImage = match serde_dynamo::from_item(record.change.new_image.clone())
        {
            Ok(image) => image,
            Err(err) => {
                tracing::warn!(error = %err, "not a moderation row; ignored");
                return Ok(Worked::default());
            }
        };
        let inserted = record.event_name == "INSERT";
        if let Some(id) = image.key.strip_prefix(ACTION_PREFIX) {
            return match (inserted, action_event(id, &image)) {
                (true, Some(event)) => {
                    self.log.publish_action(&event).await?;
                    Ok(Worked {
                        actions_logged: 1,
                        ..Worked::default()
                    })
                }
                _ => Ok(Worked::default()),
            };
        }
        let Some(Ok(id)) = image.key.strip_prefix(RETRACTION_PREFIX).map(JobId::parse) else {
            // A guard, or a key this code does not know.
            return Ok(Worked::default());
        };
        let Some(job) = self.moderation.retraction(&id).await? else {
            return Ok(Worked::default());
        };
        let mut worked = Worked::default();
        // A keys-only image (moto's first INSERT of an updated row) names no action yet.
        if inserted && image.action.is_some() {
            self.log
                .publish_action(&ModerationEvent::retraction(&job))
                .await?;
            worked.actions_logged = 1;
        }
        let current = image.step.is_none_or(|step| step == job.step);
        if job.status != JobStatus::Running || !current {
            return Ok(worked);
        }
        let (retracted, done) = self.slice(&job).await?;
        worked.slices = 1;
        worked.retracted = retracted;
        worked.finished = usize::from(done);
        Ok(worked)
    }

    /// One slice: the planned reactions retracted, the next page read, the pace kept, one
    /// conditional checkpoint (or the finishing transaction). Returns the reactions it
    /// committed and whether it finished the job.
    async fn slice(&self, job: &RetractionJob) -> Result<(u64, bool), StoreError> {
        let started = Instant::now();
        let write = RetractionWrite {
            job_id: job.id.as_str(),
            reason: &job.reason,
            cause: job.cause(),
            step: job.step,
            cut_ms: job.cut_ms(),
        };
        let now_ms = likes_core::clock::now_ms();
        let target = job.target();
        // The futures are made before they are streamed: a closure handing out borrows
        // would make the handler's future not `Send` for every lifetime.
        let writes: Vec<_> = job
            .planned
            .iter()
            .map(|key| match target {
                Target::User { user_id, .. } => self.reactions.retract(user_id, key, write, now_ms),
                // An item's planned keys are its likers entries, which name their users.
                Target::Item { item_id } => {
                    self.reactions
                        .retract(likers::entry_user(key), item_id.as_str(), write, now_ms)
                }
            })
            .collect();
        let outcomes: Vec<Retracted> = stream::iter(writes)
            .buffer_unordered(CONCURRENT_WRITES)
            .try_collect()
            .await?;
        let retracted = outcomes
            .iter()
            .filter(|outcome| **outcome != Retracted::Nothing)
            .count() as u64;
        let (after, rows) = (query_after(&job.planned), slice_rows(self.rows_per_second));
        let page = match target {
            Target::User { user_id, item_id } => {
                let user = UserId::parse(user_id).map_err(StoreError::Id)?;
                self.reactions
                    .retractable_keys(&user, item_id, after, rows, job.cut_ms())
                    .await?
            }
            Target::Item { item_id } => self.likers.reactors(item_id, after, rows as usize).await?,
        };
        let pace = paced(job.planned.len(), self.rows_per_second);
        tokio::time::sleep(pace.saturating_sub(started.elapsed())).await;
        let end = slice_end(&job.planned, page);
        // A sweep from the start that found nothing began with this slice (`now_ms`).
        let finished = match end {
            SliceEnd::Done if job.may_finish(now_ms) => self.nothing_left(job).await?,
            _ => false,
        };
        let (applied, done) = match end {
            SliceEnd::Done if finished => (
                self.moderation
                    .finish(job, retracted, likes_core::clock::now_ms())
                    .await?,
                true,
            ),
            // Nothing in sight, but a suspended user's leased write may still land, or the
            // log not show a removed item's reaction yet: sweep again a little later, waiting
            // at most SETTLE_WAIT_MS a slice (ten records of a batch stay well inside the
            // function's Timeout).
            SliceEnd::Done => {
                let to_settle = job.settled_at_ms() - likes_core::clock::now_ms();
                let wait = if to_settle > 0 {
                    to_settle.min(SETTLE_WAIT_MS)
                } else {
                    SETTLE_WAIT_MS
                };
                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                (
                    self.moderation.checkpoint(job, retracted, &[]).await?,
                    false,
                )
            }
            SliceEnd::Continue { next } => (
                self.moderation.checkpoint(job, retracted, &next).await?,
                false,
            ),
        };
        tracing::info!(
            retraction_id = %job.id,
            step = job.step,
            retracted,
            done,
            applied,
            "retraction slice"
        );
        // A step committed by another delivery counted these reactions itself.
        Ok((if applied { retracted } else { 0 }, done && applied))
    }

    /// Whether a settled sweep from the start that found nothing leaves nothing: a user's
    /// reactions are read from the Reactions table itself, a removed item's from the likers
    /// entries the log feeds, so a removal also needs the item's counts to hold nothing as
    /// of after the job settled ([`counted_out`]).
    async fn nothing_left(&self, job: &RetractionJob) -> Result<bool, StoreError> {
        let Target::Item { item_id } = job.target() else {
            return Ok(true);
        };
        let as_of = self.counts.as_of().await;
        let stored = self.counts.stored_sum(item_id).await?;
        let empty = counted_out(as_of, job.settled_at_ms(), stored.like, stored.dislike);
        if !empty {
            tracing::info!(
                retraction_id = %job.id,
                item_id = %item_id,
                as_of,
                likes = stored.like,
                dislikes = stored.dislike,
                "the removed item's counts still hold reactions: sweeping again"
            );
        }
        Ok(empty)
    }
}

/// The log's record of an action row that starts no job.
fn action_event(id: &str, image: &ModerationImage) -> Option<ModerationEvent> {
    Some(ModerationEvent {
        moderation_id: id.to_owned(),
        action: image.action?,
        user_id: Some(image.user_id.clone()?),
        item_id: None,
        reason: None,
        suspend: (image.action? == ModerationAction::LiftSuspension).then_some(false),
        by: image.by.clone()?,
        at_ms: image.created_at?,
    })
}
