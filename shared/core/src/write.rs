//! The reaction write decision: what one conditional write means, and how to read a rejected one.
//!
//! The store makes one conditional UpdateItem: "the state differs from the target, this
//! idempotency key is not recorded yet (and `op_id` matches `If-Match` when given)". When the
//! condition fails, DynamoDB hands back the old row (`ALL_OLD`) and [`explain_rejection`] says
//! which of the three clauses failed, without a second read.

use serde::Serialize;

use crate::ids::KeyHash;
use crate::reaction::{ReactionState, Transition};

/// The newest keys a row always keeps, so a late retry replays instead of re-applying.
pub const KEYS_KEPT: usize = 6;
/// A row is trimmed back to [`KEYS_KEPT`] keys once it holds more than this many; the slack
/// means the extra trimming write happens on at most one keyed flip in four of a busy row,
/// and the row stays under 1 KB (one write unit) in between.
pub const KEYS_TRIM_ABOVE: usize = 9;

/// What a row remembers about one accepted write, enough to rebuild its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// The state the request asked for (and got: only real flips are recorded).
    pub state: ReactionState,
    pub previous_state: ReactionState,
    pub version: u64,
    pub updated_at_ms: i64,
}

/// The stored row, as far as the write decision cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionRow {
    pub state: ReactionState,
    /// `op_id`: bumped by one on every real flip; 0 for a row never written.
    pub version: u64,
    pub updated_at_ms: Option<i64>,
    pub keys: Vec<(KeyHash, IdempotencyRecord)>,
}

impl ReactionRow {
    /// The row of a user who never reacted to the item.
    pub fn absent() -> Self {
        Self {
            state: ReactionState::None,
            version: 0,
            updated_at_ms: None,
            keys: Vec::new(),
        }
    }

    pub fn record_for(&self, key: &KeyHash) -> Option<&IdempotencyRecord> {
        self.keys.iter().find(|(k, _)| k == key).map(|(_, r)| r)
    }

    /// The keys to remove so the row keeps its [`KEYS_KEPT`] newest, once it holds more than
    /// [`KEYS_TRIM_ABOVE`]; empty otherwise.
    pub fn keys_to_trim(&self) -> Vec<KeyHash> {
        if self.keys.len() <= KEYS_TRIM_ABOVE {
            return Vec::new();
        }
        let mut by_age: Vec<&(KeyHash, IdempotencyRecord)> = self.keys.iter().collect();
        by_age.sort_by_key(|(_, record)| std::cmp::Reverse(record.version));
        by_age
            .into_iter()
            .skip(KEYS_KEPT)
            .map(|(key, _)| key.clone())
            .collect()
    }
}

/// One request to set a reaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest {
    pub target: ReactionState,
    pub key: Option<KeyHash>,
    /// The version from `If-Match`, when the client sent one.
    pub if_match: Option<u64>,
}

/// Why DynamoDB rejected the conditional write, read from the returned old row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The key was already used with this same request: answer the stored response again.
    Replay(IdempotencyRecord),
    /// The key was already used for another target state.
    KeyReused { original: IdempotencyRecord },
    /// `If-Match` named a version that is no longer current.
    Stale { current: u64 },
    /// The row already holds the target state: nothing to write, nothing to count.
    AlreadyInState,
}

/// Reads a rejected write. A replay wins over everything, so a retry of a write that
/// succeeded answers its original response even after later writes (like → unlike → the
/// like's retry replays and leaves the row NONE).
pub fn explain_rejection(row: &ReactionRow, request: &WriteRequest) -> Rejection {
    if let Some(record) = request.key.as_ref().and_then(|k| row.record_for(k)) {
        return if record.state == request.target {
            Rejection::Replay(*record)
        } else {
            Rejection::KeyReused { original: *record }
        };
    }
    match request.if_match {
        Some(version) if version != row.version => Rejection::Stale {
            current: row.version,
        },
        _ => Rejection::AlreadyInState,
    }
}

/// Whether the count pipeline has work from a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CountStatus {
    /// A real flip: the stream carries it to the counts.
    Queued,
    /// No flip: counts do not change.
    Unchanged,
}

/// The outcome of a reaction write, as the API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReactionChange {
    pub state: ReactionState,
    pub previous_state: ReactionState,
    pub version: u64,
    pub updated_at_ms: Option<i64>,
    pub count_status: CountStatus,
    /// True when this answers a retry from the stored record.
    pub replayed: bool,
}

impl ReactionChange {
    /// A write that flipped the state (first answer or replay: the same body either way).
    pub fn from_record(record: IdempotencyRecord, replayed: bool) -> Self {
        Self {
            state: record.state,
            previous_state: record.previous_state,
            version: record.version,
            updated_at_ms: Some(record.updated_at_ms),
            count_status: CountStatus::Queued,
            replayed,
        }
    }

    /// A request for the state the row already holds.
    pub fn unchanged(row: &ReactionRow) -> Self {
        Self {
            state: row.state,
            previous_state: row.state,
            version: row.version,
            updated_at_ms: row.updated_at_ms,
            count_status: CountStatus::Unchanged,
            replayed: false,
        }
    }

