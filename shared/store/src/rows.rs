//! The row codec: every DynamoDB item the service reads or writes, as a typed row, and the
//! names of their attributes. Items are converted with `serde_dynamo`, so a misspelt or
//! mistyped attribute fails here, in one place, never as a silent default. A field's name
//! is its attribute's name; expressions name attributes through the constants below, and
//! a test holds the two together.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::{ErasureStatus, ReactionState};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// An item as the SDK hands it over.
pub type Item = HashMap<String, AttributeValue>;

/// Attribute names, per table.
pub mod attr {
    // Reactions (PK user_id, SK item_id).
    pub const USER_ID: &str = "user_id";
    pub const ITEM_ID: &str = "item_id";
    pub const STATE: &str = "state";
    pub const OP_ID: &str = "op_id";
    pub const UPDATED_AT: &str = "updated_at";
    pub const LIKED_AT: &str = "liked_at";
    /// `k#<key hash>`: the state a keyed write asked for and its time (`L|1732912345678`).
    pub const REQUEST_PREFIX: &str = "k#";
    /// `v#<key hash>`: the version that write produced.
    pub const VERSION_PREFIX: &str = "v#";
    /// `p#<key hash>`: the state that write replaced.
    pub const PREVIOUS_PREFIX: &str = "p#";
    pub const PROBED_AT: &str = "probed_at";
    // Counts (PK item_id, SK shard), count rows and freshness rows.
    pub const SHARD: &str = "shard";
    pub const LIKE_COUNT: &str = "like_count";
    pub const DISLIKE_COUNT: &str = "dislike_count";
    pub const PARTITIONS: &str = "partitions";
    pub const STREAM_TIME: &str = "stream_time";
    pub const PROBE_KEY: &str = "probe_key";
    pub const AS_OF: &str = "as_of";
    pub const COMPUTED_AT: &str = "computed_at";
    // Counts: the reconciliation run `#reconcile` / `S`, and correction rows' run ids.
    pub const CUT: &str = "cut";
    pub const PHASE: &str = "phase";
    pub const EXPORT_ARN: &str = "export_arn";
    pub const STARTED_AT: &str = "started_at";
    pub const LEASE_UNTIL: &str = "lease_until";
    pub const ABANDONED: &str = "abandoned";
    /// The cuts given up since the last completed run, and how many of them the list dropped.
    pub const GIVEN_UP: &str = "given_up";
    pub const GIVEN_UP_DROPPED: &str = "given_up_dropped";
    pub const ATTEMPTS: &str = "attempts";
    pub const LEASES: &str = "leases";
    pub const LAST_ERROR: &str = "last_error";
    pub const REPORT: &str = "report";
    /// A paused compare: the last item it judged, and its report so far (JSON).
    pub const COMPARED_THROUGH: &str = "compared_through";
    pub const COMPARE_TALLY: &str = "compare_tally";
    /// Athena mode: when the read models were found past the cut (the time their exports are
    /// taken at), the tables to export (a string set of ARNs) and the exports asked for.
    pub const DERIVED_AT: &str = "derived_at";
    pub const DERIVED_TABLES: &str = "derived_tables";
    pub const DERIVED_EXPORTS: &str = "derived_exports";
    /// The correction row's runs of the older layout (a string set of run ids).
    pub const RUNS: &str = "runs";
    /// The last cut (epoch index) that corrected the item.
    pub const LAST_CUT: &str = "last_cut";
    // Claims (PK claim_id).
    pub const CLAIM_ID: &str = "claim_id";
    pub const EVENT_IDS: &str = "event_ids";
    pub const CREATED_AT: &str = "created_at";
    pub const EXPIRES_AT: &str = "expires_at";
    // RateLimits (PK user_id): the bucket's `tat` on the clock of its `rate`; TTL `expires_at`.
    pub const TAT: &str = "tat";
    pub const RATE: &str = "rate";
    // Erasures (PK user_id, SK erasure_id): jobs, and the guard `#active` naming the running
    // one (`active_id`). Jobs also keep `created_at` and, once done, `expires_at` for TTL.
    pub const ERASURE_ID: &str = "erasure_id";
    pub const STATUS: &str = "status";
    pub const STEP: &str = "step";
    pub const REACTIONS_ERASED: &str = "reactions_erased";
    pub const PLANNED: &str = "planned";
    pub const ACTIVE_ID: &str = "active_id";
    // Leaderboard (PK board, SK item_id): score rows, event claims (`by`: the log record
    // that owns one), shard progress, each shard's pending intent (its head and parts), the
    // materialized boards and their refresh leases.
    pub const BOARD: &str = "board";
    pub const SCORE: &str = "score";
    pub const APPLIED_THROUGH: &str = "applied_through";
    pub const THROUGH_SEQ: &str = "through_seq";
    pub const INTENTS: &str = "intents";
    pub const BY: &str = "by";
    /// A head's intent number; on a score row, `n#<shard>` is the last intent of that log
    /// shard the row took.
    pub const INTENT_N: &str = "n";
    pub const REFRESHED_AT: &str = "refreshed_at";
    /// A materialized top's ranked entries.
    pub const ENTRIES: &str = "entries";
    /// On a progress row, the day windows its last intent scored on.
    pub const DAYS: &str = "days";
    // Likers (PK bucket `item_id#<n>`, SK user_id): `row_created`, `op_id`, and while liked `position`
    // (the by_position index's sort key) and `liked_at`; tombstones `expires_at`.
    pub const BUCKET: &str = "bucket";
    pub const POSITION: &str = "position";
    /// With `op_id`, the order of the flip an entry holds: its Reactions row's `created_at`.
    pub const ROW_CREATED: &str = "row_created";
    /// The occupancy row's set of bucket numbers.
    pub const OCCUPIED: &str = "occupied";
    // LiveConnections (PK connection_id): the watcher, the items it watches; TTL `expires_at`.
    pub const CONNECTION_ID: &str = "connection_id";
    pub const ITEMS: &str = "items";
    pub const ITEMS_VERSION: &str = "items_version";
    pub const CONNECTED_AT: &str = "connected_at";
    // LiveSubscriptions (PK watch = `<item_id>#<bucket>`, SK connection_id); TTL `expires_at`.
    pub const WATCH: &str = "watch";
    // LivePushes (PK item_id). An item's watch row, `<item_id>`: `watched#<bucket>`, until
    // when a subscription in the bucket may be open (epoch s). A bucket's push claim,
    // `<item_id>#<bucket>`: when its last push was claimed (epoch ms), the claim whose push
    // finished and when, the newest `as_of` pushed and the counts last pushed. TTL `expires_at`.
    pub const WATCHED_PREFIX: &str = "watched#";
    pub const CLAIMED_AT: &str = "claimed_at";
    pub const FINISHED: &str = "finished";
    pub const FINISHED_AT: &str = "finished_at";
    pub const PUSHED_AS_OF: &str = "pushed_as_of";
    pub const PUSHED_LIKE_COUNT: &str = "pushed_like_count";
    pub const PUSHED_DISLIKE_COUNT: &str = "pushed_dislike_count";

