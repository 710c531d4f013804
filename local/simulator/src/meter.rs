//! What AWS bills and where it throttles, as the simulator counts them: every unit billed,
//! by resource (a table, an index, a stream) and kind, and every partition key and shard
//! metered over a sliding second against its limit. A request to a key already at its
//! limit in the last second is throttled, as AWS throttles it, so the figures read back
//! are what AWS would serve, not what was asked.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::{AddAssign, SubAssign};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What is billed or limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    /// DynamoDB write request units.
    Writes,
    /// DynamoDB read request units.
    Reads,
    /// Kinesis records put.
    RecordsIn,
    /// Kinesis bytes put (data and partition key).
    BytesIn,
    /// Kinesis bytes read, shared by a shard's standard consumers.
    BytesOut,
}

impl Unit {
    /// AWS's limit per partition key or shard, per second.
    pub fn limit(self) -> f64 {
        match self {
            Self::Writes => 1_000.0,
            Self::Reads => 3_000.0,
            Self::RecordsIn => 1_000.0,
            Self::BytesIn => 1024.0 * 1024.0,
            Self::BytesOut => 2.0 * 1024.0 * 1024.0,
        }
    }
}

/// A table (`table/<name>`), an index (`table/<name>/index/<index>`) or a stream
/// (`stream/<name>`).
pub type Resource = String;

/// What the simulator billed and metered since it started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// The units billed, by resource and unit.
    pub billed: BTreeMap<(Resource, Unit), f64>,
    /// The busiest key of each resource and unit: the most it took in any sliding second.
    pub peaks: BTreeMap<(Resource, Unit), Peak>,
    /// Requests (or Kinesis entries) refused because their key or shard was at its limit.
    pub throttled: BTreeMap<(Resource, Unit), u64>,
}

impl Usage {
    /// The units billed to `resource` in `unit` (0 when none were).
    pub fn billed(&self, resource: &str, unit: Unit) -> f64 {
        self.billed
            .get(&(resource.to_owned(), unit))
            .copied()
            .unwrap_or(0.0)
    }

    pub fn throttled(&self, resource: &str, unit: Unit) -> u64 {
        self.throttled
            .get(&(resource.to_owned(), unit))
            .copied()
            .unwrap_or(0)
    }
}

/// A key's busiest sliding second.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    pub key: String,
    pub per_second: f64,
}

#[derive(Debug, Default)]
pub struct Meter {
    state: Mutex<State>,
    /// A test's stopped clock: every request metered in the same instant.
    #[cfg(test)]
    stopped: Mutex<Option<Instant>>,
}

#[derive(Debug, Default)]
struct State {
    usage: Usage,
    windows: HashMap<(Resource, String, Unit), LastSecond<Instant, f64>>,
    /// How many windows are kept before the idle ones are dropped: twice those still busy
    /// at the last drop, so a drop is never repeated on every request.
    drop_at: usize,
}

/// One key's last second: what it took, when, and the sum. `At` is a time on any clock; the
/// caller says which takings a second has passed since.
#[derive(Debug)]
pub struct LastSecond<At, Amount> {
    taken: VecDeque<(At, Amount)>,
    sum: Amount,
}

impl<At, Amount: Default> Default for LastSecond<At, Amount> {
    fn default() -> Self {
        Self {
            taken: VecDeque::new(),
            sum: Amount::default(),
        }
    }
}

impl<At: Copy, Amount: Copy + Default + AddAssign + SubAssign> LastSecond<At, Amount> {
    /// Forgets the oldest takings while `past(at)` says a second has passed since them.
    pub fn slide(&mut self, past: impl Fn(At) -> bool) {
        while let Some((at, amount)) = self.taken.front().copied() {
            if !past(at) {
                break;
            }
            self.taken.pop_front();
            self.sum -= amount;
        }
        if self.taken.is_empty() {
            // No drift left behind by fractional amounts.
            self.sum = Amount::default();
        }
    }

    /// Adds `amount` taken at `at`, the latest time yet.
    pub fn take(&mut self, at: At, amount: Amount) {
        self.taken.push_back((at, amount));
        self.sum += amount;
    }

    /// What the second holds.
    pub fn sum(&self) -> Amount {
        self.sum
    }

    /// When it last took something, if it holds anything.
    pub fn last(&self) -> Option<At> {
        self.taken.back().map(|&(at, _)| at)
    }
}

const SECOND: Duration = Duration::from_secs(1);
/// Windows kept at least before the idle ones are dropped.
const WINDOWS_KEPT: usize = 100_000;

/// Whether a second has passed from `at` to `now`.
fn a_second_on(now: Instant) -> impl Fn(Instant) -> bool {
    move |at| now.duration_since(at) >= SECOND
}

impl Meter {
    #[cfg(not(test))]
    pub fn now(&self) -> Instant {
        Instant::now()
    }

    /// Now, on the meters' clock (stopped in a test that stops it).
    #[cfg(test)]
    pub fn now(&self) -> Instant {
        let stopped = *self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        stopped.unwrap_or_else(Instant::now)
    }

    /// Stops the meters' clock where it is, however slowly the test runs after.
    #[cfg(test)]
    pub fn stop_the_clock(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Moves a stopped clock on by `by`.
    #[cfg(test)]
    pub fn advance_the_clock(&self, by: Duration) {
        if let Some(at) = self
            .stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            *at += by;
        }
    }

    /// Whether `key` of `resource` is at its limit in `unit` over the last second; a request
    /// it refuses is counted as throttled.
    pub fn at_limit(&self, resource: &str, key: &str, unit: Unit) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        let id = (resource.to_owned(), key.to_owned(), unit);
        let full = match state.windows.get_mut(&id) {
            Some(window) => {
                window.slide(a_second_on(now));
                window.sum() >= unit.limit()
            }
            None => false,
        };
        if full {
            *state
                .usage
                .throttled
                .entry((resource.to_owned(), unit))
                .or_default() += 1;
        }
        full
    }

    /// Bills `amount` to `key` of `resource` now.
    pub fn take(&self, resource: &str, key: &str, unit: Unit, amount: f64) {
        if amount <= 0.0 {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        if state.windows.len() >= state.drop_at.max(WINDOWS_KEPT) {
            state.windows.retain(|_, window| {
                window.slide(a_second_on(now));
                window.last().is_some()
            });
            state.drop_at = 2 * state.windows.len();
        }
        *state
            .usage
            .billed
            .entry((resource.to_owned(), unit))
            .or_default() += amount;
        let window = state
            .windows
            .entry((resource.to_owned(), key.to_owned(), unit))
            .or_default();
        window.slide(a_second_on(now));
        window.take(now, amount);
        let per_second = window.sum();
        let peak = state
            .usage
            .peaks
            .entry((resource.to_owned(), unit))
            .or_insert_with(|| Peak {
                key: key.to_owned(),
                per_second: 0.0,
            });
        if per_second > peak.per_second {
            *peak = Peak {
                key: key.to_owned(),
                per_second,
            };
        }
    }

    pub fn usage(&self) -> Usage {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .usage
            .clone()
    }
}
