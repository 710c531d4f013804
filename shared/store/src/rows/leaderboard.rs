//! The Leaderboard table's rows: score rows, event claims, shard progress, intents, the
//! materialized boards, and an all-time score row as reconciliation reads it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Attribute;

/// A leaderboard score row: an item's net likes on one board.
#[derive(Debug, Clone, Deserialize)]
pub struct ScoreRow {
    pub item_id: String,
    pub score: i64,
}

/// A score row's keys, as a writer reads a row it does not know.
#[derive(Debug, Clone, Deserialize)]
pub struct ScoreRowKey {
    pub board: String,
    pub item_id: String,
}

/// A score row's entry in the score index: its score as the index keys it.
#[derive(Debug, Clone, Deserialize)]
pub struct RankedRow {
    pub item_id: String,
    pub ranked: i64,
}

/// The claim of one event on the Leaderboard table, `#event#<flip key>` / item id: `by` is
/// the log record (`<shard>:<sequence number>`) whose invocation scores it.
#[derive(Debug, Clone, Serialize)]
pub struct EventClaimRow {
    pub board: String,
    pub item_id: String,
    pub by: String,
    pub expires_at: i64,
}

/// How far the leaderboard consumer applied one Kinesis shard, `#progress` / shard id: the
/// last record's sequence number, its arrival on the log, and how many intents the shard
/// has applied.
#[derive(Debug, Clone, Deserialize)]
pub struct BoardProgressRow {
    pub item_id: String,
    pub applied_through: i64,
    #[serde(default)]
    pub through_seq: Option<String>,
    #[serde(default)]
    pub intents: u64,
    /// The namespace boards its intents scored on lately, by key: the intent that last
    /// did, and when (epoch ms).
    #[serde(default)]
    pub scored: BTreeMap<String, (u64, i64)>,
    /// The last intent whose boards were dropped from `scored` to keep it bounded.
    #[serde(default)]
    pub scored_dropped: u64,
}

/// A shard's pending intent, `#intent#<shard>` / `head`: the score deltas of its records up
/// to `last_seq`, frozen before any is applied, as the shard's intent number `n`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntentHeadRow {
    pub board: String,
    pub item_id: String,
    pub n: u64,
    pub last_seq: String,
    pub applied_through: i64,
    pub rows: Vec<ScoreDeltaRow>,
}

/// A delta for one score row (its board shard key and item), the row's TTL if it has one,
/// and on an all-time row the delta's split by epoch and its flips near each cut, as
/// `[epoch, delta]` and `[cut, flips]` pairs (absent on intents frozen before rows kept them).
/// Short names: an intent holds up to two thousand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreDeltaRow {
    #[serde(rename = "b")]
    pub board: String,
    #[serde(rename = "i")]
    pub item_id: String,
    #[serde(rename = "d")]
    pub delta: i64,
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    #[serde(rename = "e", default, skip_serializing_if = "Vec::is_empty")]
    pub by_epoch: Vec<(i64, i64)>,
    #[serde(rename = "n", default, skip_serializing_if = "Vec::is_empty")]
    pub near_cuts: Vec<(i64, u64)>,
}

/// A materialized board, `#top` / window key: its top entries and the `as_of` they hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopRow {
    pub board: String,
    pub item_id: String,
    pub entries: Vec<TopEntryRow>,
    pub as_of: Option<i64>,
    pub refreshed_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopEntryRow {
    pub item_id: String,
    pub like_count: i64,
}

/// An all-time score row as reconciliation reads it: its keys, score, and every other
/// attribute, among them the epoch subtotals (`e<j>l`) and near-cut counts (`n<k>`).
#[derive(Debug, Clone, Deserialize)]
pub struct ReconciledScoreRow {
    pub item_id: String,
    #[serde(default)]
    pub score: i64,
    #[serde(flatten)]
    pub others: BTreeMap<String, Attribute>,
}
