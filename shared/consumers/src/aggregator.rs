//! The count aggregator: Reactions stream batches become exactly-once additions to sharded
//! count rows, and each shard's watermark moves to the last record applied.
//!
//! A batch is cut into chunks; each chunk is committed with its claim in one transaction
//! (see [`likes_core::pipeline`]). A claim met on the way means an earlier delivery committed
//! those records: they are skipped, or handed on with a continuation claim when the batch
//! ends inside them. The first failure stops the batch and is reported at its first record,
//! a chunk boundary, which is where Lambda's retry will start. The mapping runs with a
//! tumbling window only because that event names the stream shard, which the watermark is
//! kept per; the window's state is handed back untouched.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use aws_lambda_events::event::dynamodb::{EventRecord, TimeWindowEvent, TimeWindowEventResponse};
use aws_lambda_events::event::streams::DynamoDbBatchItemFailure;
use lambda_runtime::LambdaEvent;
use likes_core::clock::now_ms;
use likes_core::pipeline::{
    hot_items, match_claim, next_chunk_len, route_chunk, ChangeRecord, ClaimMatch, CountLayout,
    Lane,
};
use likes_core::reconcile::Period;
use likes_core::ItemId;
use likes_store::metrics::Report;
use likes_store::{Chunk, CommitOutcome, CountsWriter, FreshnessStore, StoreError};
use tracing::Instrument;

use crate::decode::{decode, probe_key, unreadable};
use crate::ConfigError;

/// Items whose overflow marker this container already wrote; forgotten past this many (a
/// forgotten one costs one more idempotent marker write).
const MARKED_ITEMS_CAP: usize = 100_000;

#[derive(Debug, Clone)]
pub struct AggregatorConfig {
    pub counts_table: String,
    pub claims_table: String,
    pub layout: CountLayout,
    /// Count rows keep subtotals per epoch of this length, and count the changes near its
    /// boundaries (reconciliation cuts).
    pub period: Period,
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
        let var = |name| ConfigError::var(&lookup, name);
        let whole = |name| ConfigError::whole(&lookup, name);
        Ok(Self {
            counts_table: var("COUNTS_TABLE")?,
            claims_table: var("CLAIMS_TABLE")?,
            layout: CountLayout {
                rows: whole("COUNT_SHARDS")? as u32,
                overflow_partitions: whole("OVERFLOW_PARTITIONS")? as u32,
            },
            period: Period {
                length_ms: whole("RECONCILE_EPOCH_SECONDS")? as i64 * 1000,
                uncertainty_ms: whole("EXPORT_UNCERTAINTY_SECONDS")? as i64 * 1000,
            },
            chunk_records: whole("CHUNK_RECORDS")?,
        })
    }
}

/// Why a record failed; the batch is reported failed from it on.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the claim keyed by {0} lists other records than this batch holds")]
    ClaimMismatch(String),
}

#[derive(Debug, Clone)]
pub struct Aggregator {
    writer: CountsWriter,
    freshness: FreshnessStore,
    layout: CountLayout,
    period: Period,
    chunk_records: usize,
    marked: Arc<Mutex<HashSet<ItemId>>>,
}

/// What one invocation did, for metrics.
#[derive(Debug, Default)]
struct Tally {
    committed_chunks: usize,
    skipped_chunks: usize,
    count_row_writes: usize,
    overflow_row_writes: usize,
    /// Event time to applied, for each change this invocation committed.
    staleness_ms: Vec<f64>,
}

