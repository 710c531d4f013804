//! One virtual shard as Lambda's poller treats an AWS shard: its own buffer, batching window
//! and batch size, checkpoint, retries, tumbling window state and function instance, with
//! one batch in flight at a time (ParallelizationFactor 1), in stream order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::UnboundedReceiver;

use super::destination::{self, GiveUp};
use super::invoke::{Answer, FunctionInstance, Outcome};
use super::mapping::MappingConfig;
use super::record::{BufferedRecord, SequenceNumber};
use super::window::{Bounds, OpenWindow};
use super::{epoch_now, Delivery, Shared, POLL_INTERVAL};
use crate::faults::{CounterCells, Recut};

/// Lambda's synchronous invocation payload limit.
const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;
/// Backoff before retry n: 100 ms, doubling, at most this.
const MAX_RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// A failed batch waiting for its retry.
#[derive(Debug, Clone)]
struct Retry {
    /// The batch's first record (none for a window's final invocation): the count of
    /// attempts starts again when it moves on.
    head: Option<SequenceNumber>,
    failed_attempts: u32,
    len: usize,
}

pub struct VirtualShard {
    shared: Arc<Shared>,
    /// n, of the mapping's virtual shards: the index fault switches name.
    index: usize,
    id: String,
    stream_shard: String,
    function: FunctionInstance,
    sqs: aws_sdk_sqs::Client,
    inbox: UnboundedReceiver<BufferedRecord>,
    /// The stream shard was read to its end: nothing more will arrive.
    drained: bool,
    buffer: VecDeque<BufferedRecord>,
    retry: Option<Retry>,
    /// A batch that succeeded and will be delivered again (a duplicate-delivery fault).
    duplicate: Option<usize>,
    window: Option<OpenWindow>,
}

