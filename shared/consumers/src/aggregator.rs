//! The count aggregator: Reactions stream batches become exactly-once additions to sharded
//! count rows, and each shard's watermark moves to the last record applied.
//!
//! Per invocation (one stream shard's records, in order): finish the intent a crashed attempt
//! left, skip the records the shard's progress covers, then chunk by chunk freeze the
//! chunk's deltas as the shard's next intent, apply it (one conditional ADD per count row
//! however many records it holds) and move the progress, which is also the shard's watermark
//! (see [`likes_store::counts::CountsWriter`]). The first failure stops the batch and is
//! reported at its chunk's first record, where Lambda's retry will start. The mapping runs
//! with a tumbling window only because that event names the stream shard, which the progress
//! is kept per; the window's state is handed back untouched.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use aws_lambda_events::event::dynamodb::{EventRecord, TimeWindowEvent, TimeWindowEventResponse};
use aws_lambda_events::event::streams::DynamoDbBatchItemFailure;
use lambda_runtime::LambdaEvent;
use likes_core::clock::now_ms;
use likes_core::pipeline::{
    covered, hot_items, next_intent, route_chunk, ChangeRecord, CountLayout, Lane, ListedBuckets,
    INTENT_ABANDON_MS,
};
use likes_core::reconcile::Period;
use likes_core::ItemId;
use likes_store::metrics::Report;
use likes_store::{Advance, CountIntent, CountsWriter, ShardProgress, StoreError};
use tracing::Instrument;

use crate::decode::{decode, probe_key, unreadable};
use crate::ConfigError;

/// Items whose overflow marker this container already wrote; forgotten past this many (a
/// forgotten one costs one more idempotent marker write).
const MARKED_ITEMS_CAP: usize = 100_000;

#[derive(Debug, Clone)]
pub struct AggregatorConfig {
    pub counts_table: String,
    pub layout: CountLayout,
    /// Count rows keep subtotals per epoch of this length, and count the changes near its
    /// boundaries (reconciliation cuts).
    pub period: Period,
    /// At most this many records per chunk (one intent); at most
    /// [`MAX_CHUNK_RECORDS`](likes_core::pipeline::MAX_CHUNK_RECORDS), as the variable's
    /// range says.
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

#[derive(Debug, Clone)]
pub struct Aggregator {
    writer: CountsWriter,
    layout: CountLayout,
    period: Period,
    chunk_records: usize,
    marked: Arc<Mutex<HashSet<ItemId>>>,
    /// The likers buckets this container's applied intents listed.
    listed: Arc<Mutex<ListedBuckets>>,
}

/// Where a pass over a batch ended.
enum Step {
    /// Every record is applied.
    Done,
    /// Another consumer of the shard claimed or moved a step first: read the shard again.
    Overtaken,
}

/// What one invocation did, for metrics.
#[derive(Debug, Default)]
struct Tally {
    /// Records an earlier delivery applied already (a retry's or a duplicate's).
    covered_records: usize,
    intents_applied: usize,
    /// Pending intents too old to apply, given up to reconciliation.
    intents_abandoned: usize,
    /// Times another consumer of the shard claimed or moved a step first.
    overtaken: usize,
    count_row_writes: usize,
    overflow_row_writes: usize,
    /// Event time to applied, for each change this invocation committed.
    staleness_ms: Vec<f64>,
}

impl Aggregator {
    pub fn new(config: AggregatorConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            writer: CountsWriter::new(dynamodb, config.counts_table),
            layout: config.layout,
            period: config.period,
            chunk_records: config.chunk_records,
            marked: Arc::default(),
            listed: Arc::default(),
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
        let first = records.first()?;
        let Some(shard) = shard else {
            // Without the shard there is no progress to apply exactly once against: the
            // batch waits (and the mapping's alarms fire) until the mapping is fixed.
            let error = "the event names no shard (no tumbling window on the mapping?)";
            return Some(report_failure(first, error));
        };
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
        let result = Box::pin(self.apply(shard, records, &decoded, &mut tally)).await;
        report(&tally, decoded.len(), shard);
        let (at, error) = result.err()?;
        Some(report_failure(&records[at], &error.to_string()))
    }