    /// What the client may add to the counts it shows, before the pipeline catches up.
    /// A replay reports the delta of the original write, which the client applied then.
    pub fn client_delta(&self) -> crate::Delta {
        Transition::new(self.previous_state, self.state).delta()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IdempotencyKey;
    use crate::reaction::ReactionState::{Dislike, Like, None as Neutral};

    fn key(raw: &str) -> KeyHash {
        IdempotencyKey::parse(raw).unwrap().hash()
    }

    fn record(
        state: ReactionState,
        previous_state: ReactionState,
        version: u64,
    ) -> IdempotencyRecord {
        IdempotencyRecord {
            state,
            previous_state,
            version,
            updated_at_ms: 1_700_000_000_000 + version as i64,
        }
    }

    fn row(
        state: ReactionState,
        version: u64,
        keys: Vec<(KeyHash, IdempotencyRecord)>,
    ) -> ReactionRow {
        ReactionRow {
            state,
            version,
            updated_at_ms: Some(1_700_000_000_000),
            keys,
        }
    }

    #[test]
    fn retry_after_unlike_replays_the_like() {
        // like (k1) -> unlike (k2) -> the like's retry arrives: the row is NONE, k1 is recorded.
        let stored = row(
            Neutral,
            2,
            vec![
                (key("k1"), record(Like, Neutral, 1)),
                (key("k2"), record(Neutral, Like, 2)),
            ],
        );
        let retry = WriteRequest {
            target: Like,
            key: Some(key("k1")),
            if_match: None,
        };
        assert_eq!(
            explain_rejection(&stored, &retry),
            Rejection::Replay(record(Like, Neutral, 1))
        );
    }

    #[test]
    fn a_key_reused_for_another_state_is_refused() {
        let stored = row(Like, 1, vec![(key("k1"), record(Like, Neutral, 1))]);
        let other = WriteRequest {
            target: Dislike,
            key: Some(key("k1")),
            if_match: None,
        };
        assert_eq!(
            explain_rejection(&stored, &other),
            Rejection::KeyReused {
                original: record(Like, Neutral, 1)
            }
        );
    }

    #[test]
    fn a_stale_version_is_reported_before_already_in_state() {
        let stored = row(Like, 3, vec![]);
        let stale = WriteRequest {
            target: Like,
            key: Some(key("new")),
            if_match: Some(2),
        };
        assert_eq!(
            explain_rejection(&stored, &stale),
            Rejection::Stale { current: 3 }
        );
        let fresh = WriteRequest {
            if_match: Some(3),
            ..stale.clone()
        };
        assert_eq!(
            explain_rejection(&stored, &fresh),
            Rejection::AlreadyInState
        );
        let unconditional = WriteRequest {
            if_match: None,
            ..stale
        };
        assert_eq!(
            explain_rejection(&stored, &unconditional),
            Rejection::AlreadyInState
        );
    }

    #[test]
    fn a_replay_wins_over_a_stale_if_match() {
        let stored = row(Like, 5, vec![(key("k"), record(Like, Neutral, 4))]);
        let retry = WriteRequest {
            target: Like,
            key: Some(key("k")),
            if_match: Some(3),
        };
        assert_eq!(
            explain_rejection(&stored, &retry),
            Rejection::Replay(record(Like, Neutral, 4))
        );
    }

    #[test]
    fn an_absent_row_reads_as_none_version_zero() {
        let absent = ReactionRow::absent();
        let unlike = WriteRequest {
            target: Neutral,
            key: None,
            if_match: Some(0),
        };
        assert_eq!(
            explain_rejection(&absent, &unlike),
            Rejection::AlreadyInState
        );
        let change = ReactionChange::unchanged(&absent);
        assert_eq!((change.state, change.version), (Neutral, 0));
        assert_eq!(change.count_status, CountStatus::Unchanged);
        assert!(change.client_delta().is_zero());
    }

    #[test]
    fn rows_are_trimmed_to_the_newest_keys_only_past_the_slack() {
        let keys = |n: u64| -> Vec<(KeyHash, IdempotencyRecord)> {
            (1..=n)
                .map(|v| (key(&format!("k{v}")), record(Like, Neutral, v)))
                .collect()
        };
        let at_slack = KEYS_TRIM_ABOVE as u64;
        assert!(row(Like, at_slack, keys(at_slack))
            .keys_to_trim()
            .is_empty());
        let full = row(Like, at_slack + 1, keys(at_slack + 1));
        let mut trimmed = full.keys_to_trim();
        trimmed.sort();
        let dropped = at_slack + 1 - KEYS_KEPT as u64;
        let mut oldest: Vec<KeyHash> = (1..=dropped).map(|v| key(&format!("k{v}"))).collect();
        oldest.sort();
        assert_eq!(
            trimmed, oldest,
            "the oldest go, the newest {KEYS_KEPT} stay"
        );
    }

    #[test]
    fn replayed_changes_report_the_original_client_delta() {
        let change = ReactionChange::from_record(record(Dislike, Like, 7), true);
        assert_eq!(
            change.client_delta(),
            crate::Delta {
                like: -1,
                dislike: 1
            }
        );
        assert_eq!(change.count_status, CountStatus::Queued);
        assert!(change.replayed);
    }
}
