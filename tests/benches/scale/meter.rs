//! Per-second accounting: what a limit is measured against. AWS enforces write units per
//! partition and records per shard over one second, so each second's worst key is what
//! decides throttling, not the run's average.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use crate::mapping::{Micros, SECOND};

/// Units charged per key within each second; keeps each second's worst key. Charges come in
/// simulated-time order (the engine runs events in order), so a second is final once a
/// charge of a later one arrives.
#[derive(Debug)]
pub struct WorstKey<K> {
    current: u64,
    by_key: HashMap<K, u64>,
    /// Per second: the worst key's units and the key (None for a second without charges).
    worst: Vec<(u64, Option<K>)>,
    total: Vec<u64>,
}

impl<K: Hash + Eq + Clone> WorstKey<K> {
    pub fn new() -> Self {
        Self {
            current: 0,
            by_key: HashMap::new(),
            worst: Vec::new(),
            total: Vec::new(),
        }
    }

    /// Adds `units` to `key`'s second; the key is copied only the first time in a second.
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
        match self.by_key.get_mut(key) {
            Some(sum) => *sum += units,
            None => {
                self.by_key.insert(key.to_owned(), units);
            }
        }
    }

    /// Ends every second before `next`.
    fn close(&mut self, next: u64) {
        while self.current < next {
            let worst = self.by_key.iter().max_by_key(|(_, u)| **u);
            self.worst
                .push(worst.map_or((0, None), |(k, u)| (*u, Some(k.clone()))));
            self.total.push(self.by_key.values().sum());
            self.by_key.clear();
            self.current += 1;
        }
    }

    /// Per second from 0 through `end`'s second: the worst key, and the sum over all keys.
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