    /// Applies `records` of `shard` chunk by chunk; on failure, the index of the first record
    /// not applied. Another consumer of the shard at once (a replaced mapping beside the new
    /// one, a batch delivered twice) may claim a step first: this one then reads the shard
    /// again and goes on from where the other left it. Each time, the progress moved, so it
    /// ends within a read per record.
    async fn apply(
        &self,
        shard: &str,
        records: &[EventRecord],
        decoded: &[ChangeRecord],
        tally: &mut Tally,
    ) -> Result<(), (usize, StoreError)> {
        let mut at = 0;
        for _ in 0..=decoded.len() {
            match self
                .apply_from(shard, records, decoded, &mut at, tally)
                .await
            {
                Ok(Step::Done) => return Ok(()),
                Ok(Step::Overtaken) => tally.overtaken += 1,
                Err(err) => return Err((at, err)),
            }
        }
        let error = format!("shard {shard}'s progress kept moving under its consumer");
        Err((at, StoreError::Corrupt(error)))
    }

    /// One pass over the records from the shard's progress as read now: `at` is the first
    /// record not applied yet.
    async fn apply_from(
        &self,
        shard: &str,
        records: &[EventRecord],
        decoded: &[ChangeRecord],
        at: &mut usize,
        tally: &mut Tally,
    ) -> Result<Step, StoreError> {
        let state = self.writer.shard_state(shard).await?;
        let mut progress = state.progress;
        if let Some(pending) = state.pending {
            let Some(finished) = self
                .finish(shard, progress.as_ref(), &pending, tally)
                .await?
            else {
                return Ok(Step::Overtaken);
            };
            progress = Some(finished);
        }
        let covered = covered(decoded, progress.as_ref().map(|p| p.through_seq.as_str()));
        tally.covered_records = tally.covered_records.max(covered);
        *at = (*at).max(covered);
        let hot = hot_items(&decoded[*at..]);
        while *at < decoded.len() {
            let end = (*at + self.chunk_records).min(decoded.len());
            let chunk = &decoded[*at..end];
            let last = &chunk[chunk.len() - 1];
            let probe_key = records[*at..end].iter().rev().find_map(probe_key);
            let mut deltas = route_chunk(chunk, shard, &hot, self.layout, self.period);
            self.listed
                .lock()
                .expect("listed buckets lock")
                .drop_listed(&mut deltas);
            let done = progress.as_ref().and_then(|p| p.intent);
            let intent = CountIntent {
                n: next_intent(done, now_ms()),
                last_seq: last.sequence_number.clone(),
                stream_time_ms: last.stream_time_ms,
                probe_key,
                deltas,
            };
            if intent.deltas.is_empty() {
                // Nothing to count: the watermark moves, the progress stays where it is.
                if !self
                    .advance(shard, progress.as_ref(), &intent, None)
                    .await?
                {
                    return Ok(Step::Overtaken);
                }
            } else {
                match self
                    .commit(shard, progress.as_ref(), &intent, tally)
                    .await?
                {
                    Some(moved) => progress = Some(moved),
                    None => return Ok(Step::Overtaken),
                }
            }
            let applied_at = now_ms();
            tally.staleness_ms.extend(
                chunk
                    .iter()
                    .filter_map(|r| r.change.as_ref())
                    .map(|c| (applied_at - c.event_time_ms) as f64),
            );
            *at = end;
        }
        Ok(Step::Done)
    }

    /// Claims the step after `was` with one chunk's intent, applies and completes it: the
    /// progress after it, or `None` when another consumer claimed or completed the step.
    async fn commit(
        &self,
        shard: &str,
        was: Option<&ShardProgress>,
        intent: &CountIntent,
        tally: &mut Tally,
    ) -> Result<Option<ShardProgress>, StoreError> {
        let overflowing: BTreeSet<&ItemId> = intent
            .deltas
            .keys()
            .filter(|target| matches!(target.lane, Lane::Overflow(_)))
            .map(|target| &target.item)
            .collect();
        self.mark_overflow(overflowing).await?;
        // The single-writer guard, before any count row is written.
        if !self.writer.begin(shard, was, intent, now_ms()).await? {
            return Ok(None);
        }
        self.finish(shard, was, intent, tally).await
    }

