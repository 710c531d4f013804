//! One virtual shard as Lambda's poller treats an AWS shard: its own buffer, batching window
//! and batch size, checkpoint, retries, tumbling window state and function instance, with
//! one batch in flight at a time (ParallelizationFactor 1), in stream order.

use std::collections::VecDeque;
use std::sync::Arc;

use aws_lambda_events::event::dynamodb::EventRecord;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::UnboundedReceiver;

use super::destination::GiveUp;
use super::invoke::{Answer, FunctionInstance, Outcome};
use super::mapping::MappingConfig;
use super::record::{plain_event, BufferedRecord, SequenceNumber};
use super::window::{Bounds, OpenWindow};
use super::{epoch_now, Delivery, Shared, POLL_INTERVAL};
use crate::faults::CounterCells;

/// Lambda's synchronous invocation payload limit.
const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;

/// A failed batch waiting for its retry.
#[derive(Debug, Clone)]
pub(super) struct Retry {
    /// The batch's first record (none for a window's final invocation): the count of
    /// attempts starts again when it moves on.
    pub head: Option<SequenceNumber>,
    pub failed_attempts: u32,
    pub len: usize,
}

/// Where a virtual shard sits: its index n (as fault switches name it), its id
/// (`<stream shard>-v<n>`) and the stream shard it is split from.
pub struct ShardPlace {
    pub index: usize,
    pub id: String,
    pub stream_shard: String,
}

pub struct VirtualShard {
    pub(super) shared: Arc<Shared>,
    pub(super) place: ShardPlace,
    pub(super) function: FunctionInstance,
    /// A second instance of the function, for a batch handed to two consumers at once.
    #[cfg(any(test, feature = "faults"))]
    pub(super) twin: FunctionInstance,
    pub(super) sqs: aws_sdk_sqs::Client,
    pub(super) inbox: UnboundedReceiver<BufferedRecord>,
    /// The stream shard was read to its end: nothing more will arrive.
    pub(super) drained: bool,
    pub(super) buffer: VecDeque<BufferedRecord>,
    pub(super) retry: Option<Retry>,
    /// A batch that succeeded and will be delivered again (a duplicate-delivery fault).
    pub(super) duplicate: Option<usize>,
    pub(super) window: Option<OpenWindow>,
}

impl VirtualShard {
    pub fn new(
        shared: Arc<Shared>,
        place: ShardPlace,
        function: FunctionInstance,
        #[cfg(any(test, feature = "faults"))] twin: FunctionInstance,
        sqs: aws_sdk_sqs::Client,
        inbox: UnboundedReceiver<BufferedRecord>,
    ) -> Self {
        Self {
            shared,
            place,
            function,
            #[cfg(any(test, feature = "faults"))]
            twin,
            sqs,
            inbox,
            drained: false,
            buffer: VecDeque::new(),
            retry: None,
            duplicate: None,
            window: None,
        }
    }

    pub(super) fn config(&self) -> &MappingConfig {
        &self.shared.config
    }

    pub(super) fn counters(&self) -> &CounterCells {
        &self.shared.counters
    }