    /// The watch row's attribute for one bucket.
    pub fn watched(bucket: u32) -> String {
        format!("{WATCHED_PREFIX}{bucket}")
    }
}

/// Reads a typed row from an item; an item that does not fit is stored data this code cannot
/// read.
pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item).map_err(StoreError::Row)
}

/// The item of a typed row.
pub fn to_item<T: Serialize>(row: &T) -> Result<Item, StoreError> {
    serde_dynamo::to_item(row).map_err(StoreError::Row)
}

/// One attribute of a typed value (a list of rows, say).
pub fn to_attribute<T: Serialize>(value: &T) -> Result<AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(value).map_err(StoreError::Row)
}

/// A number attribute, as every expression value of a number is written.
pub(crate) fn number(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The key of a Reactions row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactionKey {
    pub user_id: String,
    pub item_id: String,
}

/// A Reactions row as the write decision reads it. The idempotency records are attributes
/// named after their key (`k#h`, `v#h`, `p#h`), so they ride in `others` with the rest.
#[derive(Debug, Clone, Deserialize)]
pub struct ReactionItem {
    pub state: ReactionState,
    pub op_id: u64,
    pub updated_at: i64,
    #[serde(flatten)]
    pub others: BTreeMap<String, Attribute>,
}

/// An attribute of a row whose name is not fixed.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Attribute {
    Text(String),
    Number(i64),
    Other(serde::de::IgnoredAny),
}