    /// Applies an intent begun and moves the progress past it; one older than
    /// [`INTENT_ABANDON_MS`] is given up instead (reported: reconciliation repairs what it
    /// did not add). `None` when another consumer moved the progress first (a row that took
    /// the intent from both took it once).
    async fn finish(
        &self,
        shard: &str,
        was: Option<&ShardProgress>,
        intent: &CountIntent,
        tally: &mut Tally,
    ) -> Result<Option<ShardProgress>, StoreError> {
        if now_ms() - intent.n > INTENT_ABANDON_MS {
            tracing::error!(
                shard,
                intent = intent.n,
                "an intent too old to apply is given up to reconciliation"
            );
            tally.intents_abandoned += 1;
        } else {
            let took = self.writer.apply(shard, intent, now_ms()).await?;
            self.listed
                .lock()
                .expect("listed buckets lock")
                .remember(&intent.deltas);
            tally.intents_applied += 1;
            tally.count_row_writes += took;
            tally.overflow_row_writes += intent
                .deltas
                .keys()
                .filter(|t| matches!(t.lane, Lane::Overflow(_)))
                .count();
        }
        let moved = self
            .advance(shard, was, intent, Some((&intent.last_seq, intent.n)))
            .await?;
        Ok(moved.then(|| ShardProgress {
            through_seq: intent.last_seq.clone(),
            intent: Some(intent.n),
        }))
    }

    /// Moves the shard's watermark to the intent's last record and, once it is `completed`,
    /// its progress; `false` when another consumer moved it first.
    async fn advance(
        &self,
        shard: &str,
        was: Option<&ShardProgress>,
        intent: &CountIntent,
        completed: Option<(&str, i64)>,
    ) -> Result<bool, StoreError> {
        let to = Advance {
            stream_time_ms: intent.stream_time_ms,
            probe_key: intent.probe_key.as_deref(),
            completed,
        };
        let now = now_ms();
        let moved = self.writer.advance(shard, was, to, now).await?;
        if moved {
            Report::new("Likes/Pipeline")
                .value(
                    "WatermarkLagMs",
                    "Milliseconds",
                    (now - intent.stream_time_ms) as f64,
                )
                .property("shard", shard)
                .emit();
        }
        Ok(moved)
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
}

/// The failure entry for `record`, where Lambda's retry starts: logged and counted.
fn report_failure(record: &EventRecord, error: &str) -> DynamoDbBatchItemFailure {
    tracing::error!(
        event_id = %record.event_id,
        sequence_number = ?record.change.sequence_number,
        error,
        "batch stops at this record; Lambda retries from it"
    );
    Report::new("Likes/Pipeline")
        .value("RecordFailures", "Count", 1.0)
        .property("error", error.to_owned())
        .emit();
    let mut failed = DynamoDbBatchItemFailure::default();
    failed.item_identifier = record.change.sequence_number.clone();
    failed
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

fn report(tally: &Tally, records: usize, shard: &str) {
    Report::new("Likes/Pipeline")
        .value("RecordsReceived", "Count", records as f64)
        .value(
            "RecordsAlreadyApplied",
            "Count",
            tally.covered_records as f64,
        )
        .value("IntentsApplied", "Count", tally.intents_applied as f64)
        .value("IntentsAbandoned", "Count", tally.intents_abandoned as f64)
        .value("ConsumersOvertaken", "Count", tally.overtaken as f64)
        .value("CountRowWrites", "Count", tally.count_row_writes as f64)
        .value(
            "OverflowRowWrites",
            "Count",
            tally.overflow_row_writes as f64,
        )
        .values("StalenessMs", "Milliseconds", &tally.staleness_ms)
        .property("shard", shard)
        .emit();
}
