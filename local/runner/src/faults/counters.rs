//! What a mapping counts as it runs, and the snapshot tests read.

use std::sync::atomic::{AtomicU64, Ordering};

/// What one event source mapping did, as tests read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Invocations of the function, retries and duplicates included.
    pub invocations: u64,
    /// Records handed to the function, summed over invocations.
    pub records_delivered: u64,
    /// Invocations that failed as a whole: an `Err`, a crash, a timeout, a refused event.
    pub function_errors: u64,
    /// Invocations that answered with `batchItemFailures`.
    pub partial_failures: u64,
    /// Invocations that retried a failed batch.
    pub retries: u64,
    /// Batches delivered a second time after they succeeded.
    pub duplicate_deliveries: u64,
    /// Batches handed to a second instance of the function at once
    /// (`Faults::deliver_twice_at_once`).
    pub twin_deliveries: u64,
    /// Invocations killed after their k-th chunk (`Faults::crash_after_chunks`).
    pub crashes: u64,
    /// Batches given up on (retries or record age exhausted) and sent to the on-failure
    /// destination, and the records they held.
    pub dlq_batches: u64,
    pub dlq_records: u64,
    /// Records acknowledged: the checkpoint moved past them (applied or given up on).
    pub records_acknowledged: u64,
    /// The aggregator's intents written (`PutItem`s that succeeded): chunks begun.
    pub intents_written: u64,
    /// The aggregator's count-row `UpdateItem`s that added their delta.
    pub count_row_writes: u64,
    /// Injected faults that were played.
    pub throttled_count_writes: u64,
    pub refused_kinesis_puts: u64,
    /// Stream reads that failed (moto's 500 on a stale iterator, say) and were re-acquired.
    pub stream_read_errors: u64,
}

/// The live counters behind [`Counters`].
#[derive(Debug, Default)]
pub(crate) struct CounterCells {
    pub invocations: AtomicU64,
    pub records_delivered: AtomicU64,
    pub function_errors: AtomicU64,
    pub partial_failures: AtomicU64,
    pub retries: AtomicU64,
    pub duplicate_deliveries: AtomicU64,
    pub twin_deliveries: AtomicU64,
    pub crashes: AtomicU64,
    pub dlq_batches: AtomicU64,
    pub dlq_records: AtomicU64,
    pub records_acknowledged: AtomicU64,
    pub intents_written: AtomicU64,
    pub count_row_writes: AtomicU64,
    pub throttled_count_writes: AtomicU64,
    pub refused_kinesis_puts: AtomicU64,
    pub stream_read_errors: AtomicU64,
}

impl CounterCells {
    pub fn add(cell: &AtomicU64, n: u64) {
        cell.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Counters {
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        Counters {
            invocations: get(&self.invocations),
            records_delivered: get(&self.records_delivered),
            function_errors: get(&self.function_errors),
            partial_failures: get(&self.partial_failures),
            retries: get(&self.retries),
            duplicate_deliveries: get(&self.duplicate_deliveries),
            twin_deliveries: get(&self.twin_deliveries),
            crashes: get(&self.crashes),
            dlq_batches: get(&self.dlq_batches),
            dlq_records: get(&self.dlq_records),
            records_acknowledged: get(&self.records_acknowledged),
            intents_written: get(&self.intents_written),
            count_row_writes: get(&self.count_row_writes),
            throttled_count_writes: get(&self.throttled_count_writes),
            refused_kinesis_puts: get(&self.refused_kinesis_puts),
            stream_read_errors: get(&self.stream_read_errors),
        }
    }
}
