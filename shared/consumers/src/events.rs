//! The event log: one `ReactionEvent` per real flip on Kinesis, partition key
//! [`event_partition_key`] so a viral item's events spread over every shard of the stream.
//! At least once: a retried batch may put an event again; consumers deduplicate by
//! `event_id`.

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use aws_sdk_kinesis::Client;
use likes_aws::{AwsError, Unprocessed};
use likes_core::moderation::ModerationEvent;
use likes_core::pipeline::{event_partition_key, LogRecord, ReactionEvent};

/// Failed entries of a PutRecords (throttled shards) are put again this many times within
/// one invocation; after that the batch fails at the first of them and Lambda retries it.
const PUT_ATTEMPTS: u32 = 4;
/// PutRecords takes up to 500 entries.
const PUT_RECORDS_MAX: usize = 500;

/// Why a publish stopped, and the first of the caller's events that may not be on the log.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct PublishFailure {
    /// Index (into the caller's events) of the earliest event not known to be put.
    pub first_unpublished: usize,
    /// The call that failed, or the entries Kinesis still refused (throttled shards).
    pub error: AwsError,
}

#[derive(Debug, Clone)]
pub struct EventPublisher {
    client: Client,
    stream: String,
}

impl EventPublisher {
    pub fn new(client: Client, stream: impl Into<String>) -> Self {
        Self {
            client,
            stream: stream.into(),
        }
    }

    /// Puts `events`, retrying refused entries with backoff.
    pub async fn publish(&self, events: &[ReactionEvent]) -> Result<(), PublishFailure> {
        let mut pending: Vec<(usize, PutRecordsRequestEntry)> = events
            .iter()
            .enumerate()
            .map(|(at, event)| {
                let data = serde_json::to_vec(event).expect("events serialize");
                let item = likes_core::ItemId::parse(&event.item_id)
                    .expect("events are built from valid item ids");
                let entry = PutRecordsRequestEntry::builder()
                    .partition_key(event_partition_key(&event.user_id, &item))
                    .data(Blob::new(data))
                    .build()
                    .expect("partition key and data are set");
                (at, entry)
            })
            .collect();
        let total = pending.len();
        for attempt in 1..=PUT_ATTEMPTS {
            if pending.is_empty() {
                return Ok(());
            }
            let mut refused = Vec::new();
            for batch in pending.chunks(PUT_RECORDS_MAX) {
                let output = self
                    .client
                    .put_records()
                    .stream_name(&self.stream)
                    .set_records(Some(batch.iter().map(|(_, e)| e.clone()).collect()))
                    .send()
                    .await
                    .map_err(|err| PublishFailure {
                        // Refused entries of earlier calls come before this call's.
                        first_unpublished: refused
                            .first()
                            .map_or(batch[0].0, |(at, _): &(usize, _)| *at),
                        error: AwsError::new("PutRecords", err),
                    })?;
                // Entries come back in request order; the refused ones carry an error code.
                refused.extend(
                    batch
                        .iter()
                        .zip(output.records())
                        .filter(|(_, result)| result.error_code().is_some())
                        .map(|(entry, _)| entry.clone()),
                );
            }
            pending = refused;
            if !pending.is_empty() && attempt < PUT_ATTEMPTS {
                tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
            }
        }
        match pending.first() {
            None => Ok(()),
            Some((first, _)) => Err(PublishFailure {
                first_unpublished: *first,
                error: AwsError::unprocessed(
                    "PutRecords",
                    Unprocessed {
                        left: pending.len(),
                        total,
                        attempts: PUT_ATTEMPTS,
                    },
                ),
            }),
        }
    }

    /// Puts a moderator's action on the log (partition key: its id). At least once: a
    /// retried slice puts it again with the same `moderation_id`.
    pub async fn publish_action(&self, event: &ModerationEvent) -> Result<(), AwsError> {
        self.client
            .put_record()
            .stream_name(&self.stream)
            .partition_key(&event.moderation_id)
            .data(Blob::new(LogRecord::moderation(event)))
            .send()
            .await
            .map_err(|err| AwsError::new("PutRecord (moderation)", err))?;
        Ok(())
    }
}