/// A reaction's image in a stream record: every attribute may be missing (moto's keys-only
/// INSERT, a REMOVE's absent new image, a probe row).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReactionImage {
    pub state: Option<ReactionState>,
    pub op_id: Option<u64>,
    pub updated_at: Option<i64>,
    pub created_at: Option<i64>,
}

/// A row of the liked-items index (only LIKE rows carry `liked_at`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LikedRow {
    pub user_id: String,
    pub item_id: String,
    pub liked_at: i64,
}

/// A user's state on one item, as a browse page reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct StateRow {
    pub item_id: String,
    pub state: ReactionState,
}

/// A pulse probe on the Reactions table: never a reaction.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRow<'a> {
    pub user_id: &'a str,
    pub item_id: &'a str,
    pub probed_at: i64,
}

/// A leaderboard score row: an item's net likes on one board.
#[derive(Debug, Clone, Deserialize)]
pub struct ScoreRow {
    pub item_id: String,
    pub score: i64,
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
    #[serde(default)]
    pub days: Vec<i64>,
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
    /// The day windows (their first millisecond) the deltas score in, besides `all`.
    pub days: Vec<i64>,
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

/// A liked entry as the Likers table's `by_position` index returns it.
#[derive(Debug, Clone, Deserialize)]
pub struct LikerRow {
    pub user_id: String,
    pub liked_at: i64,
}

/// A liked entry of the Likers table as a repair reads it: its keys and its flip's order.
#[derive(Debug, Clone, Deserialize)]
pub struct LikedEntryRow {
    pub bucket: String,
    pub user_id: String,
    /// 0 on entries written before entries kept it.
    #[serde(default)]
    pub row_created: i64,
    #[serde(default)]
    pub op_id: u64,
    pub liked_at: i64,
}

/// An item's occupancy row on the Likers table: the buckets that ever held a liked entry (a
/// number set).
#[derive(Debug, Clone, Deserialize)]
pub struct OccupancyRow {
    pub occupied: Vec<u32>,
}

/// The key of a Counts row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountKey {
    pub item_id: String,
    pub shard: String,
}

/// A row of an item's partition: a count row `D#k` (totals; a count never added to reads
/// 0), or the overflow marker `H` (`partitions`).
#[derive(Debug, Clone, Deserialize)]
pub struct CountRow {
    pub shard: String,
    #[serde(default)]
    pub like_count: i64,
    #[serde(default)]
    pub dislike_count: i64,
    pub partitions: Option<u32>,
}

/// A shard's watermark row `#wm#<shard>` / `W`.
#[derive(Debug, Clone, Deserialize)]
pub struct WatermarkRow {
    pub item_id: String,
    pub stream_time: i64,
    pub probe_key: Option<String>,
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

/// A chunk's claim: its first `eventID`, every eventID it holds, joined by commas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRow {
    pub claim_id: String,
    pub event_ids: String,
    pub created_at: i64,
    /// Epoch seconds, for the table's TTL.
    pub expires_at: i64,
}

/// A user's token bucket (`likes_core::limit`): when it is full again, on its rate's clock.
#[derive(Debug, Clone, Deserialize)]
pub struct BucketRow {
    pub tat: i64,
    pub rate: u32,
}

/// The key of an Erasures row: a job's id, or the guard's `#active`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureKey {
    pub user_id: String,
    pub erasure_id: String,
}

/// An erasure job (`likes_core::erasure`): its progress and the keys its next slice deletes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasureRow {
    pub user_id: String,
    pub erasure_id: String,
    pub status: ErasureStatus,
    pub step: u64,
    pub reactions_erased: u64,
    #[serde(default)]
    pub planned: Vec<String>,
    pub created_at: i64,
    /// Epoch seconds, for the table's TTL; set when the job is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// A user's guard row `#active`: it exists exactly while a job of theirs runs, and names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasureGuardRow {
    pub user_id: String,
    pub erasure_id: String,
    pub active_id: String,
}

