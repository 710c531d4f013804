//! From a Lambda DynamoDB stream record to the domain's [`ChangeRecord`].
//!
//! Deltas come only from the old and new images, through the transition table: a record
//! whose images hold no state change (moto's keys-only INSERT, a no-op MODIFY, a trim of
//! idempotency keys, a REMOVE of a NONE row, a probe) carries no change at all.

use aws_lambda_events::event::dynamodb::EventRecord;
use likes_core::pipeline::{Change, ChangeRecord};
use likes_core::{ItemId, ReactionState, Transition};
use likes_store::freshness::PROBE_ITEM;
use serde_dynamo::{AttributeValue, Item};

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("record {event_id}: {message}")]
    Malformed { event_id: String, message: String },
}

/// A record this code cannot read still holds its place in the batch: it counts as no change
/// (reconciliation restores whatever it should have counted), so the records beside it are
/// counted as usual.
pub fn unreadable(record: &EventRecord) -> ChangeRecord {
    ChangeRecord {
        event_id: record.event_id.clone(),
        sequence_number: record.change.sequence_number.clone().unwrap_or_default(),
        stream_time_ms: record
            .change
            .approximate_creation_date_time
            .timestamp_millis(),
        change: None,
    }
}

/// The probe key, when the record is the pulse's probe write rather than a reaction.
pub fn probe_key(record: &EventRecord) -> Option<String> {
    let keys = &record.change.keys;
    match (keys.get("item_id"), keys.get("user_id")) {
        (Some(AttributeValue::S(item)), Some(AttributeValue::S(user))) if item == PROBE_ITEM => {
            Some(user.clone())
        }
        _ => None,
    }
}

pub fn decode(record: &EventRecord) -> Result<ChangeRecord, DecodeError> {
    let malformed = |message: String| DecodeError::Malformed {
        event_id: record.event_id.clone(),
        message,
    };
    let stream = &record.change;
    let sequence_number = stream
        .sequence_number
        .clone()
        .ok_or_else(|| malformed("no SequenceNumber".into()))?;
    let stream_time_ms = stream.approximate_creation_date_time.timestamp_millis();
    let old = state(&stream.old_image).map_err(&malformed)?;
    let new = state(&stream.new_image).map_err(&malformed)?;
    let transition = Transition::new(
        old.unwrap_or(ReactionState::None),
        new.unwrap_or(ReactionState::None),
    );
    if !transition.is_flip() {
        return Ok(ChangeRecord {
            event_id: record.event_id.clone(),
            sequence_number,
            stream_time_ms,
            change: None,
        });
    }
    let user_id = string(&stream.keys, "user_id").map_err(&malformed)?;
    let item_id = ItemId::parse(&string(&stream.keys, "item_id").map_err(&malformed)?)
        .map_err(|e| malformed(e.to_string()))?;
    let (op_id, event_time_ms) = if stream.new_image.contains_key("state") {
        (
            number(&stream.new_image, "op_id").map_err(&malformed)?,
            number(&stream.new_image, "updated_at").map_err(&malformed)?,
        )
    } else {
        // A REMOVE (account erasure, TTL): the flip to NONE is the row's next operation, and
        // its time is the stream's, the only one there is.
        (
            number::<u64>(&stream.old_image, "op_id").map_err(&malformed)? + 1,
            stream_time_ms,
        )
    };
    Ok(ChangeRecord {
        event_id: record.event_id.clone(),
        sequence_number,
        stream_time_ms,
        change: Some(Change {
            user_id,
            item_id,
            transition,
            op_id,
            event_time_ms,
        }),
    })
}

/// The image's reaction state; `None` for a missing image or one without a state.
fn state(image: &Item) -> Result<Option<ReactionState>, String> {
    match image.get("state") {
        None => Ok(None),
        Some(AttributeValue::S(s)) => s
            .parse()
            .map(Some)
            .map_err(|e: likes_core::ValidationError| e.to_string()),
        Some(other) => Err(format!("state is {other:?}")),
    }
}

fn string(image: &Item, name: &str) -> Result<String, String> {
    match image.get(name) {
        Some(AttributeValue::S(s)) => Ok(s.clone()),
        other => Err(format!("{name} is {other:?}, not a string")),
    }
}

