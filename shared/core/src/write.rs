//! The reaction write decision: what one conditional write asks of the row, and what it
//! comes to.
//!
//! The store makes one conditional UpdateItem whose condition is [`WriteRequest::clauses`]:
//! "this idempotency key is not recorded yet, `op_id` matches `If-Match` when given, and the
//! state differs from the target". Applied, [`applied`] builds the answer from the old row
//! (`ALL_OLD`); refused, DynamoDB hands back the old row too and [`refused`] says which clause
//! failed, without a second read.

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

/// One clause of the write's condition. The store states each in DynamoDB's words;
/// [`Clause::holds`] is the same test on a row in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clause {
    /// This idempotency key is not recorded on the row yet.
    KeyUnrecorded(KeyHash),
    /// The row is at this version; 0 means the row was never written.
    AtVersion(u64),
    /// The stored state differs from the target. A row never written counts as differing
    /// only from LIKE and DISLIKE: a NONE target never creates a row.
    StateDiffers(ReactionState),
}

impl Clause {
    pub fn holds(&self, row: &ReactionRow) -> bool {
        match self {
            Self::KeyUnrecorded(key) => row.record_for(key).is_none(),
            Self::AtVersion(version) => row.version == *version,
            Self::StateDiffers(target) => row.state != *target,
        }
    }
}

impl WriteRequest {
    /// The clauses one conditional write must meet, in the order their failures are
    /// answered: a replay wins over everything, so a retry of a write that succeeded answers
    /// its original response even after later writes (like → unlike → the like's retry
    /// replays and leaves the row NONE); then a stale `If-Match`; then "already in state".
    pub fn clauses(&self) -> Vec<Clause> {
        let mut clauses = Vec::with_capacity(3);
        clauses.extend(self.key.clone().map(Clause::KeyUnrecorded));
        clauses.extend(self.if_match.map(Clause::AtVersion));
        clauses.push(Clause::StateDiffers(self.target));
        clauses
    }
}

/// What one reaction write came to: the domain's answer, whichever way DynamoDB went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The state flipped: the stream carries the change to the counts.
    Applied(ReactionChange),
    /// A retry of a write that flipped the state: its original answer, nothing written.
    Replayed(ReactionChange),
    /// The row already holds the target state: nothing written, nothing to count.
    Unchanged(ReactionChange),
    /// `If-Match` named a version that is no longer current.
    Stale { current: u64 },
    /// The idempotency key was used for a request to set another state.
    KeyReused { original: ReactionState },
}

/// The answer to a write DynamoDB applied, and the row as it now is. `old` is the row
/// before the write (`ALL_OLD`): the write bumped its version by one and, when keyed,
/// recorded what a replay must answer.
pub fn applied(
    old: ReactionRow,
    request: &WriteRequest,
    now_ms: i64,
) -> (WriteOutcome, ReactionRow) {
    let record = IdempotencyRecord {
        state: request.target,
        previous_state: old.state,
        version: old.version + 1,
        updated_at_ms: now_ms,
    };
    let mut after = ReactionRow {
        state: record.state,
        version: record.version,
        updated_at_ms: Some(now_ms),
        keys: old.keys,
    };
    if let Some(key) = &request.key {
        after.keys.push((key.clone(), record));
    }
    (WriteOutcome::Applied(ReactionChange::from(record)), after)
}

