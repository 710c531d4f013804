//! Reads one stream shard and routes its records to the virtual shards that share it:
//! moto keeps one shard per table, AWS several, so the local mapping splits each real
//! shard by partition key into `LIKES_STREAM_SHARDS` virtual ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use tokio::sync::mpsc::UnboundedSender;

use super::mapping::StartingPosition;
use super::record::{virtual_shard, BufferedRecord, RecordError};
use super::{epoch_now, Shared, POLL_INTERVAL};
use crate::faults::CounterCells;

/// Pause after a failed stream read before the iterator is acquired again.
pub const READ_ERROR_PAUSE: Duration = Duration::from_millis(200);
/// GetRecords takes at most 1,000 records.
const READ_LIMIT: i32 = 1000;

/// The name of virtual shard `n` of a stream shard.
pub fn virtual_shard_id(stream_shard: &str, n: usize) -> String {
    format!("{stream_shard}-v{n}")
}

#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("{0}")]
    Stream(String),
    #[error("unreadable stream record: {0}")]
    Record(#[from] RecordError),
}

pub struct StreamReader {
    shared: Arc<Shared>,
    shard_id: String,
    streams: aws_sdk_dynamodbstreams::Client,
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
        streams: aws_sdk_dynamodbstreams::Client,
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
        loop {
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
                        POLL_INTERVAL
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
            tokio::time::sleep(pause).await;
        }
    }

    /// One GetRecords; the number of records read and routed.
    async fn read(&mut self) -> Result<usize, ReadError> {
        let mut iterator = match self.iterator.take() {
            Some(iterator) => iterator,
            None => self.acquire_iterator().await.map_err(ReadError::Stream)?,
        };
        if self.shared.faults.take_stale_iterator() {
            // Same shape, unknown to the stream: what an expired iterator looks like.
            iterator = format!("{}expired", iterator.trim_end_matches('='));
        }
        // A stale or expired iterator (moto: HTTP 500): the caller acquires a new one after
        // the last record read, so nothing is skipped or read twice.
        let output = self
            .streams
            .get_records()
            .shard_iterator(iterator)
            .limit(READ_LIMIT)
            .send()
            .await
            .map_err(|e| ReadError::Stream(DisplayErrorContext(e).to_string()))?;
        let arrived = Instant::now();
        let config = &self.shared.config;
        let records = output.records.unwrap_or_default();
        for record in &records {
            // Never skip a record silently: an unreadable one stops the read here, and the
            // next read starts at it again.
            let n = virtual_shard(record, &config.partition_key, self.outlets.len())?;
            let buffered = BufferedRecord::read(record, &config.stream_arn, arrived)?;
            self.tail = Some(buffered.raw_sequence_number.clone());
            let id = virtual_shard_id(&self.shard_id, n);
            self.shared.shard_progress(&id, |p| p.routed += 1);
            // A virtual shard's inbox outlives the reader unless the mapping is stopping.
            let _ = self.outlets[n].send(buffered);
        }
        self.shared
            .stream_progress(&self.shard_id, |p| p.records_read += records.len() as u64);
        match output.next_shard_iterator {
            Some(next) => self.iterator = Some(next),
            None => {
                self.closed = true;
                self.outlets.clear();
            }
        }
        Ok(records.len())
    }

    async fn acquire_iterator(&self) -> Result<String, String> {
        let request = self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.shared.config.stream_arn)
            .shard_id(&self.shard_id);
        let request = match (&self.tail, self.shared.config.starting_position) {
            (Some(tail), _) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(tail),
            (None, StartingPosition::TrimHorizon) => {
                request.shard_iterator_type(ShardIteratorType::TrimHorizon)
            }
            (None, StartingPosition::Latest) => {
                request.shard_iterator_type(ShardIteratorType::Latest)
            }
        };
        request
            .send()
            .await
            .map_err(|e| DisplayErrorContext(e).to_string())?
            .shard_iterator
            .ok_or_else(|| "GetShardIterator returned no iterator".to_owned())
    }
}
