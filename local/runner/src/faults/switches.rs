//! The fault switches tests arm, and what the pollers and interceptors take from them.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use super::Recut;

/// The fault switches of one event source mapping. Most switches are one-shot: they count
/// down as faults are played, so a test arms exactly the faults it wants; the per-shard
/// ones (a stalled shard, a failing shard) hold until switched off. A shard is named by its
/// index n among the mapping's virtual shards (`Pipeline::shard_index` of a key), a whole
/// stream shard by its id.
#[derive(Debug, Default)]
pub struct Faults {
    switches: Mutex<Switches>,
}

#[derive(Debug, Default, Clone)]
struct Switches {
    duplicate_batches: u32,
    /// Batches to hand a second function instance too, each after its stagger.
    twins: VecDeque<Duration>,
    recuts: VecDeque<Recut>,
    batch_cap: Option<usize>,
    /// Crashes to play, in order: after how many committed chunks of an invocation.
    crashes: VecDeque<usize>,
    /// Only writes of this table are chunks, when set.
    chunk_table: Option<String>,
    failing_invocations: u32,
    kinesis_put_failures: u32,
    throttled_count_writes: u32,
    /// The count row the throttles in play hit: the first one written once they are armed.
    throttled_row: Option<String>,
    /// Throttles wait until the invocation committed this many chunks.
    throttle_after_chunks: usize,
    record_age_offset: Duration,
    stale_iterators: u32,
    stalled_shards: BTreeSet<usize>,
    stalled_stream_shards: BTreeSet<String>,
    failing_shards: BTreeSet<usize>,
}

impl Faults {
    /// The next `n` batches that succeed are delivered again, the very same records, as when
    /// Lambda loses a checkpoint; the second delivery's answer decides what happens next.
    pub fn duplicate_next_batches(&self, n: u32) {
        self.with(|s| s.duplicate_batches += n);
    }

    /// The next batches, one per entry in order, are also handed to a second instance of the
    /// function, started the entry's stagger after the first: two consumers of one shard at
    /// once, as when CloudFormation replaces a mapping (the new one runs beside the old one
    /// until its cleanup) or Lambda delivers a batch twice. The mapping acts on the first
    /// instance's answer; the second's is dropped, as the other mapping's checkpoint would
    /// take it.
    pub fn deliver_twice_at_once(&self, staggers: impl IntoIterator<Item = Duration>) {
        self.with(|s| s.twins.extend(staggers));
    }

    /// The next retries, one per entry in order, are cut differently from the attempt that
    /// failed (a retry starts where AWS starts it: the batch's first record, or the lowest
    /// record reported in `batchItemFailures`).
    pub fn recut_next_retries(&self, recuts: impl IntoIterator<Item = Recut>) {
        self.with(|s| s.recuts.extend(recuts));
    }

    /// Deliveries hold at most `records` records (as when the 6 MB payload limit cuts a batch
    /// early) until set back to `None`. A [`Recut::Longer`] retry may go past it.
    pub fn cut_batches_at(&self, records: Option<usize>) {
        self.with(|s| s.batch_cap = records.map(|r| r.max(1)));
    }

    /// The next invocation that commits its `k`-th chunk (the aggregator's k-th successful
    /// count write, an intent or a count row, so a crash can fall inside an intent half
    /// applied; the eraser's k-th `BatchWriteItem` of deletes; the read models'
    /// k-th `UpdateItem`) dies right after it: no further call leaves it, its
    /// answer is lost, and the mapping treats it as a function error. `k` ≥ 1. Each call arms one
    /// more crash, played after the ones armed before it.
    pub fn crash_after_chunks(&self, k: usize) {
        self.with(|s| s.crashes.push_back(k.max(1)));
    }

    /// Counts only the writes of `table` as chunks, for [`Faults::crash_after_chunks`]: the
    /// leaderboard consumer's score rows and progress (its Leaderboard table's
    /// `UpdateItem`s) without the likers entries it writes first.
    pub fn count_chunks_of(&self, table: &str) {
        self.with(|s| s.chunk_table = Some(table.to_owned()));
    }

    /// The next `n` invocations fail as a function error before doing anything (the runtime
    /// crashed at start, a bad deploy).
    pub fn fail_next_invocations(&self, n: u32) {
        self.with(|s| s.failing_invocations += n);
    }

    /// The next `n` `PutRecords` calls are refused entry by entry
    /// (`ProvisionedThroughputExceededException` on every record, as Kinesis answers a
    /// throttled put). The event publisher puts refused entries again a few times itself, so
    /// it takes that many refusals in a row to fail the batch record.
    pub fn fail_kinesis_puts(&self, n: u32) {
        self.with(|s| s.kinesis_put_failures += n);
    }

    /// The aggregator's next `n` attempts at one count row's `UpdateItem` (the first row
    /// written once armed; the intent's other rows, written beside it, go through) are
    /// answered `400 ProvisionedThroughputExceededException`, nothing written. The SDK retries
    /// throttling itself (3 attempts by default), so 3 in a row fail the chunk for the
    /// function.
    pub fn throttle_count_writes(&self, n: u32) {
        self.throttle_count_writes_after(0, n);
    }

    /// As [`Faults::throttle_count_writes`], played only once an invocation made `chunks`
    /// count writes (see [`Faults::crash_after_chunks`]): the batch then fails in its middle, at the
    /// first record of the chunk that could not be written.
    pub fn throttle_count_writes_after(&self, chunks: usize, n: u32) {
        self.with(|s| {
            s.throttled_count_writes += n;
            s.throttle_after_chunks = chunks;
        });
    }

