//! The live tables' rows: connections, subscriptions, an item's watch row and a bucket's
//! push claim.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::attr;

/// A live connection, `connection_id`: whose it is and which items it watches, so its
/// subscriptions can be found and removed when it goes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionRow {
    pub connection_id: String,
    pub user_id: String,
    #[serde(default)]
    pub items: Vec<String>,
    /// Bumped by every change of `items`, which is conditional on it: two subscribes racing
    /// on one connection cannot both write the list they read.
    #[serde(default)]
    pub items_version: u64,
    pub connected_at: i64,
    /// Epoch seconds, for the table's TTL: past API Gateway's 2 h connection limit.
    pub expires_at: i64,
}

/// One watcher of one item, in one bucket of the item's watchers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubscriptionRow {
    pub watch: String,
    pub connection_id: String,
    pub expires_at: i64,
}

/// An item's watch row: which buckets of its watchers may hold an open subscription.
#[derive(Debug, Clone, Deserialize)]
pub struct WatchRow {
    pub item_id: String,
    /// `watched#<bucket>` → until when (epoch seconds); the row's other numbers too.
    #[serde(flatten)]
    pub numbers: BTreeMap<String, i64>,
}

impl WatchRow {
    /// The buckets watched at `now_s`, in order.
    pub fn watched(&self, now_s: i64) -> Vec<u32> {
        let mut buckets: Vec<u32> = self
            .numbers
            .iter()
            .filter(|(_, until)| **until >= now_s)
            .filter_map(|(name, _)| name.strip_prefix(attr::WATCHED_PREFIX)?.parse().ok())
            .collect();
        buckets.sort_unstable();
        buckets
    }
}

/// A bucket's push claim as a refused claim returns it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PushRow {
    pub claimed_at: Option<i64>,
    /// The `claimed_at` of the last push that finished, and when it finished.
    pub finished: Option<i64>,
    pub finished_at: Option<i64>,
    pub pushed_as_of: Option<i64>,
    /// What the last finished counts push sent.
    pub pushed_like_count: Option<u64>,
    pub pushed_dislike_count: Option<u64>,
}