    pub async fn run(mut self) {
        loop {
            self.take_arrivals();
            if self.drained && self.buffer.is_empty() && self.window.is_none() {
                self.shared
                    .shard_progress(&self.place.id, |p| p.finished = true);
                return;
            }
            let faults = &self.shared.faults;
            if self.shared.is_enabled()
                && !faults.is_stalled(self.place.index, &self.place.stream_shard)
            {
                if let Some(expired) = self.expired_records() {
                    self.give_up(expired, GiveUp::RecordAgeExceeded).await;
                    continue;
                }
                if self.final_due() {
                    self.deliver(0).await;
                    continue;
                }
                if let Some(len) = self.next_batch_len() {
                    self.deliver(len).await;
                    continue;
                }
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    pub(super) fn take_arrivals(&mut self) {
        loop {
            match self.inbox.try_recv() {
                Ok(record) => self.buffer.push_back(record),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.drained = true;
                    return;
                }
            }
        }
    }

    /// The leading records older than `MaximumRecordAgeInSeconds`, if any.
    fn expired_records(&self) -> Option<usize> {
        let max_age = self.config().maximum_record_age?;
        let now = epoch_now() + self.shared.faults.record_age_offset().as_secs_f64();
        let expired = self
            .buffer
            .iter()
            .take_while(|r| now - r.created_at_secs > max_age.as_secs_f64())
            .count();
        (expired > 0).then_some(expired)
    }

    fn bounds_of(&self, record: &BufferedRecord) -> Option<Bounds> {
        let length = self.config().tumbling_window?;
        Some(Bounds::holding(record.created_at_secs, length))
    }

    /// True when the open window's final invocation is the next one.
    fn final_due(&self) -> bool {
        let Some(open) = &self.window else {
            return false;
        };
        if self.retry.as_ref().is_some_and(|r| r.head.is_some()) {
            return false;
        }
        let head = self.buffer.front().and_then(|r| self.bounds_of(r));
        open.final_due(
            self.shared.read_through_secs(&self.place.stream_shard),
            head,
        )
    }

    /// How many records the next invocation holds, if one is due.
    fn next_batch_len(&self) -> Option<usize> {
        let head = self.buffer.front()?;
        // A batch holds records of one window only.
        let head_bounds = self.bounds_of(head);
        let in_window = self
            .buffer
            .iter()
            .take_while(|r| self.bounds_of(r) == head_bounds)
            .count();
        let window_over = head_bounds.is_some_and(|b| {
            in_window < self.buffer.len()
                || self.shared.read_through_secs(&self.place.stream_shard) >= b.end as f64
        });
        let due = if let Some(retry) = &self.retry {
            Some(retry.len)
        } else if let Some(len) = self.duplicate {
            Some(len)
        } else {
            let cap = self
                .shared
                .faults
                .batch_cap()
                .map_or(self.config().batch_size, |cap| {
                    cap.min(self.config().batch_size)
                });
            let due = in_window >= cap
                || window_over
                || head.arrived.elapsed() >= self.config().batching_window;
            due.then_some(in_window.min(cap))
        }?;
        // Lambda cuts a batch early rather than exceed the invocation payload limit.
        let mut bytes = 0;
        let fits = self
            .buffer
            .iter()
            .take(due)
            .take_while(|r| {
                bytes += r.json_bytes + 1;
                bytes <= MAX_PAYLOAD_BYTES
            })
            .count();
        Some(fits.clamp(1, due.min(self.buffer.len())))
    }

    /// Invokes the function with the first `len` buffered records (none: the open window's
    /// final invocation) and acts on its answer.
    async fn deliver(&mut self, len: usize) {
        let is_final = len == 0;
        let is_retry = self.retry.is_some();
        let is_duplicate = self.duplicate.take().is_some();
        let counters = self.counters();
        CounterCells::add(&counters.invocations, 1);
        CounterCells::add(&counters.records_delivered, len as u64);
        if is_retry {
            CounterCells::add(&counters.retries, 1);
        }
        if is_duplicate {
            CounterCells::add(&counters.duplicate_deliveries, 1);
        }
        let batch = self.buffer.iter().take(len).map(|r| &r.lambda);
        let mut open = match (
            self.window.take(),
            self.buffer.front().and_then(|r| self.bounds_of(r)),
        ) {
            (Some(open), _) if is_final => Some(open),
            (Some(open), Some(head)) if open.bounds == head => Some(open),
            (_, head) => head.map(OpenWindow::new),
        };
        let (payload, delivery) = match &open {
            Some(open) => {
                // Only DynamoDB mappings take tumbling windows.
                let records: Vec<EventRecord> =
                    batch.filter_map(|r| r.dynamodb().cloned()).collect();
                let event =
                    open.event(records, &self.place.id, &self.config().stream_arn, is_final);
                (
                    serde_json::to_vec(&event),
                    Delivery::of_window(&event, open.bounds),
                )
            }
            None => (plain_event(batch), Delivery::plain(&self.place.id, len)),
        };
        self.shared.record_delivery(delivery);
        self.shared.shard_progress(&self.place.id, |p| {
            p.in_flight = true;
            p.invocations += 1;
            p.records_delivered += len as u64;
        });
        let answer = match payload {
            Ok(payload) => self.invoke(&payload, len).await,
            Err(err) => Answer::failed(format!("the event does not serialize: {err}")),
        };
        self.shared
            .shard_progress(&self.place.id, |p| p.in_flight = false);
        if let (Some(open), Some(state)) = (open.as_mut(), answer.state) {
            open.carry(state);
        }
        let succeeded = !matches!(answer.outcome, Outcome::FunctionError(_));
        // A window's final invocation that succeeded closes it; the next records open a
        // new one, with fresh state.
        self.window = open.filter(|_| !(is_final && succeeded));
        let window = self.window.as_ref().map(|w| (w.bounds.start, w.bounds.end));
        self.shared
            .shard_progress(&self.place.id, |p| p.open_window = window);
        match answer.outcome {
            Outcome::Success => {
                self.retry = None;
                if !is_final && self.shared.faults.take_duplicate() {
                    // As if the checkpoint were lost: the same records go again.
                    self.duplicate = Some(len);
                } else {
                    self.acknowledge(len);
                }
            }
            Outcome::PartialFailure(at) => {
                CounterCells::add(&self.counters().partial_failures, 1);
                self.acknowledge(at);
                self.failed(len - at).await;
            }
            Outcome::FunctionError(reason) => {
                CounterCells::add(&self.counters().function_errors, 1);
                self.shared
                    .shard_progress(&self.place.id, |p| p.last_error = Some(reason.clone()));
                tracing::debug!(shard = %self.place.id, %reason, "function error; the batch is retried");
                self.failed(len).await;
            }
        }
    }

    async fn invoke(&self, payload: &[u8], len: usize) -> Answer {
        let faults = &self.shared.faults;
        if faults.is_failing(self.place.index) || faults.take_invocation_failure() {
            return Answer::failed("the invocation failed (injected fault)");
        }
        match self.call(payload).await {
            Ok(response) => {
                let batch: Vec<BufferedRecord> = self.buffer.iter().take(len).cloned().collect();
                Answer::read(&response, &batch, self.config())
            }
            Err(err) => Answer::failed(err.to_string()),
        }
    }

    #[cfg(not(any(test, feature = "faults")))]
    async fn call(&self, payload: &[u8]) -> Result<Vec<u8>, crate::lambda::InvokeError> {
        self.function
            .call(payload, self.config(), &self.shared.counters)
            .await
    }

    /// The function's answer; when a fault hands the batch to a second instance too, that
    /// one runs beside it, started its stagger later, and its answer is dropped.
    #[cfg(any(test, feature = "faults"))]
    async fn call(&self, payload: &[u8]) -> Result<Vec<u8>, crate::lambda::InvokeError> {
        let counters = &self.shared.counters;
        let first = self.function.call(payload, self.config(), counters);
        let Some(stagger) = self.shared.faults.take_twin() else {
            return first.await;
        };
        CounterCells::add(&counters.twin_deliveries, 1);
        let second = async {
            tokio::time::sleep(stagger).await;
            self.twin.call(payload, self.config(), counters).await
        };
        tokio::join!(first, second).0
    }

    /// The checkpoint moves past the first `n` buffered records.
    pub(super) fn acknowledge(&mut self, n: usize) {
        let mut last = None;
        for _ in 0..n {
            last = self.buffer.pop_front().map(|r| r.raw_sequence_number);
        }
        if let Some(last) = last {
            CounterCells::add(&self.counters().records_acknowledged, n as u64);
            self.shared.shard_progress(&self.place.id, |p| {
                p.acknowledged += n as u64;
                p.checkpoint = Some(last);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use aws_lambda_events::event::kinesis::KinesisEvent;
    use aws_sdk_kinesis::primitives::Blob;
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;
    use crate::event_source_mapping::invoke::Script;
    use crate::event_source_mapping::mapping::{StartingPosition, StreamSource};

    const STREAM: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/events";
    const SHARD: &str = "shardId-000000000001";

    fn config() -> MappingConfig {
        MappingConfig {
            function: "Consumer".into(),
            event: "Events".into(),
            handler: "consumer".into(),
            function_arn: "arn:aws:lambda:us-east-1:123456789012:function:p-Consumer".into(),
            stream_arn: STREAM.into(),
            source: StreamSource::Kinesis,
            starting_position: StartingPosition::TrimHorizon,
            batch_size: 5,
            batching_window: Duration::ZERO,
            tumbling_window: None,
            maximum_retry_attempts: Some(3),
            maximum_record_age: None,
            report_batch_item_failures: true,
            on_failure: None,
            enabled: true,
            function_timeout: Duration::from_secs(5),
            environment: BTreeMap::new(),
        }
    }

    fn record(seq: u64) -> BufferedRecord {
        let record = aws_sdk_kinesis::types::Record::builder()
            .sequence_number(format!("4959{seq:020}"))
            .data(Blob::new(format!("event {seq}")))
            .partition_key(format!("item#{seq}"))
            .approximate_arrival_timestamp(aws_smithy_types::DateTime::from_secs(1_700_000_000))
            .build()
            .unwrap();
        BufferedRecord::read_kinesis(&record, SHARD, STREAM, Instant::now()).unwrap()
    }

    /// The data of every record of every event the function received, in order.
    fn deliveries(script: &Script) -> Vec<Vec<String>> {
        let received = script.received.lock().unwrap();
        received
            .iter()
            .map(|event| {
                let event: KinesisEvent = serde_json::from_value(event.clone()).unwrap();
                event
                    .records
                    .iter()
                    .map(|r| String::from_utf8(r.kinesis.data.to_vec()).unwrap())
                    .collect()
            })
            .collect()
    }

    #[tokio::test]
    async fn kinesis_batches_arrive_in_order_and_a_partial_failure_retries_from_the_failed_record()
    {
        let shared = Arc::new(Shared {
            config: config(),
            virtual_shards: 1,
            faults: Arc::default(),
            counters: Arc::default(),
            enabled: true.into(),
            stop: tokio_util::sync::CancellationToken::new(),
            progress: Default::default(),
            deliveries: Default::default(),
            failure: Default::default(),
            read_now: Default::default(),
        });
        let script = Arc::new(Script::default());
        // The first batch fails at its third record (and its fifth: the lowest counts); the
        // retry from it succeeds, and is delivered twice as if its checkpoint were lost.
        let failed = record(3).raw_sequence_number;
        script.answers.lock().unwrap().push_back(json!({
            "batchItemFailures": [
                {"itemIdentifier": record(5).raw_sequence_number},
                {"itemIdentifier": failed},
            ]
        }));
        shared.faults.duplicate_next_batches(1);
        let (outlet, inbox) = mpsc::unbounded_channel();
        for seq in 1..=5 {
            outlet.send(record(seq)).unwrap();
        }
        drop(outlet);
        let place = ShardPlace {
            index: 0,
            id: SHARD.into(),
            stream_shard: SHARD.into(),
        };
        let sqs = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::Config::builder()
                .behavior_version_latest()
                .build(),
        );
        let shard = VirtualShard::new(
            shared.clone(),
            place,
            FunctionInstance::scripted(script.clone()),
            FunctionInstance::scripted(script.clone()),
            sqs,
            inbox,
        );
        tokio::time::timeout(Duration::from_secs(10), shard.run())
            .await
            .expect("the shard finishes its records");

        let all: Vec<String> = (1..=5).map(|n| format!("event {n}")).collect();
        assert_eq!(
            deliveries(&script),
            [all.clone(), all[2..].to_vec(), all[2..].to_vec()],
            "in order; the retry starts at the lowest failed record; the duplicate repeats it"
        );
        let first = script.received.lock().unwrap()[0]["Records"][0].clone();
        assert_eq!(first["eventSource"], "aws:kinesis");
        assert_eq!(first["eventSourceARN"], STREAM);
        assert_eq!(
            first["eventID"],
            format!("{SHARD}:{}", record(1).raw_sequence_number)
        );
        assert_eq!(first["kinesis"]["partitionKey"], "item#1");
        assert_eq!(
            first["kinesis"]["data"], "ZXZlbnQgMQ==",
            "base64 of \"event 1\""
        );
        let typed: KinesisEvent =
            serde_json::from_value(script.received.lock().unwrap()[0].clone()).unwrap();
        assert_eq!(
            typed.records[0]
                .kinesis
                .approximate_arrival_timestamp
                .timestamp(),
            1_700_000_000
        );
        let progress = shared.with_progress(|p| p.shards[SHARD].clone());
        assert_eq!(progress.acknowledged, 5);
        assert_eq!(
            progress.checkpoint.as_deref(),
            Some(record(5).raw_sequence_number.as_str())
        );
        let counters = shared.counters.snapshot();
        assert_eq!(
            (counters.partial_failures, counters.duplicate_deliveries),
            (1, 1)
        );
    }
}
