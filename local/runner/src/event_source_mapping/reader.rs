//! Reads one stream shard and routes its records to the virtual shards that share it:
//! moto keeps one shard per table, AWS several, so the local mapping splits each real
//! DynamoDB stream shard by partition key into `LIKES_STREAM_SHARDS` virtual ones. A
//! Kinesis shard has one virtual shard: itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::mapping::StreamSource;
use super::record::{BufferedRecord, RecordError};
use super::stream::StreamClient;
use super::{epoch_now, Shared, DYNAMODB_READ_INTERVAL, KINESIS_READ_INTERVAL};
use crate::faults::CounterCells;

/// Pause after a failed stream read before the iterator is acquired again.
pub const READ_ERROR_PAUSE: Duration = Duration::from_millis(200);
/// GetRecords takes at most 1,000 records.
const READ_LIMIT: i32 = 1000;

/// The name of virtual shard `n` of a stream shard: a Kinesis shard is not split, so its
/// one virtual shard keeps its name (the `shardId-…` of its records' `eventID`).
pub fn virtual_shard_id(source: &StreamSource, stream_shard: &str, n: usize) -> String {
    match source {
        StreamSource::DynamoDb { .. } => split_shard_id(stream_shard, n),
        StreamSource::Kinesis => stream_shard.to_owned(),
    }
}

/// Virtual shard `n` of a DynamoDB stream shard.
pub(super) fn split_shard_id(stream_shard: &str, n: usize) -> String {
    format!("{stream_shard}-v{n}")
}

#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error(transparent)]
    Stream(#[from] likes_aws::AwsError),
    #[error("unreadable stream record: {0}")]
    Record(#[from] RecordError),
}

pub struct StreamReader {
    shared: Arc<Shared>,
    shard_id: String,
    streams: Arc<StreamClient>,
    iterator: Option<String>,
    /// The last record read from the shard.
    tail: Option<String>,
    closed: bool,
    /// Virtual shard n's inbox at index n; dropped when the shard is read to its end.
    outlets: Vec<UnboundedSender<BufferedRecord>>,
}

impl StreamReader {
    pub fn new(
        shared: Arc<Shared>,
        shard_id: String,
        streams: Arc<StreamClient>,
        outlets: Vec<UnboundedSender<BufferedRecord>>,
    ) -> Self {
        Self {
            shared,
            shard_id,
            streams,
            iterator: None,
            tail: None,
            closed: false,
            outlets,
        }
    }

    pub async fn run(mut self) {
        let idle = match self.shared.config.source {
            StreamSource::DynamoDb { .. } => DYNAMODB_READ_INTERVAL,
            StreamSource::Kinesis => KINESIS_READ_INTERVAL,
        };
        let shared = self.shared.clone();
        loop {
            // Waiting from before the read: a settle that begins during it is not missed.
            let read_now = shared.read_now.notified();
            tokio::pin!(read_now);
            read_now.as_mut().enable();
            let started = (Instant::now(), epoch_now());
            let pause = match self.read().await {
                Ok(read) => {
                    if read < READ_LIMIT as usize {
                        // The read reached the shard's end as it was when the read began.
                        self.shared.stream_progress(&self.shard_id, |p| {
                            p.tip_read_at = Some(started.0);
                            p.read_through_secs = started.1;
                        });
                    }
                    if self.closed {
                        self.shared
                            .stream_progress(&self.shard_id, |p| p.finished = true);
                        return;
                    }
                    if read == 0 {
                        idle
                    } else {
                        Duration::ZERO
                    }
                }
                Err(err) => {
                    CounterCells::add(&self.shared.counters.stream_read_errors, 1);
                    tracing::debug!(shard = %self.shard_id, error = %err, "stream read failed; re-acquiring the iterator");
                    self.iterator = None;
                    self.shared.stream_progress(&self.shard_id, |p| {
                        p.last_error = Some(err.to_string());
                    });
                    READ_ERROR_PAUSE
                }
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = read_now => {}
            }
        }
    }

    /// One GetRecords; the number of records read and routed.
    async fn read(&mut self) -> Result<usize, ReadError> {
        let mut iterator = match self.iterator.take() {
            Some(iterator) => iterator,
            None => self.acquire_iterator().await?,
        };
        if self.shared.faults.take_stale_iterator() {
            // Same shape, unknown to the stream: what an expired iterator looks like.
            iterator = format!("{}expired", iterator.trim_end_matches('='));
        }
        // A stale or expired iterator (moto: HTTP 500): the caller acquires a new one after
        // the last record read, so nothing is skipped or read twice.
        let config = &self.shared.config;
        let page = self
            .streams
            .get_records(
                iterator,
                READ_LIMIT,
                &self.shard_id,
                &config.stream_arn,
                self.outlets.len(),
            )
            .await?;
        let read = page.records.len();
        for record in page.records {
            // Never skip a record silently: an unreadable one stops the read here, and the
            // next read starts at it again.
            let (n, buffered) = record?;
            self.tail = Some(buffered.raw_sequence_number.clone());
            let id = virtual_shard_id(&config.source, &self.shard_id, n);
            self.shared.shard_progress(&id, |p| p.routed += 1);
            // A virtual shard's inbox outlives the reader unless the mapping is stopping.
            let _ = self.outlets[n].send(buffered);
        }
        self.shared
            .stream_progress(&self.shard_id, |p| p.records_read += read as u64);
        match page.next_iterator {
            Some(next) => self.iterator = Some(next),
            None => {
                self.closed = true;
                self.outlets.clear();
            }
        }
        Ok(read)
    }

    async fn acquire_iterator(&self) -> Result<String, likes_aws::AwsError> {
        let config = &self.shared.config;
        self.streams
            .shard_iterator(
                &config.stream_arn,
                &self.shard_id,
                self.tail.as_deref(),
                config.starting_position,
            )
            .await
    }
}
