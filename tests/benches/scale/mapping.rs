//! A Lambda event source mapping reading a stream, in simulated time: the Reactions table's
//! stream, or the Kinesis event log.
//!
//! A Reactions write lands on the stream shard its user id hashes to (the table's partition
//! key is the user, so users spread; DynamoDB's partition hash is its own, and FNV-1a stands
//! in); an event lands on the Kinesis shard the publisher put it on. Per shard, as the
//! mapping does: one batch in flight; a batch is sent once `BatchSize` records are waiting
//! or the batching window has run since the shard went idle with records waiting, whichever
//! is first; a batch that reports a failure at a record is retried from that record, at
//! once. Each shard's poller starts at a moment of its own within the first window (seeded),
//! as shards that were never started together would be. Records are on the stream the
//! moment they are written (no propagation delay) and an invocation starts the moment it is
//! sent (no cold start, no invoke overhead): the consumer's own calls are all its time.
//!
//! Events run in time order across all shards, so what one shard's consumer does is seen by
//! every other's at the right moment (a partition key's second, a score row's writes in
//! flight).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use likes_core::pipeline::ChangeRecord;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::traffic::Arrival;

/// A record on a stream, as the mapping reads it.
pub trait StreamRecord {
    /// Which of the stream's `shards` holds it.
    fn shard(&self, shards: u32) -> usize;
    /// When it reached the stream (epoch millis): what the iterator age is measured from.
    fn arrived_ms(&self) -> i64;
}

impl StreamRecord for ChangeRecord {
    fn shard(&self, shards: u32) -> usize {
        let user = &self.change.as_ref().expect("a flip").user_id;
        (fnv1a(user.as_bytes()) % u64::from(shards)) as usize
    }

    fn arrived_ms(&self) -> i64 {
        self.stream_time_ms
    }
}

/// Simulated time in microseconds since the run started.
pub type Micros = u64;
pub const MS: Micros = 1_000;
pub const SECOND: Micros = 1_000_000;

#[derive(Debug, Clone, Copy)]
pub struct MappingConfig {
    pub shards: u32,
    pub batch_size: usize,
    pub batching_window: Micros,
    pub seed: u64,
}

/// What an invocation does next.
pub enum Next<R = ChangeRecord> {
    /// Its next call finishes at this time: resume it then.
    At(Micros),
    /// It returned; `unapplied` are the records from the one it reported failed on (empty
    /// when the whole batch was applied).
    Done { unapplied: Vec<R> },
}

/// A function behind the mapping: invoked with a shard's batch, resumed at each call's end.
/// On the Reactions stream the design's aggregator, its publisher and the naive counter; on
/// the event log the likers' and the leaderboard's consumers.
pub trait Consumer<R = ChangeRecord> {
    fn invoke(&mut self, shard: usize, batch: Vec<R>, now: Micros) -> Next<R>;
    fn resume(&mut self, shard: usize, now: Micros) -> Next<R>;
    /// Once per simulated millisecond, after its flips arrived.
    fn tick(&mut self, _now: Micros) {}
}

/// What the mapping saw over a run.
#[derive(Debug, Clone, Copy)]
pub struct MappingRun {
    /// When the last invocation returned.
    pub end: Micros,
    pub invocations: u64,
    /// Batches sent again from a failed record.
    pub retried_batches: u64,
    /// The oldest record's age when its batch was sent (the mapping's IteratorAge), worst.
    pub max_iterator_age_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Wake {
    /// The batching window ends: send what is waiting.
    WindowEnd,
    /// The shard's invocation has a call finishing.
    Resume,
}

struct Shard<R> {
    waiting: VecDeque<R>,
    busy: bool,
    window_end: Option<Micros>,
    /// When the shard's poller first reads: records before it wait for it.
    polling_from: Micros,
}

struct Mapping<'c, C, R> {
    config: MappingConfig,
    consumer: &'c mut C,
    shards: Vec<Shard<R>>,
    events: BinaryHeap<Reverse<(Micros, u64, usize, Wake)>>,
    scheduled: u64,
    run: MappingRun,
}