/// The answer to a write DynamoDB refused on its condition, read from the row it returned
/// (`ALL_OLD`), without a second read: the first clause that fails says why.
pub fn refused(row: &ReactionRow, request: &WriteRequest) -> WriteOutcome {
    let failed = request
        .clauses()
        .into_iter()
        .find(|clause| !clause.holds(row));
    match failed {
        Some(Clause::KeyUnrecorded(key)) => {
            let record = *row
                .record_for(&key)
                .expect("the clause failed on a recorded key");
            if record.state == request.target {
                WriteOutcome::Replayed(ReactionChange::from(record))
            } else {
                WriteOutcome::KeyReused {
                    original: record.state,
                }
            }
        }
        Some(Clause::AtVersion(_)) => WriteOutcome::Stale {
            current: row.version,
        },
        // The state already is the target. (Or DynamoDB saw a clause fail that the row as
        // read does not show, such as a half-written key record: nothing was written either way.)
        Some(Clause::StateDiffers(_)) | None => WriteOutcome::Unchanged(ReactionChange {
            state: row.state,
            previous_state: row.state,
            version: row.version,
            updated_at_ms: row.updated_at_ms,
        }),
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

/// The reaction a write answers with: the flip it made (or replays), or the row unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReactionChange {
    pub state: ReactionState,
    pub previous_state: ReactionState,
    pub version: u64,
    pub updated_at_ms: Option<i64>,
}

impl From<IdempotencyRecord> for ReactionChange {
    fn from(record: IdempotencyRecord) -> Self {
        Self {
            state: record.state,
            previous_state: record.previous_state,
            version: record.version,
            updated_at_ms: Some(record.updated_at_ms),
        }
    }
}

impl ReactionChange {
    /// What the client may add to the counts it shows, before the pipeline catches up.
    /// A replay reports the delta of the original write, which the client applied then.
    pub fn client_delta(&self) -> crate::Delta {
        Transition::new(self.previous_state, self.state).delta()
    }

    /// Queued for a flip (first answer or replay), unchanged otherwise.
    pub fn count_status(&self) -> CountStatus {
        match self.state != self.previous_state {
            true => CountStatus::Queued,
            false => CountStatus::Unchanged,
        }
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

    fn request(
        target: ReactionState,
        raw_key: Option<&str>,
        if_match: Option<u64>,
    ) -> WriteRequest {
        WriteRequest {
            target,
            key: raw_key.map(key),
            if_match,
        }
    }

    #[test]
    fn a_replay_wins_over_the_state_the_row_has_moved_to() {
        // like (k1) -> unlike (k2) -> the like's retry arrives: the row is NONE, k1 is recorded.
        let stored = row(
            Neutral,
            2,
            vec![
                (key("k1"), record(Like, Neutral, 1)),
                (key("k2"), record(Neutral, Like, 2)),
            ],
        );
        assert_eq!(
            refused(&stored, &request(Like, Some("k1"), None)),
            WriteOutcome::Replayed(record(Like, Neutral, 1).into())
        );
    }

    #[test]
    fn a_key_reused_for_another_state_is_refused() {
        let stored = row(Like, 1, vec![(key("k1"), record(Like, Neutral, 1))]);
        assert_eq!(
            refused(&stored, &request(Dislike, Some("k1"), None)),
            WriteOutcome::KeyReused { original: Like }
        );
    }

    #[test]
    fn a_stale_version_is_reported_before_already_in_state() {
        let stored = row(Like, 3, vec![]);
        assert_eq!(
            refused(&stored, &request(Like, Some("new"), Some(2))),
            WriteOutcome::Stale { current: 3 }
        );
        let unchanged = WriteOutcome::Unchanged(ReactionChange {
            state: Like,
            previous_state: Like,
            version: 3,
            updated_at_ms: Some(1_700_000_000_000),
        });
        assert_eq!(
            refused(&stored, &request(Like, Some("new"), Some(3))),
            unchanged
        );
        assert_eq!(
            refused(&stored, &request(Like, Some("new"), None)),
            unchanged
        );
    }

    #[test]
    fn a_replay_wins_over_a_stale_if_match() {
        let stored = row(Like, 5, vec![(key("k"), record(Like, Neutral, 4))]);
        assert_eq!(
            refused(&stored, &request(Like, Some("k"), Some(3))),
            WriteOutcome::Replayed(record(Like, Neutral, 4).into())
        );
    }

    #[test]
    fn an_absent_row_reads_as_none_version_zero() {
        let absent = ReactionRow::absent();
        let unlike = request(Neutral, None, Some(0));
        assert!(!unlike.clauses().iter().all(|c| c.holds(&absent)));
        let WriteOutcome::Unchanged(change) = refused(&absent, &unlike) else {
            panic!("NONE on a row never written is unchanged");
        };
        assert_eq!((change.state, change.version), (Neutral, 0));
        assert_eq!(change.count_status(), CountStatus::Unchanged);
        assert!(change.client_delta().is_zero());
        assert!(request(Like, None, Some(0))
            .clauses()
            .iter()
            .all(|c| c.holds(&absent)));
    }

    #[test]
    fn an_applied_write_bumps_the_version_and_records_its_key() {
        let old = row(Dislike, 4, vec![(key("k1"), record(Dislike, Neutral, 4))]);
        let (outcome, after) = applied(old, &request(Like, Some("k2"), Some(4)), 9_000);
        let change = ReactionChange {
            state: Like,
            previous_state: Dislike,
            version: 5,
            updated_at_ms: Some(9_000),
        };
        assert_eq!(outcome, WriteOutcome::Applied(change));
        assert_eq!(change.count_status(), CountStatus::Queued);
        assert_eq!((after.state, after.version), (Like, 5));
        // The row now answers a retry of this very write with the same change.
        assert_eq!(
            refused(&after, &request(Like, Some("k2"), Some(4))),
            WriteOutcome::Replayed(change)
        );
        let (_, unkeyed) = applied(after.clone(), &request(Neutral, None, None), 9_001);
        assert_eq!(unkeyed.keys, after.keys, "an unkeyed write records no key");
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
        let change = ReactionChange::from(record(Dislike, Like, 7));
        assert_eq!(
            change.client_delta(),
            crate::Delta {
                like: -1,
                dislike: 1
            }
        );
        assert_eq!(change.count_status(), CountStatus::Queued);
    }
}
