//! Per-second accounting: what a limit is measured against. AWS enforces write units per
//! partition and records per shard over any one second, so the worst key's units in a
//! sliding second (any window of one second, not only the seconds of the clock) decide
//! throttling, not the run's average.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use likes_simulator::LastSecond;

use crate::mapping::{Micros, SECOND};

/// Units charged per key; keeps, for each second of the clock, the worst key's units in any
/// one-second window ending within it. Charges come in simulated-time order (the engine
/// runs events in order), so a second is final once a charge of a later one arrives.
#[derive(Debug)]
pub struct WorstKey<K> {
    current: u64,
    /// Per key: its charges of the last second, and their sum.
    windows: HashMap<K, LastSecond<Micros, u64>>,
    /// The worst window ending in the current second, and its key.
    current_worst: Option<(u64, K)>,
    current_total: u64,
    /// Per second: the worst key's units and the key (None for a second without charges).
    worst: Vec<(u64, Option<K>)>,
    total: Vec<u64>,
}

impl<K: Hash + Eq + Clone> WorstKey<K> {
    pub fn new() -> Self {
        Self {
            current: 0,
            windows: HashMap::new(),
            current_worst: None,
            current_total: 0,
            worst: Vec::new(),
            total: Vec::new(),
        }
    }

    /// Adds `units` to `key` at `at`: the window of the second up to `at` holds them and
    /// every charge of the key less than a second before. The key is copied only when it
    /// has no charge in the last second, or its window becomes the second's worst.
    pub fn charge<Q>(&mut self, at: Micros, key: &Q, units: u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let second = at / SECOND;
        assert!(second >= self.current, "charges arrive in time order");
        if second > self.current {
            self.close(second);
        }
        if !self.windows.contains_key(key) {
            self.windows.insert(key.to_owned(), LastSecond::default());
        }
        let window = self.windows.get_mut(key).expect("inserted above");
        window.slide(|then| then + SECOND <= at);
        window.take(at, units);
        self.current_total += units;
        let sum = window.sum();
        if self
            .current_worst
            .as_ref()
            .is_none_or(|(worst, _)| sum > *worst)
        {
            self.current_worst = Some((sum, key.to_owned()));
        }
    }

    /// Ends every second before `next`, and forgets the keys with no charge in the second
    /// before it.
    fn close(&mut self, next: u64) {
        while self.current < next {
            let worst = self.current_worst.take();
            self.worst
                .push(worst.map_or((0, None), |(units, key)| (units, Some(key))));
            self.total.push(std::mem::take(&mut self.current_total));
            self.current += 1;
        }
        let since = next.saturating_sub(1) * SECOND;
        self.windows
            .retain(|_, window| window.last().is_some_and(|at| at >= since));
    }

    /// Per second from 0 through `end`'s second: the worst key's units in a window ending in
    /// it, and the sum charged within it over all keys.
    pub fn finish(mut self, end: Micros) -> PerSecondWorst<K> {
        self.close(end / SECOND + 1);
        PerSecondWorst {
            worst: self.worst,
            total: self.total,
        }
    }
}

#[derive(Debug)]
pub struct PerSecondWorst<K> {
    pub worst: Vec<(u64, Option<K>)>,
    pub total: Vec<u64>,
}

impl<K> PerSecondWorst<K> {
    pub fn worst_units(&self) -> Vec<u64> {
        self.worst.iter().map(|(u, _)| *u).collect()
    }

    /// The run's worst second: its units, its key, and the second.
    pub fn peak(&self) -> (u64, Option<&K>, usize) {
        self.worst
            .iter()
            .enumerate()
            .max_by_key(|(second, (u, _))| (*u, std::cmp::Reverse(*second)))
            .map_or((0, None, 0), |(second, (u, k))| (*u, k.as_ref(), second))
    }
}

/// Events counted per second.
#[derive(Debug, Default)]
pub struct PerSecond(Vec<u64>);

impl PerSecond {
    pub fn add(&mut self, at: Micros, n: u64) {
        let second = (at / SECOND) as usize;
        if self.0.len() <= second {
            self.0.resize(second + 1, 0);
        }
        self.0[second] += n;
    }

    pub fn seconds(&self) -> &[u64] {
        &self.0
    }
}

/// Durations to the millisecond, kept as counts per millisecond so millions of samples cost
/// a few kilobytes.
#[derive(Debug, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
}

impl Histogram {
    pub fn record(&mut self, ms: u64, times: u64) {
        let ms = ms as usize;
        if self.counts.len() <= ms {
            self.counts.resize(ms + 1, 0);
        }
        self.counts[ms] += times;
        self.n += times;
    }

    /// The smallest value at least `p` percent of the samples do not exceed (nearest rank).
    pub fn percentile(&self, p: f64) -> Option<u64> {
        let rank = ((p / 100.0 * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (ms, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(ms as u64);
            }
        }
        None
    }
}

/// The nearest-rank percentile of per-second values.
pub use likes_tests::percentile;