/// Runs the arrivals through the mapping into `consumer` until every record was applied.
pub fn run<R: StreamRecord, C: Consumer<R>>(
    config: MappingConfig,
    arrivals: impl IntoIterator<Item = Arrival<R>>,
    consumer: &mut C,
) -> MappingRun {
    let mut arrivals = arrivals.into_iter().peekable();
    let mut mapping = Mapping {
        config,
        consumer,
        shards: {
            let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
            (0..config.shards)
                .map(|_| Shard {
                    waiting: VecDeque::new(),
                    busy: false,
                    window_end: None,
                    polling_from: rng.random_range(0..config.batching_window.max(1)),
                })
                .collect()
        },
        events: BinaryHeap::new(),
        scheduled: 0,
        run: MappingRun {
            end: 0,
            invocations: 0,
            retried_batches: 0,
            max_iterator_age_ms: 0,
        },
    };
    let mut touched = vec![false; config.shards as usize];
    loop {
        let event = mapping.events.peek().map(|Reverse((at, ..))| *at);
        // Flips of a millisecond arrive before the calls that end in it.
        let arrives_first = match (arrivals.peek().map(|a| a.at), event) {
            (Some(at), Some(event)) => at <= event,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if arrives_first {
            let Arrival { at, records } = arrivals.next().expect("peeked");
            for record in records {
                let shard = record.shard(config.shards);
                mapping.shards[shard].waiting.push_back(record);
                touched[shard] = true;
            }
            for (shard, hit) in touched.iter_mut().enumerate() {
                if std::mem::take(hit) {
                    mapping.wake_if_ready(shard, at);
                }
            }
            mapping.consumer.tick(at);
            continue;
        }
        let Reverse((at, _, shard, wake)) = mapping.events.pop().expect("peeked");
        match wake {
            Wake::WindowEnd if mapping.shards[shard].window_end == Some(at) => {
                mapping.send(shard, at)
            }
            Wake::WindowEnd => {}
            Wake::Resume => {
                let next = mapping.consumer.resume(shard, at);
                mapping.follow(shard, next, at);
            }
        }
    }
    mapping.run
}

/// 64-bit FNV-1a: uniform enough to spread users, and the same on every platform and run.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl<R: StreamRecord, C: Consumer<R>> Mapping<'_, C, R> {
    fn schedule(&mut self, at: Micros, shard: usize, wake: Wake) {
        self.scheduled += 1;
        self.events.push(Reverse((at, self.scheduled, shard, wake)));
    }

    /// An idle shard sends a full batch at once, and opens its window on the first record.
    fn wake_if_ready(&mut self, shard: usize, now: Micros) {
        let state = &mut self.shards[shard];
        if state.busy || state.waiting.is_empty() {
            return;
        }
        if state.waiting.len() >= self.config.batch_size && now >= state.polling_from {
            self.send(shard, now);
        } else if state.window_end.is_none() {
            let end = now.max(state.polling_from) + self.config.batching_window;
            state.window_end = Some(end);
            self.schedule(end, shard, Wake::WindowEnd);
        }
    }

    fn send(&mut self, shard: usize, now: Micros) {
        let state = &mut self.shards[shard];
        let take = state.waiting.len().min(self.config.batch_size);
        let batch: Vec<R> = state.waiting.drain(..take).collect();
        state.busy = true;
        state.window_end = None;
        let age = (now / MS) as i64 - (batch[0].arrived_ms() - crate::traffic::EPOCH_MS);
        self.run.max_iterator_age_ms = self.run.max_iterator_age_ms.max(age);
        self.run.invocations += 1;
        let next = self.consumer.invoke(shard, batch, now);
        self.follow(shard, next, now);
    }

    fn follow(&mut self, shard: usize, next: Next<R>, now: Micros) {
        match next {
            Next::At(at) => self.schedule(at, shard, Wake::Resume),
            Next::Done { unapplied } => {
                self.run.end = self.run.end.max(now);
                let state = &mut self.shards[shard];
                state.busy = false;
                if unapplied.is_empty() {
                    self.wake_if_ready(shard, now);
                } else {
                    // The failed record and all after it come back first, and go at once.
                    self.run.retried_batches += 1;
                    for record in unapplied.into_iter().rev() {
                        state.waiting.push_front(record);
                    }
                    state.window_end = Some(now);
                    self.schedule(now, shard, Wake::WindowEnd);
                }
            }
        }
    }
}