impl VirtualShard {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        shared: Arc<Shared>,
        index: usize,
        id: String,
        stream_shard: String,
        function: FunctionInstance,
        sqs: aws_sdk_sqs::Client,
        inbox: UnboundedReceiver<BufferedRecord>,
    ) -> Self {
        Self {
            shared,
            index,
            id,
            stream_shard,
            function,
            sqs,
            inbox,
            drained: false,
            buffer: VecDeque::new(),
            retry: None,
            duplicate: None,
            window: None,
        }
    }

    fn config(&self) -> &MappingConfig {
        &self.shared.config
    }

    fn counters(&self) -> &CounterCells {
        &self.shared.counters
    }

    pub async fn run(mut self) {
        loop {
            self.take_arrivals();
            if self.drained && self.buffer.is_empty() && self.window.is_none() {
                self.shared.shard_progress(&self.id, |p| p.finished = true);
                return;
            }
            let faults = &self.shared.faults;
            if self.shared.is_enabled() && !faults.is_stalled(self.index) {
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

    fn take_arrivals(&mut self) {
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
        open.final_due(self.shared.read_through_secs(&self.stream_shard), head)
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
                || self.shared.read_through_secs(&self.stream_shard) >= b.end as f64
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
        let records: Vec<EventRecord> = self
            .buffer
            .iter()
            .take(len)
            .map(|r| r.lambda.clone())
            .collect();
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
                let event = open.event(records, &self.id, &self.config().stream_arn, is_final);
                let properties = &event.time_window_properties;
                let delivery = Delivery {
                    shard_id: properties.shard_id.clone().unwrap_or_default(),
                    records: len,
                    window: Some(open.bounds),
                    is_final_invoke_for_window: properties.is_final_invoke_for_window,
                    state: properties.state.clone(),
                };
                (serde_json::to_vec(&event), delivery)
            }
            None => {
                let mut event = Event::default();
                event.records = records;
                (serde_json::to_vec(&event), Delivery::plain(&self.id, len))
            }
        };
        self.shared.record_delivery(delivery);
        self.shared.shard_progress(&self.id, |p| {
            p.in_flight = true;
            p.invocations += 1;
            p.records_delivered += len as u64;
        });
        let answer = match payload {
            Ok(payload) => self.invoke(&payload, len).await,
            Err(err) => Answer::failed(format!("the event does not serialize: {err}")),
        };
        self.shared
            .shard_progress(&self.id, |p| p.in_flight = false);
        if let (Some(open), Some(state)) = (open.as_mut(), answer.state) {
            open.carry(state);
        }
        let succeeded = !matches!(answer.outcome, Outcome::FunctionError(_));
        // A window's final invocation that succeeded closes it; the next records open a
        // new one, with fresh state.
        self.window = open.filter(|_| !(is_final && succeeded));
        let window = self.window.as_ref().map(|w| (w.bounds.start, w.bounds.end));
        self.shared
            .shard_progress(&self.id, |p| p.open_window = window);
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
                    .shard_progress(&self.id, |p| p.last_error = Some(reason.clone()));
                tracing::debug!(shard = %self.id, %reason, "function error; the batch is retried");
                self.failed(len).await;
            }
        }
    }

    async fn invoke(&self, payload: &[u8], len: usize) -> Answer {
        let faults = &self.shared.faults;
        if faults.is_failing(self.index) || faults.take_invocation_failure() {
            return Answer::failed("the invocation failed (injected fault)");
        }
        match self
            .function
            .call(payload, self.config(), &self.shared.counters)
            .await
        {
            Ok(response) => {
                let batch: Vec<BufferedRecord> = self.buffer.iter().take(len).cloned().collect();
                Answer::read(&response, &batch, self.config())
            }
            Err(reason) => Answer::failed(reason),
        }
    }

    /// The checkpoint moves past the first `n` buffered records.
    fn acknowledge(&mut self, n: usize) {
        let mut last = None;
        for _ in 0..n {
            last = self.buffer.pop_front().map(|r| r.raw_sequence_number);
        }
        if let Some(last) = last {
            CounterCells::add(&self.counters().records_acknowledged, n as u64);
            self.shared.shard_progress(&self.id, |p| {
                p.acknowledged += n as u64;
                p.checkpoint = Some(last);
            });
        }
    }

    /// After a failed attempt of the first `len` buffered records (none: a final window
    /// invocation): retry them (cut as a fault may ask), or give up once
    /// `MaximumRetryAttempts` retries failed.
    async fn failed(&mut self, len: usize) {
        let head = (len > 0)
            .then(|| self.buffer.front().map(|r| r.sequence_number.clone()))
            .flatten();
        let failed_attempts = match &self.retry {
            Some(retry) if retry.head == head => retry.failed_attempts + 1,
            _ => 1,
        };
        if self
            .config()
            .maximum_retry_attempts
            .is_some_and(|max| failed_attempts > max)
        {
            if len == 0 {
                tracing::warn!(shard = %self.id, "the window's final invocation kept failing; its state is dropped");
                self.window = None;
                self.retry = None;
                self.shared
                    .shard_progress(&self.id, |p| p.open_window = None);
            } else {
                self.give_up(len, GiveUp::RetryAttemptsExhausted(failed_attempts))
                    .await;
            }
            return;
        }
        let len = match (len, self.shared.faults.take_recut()) {
            (0, _) | (_, None) => len,
            (_, Some(Recut::Shorter(fewer))) => len.saturating_sub(fewer).max(1),
            (_, Some(Recut::Longer(more))) => {
                let wanted = (len + more).min(self.config().batch_size);
                self.fill_until(wanted).await;
                wanted.min(self.buffer.len())
            }
        };
        self.retry = Some(Retry {
            head,
            failed_attempts,
            len,
        });
        let backoff = Duration::from_millis(100 << (failed_attempts - 1).min(8));
        tokio::time::sleep(backoff.min(MAX_RETRY_BACKOFF)).await;
    }

    /// Waits until `len` records are buffered or the stream shard was read to its end as it
    /// is now.
    async fn fill_until(&mut self, len: usize) {
        let since = epoch_now();
        loop {
            self.take_arrivals();
            let read_through = self.shared.read_through_secs(&self.stream_shard);
            if self.buffer.len() >= len || self.drained || read_through > since {
                self.take_arrivals();
                return;
            }
            tokio::time::sleep(POLL_INTERVAL / 4).await;
        }
    }

    /// Sends the metadata of the first `len` buffered records to the on-failure destination
    /// and moves past them.
    async fn give_up(&mut self, len: usize, why: GiveUp) {
        let batch: Vec<BufferedRecord> = self.buffer.iter().take(len).cloned().collect();
        let Some(message) = destination::batch_info(self.config(), &self.id, &batch, why) else {
            return;
        };
        tracing::warn!(
            shard = %self.id,
            ?why,
            records = len,
            "giving up on a batch; its metadata goes to the on-failure destination"
        );
        destination::send(&self.sqs, self.config(), &message).await;
        CounterCells::add(&self.counters().dlq_batches, 1);
        CounterCells::add(&self.counters().dlq_records, len as u64);
        // Whatever was pending for these records (a retry, a duplicate) goes with them.
        self.retry = None;
        self.duplicate = None;
        self.acknowledge(len);
    }
}
