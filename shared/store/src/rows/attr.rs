//! Attribute names, per table.

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
/// A count row's set of the item's likers buckets its likes went to (see `likes_core::likers`):
/// a binary set, each bucket's number in its fewest big-endian bytes (one for every bucket
/// there is), so a row listing all of an item's buckets stays small.
pub const LIKED_BUCKETS: &str = "lbs";
/// The same as a number set, as count rows listed them before (read, no longer written).
pub const LIKED_BUCKET_NUMBERS: &str = "lb";
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
// A stream shard's progress on the Counts table: the last intent it completed.
pub const INTENT: &str = "intent";
// A stream shard's intent on the Counts table: its last record and its rows' deltas
// (deflated in `packed`; as plain JSON in `rows` before intents were deflated).
pub const LAST_SEQ: &str = "last_seq";
pub const ROWS: &str = "rows";
pub const PACKED: &str = "packed";
pub const CREATED_AT: &str = "created_at";
pub const EXPIRES_AT: &str = "expires_at";
// RateLimits (PK user_id): the bucket's `tat` on the clock of its `rate`; TTL `expires_at`.
pub const TAT: &str = "tat";
pub const RATE: &str = "rate";
/// A moderator's suspension of the user's writes (on the RateLimits row): who, why, when.
pub const SUSPENDED: &str = "suspended";
// Reactions rows a moderation job wrote last: the job and the moderator's reason.
pub const RETRACTION: &str = "retraction";
pub const REASON: &str = "reason";
pub const CAUSE: &str = "cause";
/// The job's step that wrote it: a retried slice tells its own writes from earlier ones.
pub const RETRACTED_IN: &str = "retracted_in";
// Moderation (PK key): retraction jobs `r#<id>`, the guard `u#<user>` naming a user's running
// one (`active_id`), and actions without a job `a#<id>`.
pub const KEY: &str = "key";
pub const REACTIONS_RETRACTED: &str = "reactions_retracted";
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
/// A score row's key in the score index: its score, on every row but one written once with
/// a delta under `RANKED_FROM`.
pub const RANKED: &str = "ranked";
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
/// On a progress row, the namespace boards its intents scored on lately.
pub const SCORED: &str = "scored";
pub const SCORED_DROPPED: &str = "scored_dropped";
/// On a score row in the score index, its namespace board's shard (`post:all#7`).
pub const RANKED_BOARD: &str = "ranked_board";
// Likers (PK bucket `item_id#<n>`, SK entry: a like's position or a user's dislike entry):
// `user_id`, `row_created`, `op_id`, and while liked `liked_at`; tombstones `expires_at`.
pub const BUCKET: &str = "bucket";
/// With `op_id`, the order of the flip an entry holds: its Reactions row's `created_at`.
pub const ROW_CREATED: &str = "row_created";
/// A likers dislike entry while its user dislikes the item.
pub const DISLIKED: &str = "disliked";
/// On a like's entry, the log records that claimed its like and its end for the
/// leaderboard (`<shard>:<sequence number>`).
pub const LIKED_BY: &str = "liked_by";
pub const ENDED_BY: &str = "ended_by";
// Privacy (PK user_id, SK entry; the Likers table's sort key too): the settings row `#settings` (`likes_visibility`, and
// `blocks`: how many users its user blocks) and block rows `b#<user id>` (`blocked_at`).
pub const ENTRY: &str = "entry";
pub const LIKES_VISIBILITY: &str = "likes_visibility";
pub const BLOCKS: &str = "blocks";
pub const BLOCKED_AT: &str = "blocked_at";
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
// Catalog (PK pk): `ns#<namespace>` rows hold a namespace's rules,
pub const CATALOG_KEY: &str = "pk";
pub const DISLIKES: &str = "dislikes";
pub const LIKE_COUNT_RULE: &str = "like_count";
pub const LEADERBOARD_WINDOWS: &str = "leaderboard_windows";
pub const RULES_SET_AT: &str = "updated_at";
// ... and `item#<item id>` rows an item's owner and what they set.
pub const OWNER_ID: &str = "owner_id";
pub const HIDE_LIKE_COUNT: &str = "hide_like_count";
pub const OWNED_AT: &str = "owned_at";