impl Aggregator {
    pub fn new(config: AggregatorConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            writer: CountsWriter::new(
                dynamodb.clone(),
                config.counts_table.clone(),
                config.claims_table,
            ),
            freshness: FreshnessStore::new(dynamodb, config.counts_table),
            layout: config.layout,
            period: config.period,
            chunk_records: config.chunk_records,
            marked: Arc::default(),
        }
    }

    /// Handles one batch. Never an `Err` for a record's failure: that is a
    /// `batchItemFailures` entry at the first record not applied, so Lambda retries from it.
    pub async fn handle(
        &self,
        event: LambdaEvent<TimeWindowEvent>,
    ) -> Result<TimeWindowEventResponse, lambda_runtime::Error> {
        let TimeWindowEvent {
            dynamo_db_event,
            time_window_properties,
            ..
        } = event.payload;
        let shard = time_window_properties.shard_id;
        let span = tracing::info_span!(
            "batch",
            records = dynamo_db_event.records.len(),
            shard = shard.as_deref().unwrap_or_default()
        );
        let failure = self
            .handle_records(&dynamo_db_event.records, shard.as_deref())
            .instrument(span)
            .await;
        let mut response = TimeWindowEventResponse::default();
        response.time_window_event_response_properties.state = time_window_properties.state;
        response.batch_item_failures.extend(failure);
        Ok(response)
    }

    async fn handle_records(
        &self,
        records: &[EventRecord],
        shard: Option<&str>,
    ) -> Option<DynamoDbBatchItemFailure> {
        let mut tally = Tally::default();
        let decoded: Vec<ChangeRecord> = records
            .iter()
            .map(|record| {
                decode(record).unwrap_or_else(|err| {
                    report_unreadable(record, &err.to_string());
                    unreadable(record)
                })
            })
            .collect();
        // Boxed: the chunk loop's state machine is deep enough to overflow the compiler's
        // layout query depth when nested inline inside the runtime's service future.
        let result = Box::pin(self.apply(&decoded, &mut tally)).await;
        let applied = match &result {
            Ok(()) => decoded.len(),
            Err((at, _)) => *at,
        };
        self.advance_watermark(shard, &records[..applied], &decoded[..applied])
            .await;
        report(&tally, decoded.len());
        let (at, error) = result.err()?;
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
        Some(failed)
    }

    /// Commits `records` chunk by chunk; on failure, the index of the first record not applied.
    async fn apply(
        &self,
        records: &[ChangeRecord],
        tally: &mut Tally,
    ) -> Result<(), (usize, RecordError)> {
        let hot = hot_items(records);
        let mut at = 0;
        while at < records.len() {
            let rest = &records[at..];
            let len = next_chunk_len(rest, self.chunk_records);
            let chunk = &rest[..len];
            let claim_id = chunk[0].event_id.as_str();
            let deltas = route_chunk(chunk, claim_id, &hot, self.layout, self.period);
            let overflowing: BTreeSet<&ItemId> = deltas
                .keys()
                .filter(|target| matches!(target.lane, Lane::Overflow(_)))
                .map(|target| &target.item)
                .collect();
            self.mark_overflow(overflowing)
                .await
                .map_err(|e| (at, e.into()))?;
            let commit = Chunk {
                claim_id,
                event_ids: chunk.iter().map(|r| r.event_id.as_str()).collect(),
                deltas: &deltas,
            };
            let outcome = self
                .writer
                .commit(&commit, now_ms())
                .await
                .map_err(|e| (at, e.into()))?;
            at += match outcome {
                CommitOutcome::Committed => {
                    let applied_at = now_ms();
                    tally.committed_chunks += 1;
                    tally.count_row_writes += deltas.len();
                    tally.overflow_row_writes += deltas
                        .keys()
                        .filter(|t| matches!(t.lane, Lane::Overflow(_)))
                        .count();
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
        }
        Ok(())
    }

    /// Writes the overflow marker of each item this container has not marked yet, before any
    /// of its overflow rows can exist.
    async fn mark_overflow(&self, items: BTreeSet<&ItemId>) -> Result<(), StoreError> {
        let unmarked: Vec<ItemId> = {
            let marked = self.marked.lock().expect("marker cache lock");
            items
                .into_iter()
                .filter(|item| !marked.contains(*item))
                .cloned()
                .collect()
        };
        for item in unmarked {
            self.writer
                .mark_overflow(&item, self.layout.overflow_partitions)
                .await?;
            let mut marked = self.marked.lock().expect("marker cache lock");
            if marked.len() >= MARKED_ITEMS_CAP {
                marked.clear();
            }
            marked.insert(item);
        }
        Ok(())
    }

    /// Everything up to the last applied record of this shard is counted now: its stream
    /// time is the shard's new watermark. The counts are committed whatever happens here; a
    /// lost watermark only keeps `as_of` older until the next batch, so it is reported, not
    /// retried.
    async fn advance_watermark(
        &self,
        shard: Option<&str>,
        records: &[EventRecord],
        applied: &[ChangeRecord],
    ) {
        let Some(last) = applied.last() else {
            return;
        };
        let Some(shard) = shard else {
            tracing::error!("the event names no shard (no tumbling window on the mapping?): as_of cannot advance");
            Report::new("Likes/Pipeline")
                .value("WatermarkFailures", "Count", 1.0)
                .emit();
            return;
        };
        let probe = records.iter().rev().find_map(probe_key);
        let now = now_ms();
        match self
            .freshness
            .advance(shard, last.stream_time_ms, probe.as_deref(), now)
            .await
        {
            Ok(()) => Report::new("Likes/Pipeline")
                .value(
                    "WatermarkLagMs",
                    "Milliseconds",
                    (now - last.stream_time_ms) as f64,
                )
                .property("shard", shard)
                .emit(),
            Err(err) => {
                tracing::error!(shard, error = %err, "could not advance the shard's watermark");
                Report::new("Likes/Pipeline")
                    .value("WatermarkFailures", "Count", 1.0)
                    .emit();
            }
        }
    }
}

/// A record the aggregator cannot read: counted as no change, reported with its keys so an
/// operator can find the row, and left to reconciliation.
fn report_unreadable(record: &EventRecord, error: &str) {
    let keys = serde_json::to_string(&record.change.keys).unwrap_or_default();
    tracing::error!(event_id = %record.event_id, keys = %keys, error, "unreadable record counted as no change");
    Report::new("Likes/Pipeline")
        .value("UnreadableRecords", "Count", 1.0)
        .property("event_id", record.event_id.clone())
        .property("keys", keys)
        .emit();
}

fn report(tally: &Tally, records: usize) {
    Report::new("Likes/Pipeline")
        .value("RecordsReceived", "Count", records as f64)
        .value("ChunksCommitted", "Count", tally.committed_chunks as f64)
        .value("ChunksAlreadyClaimed", "Count", tally.skipped_chunks as f64)
        .value("CountRowWrites", "Count", tally.count_row_writes as f64)
        .value(
            "OverflowRowWrites",
            "Count",
            tally.overflow_row_writes as f64,
        )
        .values("StalenessMs", "Milliseconds", &tally.staleness_ms)
        .emit();
}
