//! The event log: one `ReactionEvent` per real flip on Kinesis, partition key `item_id`.
//! At least once: a retried batch may put an event again; consumers deduplicate by
//! `event_id`.

use std::time::Duration;

use aws_sdk_kinesis::error::DisplayErrorContext;
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use aws_sdk_kinesis::Client;
use likes_core::pipeline::{ChangeRecord, ReactionEvent};

/// Failed entries of a PutRecords (throttled shards) are put again this many times.
const PUT_ATTEMPTS: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("PutRecords failed: {0}")]
    Kinesis(String),
    #[error("{failed} of {total} events were still refused after {PUT_ATTEMPTS} attempts")]
    Refused { failed: usize, total: usize },
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

    /// Puts the events of the flips among `records`; returns how many.
    pub async fn publish(&self, records: &[ChangeRecord]) -> Result<usize, PublishError> {
        let mut pending: Vec<PutRecordsRequestEntry> = records
            .iter()
            .filter_map(|r| {
                r.change
                    .as_ref()
                    .map(|c| ReactionEvent::new(c, &r.sequence_number))
            })
            .map(|event| {
                let data = serde_json::to_vec(&event).expect("events serialize");
                PutRecordsRequestEntry::builder()
                    .partition_key(event.item_id)
                    .data(Blob::new(data))
                    .build()
                    .expect("partition key and data are set")
            })
            .collect();
        let total = pending.len();
        // PutRecords takes up to 500 entries; a chunk holds at most a few hundred flips.
        for attempt in 1..=PUT_ATTEMPTS {
            if pending.is_empty() {
                return Ok(total);
            }
            let mut next = Vec::new();
            for batch in pending.chunks(500) {
                let output = self
                    .client
                    .put_records()
                    .stream_name(&self.stream)
                    .set_records(Some(batch.to_vec()))
                    .send()
                    .await
                    .map_err(|err| PublishError::Kinesis(DisplayErrorContext(err).to_string()))?;
                // Entries come back in request order; the refused ones carry an error code.
                next.extend(
                    batch
                        .iter()
                        .zip(output.records())
                        .filter(|(_, result)| result.error_code().is_some())
                        .map(|(entry, _)| entry.clone()),
                );
            }
            pending = next;
            if !pending.is_empty() && attempt < PUT_ATTEMPTS {
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
        }
        if pending.is_empty() {
            Ok(total)
        } else {
            Err(PublishError::Refused {
                failed: pending.len(),
                total,
            })
        }
    }
}
