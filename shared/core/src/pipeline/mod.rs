//! The count pipeline's decisions, free of AWS types: how a stream batch is cut into chunks,
//! which records a shard's progress already covers, where deltas land ([`routing`]), and
//! how fresh a count is ([`freshness`]).
//!
//! Exactly once without transactions, per stream shard: each chunk's deltas are frozen first
//! as the shard's next **intent** (numbered `n`, rising; its row claims the step, so of two
//! consumers of one shard at once only one writes it), then added to each count row by one
//! plain conditional UpdateItem that also notes `n` for the shard on the row (so a row takes
//! intent `n` once), then the shard's **progress** moves to the chunk's last record. A retry finishes a pending intent before anything else and skips the
//! records the progress covers, however the stream cuts its batches.

pub mod freshness;
pub mod routing;

use crate::moderation::{Cause, ModerationEvent};
use crate::{Delta, ItemId, Transition};

pub use freshness::{counts_as_of, probe_plan, StreamShard};
pub use routing::{
    event_partition_key, hot_items, overflow_partition, route_chunk, shard_tag, user_hash,
    CountLayout, CountTarget, Lane, ListedBuckets, RowDelta, HOT_ITEM_CHANGES,
};

/// How long a consumer of the event log remembers what it applied (claims, tombstones): past
/// the log's 24 h retention, so no delivery can bring an event back once it is forgotten.
pub const REPLAY_HORIZON_MS: i64 = 2 * 86_400_000;

/// At most this many records per chunk: its intent (one row per item at most, each with the
/// epochs its changes fell in) stays well inside DynamoDB's 400 KB item.
pub const MAX_CHUNK_RECORDS: usize = 1000;

/// A pending intent older than this is not applied any more but given up (reported, and left
/// to reconciliation): the stream's records live 24 hours, so no delivery that could finish it
/// comes later, and the rows' notes of it may be dropped after [`INTENT_NOTE_HORIZON_MS`].
pub const INTENT_ABANDON_MS: i64 = 25 * 3_600_000;

/// A count row's note of a shard's intent older than this guards nothing (no intent that old
/// is applied again): reconciliation's cleaning may drop it.
pub const INTENT_NOTE_HORIZON_MS: i64 = 26 * 3_600_000;

/// The number of a shard's next intent: above the last one, and otherwise the clock, so a
/// note's number says when it was written and old notes can be told apart.
pub fn next_intent(last: Option<i64>, now_ms: i64) -> i64 {
    last.map_or(now_ms, |last| (last + 1).max(now_ms))
}

/// Whether sequence number `seq` comes after `through` on its shard (of the event log or of
/// the Reactions stream): sequence numbers are decimal strings that only grow, but not
/// always in length, so they compare by length first.
pub fn sequence_after(seq: &str, through: &str) -> bool {
    (seq.len(), seq) > (through.len(), through)
}

/// How many of `records` (in shard order) a shard's progress through `through_seq` already
/// covers: a retry or a duplicate delivery starts with them.
pub fn covered(records: &[ChangeRecord], through_seq: Option<&str>) -> usize {
    let Some(through) = through_seq else {
        return 0;
    };
    records
        .iter()
        .take_while(|r| !sequence_after(&r.sequence_number, through))
        .count()
}

/// One stream record as the aggregator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    /// The stream's `eventID`: unique per record, the same on every delivery.
    pub event_id: String,
    pub sequence_number: String,
    /// When DynamoDB committed the write (`ApproximateCreationDateTime`, epoch millis): what
    /// the shard's watermark advances to once this record is applied.
    pub stream_time_ms: i64,
    /// `None` for a record that changes no reaction state (a keys-only image, no-op write,
    /// a probe, a record that could not be read).
    pub change: Option<Change>,
}

/// A real flip of one user's reaction to one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub user_id: String,
    pub item_id: ItemId,
    pub transition: Transition,
    /// The row's `op_id` after the flip.
    pub op_id: u64,
    /// When the flip was written (epoch millis).
    pub event_time_ms: i64,
    /// When the row was created (epoch millis; 0 for a row from before rows kept it). Account
    /// erasure removes rows, and a row written again counts `op_id` from 1: this tells the
    /// row's lives apart.
    pub row_created_ms: i64,
    /// The row's `liked_at` where the flip begins or ends a like (from the new image for a
    /// flip to LIKE, the old one for a flip from it): the like's place in the item's likers.
    pub liked_at_ms: Option<i64>,
    /// Set when a moderator's job made the flip, not the user.
    pub moderated: Option<Moderated>,
}

/// A flip a moderation job made: its cause, the moderator's reason, and the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moderated {
    pub cause: Cause,
    pub reason: String,
    pub moderation_id: String,
}