/// An Erasures stream image: the guard's image, and moto's keys-only INSERT, carry no status
/// or step.
#[derive(Debug, Clone, Deserialize)]
pub struct ErasureImage {
    pub user_id: String,
    pub erasure_id: String,
    pub status: Option<ErasureStatus>,
    pub step: Option<u64>,
}

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

impl ClaimRow {
    pub fn listed(&self) -> impl Iterator<Item = &str> {
        self.event_ids.split(',')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(item: &Item) -> Vec<&str> {
        let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn rows_use_the_named_attributes() {
        let claim = ClaimRow {
            claim_id: "e1".into(),
            event_ids: "e1,e2".into(),
            created_at: 1,
            expires_at: 2,
        };
        let mut expected = [
            attr::CLAIM_ID,
            attr::CREATED_AT,
            attr::EVENT_IDS,
            attr::EXPIRES_AT,
        ];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&claim).unwrap()), expected);
        let as_of = AsOfRow {
            item_id: "#asof#0".into(),
            shard: "A".into(),
            as_of: 1,
            computed_at: 2,
        };
        let mut expected = [attr::AS_OF, attr::COMPUTED_AT, attr::ITEM_ID, attr::SHARD];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&as_of).unwrap()), expected);
        let liked = LikedRow {
            user_id: "u".into(),
            item_id: "i".into(),
            liked_at: 3,
        };
        let mut expected = [attr::ITEM_ID, attr::LIKED_AT, attr::USER_ID];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&liked).unwrap()), expected);
        let probe = ProbeRow {
            user_id: "#probe#1",
            item_id: "#probe",
            probed_at: 4,
        };
        let mut expected = [attr::ITEM_ID, attr::PROBED_AT, attr::USER_ID];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&probe).unwrap()), expected);
        let job = ErasureRow {
            user_id: "u".into(),
            erasure_id: "e".into(),
            status: ErasureStatus::Running,
            step: 0,
            reactions_erased: 0,
            planned: vec![],
            created_at: 5,
            expires_at: None,
        };
        let mut expected = [
            attr::CREATED_AT,
            attr::ERASURE_ID,
            attr::PLANNED,
            attr::REACTIONS_ERASED,
            attr::STATUS,
            attr::STEP,
            attr::USER_ID,
        ];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&job).unwrap()), expected);
        let event_claim = EventClaimRow {
            board: "#event#u#i#1@0".into(),
            item_id: "i".into(),
            by: "shard:1".into(),
            expires_at: 6,
        };
        let mut expected = [attr::BOARD, attr::BY, attr::EXPIRES_AT, attr::ITEM_ID];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&event_claim).unwrap()), expected);
        let head = IntentHeadRow {
            board: "#intent#shard".into(),
            item_id: "head".into(),
            n: 1,
            last_seq: "1".into(),
            applied_through: 7,
            days: vec![],
            rows: vec![],
        };
        let item = to_item(&head).unwrap();
        for name in [
            attr::BOARD,
            attr::ITEM_ID,
            attr::INTENT_N,
            attr::APPLIED_THROUGH,
        ] {
            assert!(item.contains_key(name), "{name}");
        }
        let top = TopRow {
            board: "#top".into(),
            item_id: "all".into(),
            entries: vec![],
            as_of: None,
            refreshed_at: 8,
            expires_at: None,
        };
        assert!(to_item(&top).unwrap().contains_key(attr::REFRESHED_AT));
        let progress: BoardProgressRow = from_item(Item::from([
            (attr::ITEM_ID.into(), AttributeValue::S("shard".into())),
            (attr::APPLIED_THROUGH.into(), AttributeValue::N("9".into())),
            (
                attr::DAYS.into(),
                AttributeValue::L(vec![AttributeValue::N("5".into())]),
            ),
            (attr::THROUGH_SEQ.into(), AttributeValue::S("12".into())),
            (attr::INTENTS.into(), AttributeValue::N("3".into())),
        ]))
        .unwrap();
        assert_eq!(progress.through_seq.as_deref(), Some("12"));
        assert_eq!((progress.intents, progress.days), (3, vec![5]));
        let guard = ErasureGuardRow {
            user_id: "u".into(),
            erasure_id: "#active".into(),
            active_id: "e".into(),
        };
        let mut expected = [attr::ACTIVE_ID, attr::ERASURE_ID, attr::USER_ID];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&guard).unwrap()), expected);
        let connection = ConnectionRow {
            connection_id: "c".into(),
            user_id: "u".into(),
            items: vec!["game:1".into()],
            items_version: 3,
            connected_at: 6,
            expires_at: 7,
        };
        let mut expected = [
            attr::CONNECTED_AT,
            attr::CONNECTION_ID,
            attr::EXPIRES_AT,
            attr::ITEMS,
            attr::ITEMS_VERSION,
            attr::USER_ID,
        ];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&connection).unwrap()), expected);
        let subscription = SubscriptionRow {
            watch: "game:1#0".into(),
            connection_id: "c".into(),
            expires_at: 7,
        };
        let mut expected = [attr::CONNECTION_ID, attr::EXPIRES_AT, attr::WATCH];
        expected.sort_unstable();
        assert_eq!(names(&to_item(&subscription).unwrap()), expected);
        assert_eq!(
            to_item(&claim).unwrap()[attr::EXPIRES_AT],
            AttributeValue::N("2".into())
        );
    }

    #[test]
    fn a_watch_row_names_its_buckets_watched_now_in_order() {
        let row: WatchRow = from_item(Item::from([
            (attr::ITEM_ID.into(), AttributeValue::S("game:1".into())),
            (attr::EXPIRES_AT.into(), AttributeValue::N("900".into())),
            (attr::watched(10), AttributeValue::N("500".into())),
            (attr::watched(2), AttributeValue::N("800".into())),
            (attr::watched(3), AttributeValue::N("499".into())),
        ]))
        .unwrap();
        assert_eq!(row.watched(500), [2, 10]);
        assert_eq!(row.watched(801), Vec::<u32>::new());
    }

    #[test]
    fn liker_rows_read_the_index_projection() {
        let row: LikerRow = from_item(Item::from([
            (attr::BUCKET.into(), AttributeValue::S("game:1#7".into())),
            (attr::USER_ID.into(), AttributeValue::S("u1".into())),
            (
                attr::POSITION.into(),
                AttributeValue::S("001700000000000#u1".into()),
            ),
            (
                attr::LIKED_AT.into(),
                AttributeValue::N("1700000000000".into()),
            ),
        ]))
        .unwrap();
        assert_eq!(
            (row.user_id.as_str(), row.liked_at),
            ("u1", 1_700_000_000_000)
        );
        let occupancy: OccupancyRow = from_item(Item::from([
            (
                attr::BUCKET.into(),
                AttributeValue::S("game:1#occupied".into()),
            ),
            (attr::USER_ID.into(), AttributeValue::S("#".into())),
            (
                attr::OCCUPIED.into(),
                AttributeValue::Ns(vec!["3".into(), "60".into()]),
            ),
        ]))
        .unwrap();
        assert_eq!(occupancy.occupied, [3, 60]);
    }

    #[test]
    fn count_rows_read_missing_totals_as_zero_and_refuse_mistyped_ones() {
        let marker: CountRow = from_item(Item::from([
            (attr::SHARD.into(), AttributeValue::S("H".into())),
            (attr::PARTITIONS.into(), AttributeValue::N("8".into())),
        ]))
        .unwrap();
        assert_eq!((marker.like_count, marker.partitions), (0, Some(8)));
        let mistyped = from_item::<CountRow>(Item::from([
            (attr::SHARD.into(), AttributeValue::S("D#0".into())),
            (attr::LIKE_COUNT.into(), AttributeValue::S("7".into())),
        ]));
        assert!(matches!(mistyped, Err(StoreError::Row(_))), "{mistyped:?}");
    }
}
