//! A function's configuration variables, read from any source (the process environment on
//! AWS, template.yaml's resolved `Environment` in the local stack).

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("{name} must be one of {}, not {value:?}", allowed.join(", "))]
    Choice {
        name: &'static str,
        allowed: &'static [&'static str],
        value: String,
    },
    #[error("{name} must be a whole number from 1 to {max}, not {value:?}")]
    Range {
        name: &'static str,
        max: usize,
        value: String,
    },
}

impl ConfigError {
    /// Variable `name` of `lookup`, required.
    pub fn var(
        lookup: impl Fn(&str) -> Option<String>,
        name: &'static str,
    ) -> Result<String, Self> {
        lookup(name).ok_or(Self::Missing(name))
    }

    /// Variable `name` of `lookup`: a whole number from 1 to its maximum in
    /// [`WHOLE_VARIABLES`].
    pub fn whole(
        lookup: impl Fn(&str) -> Option<String>,
        name: &'static str,
    ) -> Result<usize, Self> {
        Self::in_range(name, Self::var(lookup, name)?)
    }

    /// `value` of variable `name`, checked against its range in [`WHOLE_VARIABLES`].
    pub fn in_range(name: &'static str, value: String) -> Result<usize, Self> {
        let max = max_of(name).unwrap_or_else(|| panic!("{name} is not in WHOLE_VARIABLES"));
        value
            .parse()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or(Self::Range { name, max, value })
    }
}

/// Every whole-number variable a function reads, with the largest value it accepts (the
/// smallest is 1). This is the one place a range is said: a template.yaml parameter that sets
/// one of them declares the same `MinValue` and `MaxValue` (a test reads both).
pub const WHOLE_VARIABLES: &[(&str, usize)] = &[
    // Count rows per item, and overflow partitions of a hot item.
    ("COUNT_SHARDS", 64),
    ("OVERFLOW_PARTITIONS", 64),
    // Records per chunk: its intent, a row per item it adds to, stays inside 400 KB.
    ("CHUNK_RECORDS", crate::pipeline::MAX_CHUNK_RECORDS),
    ("RECONCILE_EPOCH_SECONDS", 24 * 3600),
    ("EXPORT_UNCERTAINTY_SECONDS", 3600),
    ("RECONCILE_LEASE_SECONDS", 3600),
    // Subtotals older than this are pruned whether or not a run completes.
    ("RECONCILE_HORIZON_SECONDS", 7 * 24 * 3600),
    // Export items the recount by size keeps in the function; Lambda's largest memory
    // (10,240 MB) holds no more than this at the bytes a row `make bench-reconcile-size`
    // measures.
    ("RECOUNT_FUNCTION_MAX_ROWS", 40_000_000),
    ("ERASURE_ROWS_PER_SECOND", 10_000),
    ("MODERATION_ROWS_PER_SECOND", 10_000),
    ("LEADERBOARD_SHARDS", 4096),
    ("REFRESH_SECONDS", 900),
    ("REFRESH_TICK_MS", 60_000),
    // A log shard quiet this long gets a heartbeat: up to a day.
    ("HEARTBEAT_AFTER_SECONDS", 86_400),
    ("PULSE_SECONDS", 900),
    ("PULSE_TICK_MS", 60_000),
    ("SUBSCRIPTION_BUCKETS", 64),
    ("LIVE_PUSH_CONCURRENCY", 10_000),
    ("LIVE_CATCH_UP_SECONDS", 60),
    ("LIVE_MAX_EVENT_AGE_SECONDS", 3600),
    // A deploy (the contract fuzzer, the write bench) may set a limit nothing reaches.
    ("WRITE_RATE_PER_SECOND", 1_000_000),
    ("WRITE_BURST", 1_000_000),
];

/// The largest value variable `name` accepts, if it is a whole-number variable.
pub fn max_of(name: &str) -> Option<usize> {
    WHOLE_VARIABLES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, max)| *max)
}
