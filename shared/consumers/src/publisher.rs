//! The event log's own consumer of the Reactions stream: one `ReactionEvent` per real flip,
//! put on Kinesis on a checkpoint of its own. Refused, throttled or slow puts retry here,
//! from the first record whose event is not on the log, and never hold back, fail or skip
//! the counts, which the aggregator commits from its own event source mapping.

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_runtime::LambdaEvent;
use likes_core::pipeline::ReactionEvent;
use likes_store::metrics::Report;
use tracing::Instrument;

use crate::decode::decode;
use crate::events::EventPublisher;
use crate::ConfigError;

#[derive(Debug, Clone)]
pub struct PublisherConfig {
    pub events_stream: String,
}

impl PublisherConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            events_stream: lookup("EVENTS_STREAM").ok_or(ConfigError::Missing("EVENTS_STREAM"))?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Publisher {
    events: EventPublisher,
}

impl Publisher {
    pub fn new(config: PublisherConfig, kinesis: aws_sdk_kinesis::Client) -> Self {
        Self {
            events: EventPublisher::new(kinesis, config.events_stream),
        }
    }

    /// Puts the batch's events. A failure is a `batchItemFailures` entry at the record of the
    /// first event not put, so Lambda retries from there (events after it may be put twice:
    /// consumers deduplicate by `event_id`).
    pub async fn handle(
        &self,
        event: LambdaEvent<Event>,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        let records = event.payload.records;
        let span = tracing::info_span!("publish", records = records.len());
        let mut sources = Vec::new();
        let mut events = Vec::new();
        for (at, record) in records.iter().enumerate() {
            match decode(record) {
                Ok(decoded) => {
                    if let Some(change) = &decoded.change {
                        sources.push(at);
                        events.push(ReactionEvent::new(change, &decoded.sequence_number));
                    }
                }
                // The aggregator reports it with its keys; it has no flip to publish.
                Err(err) => tracing::warn!(error = %err, "unreadable record has no event"),
            }
        }
        let outcome = self.events.publish(&events).instrument(span).await;
        let mut response = DynamoDbEventResponse::default();
        let published = match outcome {
            Ok(()) => events.len(),
            Err(failure) => {
                let record = &records[sources[failure.first_unpublished]];
                tracing::error!(
                    event_id = %record.event_id,
                    error = %failure,
                    "events from this record on are not on the log yet; Lambda retries from it"
                );
                let mut failed = DynamoDbBatchItemFailure::default();
                failed.item_identifier = record.change.sequence_number.clone();
                response.batch_item_failures.push(failed);
                failure.first_unpublished
            }
        };
        Report::new("Likes/EventLog")
            .value("RecordsReceived", "Count", records.len() as f64)
            .value("EventsPublished", "Count", published as f64)
            .value(
                "PublishFailures",
                "Count",
                response.batch_item_failures.len() as f64,
            )
            .emit();
        Ok(response)
    }
}