    /// The mapping sees records as this much older than they are (a stalled pipeline), for
    /// `MaximumRecordAgeInSeconds`.
    pub fn age_records_by(&self, age: Duration) {
        self.with(|s| s.record_age_offset = age);
    }

    /// The next `n` stream reads present an iterator the stream no longer knows (as one that
    /// expired: moto answers HTTP 500, AWS `ExpiredIteratorException`); the mapping must get
    /// a new one after the last record it read, losing and repeating nothing.
    pub fn expire_stream_iterators(&self, n: u32) {
        self.with(|s| s.stale_iterators += n);
    }

    /// Virtual shard `n` stops delivering: its records pile up (read, not invoked, not
    /// aged out) while the other shards run, until [`Faults::resume_shard`].
    pub fn stall_shard(&self, n: usize) {
        self.with(|s| s.stalled_shards.insert(n));
    }

    pub fn resume_shard(&self, n: usize) {
        self.with(|s| s.stalled_shards.remove(&n));
    }

    /// Every virtual shard of stream shard `id` stops delivering, as [`Faults::stall_shard`]
    /// stops one, until [`Faults::resume_stream_shard`]: a test that lets one stream shard
    /// deliver at a time.
    pub fn stall_stream_shard(&self, id: &str) {
        self.with(|s| s.stalled_stream_shards.insert(id.to_owned()));
    }

    pub fn resume_stream_shard(&self, id: &str) {
        self.with(|s| s.stalled_stream_shards.remove(id));
    }

    /// Every invocation on virtual shard `n` fails as a function error, so it retries (and
    /// after `MaximumRetryAttempts` gives its batches up), until [`Faults::heal_shard`].
    pub fn fail_shard(&self, n: usize) {
        self.with(|s| s.failing_shards.insert(n));
    }

    pub fn heal_shard(&self, n: usize) {
        self.with(|s| s.failing_shards.remove(&n));
    }

    /// Disarms every fault.
    pub fn clear(&self) {
        self.with(|s| *s = Switches::default());
    }

    /// True while some one-shot fault is still waiting to be played.
    pub fn armed(&self) -> bool {
        self.with(|s| {
            s.duplicate_batches > 0
                || !s.twins.is_empty()
                || !s.recuts.is_empty()
                || !s.crashes.is_empty()
                || s.failing_invocations > 0
                || s.kinesis_put_failures > 0
                || s.throttled_count_writes > 0
                || s.stale_iterators > 0
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Switches) -> T) -> T {
        f(&mut self.switches.lock().expect("fault switches"))
    }

    pub(crate) fn take_duplicate(&self) -> bool {
        self.with(|s| take_one(&mut s.duplicate_batches))
    }

    pub(crate) fn take_twin(&self) -> Option<Duration> {
        self.with(|s| s.twins.pop_front())
    }

    pub(crate) fn take_recut(&self) -> Option<Recut> {
        self.with(|s| s.recuts.pop_front())
    }

    pub(crate) fn batch_cap(&self) -> Option<usize> {
        self.with(|s| s.batch_cap)
    }

    pub(crate) fn take_invocation_failure(&self) -> bool {
        self.with(|s| take_one(&mut s.failing_invocations))
    }

    pub(crate) fn is_stalled(&self, shard: usize, stream_shard: &str) -> bool {
        self.with(|s| {
            s.stalled_shards.contains(&shard) || s.stalled_stream_shards.contains(stream_shard)
        })
    }

    pub(crate) fn is_failing(&self, shard: usize) -> bool {
        self.with(|s| s.failing_shards.contains(&shard))
    }

    /// A shard a fault keeps from applying its records.
    pub(crate) fn holds_back(&self, shard: usize, stream_shard: &str) -> bool {
        self.is_stalled(shard, stream_shard) || self.is_failing(shard)
    }

    pub(crate) fn take_stale_iterator(&self) -> bool {
        self.with(|s| take_one(&mut s.stale_iterators))
    }

    pub(crate) fn record_age_offset(&self) -> Duration {
        self.with(|s| s.record_age_offset)
    }

    /// Whether a write of `table` is a chunk.
    pub(super) fn counts_chunks_of(&self, table: Option<&str>) -> bool {
        self.with(|s| {
            s.chunk_table
                .as_deref()
                .is_none_or(|only| table == Some(only))
        })
    }

    pub(super) fn take_crash_at(&self, chunks: usize) -> bool {
        self.with(|s| {
            let crash = s.crashes.front() == Some(&chunks);
            if crash {
                s.crashes.pop_front();
            }
            crash
        })
    }

    pub(super) fn take_kinesis_failure(&self) -> bool {
        self.with(|s| take_one(&mut s.kinesis_put_failures))
    }

    pub(super) fn take_count_write_throttle(&self, chunks_committed: usize, row: &str) -> bool {
        self.with(|s| {
            if chunks_committed < s.throttle_after_chunks
                || s.throttled_row.as_deref().is_some_and(|hit| hit != row)
                || !take_one(&mut s.throttled_count_writes)
            {
                return false;
            }
            s.throttled_row = Some(row.to_owned());
            if s.throttled_count_writes == 0 {
                s.throttle_after_chunks = 0;
                s.throttled_row = None;
            }
            true
        })
    }
}

fn take_one(n: &mut u32) -> bool {
    let armed = *n > 0;
    if armed {
        *n -= 1;
    }
    armed
}
