//! The Counts table's rows: count rows, each stream shard's progress (its watermark) and
//! intents, `as_of` replicas, the reconciliation run.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::Attribute;

/// The key of a Counts row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountKey {
    pub item_id: String,
    pub shard: String,
}

/// A row of an item's partition: a count row `D#k` (totals, a count never added to reading
/// 0; the likers buckets its likes went to, `lbs`), or the overflow marker `H`
/// (`partitions`).
#[derive(Debug, Clone, Deserialize)]
pub struct CountRow {
    pub shard: String,
    #[serde(default)]
    pub like_count: i64,
    #[serde(default)]
    pub dislike_count: i64,
    /// The likers buckets, each number in big-endian bytes (see [`super::attr::LIKED_BUCKETS`]).
    #[serde(default, rename = "lbs")]
    liked_bucket_bytes: Vec<serde_bytes::ByteBuf>,
    /// The likers buckets as a number set, as rows listed them before.
    #[serde(default, rename = "lb")]
    liked_bucket_numbers: Vec<u32>,
    pub partitions: Option<u32>,
}

impl CountRow {
    /// The likers buckets the row lists, in either form ([`listed_buckets`] writes them).
    pub fn liked_buckets(&self) -> impl Iterator<Item = u32> + '_ {
        let from_bytes = self.liked_bucket_bytes.iter().map(|bytes| {
            bytes
                .iter()
                .fold(0u32, |number, byte| (number << 8) | u32::from(*byte))
        });
        from_bytes.chain(self.liked_bucket_numbers.iter().copied())
    }
}

/// A set of likers buckets as a count row lists them, for an `ADD` (a binary set, each number
/// in its fewest big-endian bytes: one for a number under 256; never empty).
pub fn listed_buckets(buckets: &BTreeSet<u32>) -> AttributeValue {
    AttributeValue::Bs(
        buckets
            .iter()
            .map(|n| {
                let bytes = n.to_be_bytes();
                let first = bytes.iter().position(|b| *b != 0).unwrap_or(3);
                Blob::new(&bytes[first..])
            })
            .collect(),
    )
}

/// A stream shard's progress, `#wm#<shard>` / `W`: its watermark (the stream time of the last
/// record applied), the last record applied and the last intent completed.
#[derive(Debug, Clone, Deserialize)]
pub struct WatermarkRow {
    pub item_id: String,
    pub stream_time: i64,
    pub probe_key: Option<String>,
    pub through_seq: Option<String>,
    pub intent: Option<i64>,
}

/// A chunk's intent, `#wm#<shard>` / `N#<m>` (`m`, the intent it follows, in 20 digits, so
/// intents sort in order before `W`): what the chunk adds to each count row, frozen before
/// any is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountIntentRow {
    pub item_id: String,
    pub shard: String,
    pub n: i64,
    /// The chunk's last record and its stream time: the progress once it is applied.
    pub last_seq: String,
    pub stream_time: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_key: Option<String>,
    /// The rows' deltas as compact JSON, deflated (see `counts::intents`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed: Option<serde_bytes::ByteBuf>,
    /// The same as plain JSON, as intents were written before they were deflated (read, no
    /// longer written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<String>,
    /// Epoch seconds, for the table's TTL.
    pub expires_at: i64,
}

/// One replica of the published `as_of`, `#asof#<r>` / `A`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AsOfRow {
    pub item_id: String,
    pub shard: String,
    pub as_of: i64,
    pub computed_at: i64,
}

/// The reconciliation run row, `#reconcile` / `S`.
#[derive(Debug, Clone, Deserialize)]
pub struct RunStateRow {
    pub cut: i64,
    pub phase: RunPhase,
    pub export_arn: Option<String>,
    #[serde(default)]
    pub started_at: i64,
    #[serde(default)]
    pub lease_until: i64,
    /// Attempts of this cut that failed and were started again.
    #[serde(default)]
    pub attempts: u32,
    /// Compare leases taken for this cut: one that never returns (an invocation that ran out
    /// of time) is counted here.
    #[serde(default)]
    pub leases: u32,
    /// Why the run was given up, when it was.
    #[serde(default)]
    pub abandoned: Option<String>,
    #[serde(default)]
    pub compared_through: Option<String>,
    #[serde(default)]
    pub compare_tally: Option<String>,
    #[serde(default)]
    pub derived_at: Option<i64>,
    #[serde(default)]
    pub derived_tables: Vec<String>,
    #[serde(default)]
    pub derived_exports: Vec<String>,
    #[serde(default)]
    pub given_up: Vec<crate::reconciliation::GivenUpCut>,
    #[serde(default)]
    pub given_up_dropped: u64,
}

/// The `phase` of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunPhase {
    Exporting,
    Comparing,
    Done,
}

impl RunPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exporting => "exporting",
            Self::Comparing => "comparing",
            Self::Done => "done",
        }
    }
}

/// A Counts row as reconciliation reads it: its keys, totals, and every other attribute,
/// among them the epoch subtotals (`e<j>l`, `e<j>d`) and near-cut counts (`n<k>`).
#[derive(Debug, Clone, Deserialize)]
pub struct ReconciledRow {
    pub item_id: String,
    pub shard: String,
    #[serde(default)]
    pub like_count: i64,
    #[serde(default)]
    pub dislike_count: i64,
    #[serde(flatten)]
    pub others: BTreeMap<String, Attribute>,
}
