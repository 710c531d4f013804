//! Each live function's configuration, read once from its environment.

use std::time::Duration;

use likes_core::config::ConfigError as Variables;

use crate::token::TokenVerifier;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Variable(#[from] Variables),
    #[error("JWT_JWKS_URI: {0}")]
    Jwks(String),
}

/// The tables every live function uses: connections, and the bucketed subscriptions.
#[derive(Debug, Clone)]
pub struct LiveTables {
    pub connections_table: String,
    pub subscriptions_table: String,
    /// B, the buckets an item's watchers spread over.
    pub buckets: u32,
}

impl LiveTables {
    fn from_lookup(lookup: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            connections_table: Variables::var(lookup, "CONNECTIONS_TABLE")?,
            subscriptions_table: Variables::var(lookup, "SUBSCRIPTIONS_TABLE")?,
            buckets: Variables::whole(lookup, "SUBSCRIPTION_BUCKETS")? as u32,
        })
    }
}

/// `$connect`: the token check and the connections table.
#[derive(Debug, Clone)]
pub struct ConnectConfig {
    pub tables: LiveTables,
    pub tokens: TokenVerifier,
}

impl ConnectConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let tokens = TokenVerifier::new(
            &Variables::var(&lookup, "JWT_JWKS_URI")?,
            &Variables::var(&lookup, "JWT_ISSUER")?,
            &Variables::var(&lookup, "JWT_AUDIENCE")?,
        )
        .map_err(ConfigError::Jwks)?;
        Ok(Self {
            tables: LiveTables::from_lookup(&lookup)?,
            tokens,
        })
    }
}

/// `$disconnect`: the connection's rows.
#[derive(Debug, Clone)]
pub struct DisconnectConfig {
    pub tables: LiveTables,
}

impl DisconnectConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            tables: LiveTables::from_lookup(&lookup)?,
        })
    }
}

/// `subscribe`, `unsubscribe`, `$default`: subscriptions, the items' watch rows, and the
/// counts sent on subscribe.
#[derive(Debug, Clone)]
pub struct MessageConfig {
    pub tables: LiveTables,
    pub pushes_table: String,
    pub counts_table: String,
    /// The items' rules and owners: what the counts sent show.
    pub catalog_table: String,
    /// The stage's management endpoint, `https://{api}.execute-api.{region}.amazonaws.com/{stage}`.
    pub connections_endpoint: String,
}

impl MessageConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            tables: LiveTables::from_lookup(&lookup)?,
            pushes_table: Variables::var(&lookup, "PUSHES_TABLE")?,
            counts_table: Variables::var(&lookup, "COUNTS_TABLE")?,
            catalog_table: Variables::var(&lookup, "CATALOG_TABLE")?,
            connections_endpoint: Variables::var(&lookup, "LIVE_CONNECTIONS_ENDPOINT")?,
        })
    }
}

/// The broadcaster: everything above, the push claims and its bounds.
#[derive(Debug, Clone)]
pub struct BroadcastConfig {
    pub tables: LiveTables,
    pub pushes_table: String,
    pub counts_table: String,
    pub catalog_table: String,
    pub connections_endpoint: String,
    /// Posts in flight at once in one invocation.
    pub push_concurrency: usize,
    /// How long an item is pushed (once a second) for its count to catch up with its newest
    /// event, before its watchers are told it is stale.
    pub catch_up: Duration,
    /// Events older than this when read mean the broadcaster is behind: their items'
    /// watchers are told they are stale instead.
    pub max_event_age: Duration,
}

impl BroadcastConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            tables: LiveTables::from_lookup(&lookup)?,
            pushes_table: Variables::var(&lookup, "PUSHES_TABLE")?,
            counts_table: Variables::var(&lookup, "COUNTS_TABLE")?,
            catalog_table: Variables::var(&lookup, "CATALOG_TABLE")?,
            connections_endpoint: Variables::var(&lookup, "LIVE_CONNECTIONS_ENDPOINT")?,
            push_concurrency: Variables::whole(&lookup, "LIVE_PUSH_CONCURRENCY")?,
            catch_up: Duration::from_secs(
                Variables::whole(&lookup, "LIVE_CATCH_UP_SECONDS")? as u64
            ),
            max_event_age: Duration::from_secs(Variables::whole(
                &lookup,
                "LIVE_MAX_EVENT_AGE_SECONDS",
            )? as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn broadcast_env() -> BTreeMap<&'static str, &'static str> {
        BTreeMap::from([
            ("CONNECTIONS_TABLE", "c"),
            ("SUBSCRIPTIONS_TABLE", "s"),
            ("SUBSCRIPTION_BUCKETS", "8"),
            ("PUSHES_TABLE", "p"),
            ("COUNTS_TABLE", "n"),
            ("CATALOG_TABLE", "c"),
            ("LIVE_CONNECTIONS_ENDPOINT", "https://x/live"),
            ("LIVE_PUSH_CONCURRENCY", "64"),
            ("LIVE_CATCH_UP_SECONDS", "10"),
            ("LIVE_MAX_EVENT_AGE_SECONDS", "30"),
        ])
    }

    #[test]
    fn missing_and_out_of_range_variables_are_named() {
        let env = broadcast_env();
        let config = BroadcastConfig::from_lookup(|n| env.get(n).map(|v| v.to_string())).unwrap();
        assert_eq!((config.tables.buckets, config.push_concurrency), (8, 64));
        for (name, value) in [("PUSHES_TABLE", None), ("SUBSCRIPTION_BUCKETS", Some("0"))] {
            let mut env = broadcast_env();
            match value {
                Some(value) => env.insert(name, value),
                None => env.remove(name),
            };
            let err = BroadcastConfig::from_lookup(|n| env.get(n).map(|v| v.to_string()))
                .unwrap_err()
                .to_string();
            assert!(err.contains(name), "{err}");
        }
    }
}
