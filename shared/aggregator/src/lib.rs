//! The count pipeline's stream handler (DESIGN §5, §6): Reactions stream batches become
//! exactly-once additions to sharded count rows, and one Kinesis event per real flip.
//!
//! A batch is cut into chunks; each chunk is committed with its claim in one transaction
//! (see [`likes_core::pipeline`]). A claim met on the way means an earlier delivery committed
//! those records: they are skipped, or handed on with a continuation claim when the batch
//! ends inside them. The first failure stops the batch and is reported at its first record,
//! a chunk boundary, which is where Lambda's retry will start.

mod decode;
mod events;

use std::time::{SystemTime, UNIX_EPOCH};

use aws_config::BehaviorVersion;
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_runtime::{service_fn, LambdaEvent};
use likes_core::pipeline::{
    chunk_deltas, count_shard, match_claim, next_chunk_len, ChangeRecord, ClaimMatch, Heartbeat,
};
use likes_store::metrics::Report;
use likes_store::{Chunk, CommitOutcome, CountsWriter, StoreError};
use tracing::Instrument;

pub use decode::{decode, DecodeError};
pub use events::{EventPublisher, PublishError};

/// A claim lists its chunk's eventIDs in one item: 10,000 of them stay far below 400 KB.
const MAX_CHUNK_RECORDS: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("COUNT_SHARDS must be a whole number from 1 to 1000, not {0:?}")]
    CountShards(String),
    #[error("CHUNK_RECORDS must be a whole number from 1 to {MAX_CHUNK_RECORDS}, not {0:?}")]
    ChunkRecords(String),
}

#[derive(Debug, Clone)]
pub struct AggregatorConfig {
    pub counts_table: String,
    pub claims_table: String,
    pub events_stream: String,
    /// K: count rows per item.
    pub count_shards: u32,
    /// At most this many records per chunk (one transaction, one claim); chunks also stop
    /// at 99 distinct items.
    pub chunk_records: usize,
}

impl AggregatorConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any source of variables (the local stack resolves them from template.yaml).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &'static str| lookup(name).ok_or(ConfigError::Missing(name));
        let shards = var("COUNT_SHARDS")?;
        let count_shards = shards
            .parse()
            .ok()
            .filter(|k| (1..=1000).contains(k))
            .ok_or(ConfigError::CountShards(shards))?;
        let records = var("CHUNK_RECORDS")?;
        let chunk_records = records
            .parse()
            .ok()
            .filter(|n| (1..=MAX_CHUNK_RECORDS).contains(n))
            .ok_or(ConfigError::ChunkRecords(records))?;
        Ok(Self {
            counts_table: var("COUNTS_TABLE")?,
            claims_table: var("CLAIMS_TABLE")?,
            events_stream: var("EVENTS_STREAM")?,
            count_shards,
            chunk_records,
        })
    }
}

/// Why a record failed; the batch is reported failed from it on.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Publish(#[from] PublishError),
    #[error("the claim keyed by {0} lists other records than this batch holds")]
    ClaimMismatch(String),
}

#[derive(Debug, Clone)]
pub struct Aggregator {
    writer: CountsWriter,
    events: EventPublisher,
    count_shards: u32,
    chunk_records: usize,
}

/// What one invocation did, for metrics.
#[derive(Debug, Default)]
struct Tally {
    committed_chunks: usize,
    skipped_chunks: usize,
    count_row_writes: usize,
    events_published: usize,
    /// Event time to applied, for each change this invocation committed.
    staleness_ms: Vec<f64>,
    /// The oldest event time among the changes this invocation applied or found applied.
    oldest_event_ms: Option<i64>,
}