fn number<T: std::str::FromStr>(image: &Item, name: &str) -> Result<T, String> {
    match image.get(name) {
        Some(AttributeValue::N(n)) => n.parse().map_err(|_| format!("{name} = {n:?}")),
        other => Err(format!("{name} is {other:?}, not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(
        name: &str,
        old: Option<serde_json::Value>,
        new: Option<serde_json::Value>,
    ) -> EventRecord {
        let mut dynamodb = json!({
            "ApproximateCreationDateTime": 1_700_000_000,
            "Keys": { "user_id": {"S": "u1"}, "item_id": {"S": "game:1"} },
            "SequenceNumber": "100",
            "SizeBytes": 10,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        });
        if let Some(old) = old {
            dynamodb["OldImage"] = old;
        }
        if let Some(new) = new {
            dynamodb["NewImage"] = new;
        }
        serde_json::from_value(json!({
            "eventID": "e1", "eventName": name, "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "dynamodb": dynamodb,
        }))
        .unwrap()
    }

    fn row(state: &str, op_id: u64, updated_at: i64) -> serde_json::Value {
        json!({
            "user_id": {"S": "u1"}, "item_id": {"S": "game:1"}, "state": {"S": state},
            "op_id": {"N": op_id.to_string()}, "updated_at": {"N": updated_at.to_string()},
        })
    }

    #[test]
    fn an_insert_of_a_like_is_a_flip_from_none() {
        let decoded = decode(&record("INSERT", None, Some(row("LIKE", 1, 77)))).unwrap();
        let change = decoded.change.unwrap();
        assert_eq!(
            change.transition,
            Transition::new(ReactionState::None, ReactionState::Like)
        );
        assert_eq!((change.op_id, change.event_time_ms), (1, 77));
        assert_eq!(change.event_id(), "u1#game:1#1");
        assert_eq!(decoded.sequence_number, "100");
    }

    #[test]
    fn records_that_change_no_state_carry_no_change() {
        let keys_only = json!({ "user_id": {"S": "u1"}, "item_id": {"S": "game:1"} });
        for record in [
            record("INSERT", None, Some(keys_only)),
            record("MODIFY", Some(row("LIKE", 1, 1)), Some(row("LIKE", 1, 1))),
            record("REMOVE", Some(row("NONE", 4, 1)), None),
        ] {
            assert_eq!(
                decode(&record).unwrap().change,
                None,
                "{}",
                record.event_name
            );
        }
    }

    #[test]
    fn a_remove_of_a_like_subtracts_it() {
        let change = decode(&record("REMOVE", Some(row("LIKE", 3, 1)), None))
            .unwrap()
            .change
            .unwrap();
        assert_eq!(
            change.transition.delta(),
            likes_core::Delta {
                like: -1,
                dislike: 0
            }
        );
        assert_eq!(change.op_id, 4);
        assert_eq!(change.event_time_ms, 1_700_000_000_000);
    }

    #[test]
    fn a_record_with_an_unknown_state_is_malformed_and_keeps_its_place_as_no_change() {
        let poison = record("INSERT", None, Some(row("LOVE", 1, 1)));
        let err = decode(&poison).unwrap_err();
        assert!(err.to_string().contains("e1"), "{err}");
        let placeholder = unreadable(&poison);
        assert_eq!(placeholder.change, None);
        assert_eq!(
            (
                placeholder.sequence_number.as_str(),
                placeholder.stream_time_ms
            ),
            ("100", 1_700_000_000_000)
        );
    }

    #[test]
    fn probes_are_recognized_and_change_nothing() {
        let mut probe = record(
            "MODIFY",
            None,
            Some(json!({"user_id": {"S": "#probe#7"}, "item_id": {"S": "#probe"}})),
        );
        probe.change.keys = serde_json::from_value(
            json!({"user_id": {"S": "#probe#7"}, "item_id": {"S": "#probe"}}),
        )
        .unwrap();
        assert_eq!(probe_key(&probe).as_deref(), Some("#probe#7"));
        assert_eq!(decode(&probe).unwrap().change, None);
        assert_eq!(probe_key(&record("INSERT", None, None)), None);
    }
}
