//! The count pipeline's decisions, free of AWS types: how a stream batch is cut into chunks,
//! what an existing claim means for the batch at hand, where deltas land ([`routing`]), and
//! how fresh a count is ([`freshness`]).
//!
//! Exactly once without knowing the shard: each chunk is committed together with a claim
//! keyed by its first record's `eventID` and listing the chunk's eventIDs. Every retry
//! starts at a chunk boundary (the batch start, or the first record of the failed chunk),
//! so it meets the claim and skips what the claim lists. When a batch ends inside a claim,
//! a continuation claim keyed by the next listed record carries the rest to the next batch.

pub mod freshness;
pub mod routing;

use crate::{Delta, ItemId, Transition};

pub use freshness::{counts_as_of, probe_plan, StreamShard};
pub use routing::{
    event_partition_key, hot_items, overflow_partition, route_chunk, user_hash, CountLayout,
    CountTarget, Lane, RowDelta, HOT_ITEM_CHANGES,
};

/// How long a consumer of the event log remembers what it applied (claims, tombstones): past
/// the log's 24 h retention, so no delivery can bring an event back once it is forgotten.
pub const REPLAY_HORIZON_MS: i64 = 2 * 86_400_000;

/// TransactWriteItems takes 100 actions: the claim and at most 99 count rows.
pub const MAX_CHUNK_ITEMS: usize = 99;

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
}

impl Change {
    /// `user_id#item_id#op_id`: the same for every delivery of the flip, and unique within
    /// one life of the row ([`ReactionEvent::flip_key`] across its lives).
    pub fn event_id(&self) -> String {
        format!("{}#{}#{}", self.user_id, self.item_id, self.op_id)
    }
}

/// How many of `records` the next chunk takes: up to `max_records`, and no more distinct
/// items with a change than one transaction can update.
pub fn next_chunk_len(records: &[ChangeRecord], max_records: usize) -> usize {
    let mut items = std::collections::BTreeSet::new();
    let mut len = 0;
    for record in records.iter().take(max_records) {
        if let Some(change) = &record.change {
            if !items.contains(&change.item_id) && items.len() == MAX_CHUNK_ITEMS {
                break;
            }
            items.insert(change.item_id.clone());
        }
        len += 1;
    }
    len
}

/// What an existing claim means for the batch records from the claim's key on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimMatch {
    /// All listed records are in this batch and already counted: skip them.
    Skip(usize),
    /// The batch ends inside the claim: skip the rest of the batch, and hand the listed
    /// records beyond it to the next batch with a continuation claim.
    Continue { skip: usize, rest: Vec<String> },
    /// The claim does not list this batch's records in order: never guess, fail the record.
    Mismatch,
}

pub fn match_claim(batch_event_ids: &[&str], listed: &[String]) -> ClaimMatch {
    let overlap = batch_event_ids.len().min(listed.len());
    if overlap == 0
        || batch_event_ids[..overlap]
            .iter()
            .zip(&listed[..overlap])
            .any(|(a, b)| *a != b)
    {
        return ClaimMatch::Mismatch;
    }
    if listed.len() <= batch_event_ids.len() {
        ClaimMatch::Skip(listed.len())
    } else {
        ClaimMatch::Continue {
            skip: overlap,
            rest: listed[overlap..].to_vec(),
        }
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
/// move their progress (and the boards' `as_of`) past a quiet spell. Readers apply events
/// and step over heartbeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecord {
    Event(ReactionEvent),
    Heartbeat { at_ms: i64 },
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
        serde_json::from_slice(data).map(Self::Event)
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
            Self::Heartbeat { .. } => None,
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
            }),
        }
    }

    #[test]
    fn chunks_stop_at_the_record_cap() {
        let records: Vec<_> = (0..10)
            .map(|n| record(n, Some(("hot", Transition::new(Neutral, Like)))))
            .collect();
        assert_eq!(next_chunk_len(&records, 4), 4);
        assert_eq!(next_chunk_len(&records, 100), 10);
        assert_eq!(next_chunk_len(&[], 100), 0);
    }

    #[test]
    fn chunks_stop_before_a_hundredth_distinct_item() {
        let records: Vec<_> = (0..150)
            .map(|n| {
                let item = format!("item-{n}");
                let mut r = record(n, None);
                r.change = Some(Change {
                    user_id: "u".into(),
                    item_id: ItemId::parse(&item).unwrap(),
                    transition: Transition::new(Neutral, Like),
                    op_id: 1,
                    event_time_ms: 0,
                    row_created_ms: 0,
                });
                r
            })
            .collect();
        assert_eq!(next_chunk_len(&records, 1000), MAX_CHUNK_ITEMS);
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
        let deltas: Vec<(String, Delta)> = route_chunk(&records, "e0", &hot, layout, period)
            .into_iter()
            .map(|(target, written)| (target.partition_key(), written.total))
            .collect();
        assert_eq!(
            deltas,
            vec![(
                "hot#1".to_owned(),
                Delta {
                    like: 0,
                    dislike: 2
                }
            )],
            "cold nets to zero and writes nothing"
        );
    }

    #[test]
    fn a_claim_inside_the_batch_is_skipped_whole() {
        let listed: Vec<String> = ["a", "b"].map(String::from).to_vec();
        assert_eq!(match_claim(&["a", "b", "c"], &listed), ClaimMatch::Skip(2));
        assert_eq!(match_claim(&["a", "b"], &listed), ClaimMatch::Skip(2));
    }

    #[test]
    fn a_batch_ending_inside_a_claim_continues_it() {
        let listed: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(
            match_claim(&["a", "b"], &listed),
            ClaimMatch::Continue {
                skip: 2,
                rest: vec!["c".into(), "d".into()]
            }
        );
    }

    #[test]
    fn a_claim_listing_other_records_is_a_mismatch() {
        let listed: Vec<String> = ["a", "x"].map(String::from).to_vec();
        assert_eq!(match_claim(&["a", "b"], &listed), ClaimMatch::Mismatch);
        assert_eq!(match_claim(&[], &listed), ClaimMatch::Mismatch);
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
        };
        let event = ReactionEvent::new(&change, "900");
        assert_eq!(event.event_id, "u1#game:1#7");
        assert_eq!((event.like_delta, event.dislike_delta), (-1, 1));
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["old_state"], "LIKE");
        assert_eq!(json["source_sequence_number"], "900");
        assert_eq!(json["row_created_ms"], 40);
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
    fn the_log_holds_events_and_heartbeats_and_nothing_else_reads_as_either() {
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
        };
        let data = serde_json::to_vec(&event).unwrap();
        assert_eq!(LogRecord::parse(&data).unwrap(), LogRecord::Event(event));
        assert_eq!(
            LogRecord::parse(&LogRecord::heartbeat(1_000)).unwrap(),
            LogRecord::Heartbeat { at_ms: 1_000 }
        );
        let err = LogRecord::parse(br#"{"heartbeat_ms": 1, "user_id": "u1"}"#).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
        assert!(LogRecord::parse(b"not json").is_err());
    }
}