impl Tally {
    fn saw(&mut self, records: &[ChangeRecord]) {
        let oldest = records
            .iter()
            .filter_map(|r| r.change.as_ref())
            .map(|c| c.event_time_ms)
            .min();
        self.oldest_event_ms = match (self.oldest_event_ms, oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

impl Aggregator {
    pub fn new(
        config: AggregatorConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        kinesis: aws_sdk_kinesis::Client,
    ) -> Self {
        Self {
            writer: CountsWriter::new(dynamodb, config.counts_table, config.claims_table),
            events: EventPublisher::new(kinesis, config.events_stream),
            count_shards: config.count_shards,
            chunk_records: config.chunk_records,
        }
    }

    /// Handles one batch. Never an `Err` for a record's failure: that is a
    /// `batchItemFailures` entry at the first record not applied, so Lambda retries from it.
    pub async fn handle(
        &self,
        event: LambdaEvent<Event>,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        let span = tracing::info_span!("batch", records = event.payload.records.len());
        Ok(self
            .handle_records(event.payload.records)
            .instrument(span)
            .await)
    }

    async fn handle_records(&self, records: Vec<EventRecord>) -> DynamoDbEventResponse {
        let mut decoded = Vec::with_capacity(records.len());
        let mut failure = None;
        for record in &records {
            match decode(record) {
                Ok(change) => decoded.push(change),
                Err(err) => {
                    failure = Some((decoded.len(), RecordError::from(err)));
                    break;
                }
            }
        }
        let mut tally = Tally::default();
        if let Err(at_and_error) = self.apply(&decoded, &mut tally).await {
            failure = Some(at_and_error);
        }
        self.report(&tally, decoded.len()).await;
        let mut response = DynamoDbEventResponse::default();
        if let Some((at, error)) = failure {
            let record = &records[at];
            tracing::error!(
                event_id = %record.event_id,
                sequence_number = ?record.change.sequence_number,
                error = %error,
                "batch stops at this record; Lambda retries from it"
            );
            Report::new("Likes/Pipeline")
                .value("RecordFailures", "Count", 1.0)
                .property("error", error.to_string())
                .emit();
            let mut failed = DynamoDbBatchItemFailure::default();
            failed.item_identifier = record.change.sequence_number.clone();
            response.batch_item_failures.push(failed);
        }
        response
    }

    /// Commits `records` chunk by chunk; on failure, the index of the first record not applied.
    async fn apply(
        &self,
        records: &[ChangeRecord],
        tally: &mut Tally,
    ) -> Result<(), (usize, RecordError)> {
        let mut at = 0;
        while at < records.len() {
            let rest = &records[at..];
            let len = next_chunk_len(rest, self.chunk_records);
            let chunk = &rest[..len];
            let deltas = chunk_deltas(chunk);
            let claim_id = chunk[0].event_id.as_str();
            let commit = Chunk {
                claim_id,
                event_ids: chunk.iter().map(|r| r.event_id.as_str()).collect(),
                deltas: &deltas,
                shard: count_shard(claim_id, self.count_shards),
            };
            let outcome = self
                .writer
                .commit(&commit, now_ms())
                .await
                .map_err(|e| (at, e.into()))?;
            let applied = match outcome {
                CommitOutcome::Committed => {
                    let applied_at = now_ms();
                    tally.committed_chunks += 1;
                    tally.count_row_writes += deltas.len();
                    tally.staleness_ms.extend(
                        chunk
                            .iter()
                            .filter_map(|r| r.change.as_ref())
                            .map(|c| (applied_at - c.event_time_ms) as f64),
                    );
                    len
                }
                CommitOutcome::AlreadyClaimed(listed) => {
                    tally.skipped_chunks += 1;
                    let ids: Vec<&str> = rest.iter().map(|r| r.event_id.as_str()).collect();
                    match match_claim(&ids, &listed) {
                        ClaimMatch::Skip(n) => n,
                        ClaimMatch::Continue { skip, rest } => {
                            self.writer
                                .continue_claim(&rest, now_ms())
                                .await
                                .map_err(|e| (at, e.into()))?;
                            skip
                        }
                        ClaimMatch::Mismatch => {
                            return Err((at, RecordError::ClaimMismatch(claim_id.to_owned())))
                        }
                    }
                }
            };
            tally.saw(&rest[..applied]);
            // After the commit: events of a chunk met as a claim are put again, since the
            // delivery that committed it may have died before putting them.
            tally.events_published += self
                .events
                .publish(&rest[..applied])
                .await
                .map_err(|e| (at, e.into()))?;
            at += applied;
        }
        Ok(())
    }

    /// Metrics of the invocation, and the heartbeat `as_of` is derived from.
    async fn report(&self, tally: &Tally, records: usize) {
        Report::new("Likes/Pipeline")
            .value("RecordsReceived", "Count", records as f64)
            .value("ChunksCommitted", "Count", tally.committed_chunks as f64)
            .value("ChunksAlreadyClaimed", "Count", tally.skipped_chunks as f64)
            .value("CountRowWrites", "Count", tally.count_row_writes as f64)
            .value("EventsPublished", "Count", tally.events_published as f64)
            .values("StalenessMs", "Milliseconds", &tally.staleness_ms)
            .emit();
        // Everything up to this batch's records is applied now, including chunks an earlier
        // delivery committed (a retry that only meets claims still reports): the lag runs
        // from the oldest change seen, which errs old, never new.
        let Some(oldest) = tally.oldest_event_ms else {
            return;
        };
        let applied_at_ms = now_ms();
        let beat = Heartbeat {
            applied_at_ms,
            lag_ms: applied_at_ms - oldest,
        };
        // The counts are committed whatever happens here; a lost heartbeat only makes
        // `as_of` more conservative until the next batch, so it is reported, not retried.
        if let Err(err) = self.writer.heartbeat(beat).await {
            tracing::error!(error = %err, "could not record the pipeline heartbeat");
            Report::new("Likes/Pipeline")
                .value("HeartbeatFailures", "Count", 1.0)
                .emit();
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The whole of the aggregator's `main`.
pub async fn run() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = AggregatorConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let aggregator = Aggregator::new(
        config,
        aws_sdk_dynamodb::Client::new(&sdk),
        aws_sdk_kinesis::Client::new(&sdk),
    );
    let aggregator = &aggregator;
    lambda_runtime::run(service_fn(move |event| async move {
        aggregator.handle(event).await
    }))
    .await
}
