//! The pulse: once a second, turn every stream shard's watermark into one `as_of`, and keep
//! quiet shards' watermarks moving with probe writes.
//!
//! Each tick lists the Reactions stream's shards (DescribeStream), reads their watermarks,
//! computes [`counts_as_of`] and publishes it to the `as_of` replicas count reads use. Then it
//! writes one probe row per shard whose probe key the aggregator has reported (a split
//! parent's too, until its children report their own: [`probe_plan`]), and a few new probe
//! keys while some shard has none yet: which shard a key lands on is DynamoDB's
//! business, so the pulse learns it from what the aggregator saw. EventBridge Scheduler runs
//! it every minute; one invocation ticks for most of that minute.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lambda_runtime::LambdaEvent;
use likes_aws::AwsError;
use likes_core::clock::now_ms;
use likes_core::pipeline::{counts_as_of, probe_plan, StreamShard};
use likes_store::freshness::PROBE_USER_PREFIX;
use likes_store::metrics::Report;
use likes_store::{FreshnessStore, StoreError};
use serde_json::Value;

use crate::stream_shards::StreamShards;
use crate::ticker::run_invocation;
use crate::ConfigError;

/// New probe keys written per tick for each shard that has none, within these bounds.
const NEW_PROBES_PER_UNCOVERED: usize = 4;
const NEW_PROBES_MAX: usize = 64;
/// The last shard list read, and when.
type ShardListCache = Arc<Mutex<Option<(Instant, Vec<StreamShard>)>>>;

/// How long a shard list is used before DescribeStream is asked again.
const SHARD_LIST_TTL: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct PulseConfig {
    pub counts_table: String,
    pub reactions_table: String,
    /// The Reactions stream's ARN.
    pub reactions_stream: String,
    /// How long one invocation keeps ticking.
    pub run_for: Duration,
    pub tick: Duration,
}

impl PulseConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name| ConfigError::var(&lookup, name);
        let whole = |name| ConfigError::whole(&lookup, name).map(|n| n as u64);
        Ok(Self {
            counts_table: var("COUNTS_TABLE")?,
            reactions_table: var("REACTIONS_TABLE")?,
            reactions_stream: var("REACTIONS_STREAM")?,
            run_for: Duration::from_secs(whole("PULSE_SECONDS")?),
            tick: Duration::from_millis(whole("PULSE_TICK_MS")?),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PulseError {
    #[error(transparent)]
    Stream(#[from] AwsError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one tick found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickReport {
    pub shards: usize,
    pub as_of_ms: Option<i64>,
    pub probes_written: usize,
}

#[derive(Debug, Clone)]
pub struct Pulse {
    config: PulseConfig,
    freshness: FreshnessStore,
    stream: StreamShards,
    /// The last shard list and when it was read: DescribeStream takes 10 calls a second per
    /// account, and shards change rarely, so ticks share one read for a while.
    listed: ShardListCache,
}

impl Pulse {
    pub fn new(
        config: PulseConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        streams: aws_sdk_dynamodbstreams::Client,
    ) -> Self {
        Self {
            freshness: FreshnessStore::new(dynamodb, config.counts_table.clone()),
            stream: StreamShards::new(streams, config.reactions_stream.clone()),
            config,
            listed: Arc::default(),
        }
    }

    /// One scheduled invocation: ticks until `run_for` has passed (or the deadline nears).
    /// Fails only when no tick succeeded, so a broken pulse shows in the function's errors.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
        run_invocation(
            "pulse",
            "Likes/Pulse",
            (self.config.run_for, self.config.tick),
            event,
            |report: &TickReport| report.as_of_ms,
            // Boxed: the tick's future nests deeper than rustc lays out inline.
            || Box::pin(self.tick()),
        )
        .await
    }

    /// Lists shards, publishes `as_of`, writes probes.
    pub async fn tick(&self) -> Result<TickReport, PulseError> {
        let shards = self.listed_shards().await?;
        let ids: Vec<String> = shards.iter().map(|s| s.shard_id.clone()).collect();
        let watermarks = self.freshness.watermarks(&ids).await?;
        let times: BTreeMap<String, i64> = watermarks
            .iter()
            .map(|(id, w)| (id.clone(), w.stream_time_ms))
            .collect();
        let now = now_ms();
        let as_of = counts_as_of(&shards, &times);
        if let Some(as_of) = as_of {
            self.freshness.publish_as_of(as_of, now).await?;
        }
        let keys: BTreeMap<String, String> = watermarks
            .iter()
            .filter_map(|(id, w)| Some((id.clone(), w.probe_key.clone()?)))
            .collect();
        let (mut probes, uncovered) = probe_plan(&shards, &keys);
        if uncovered > 0 {
            let fresh = (uncovered * NEW_PROBES_PER_UNCOVERED).min(NEW_PROBES_MAX);
            probes.extend((0..fresh).map(|_| new_probe_key()));
        }
        self.freshness
            .probe(&self.config.reactions_table, &probes, now)
            .await?;
        let mut report = Report::new("Likes/Pulse")
            .value("Shards", "Count", shards.len() as f64)
            .value("ShardsWithoutProbe", "Count", uncovered as f64)
            .value("ProbesWritten", "Count", probes.len() as f64);
        if let Some(as_of) = as_of {
            report = report.value("AsOfLagMs", "Milliseconds", (now - as_of) as f64);
        }
        report.emit();
        Ok(TickReport {
            shards: shards.len(),
            as_of_ms: as_of,
            probes_written: probes.len(),
        })
    }

    /// The shard list, read again once it is [`SHARD_LIST_TTL`] old. A list a few seconds
    /// stale only errs old: a closed parent still counts until its child shows up.
    async fn listed_shards(&self) -> Result<Vec<StreamShard>, PulseError> {
        if let Some((read_at, shards)) = &*self.listed.lock().expect("shard list lock") {
            if read_at.elapsed() < SHARD_LIST_TTL {
                return Ok(shards.clone());
            }
        }
        let shards = self.stream.list().await?;
        *self.listed.lock().expect("shard list lock") = Some((Instant::now(), shards.clone()));
        Ok(shards)
    }
}

/// A probe key nobody used before: random, from the standard library's randomly seeded
/// hasher.
fn new_probe_key() -> String {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("{PROBE_USER_PREFIX}{random:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_keys_are_fresh_and_never_reactions() {
        let (a, b) = (new_probe_key(), new_probe_key());
        assert_ne!(a, b);
        assert!(a.starts_with(PROBE_USER_PREFIX));
        assert!(
            likes_core::ItemId::parse(&a).is_err(),
            "a probe key is no item id"
        );
    }
}
