//! From a Lambda DynamoDB stream record to the domain's [`ChangeRecord`].
//!
//! Deltas come only from the old and new images, through the transition table: a record
//! whose images hold no state change (moto's keys-only INSERT, a no-op MODIFY, a trim of
//! idempotency keys, a REMOVE of a NONE row, a probe) carries no change at all.

use aws_lambda_events::event::dynamodb::EventRecord;
use likes_core::moderation::Cause;
use likes_core::pipeline::{Change, ChangeRecord, Moderated};
use likes_core::{ItemId, ReactionState, Transition};
use likes_store::freshness::PROBE_ITEM;
use likes_store::rows::{ReactionImage, ReactionKey};
use serde_dynamo::Item;

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
    serde_dynamo::from_item::<_, ReactionKey>(record.change.keys.clone())
        .ok()
        .filter(|key| key.item_id == PROBE_ITEM)
        .map(|key| key.user_id)
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
    let old = image(&stream.old_image).map_err(&malformed)?;
    let new = image(&stream.new_image).map_err(&malformed)?;
    let transition = Transition::new(
        old.state.unwrap_or(ReactionState::None),
        new.state.unwrap_or(ReactionState::None),
    );
    if !transition.is_flip() {
        return Ok(ChangeRecord {
            event_id: record.event_id.clone(),
            sequence_number,
            stream_time_ms,
            change: None,
        });
    }
    let keys: ReactionKey = serde_dynamo::from_item(stream.keys.clone())
        .map_err(|e| malformed(format!("keys: {e}")))?;
    let item_id = ItemId::parse(&keys.item_id).map_err(|e| malformed(e.to_string()))?;
    let missing = |name: &str| malformed(format!("the image has no {name}"));
    let (op_id, event_time_ms) = if new.state.is_some() {
        (
            new.op_id.ok_or_else(|| missing("op_id"))?,
            new.updated_at.ok_or_else(|| missing("updated_at"))?,
        )
    } else {
        // A REMOVE (account erasure, TTL): the flip to NONE is the row's next operation, and
        // its time is the stream's, the only one there is.
        (
            old.op_id.ok_or_else(|| missing("op_id"))? + 1,
            stream_time_ms,
        )
    };
    Ok(ChangeRecord {
        event_id: record.event_id.clone(),
        sequence_number,
        stream_time_ms,
        change: Some(Change {
            user_id: keys.user_id,
            item_id,
            transition,
            op_id,
            event_time_ms,
            // A REMOVE's row is in its old image only.
            row_created_ms: new.created_at.or(old.created_at).unwrap_or(0),
            liked_at_ms: if transition.to == ReactionState::Like {
                new.liked_at
            } else if transition.from == ReactionState::Like {
                old.liked_at
            } else {
                None
            },
            moderated: new.retraction.map(|moderation_id| Moderated {
                // Rows written before removals marked their cause were all retractions.
                cause: new
                    .cause
                    .as_deref()
                    .and_then(Cause::parse)
                    .unwrap_or(Cause::Retracted),
                reason: new.reason.unwrap_or_default(),
                moderation_id,
            }),
        }),
    })
}

/// A record's image, typed; a missing image (an INSERT's old one, a REMOVE's new one) is
/// empty.
fn image(image: &Item) -> Result<ReactionImage, String> {
    serde_dynamo::from_item(image.clone()).map_err(|e| format!("image: {e}"))
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

    /// A row as the handler writes it: a LIKE row carries `liked_at`, its flip's time.
    fn row(state: &str, op_id: u64, updated_at: i64) -> serde_json::Value {
        let mut row = json!({
            "user_id": {"S": "u1"}, "item_id": {"S": "game:1"}, "state": {"S": state},
            "op_id": {"N": op_id.to_string()}, "updated_at": {"N": updated_at.to_string()},
        });
        if state == "LIKE" {
            row["liked_at"] = json!({"N": updated_at.to_string()});
        }
        row
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
        assert_eq!(change.liked_at_ms, Some(77), "the like begun");
        assert_eq!(change.event_id(), "u1#game:1#1");
        assert_eq!(decoded.sequence_number, "100");
    }

    #[test]
    fn a_flip_a_retraction_wrote_names_its_job_and_reason() {
        let mut retracted = row("NONE", 2, 80);
        retracted["retraction"] = json!({"S": "1-2"});
        retracted["reason"] = json!({"S": "bot ring"});
        retracted["cause"] = json!({"S": "retracted"});
        let change = decode(&record("MODIFY", Some(row("LIKE", 1, 77)), Some(retracted)))
            .unwrap()
            .change
            .unwrap();
        assert_eq!(change.liked_at_ms, Some(77), "the like ended");
        let moderated = change.moderated.unwrap();
        assert_eq!(moderated.cause, Cause::Retracted);
        assert_eq!(
            (moderated.reason.as_str(), moderated.moderation_id.as_str()),
            ("bot ring", "1-2")
        );
        // The user's own flip after it names none: their write removes both attributes.
        let own = decode(&record(
            "MODIFY",
            Some(row("NONE", 2, 80)),
            Some(row("LIKE", 3, 90)),
        ))
        .unwrap()
        .change
        .unwrap();
        assert_eq!(own.moderated, None);
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
        assert_eq!(
            change.liked_at_ms,
            Some(1),
            "the like erased, from the old image"
        );
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
