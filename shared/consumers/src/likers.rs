//! The likers' consumer of the Kinesis event log: each event that starts or ends a like (or
//! a dislike) becomes a conditional write of that like's (or dislike's) entry, ordered by
//! the flip's order, so however often and in whatever order the log delivers an event, each
//! entry ends as the newest flip says. No claims are needed: the entry itself remembers
//! what it applied.

use aws_lambda_events::event::kinesis::{KinesisEvent, KinesisEventRecord};
use aws_lambda_events::event::streams::{KinesisBatchItemFailure, KinesisEventResponse};
use lambda_runtime::LambdaEvent;
use likes_core::likers::{liker_updates, unplaced, LikerUpdate};
use likes_core::pipeline::LogRecord;
use likes_store::metrics::Report;
use likes_store::{LikersStore, StoreError};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::ConfigError;

/// Entries written at once: enough to hide DynamoDB's latency, few enough that a batch's
/// writes do not crowd out the other consumers of the same partitions.
pub const CONCURRENT_WRITES: usize = 25;

#[derive(Debug, Clone)]
pub struct LikersConfig {
    pub likers_table: String,
}

impl LikersConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            likers_table: lookup("LIKERS_TABLE").ok_or(ConfigError::Missing("LIKERS_TABLE"))?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Likers {
    store: LikersStore,
}

/// What a batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Applied {
    written: usize,
    /// Entries that already held the flip or a later one.
    superseded: usize,
    /// Events that end a like without saying when it was liked: left to reconciliation.
    unplaced: usize,
}

impl Likers {
    pub fn new(config: LikersConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            store: LikersStore::new(dynamodb, config.likers_table),
        }
    }

    /// Applies the batch's events. A write that fails, or an event that cannot be read, is
    /// a `batchItemFailures` entry at its record, so Lambda retries from there; writes after
    /// it that went through are applied again then, which changes nothing.
    pub async fn handle(
        &self,
        event: LambdaEvent<KinesisEvent>,
    ) -> Result<KinesisEventResponse, lambda_runtime::Error> {
        let records = event.payload.records;
        let span = tracing::info_span!("likers", records = records.len());
        let (applied, failed) = self.apply(&records).instrument(span).await;
        let mut response = KinesisEventResponse::default();
        if let Some(at) = failed {
            let mut failure = KinesisBatchItemFailure::default();
            failure.item_identifier = Some(records[at].kinesis.sequence_number.clone());
            response.batch_item_failures.push(failure);
        }
        Report::new("Likes/Likers")
            .value("RecordsReceived", "Count", records.len() as f64)
            .value("EntriesWritten", "Count", applied.written as f64)
            .value("EntriesSuperseded", "Count", applied.superseded as f64)
            .value("EventsUnplaced", "Count", applied.unplaced as f64)
            .value("BatchFailures", "Count", failed.is_some() as u64 as f64)
            .emit();
        Ok(response)
    }

    /// What was applied, and the first record not known to be applied if any failed.
    async fn apply(&self, records: &[KinesisEventRecord]) -> (Applied, Option<usize>) {
        let now_ms = likes_core::clock::now_ms();
        let mut updates: Vec<(usize, LikerUpdate)> = Vec::new();
        let mut unreadable = None;
        let mut unplaced_events = 0;
        for (at, record) in records.iter().enumerate() {
            match LogRecord::parse(&record.kinesis.data) {
                Ok(LogRecord::Event(event)) => {
                    if unplaced(&event) {
                        tracing::warn!(event_id = %event.event_id, "an unlike without the like's time: its entry is left to reconciliation");
                        unplaced_events += 1;
                    }
                    updates.extend(liker_updates(&event, now_ms).into_iter().map(|u| (at, u)))
                }
                Ok(LogRecord::Heartbeat { .. } | LogRecord::Moderation(_)) => {}
                Err(err) => {
                    tracing::error!(sequence_number = %record.kinesis.sequence_number, error = %err, "unreadable event; Lambda retries from it");
                    unreadable = Some(at);
                    break;
                }
            }
        }
        let (mut applied, failed) = self.write(updates).await;
        applied.unplaced = unplaced_events;
        let first_failure = match (failed, unreadable) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        (applied, first_failure)
    }

    /// Writes every update, [`CONCURRENT_WRITES`] at a time; returns the earliest record
    /// whose write failed.
    async fn write(&self, updates: Vec<(usize, LikerUpdate)>) -> (Applied, Option<usize>) {
        let mut applied = Applied::default();
        let mut failed: Option<usize> = None;
        let mut writes: JoinSet<(usize, Result<bool, StoreError>)> = JoinSet::new();
        let mut pending = updates.into_iter();
        loop {
            while writes.len() < CONCURRENT_WRITES {
                let Some((at, update)) = pending.next() else {
                    break;
                };
                let store = self.store.clone();
                writes.spawn(async move { (at, store.apply(&update).await) });
            }
            let Some(done) = writes.join_next().await else {
                break;
            };
            match done {
                Ok((_, Ok(true))) => applied.written += 1,
                Ok((_, Ok(false))) => applied.superseded += 1,
                Ok((at, Err(err))) => {
                    tracing::error!(error = %err, "a likers entry could not be written; Lambda retries from its record");
                    failed = Some(failed.map_or(at, |f| f.min(at)));
                }
                // A write task only ends early by panicking: the invocation fails with it.
                Err(err) => std::panic::resume_unwind(err.into_panic()),
            }
        }
        (applied, failed)
    }
}