impl Change {
    /// `user_id#item_id#op_id`: the same for every delivery of the flip, and unique within
    /// one life of the row ([`ReactionEvent::flip_key`] across its lives).
    pub fn event_id(&self) -> String {
        format!("{}#{}#{}", self.user_id, self.item_id, self.op_id)
    }
}

/// An item's counts as readers see them: never below zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub like_count: u64,
    pub dislike_count: u64,
}

impl Counts {
    /// Sums of an item's count rows, clamped at zero. The second value is true when a sum
    /// was negative: it must be reported (a metric), since exactly-once deltas never make one.
    pub fn clamped(sum: Delta) -> (Self, bool) {
        let counts = Self {
            like_count: sum.like.max(0) as u64,
            dislike_count: sum.dislike.max(0) as u64,
        };
        (counts, sum.like < 0 || sum.dislike < 0)
    }
}

/// One flip on the event log (Kinesis, partition key [`event_partition_key`]). At least once:
/// consumers deduplicate by `event_id` (with `row_created_ms`, see [`ReactionEvent::flip_key`])
/// and order one row's flips by [`ReactionEvent::order`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReactionEvent {
    pub event_id: String,
    pub user_id: String,
    pub item_id: String,
    pub op_id: u64,
    pub old_state: crate::ReactionState,
    pub new_state: crate::ReactionState,
    pub like_delta: i64,
    pub dislike_delta: i64,
    /// When the flip was written (epoch millis).
    pub event_time_ms: i64,
    /// The Reactions stream record it came from (comparable only within one stream shard).
    pub source_sequence_number: String,
    /// When the flip's row was created ([`Change::row_created_ms`]); 0 on events put before
    /// events carried it.
    #[serde(default)]
    pub row_created_ms: i64,
    /// The `liked_at` of the like the flip begins or ends ([`Change::liked_at_ms`]); absent
    /// on a flip between NONE and DISLIKE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liked_at_ms: Option<i64>,
    /// `retracted` when a moderator's job made the flip (absent when the user did), with the
    /// moderator's `reason` and the job's `moderation_id`; the job's own record on the log
    /// ([`LogRecord::Moderation`]) says who asked and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moderation_id: Option<String>,
}

impl ReactionEvent {
    pub fn new(change: &Change, sequence_number: &str) -> Self {
        let delta = change.transition.delta();
        Self {
            event_id: change.event_id(),
            user_id: change.user_id.clone(),
            item_id: change.item_id.as_str().to_owned(),
            op_id: change.op_id,
            old_state: change.transition.from,
            new_state: change.transition.to,
            like_delta: delta.like,
            dislike_delta: delta.dislike,
            event_time_ms: change.event_time_ms,
            source_sequence_number: sequence_number.to_owned(),
            row_created_ms: change.row_created_ms,
            liked_at_ms: change.liked_at_ms,
            cause: change.moderated.as_ref().map(|m| m.cause),
            reason: change.moderated.as_ref().map(|m| m.reason.clone()),
            moderation_id: change.moderated.as_ref().map(|m| m.moderation_id.clone()),
        }
    }

    /// What names this flip across every life of its row: `event_id` alone repeats once an
    /// erased row is written again (its `op_id` starts over), so a consumer that remembers
    /// flips longer than a row may live keys them by this.
    pub fn flip_key(&self) -> String {
        format!("{}@{}", self.event_id, self.row_created_ms)
    }

    /// One row's flips in the order they were made: by the row's life, then `op_id`.
    pub fn order(&self) -> (i64, u64) {
        (self.row_created_ms, self.op_id)
    }
}

/// A record of the event log: a flip's event, or a **heartbeat**, which the leaderboard's
/// refresher puts on a log shard that carried nothing for a while, so the shard's readers
/// move their progress (and the boards' `as_of`) past a quiet spell, or a moderator's action
/// (the flips it makes are events of their own). Readers apply events and step over the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecord {
    Event(ReactionEvent),
    Heartbeat { at_ms: i64 },
    Moderation(ModerationEvent),
}

/// A moderation action as the log holds it: `{"moderation": {...}}`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModerationRecord {
    moderation: ModerationEvent,
}

/// A heartbeat as the log holds it: `{"heartbeat_ms": 1796119200000}`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HeartbeatRecord {
    heartbeat_ms: i64,
}

