//! What a virtual shard does after a failed invocation: retry (cut as a fault may ask),
//! or give the records up to the on-failure destination.

use std::time::Duration;

use likes_core::backoff::Backoff;

use super::destination::{self, GiveUp};
use super::record::BufferedRecord;
use super::shard::{Retry, VirtualShard};
use super::{epoch_now, POLL_INTERVAL};
use crate::faults::{CounterCells, Recut};

/// Backoff before retry n of a failed batch: 100 ms, doubling, at most 500 ms.
const RETRY_BACKOFF: Backoff = Backoff {
    first: Duration::from_millis(100),
    cap: Duration::from_millis(500),
};

impl VirtualShard {
    /// After a failed attempt of the first `len` buffered records (none: a final window
    /// invocation): retry them (cut as a fault may ask), or give up once
    /// `MaximumRetryAttempts` retries failed.
    pub(super) async fn failed(&mut self, len: usize) {
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
                tracing::warn!(shard = %self.place.id, "the window's final invocation kept failing; its state is dropped");
                self.window = None;
                self.retry = None;
                self.shared
                    .shard_progress(&self.place.id, |p| p.open_window = None);
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
        tokio::time::sleep(RETRY_BACKOFF.delay(failed_attempts)).await;
    }

    /// Waits until `len` records are buffered or the stream shard was read to its end as it
    /// is now.
    async fn fill_until(&mut self, len: usize) {
        let since = epoch_now();
        loop {
            self.take_arrivals();
            let read_through = self.shared.read_through_secs(&self.place.stream_shard);
            if self.buffer.len() >= len || self.drained || read_through > since {
                self.take_arrivals();
                return;
            }
            tokio::time::sleep(POLL_INTERVAL / 4).await;
        }
    }

    /// Sends the metadata of the first `len` buffered records to the on-failure destination
    /// and moves past them.
    pub(super) async fn give_up(&mut self, len: usize, why: GiveUp) {
        let batch: Vec<BufferedRecord> = self.buffer.iter().take(len).cloned().collect();
        let Some(message) = destination::batch_info(self.config(), &self.place.id, &batch, why)
        else {
            return;
        };
        tracing::warn!(
            shard = %self.place.id,
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