impl LogRecord {
    /// Reads a record's data; the error is the event's when it is neither.
    pub fn parse(data: &[u8]) -> Result<Self, serde_json::Error> {
        if let Ok(heartbeat) = serde_json::from_slice::<HeartbeatRecord>(data) {
            return Ok(Self::Heartbeat {
                at_ms: heartbeat.heartbeat_ms,
            });
        }
        if let Ok(record) = serde_json::from_slice::<ModerationRecord>(data) {
            return Ok(Self::Moderation(record.moderation));
        }
        serde_json::from_slice(data).map(Self::Event)
    }

    /// A moderation action's data.
    pub fn moderation(event: &ModerationEvent) -> Vec<u8> {
        serde_json::to_vec(&ModerationRecord {
            moderation: event.clone(),
        })
        .expect("a moderation event serializes")
    }

    /// A heartbeat's data, put at `at_ms`.
    pub fn heartbeat(at_ms: i64) -> Vec<u8> {
        serde_json::to_vec(&HeartbeatRecord {
            heartbeat_ms: at_ms,
        })
        .expect("a heartbeat serializes")
    }

    /// The event, if the record is one.
    pub fn event(self) -> Option<ReactionEvent> {
        match self {
            Self::Event(event) => Some(event),
            Self::Heartbeat { .. } | Self::Moderation(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReactionState::{Dislike, Like, None as Neutral};

    fn record(n: usize, change: Option<(&str, Transition)>) -> ChangeRecord {
        ChangeRecord {
            event_id: format!("e{n}"),
            sequence_number: n.to_string(),
            // Mid-epoch: far from any reconciliation cut.
            stream_time_ms: 1_800_000,
            change: change.map(|(item, transition)| Change {
                user_id: format!("u{n}"),
                item_id: ItemId::parse(item).unwrap(),
                transition,
                op_id: 1,
                event_time_ms: 0,
                row_created_ms: 0,
                liked_at_ms: None,
                moderated: None,
            }),
        }
    }

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        assert!(sequence_after("10", "9"));
        assert!(!sequence_after("9", "10"));
        assert!(!sequence_after("42", "42"));
        assert!(sequence_after(
            "49590338271490256608559692540925702759324208523137515618",
            "49590338271490256608559692538361571095921575989136588898"
        ));
    }

    #[test]
    fn the_progress_covers_the_records_up_to_its_sequence_number() {
        let records: Vec<_> = (8..12).map(|n| record(n, None)).collect();
        assert_eq!(covered(&records, None), 0);
        assert_eq!(covered(&records, Some("7")), 0);
        assert_eq!(covered(&records, Some("9")), 2, "9 < 10: numbers, not text");
        assert_eq!(covered(&records, Some("11")), 4);
    }

    #[test]
    fn intents_rise_with_the_clock_and_never_repeat() {
        assert_eq!(next_intent(None, 5_000), 5_000);
        assert_eq!(next_intent(Some(4_000), 5_000), 5_000);
        assert_eq!(
            next_intent(Some(5_000), 5_000),
            5_001,
            "a clock that did not move"
        );
        assert_eq!(
            next_intent(Some(9_000), 5_000),
            9_001,
            "a clock behind the last"
        );
    }

    #[test]
    fn a_hot_item_sums_into_one_delta_and_no_ops_add_nothing() {
        let records = vec![
            record(0, Some(("hot", Transition::new(Neutral, Like)))),
            record(1, Some(("hot", Transition::new(Neutral, Dislike)))),
            record(2, Some(("hot", Transition::new(Like, Dislike)))),
            record(3, None),
            record(4, Some(("cold", Transition::new(Like, Neutral)))),
            record(5, Some(("cold", Transition::new(Neutral, Like)))),
        ];
        let hot = hot_items(&records);
        let layout = CountLayout {
            rows: 1,
            overflow_partitions: 1,
        };
        let period = crate::reconcile::Period {
            length_ms: 3_600_000,
            uncertainty_ms: 60_000,
        };
        let deltas: Vec<(String, Delta, Vec<u32>)> =
            route_chunk(&records, "shard-0", &hot, layout, period)
                .into_iter()
                .map(|(target, written)| {
                    let buckets = written.liked_buckets.into_iter().collect();
                    (target.partition_key(), written.total, buckets)
                })
                .collect();
        let like = |n: u32| crate::likers::bucket_of(&format!("u{n}"));
        assert_eq!(
            deltas,
            vec![
                ("cold#1".to_owned(), Delta::ZERO, vec![like(5)]),
                (
                    "hot#1".to_owned(),
                    Delta {
                        like: 0,
                        dislike: 2
                    },
                    vec![like(0)]
                )
            ],
            "cold nets to zero and writes only its like's bucket"
        );
    }

    #[test]
    fn negative_sums_are_clamped_and_reported() {
        assert_eq!(
            Counts::clamped(Delta {
                like: 3,
                dislike: 0
            }),
            (
                Counts {
                    like_count: 3,
                    dislike_count: 0
                },
                false
            )
        );
        assert_eq!(
            Counts::clamped(Delta {
                like: -1,
                dislike: 2
            }),
            (
                Counts {
                    like_count: 0,
                    dislike_count: 2
                },
                true
            )
        );
    }

    #[test]
    fn events_carry_the_flip_and_its_dedup_id() {
        let change = Change {
            user_id: "u1".into(),
            item_id: ItemId::parse("game:1").unwrap(),
            transition: Transition::new(Like, Dislike),
            op_id: 7,
            event_time_ms: 42,
            row_created_ms: 40,
            liked_at_ms: Some(30),
            moderated: None,
        };
        let event = ReactionEvent::new(&change, "900");
        assert_eq!(event.event_id, "u1#game:1#7");
        assert_eq!((event.like_delta, event.dislike_delta), (-1, 1));
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["old_state"], "LIKE");
        assert_eq!(json["source_sequence_number"], "900");
        assert_eq!(json["row_created_ms"], 40);
        assert_eq!(json["liked_at_ms"], 30, "the like the flip ends");
        assert!(
            json.get("cause").is_none(),
            "the user's own flip has no cause"
        );
        let retracted = Change {
            moderated: Some(Moderated {
                cause: Cause::Retracted,
                reason: "bot ring".into(),
                moderation_id: "1-2".into(),
            }),
            ..change
        };
        let json = serde_json::to_value(ReactionEvent::new(&retracted, "901")).unwrap();
        assert_eq!(json["cause"], "retracted");
        assert_eq!(json["reason"], "bot ring");
        assert_eq!(json["moderation_id"], "1-2");
    }

    #[test]
    fn a_row_written_again_after_an_erasure_names_and_orders_its_flips_anew() {
        let flip = |op_id, row_created_ms| {
            ReactionEvent::new(
                &Change {
                    user_id: "u1".into(),
                    item_id: ItemId::parse("game:1").unwrap(),
                    transition: Transition::new(Like, Dislike),
                    op_id,
                    event_time_ms: 42,
                    row_created_ms,
                    liked_at_ms: Some(30),
                    moderated: None,
                },
                "1",
            )
        };
        let (before, again) = (flip(5, 100), flip(1, 900));
        assert_eq!(again.event_id, "u1#game:1#1");
        assert_ne!(flip(1, 100).flip_key(), again.flip_key());
        assert_eq!(flip(1, 900).flip_key(), again.flip_key());
        assert!(again.order() > before.order(), "the new life comes after");
        assert!(flip(6, 100).order() > before.order());
        // An event put before events carried the row's creation reads as its first life.
        let mut old = serde_json::to_value(flip(3, 0)).unwrap();
        old.as_object_mut().unwrap().remove("row_created_ms");
        let old: ReactionEvent = serde_json::from_value(old).unwrap();
        assert_eq!(old.order(), (0, 3));
    }

    #[test]
    fn the_log_holds_events_heartbeats_and_moderation_and_nothing_else_reads_as_one() {
        let event = ReactionEvent {
            event_id: "u1#game:1#1".into(),
            user_id: "u1".into(),
            item_id: "game:1".into(),
            op_id: 1,
            old_state: crate::ReactionState::None,
            new_state: crate::ReactionState::Like,
            like_delta: 1,
            dislike_delta: 0,
            event_time_ms: 42,
            source_sequence_number: "7".into(),
            row_created_ms: 40,
            liked_at_ms: Some(42),
            cause: None,
            reason: None,
            moderation_id: None,
        };
        let data = serde_json::to_vec(&event).unwrap();
        assert_eq!(LogRecord::parse(&data).unwrap(), LogRecord::Event(event));
        assert_eq!(
            LogRecord::parse(&LogRecord::heartbeat(1_000)).unwrap(),
            LogRecord::Heartbeat { at_ms: 1_000 }
        );
        let action = ModerationEvent {
            moderation_id: "1-2".into(),
            action: crate::moderation::ModerationAction::LiftSuspension,
            user_id: Some("bot".into()),
            item_id: None,
            reason: None,
            suspend: None,
            by: "mod".into(),
            at_ms: 9,
        };
        let parsed = LogRecord::parse(&LogRecord::moderation(&action)).unwrap();
        assert_eq!(parsed, LogRecord::Moderation(action));
        assert_eq!(parsed.event(), None, "readers of flips step over it");
        let err = LogRecord::parse(br#"{"heartbeat_ms": 1, "user_id": "u1"}"#).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
        assert!(LogRecord::parse(b"not json").is_err());
    }
}
