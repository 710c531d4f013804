//! A Reactions row as one flip writes it (its update and condition expressions) and as a
//! read finds it (its state, version and replayable key records).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::write::Clause;
use likes_core::{IdempotencyRecord, KeyHash, ReactionRow, ReactionState, WriteRequest};

use super::string;
use crate::rows::attr::{
    CAUSE, PREVIOUS_PREFIX, REASON, REQUEST_PREFIX, RETRACTED_IN, RETRACTION, STATE, VERSION_PREFIX,
};
use crate::rows::{self, number, Attribute, Item, ReactionItem};
use crate::StoreError;

/// The update and condition expressions of one flip.
pub(super) struct FlipExpression {
    pub(super) update: String,
    pub(super) condition: String,
    pub(super) names: HashMap<String, String>,
    pub(super) values: HashMap<String, AttributeValue>,
}

impl FlipExpression {
    pub(super) fn new(request: &WriteRequest, now_ms: i64) -> Self {
        let mut names = HashMap::from([
            ("#state".to_owned(), STATE.to_owned()),
            ("#retraction".to_owned(), RETRACTION.to_owned()),
            ("#reason".to_owned(), REASON.to_owned()),
            ("#cause".to_owned(), CAUSE.to_owned()),
            ("#retracted_in".to_owned(), RETRACTED_IN.to_owned()),
        ]);
        let mut values = HashMap::from([
            (":target".to_owned(), string(request.target.as_str())),
            (":zero".to_owned(), number(0)),
            (":one".to_owned(), number(1)),
            (":now".to_owned(), number(now_ms)),
        ]);
        let mut set = Vec::new();
        if let Some(key) = &request.key {
            names.insert("#req".into(), format!("{REQUEST_PREFIX}{}", key.as_str()));
            names.insert("#ver".into(), format!("{VERSION_PREFIX}{}", key.as_str()));
            names.insert("#prev".into(), format!("{PREVIOUS_PREFIX}{}", key.as_str()));
            values.insert(":none".into(), string(ReactionState::None.as_str()));
            values.insert(
                ":request".into(),
                string(&encode_request(request.target, now_ms)),
            );
            // Right-hand sides read the row as it was before this update, so these copy the
            // version this write produces and the state it replaces. Listed first all the same.
            set.push("#ver = if_not_exists(op_id, :zero) + :one");
            set.push("#prev = if_not_exists(#state, :none)");
            set.push("#req = :request");
        }
        set.extend([
            "#state = :target",
            "op_id = if_not_exists(op_id, :zero) + :one",
            "updated_at = :now",
            "created_at = if_not_exists(created_at, :now)",
        ]);
        let condition = request
            .clauses()
            .iter()
            .map(|clause| match clause {
                // The key's record is written whole by one update: its version stands for it.
                Clause::KeyUnrecorded(_) => "attribute_not_exists(#ver)".to_owned(),
                Clause::AtVersion(0) => "attribute_not_exists(op_id)".to_owned(),
                Clause::AtVersion(version) => {
                    values.insert(":expected".into(), number(version));
                    "op_id = :expected".to_owned()
                }
                // A NONE target never creates a row: "never reacted → NONE" fails the
                // condition and is answered "unchanged". (Stated outright: moto, unlike
                // DynamoDB, finds a missing attribute "<>" anything.)
                Clause::StateDiffers(ReactionState::None) => {
                    "(attribute_exists(#state) AND #state <> :target)".to_owned()
                }
                Clause::StateDiffers(_) => {
                    "(attribute_not_exists(#state) OR #state <> :target)".to_owned()
                }
            })
            .collect::<Vec<_>>();
        // The user's own write: a moderation job's marks of the row go.
        let mut remove = vec!["#retraction", "#reason", "#cause", "#retracted_in"];
        if request.target == ReactionState::Like {
            set.push("liked_at = :now");
        } else {
            // liked_at exists only while LIKE: the liked-items index stays sparse.
            remove.push("liked_at");
        }
        let update = format!("SET {} REMOVE {}", set.join(", "), remove.join(", "));
        Self {
            update,
            condition: condition.join(" AND "),
            names,
            values,
        }
    }
}

fn encode_request(state: ReactionState, at_ms: i64) -> String {
    format!("{}|{at_ms}", state.code())
}

fn decode_request(raw: &str) -> Option<(ReactionState, i64)> {
    let (code, at) = raw.split_once('|')?;
    let mut chars = code.chars();
    let state = ReactionState::from_code(chars.next()?)?;
    if chars.next().is_some() {
        return None;
    }
    Some((state, at.parse().ok()?))
}

/// Reads a stored row; no item is the row of a user who never reacted. Key records that are
/// incomplete are skipped: they cannot be replayed, and the condition on `v#h` still blocks
/// their key from flipping the row again.
pub(super) fn row_from_item(item: Item) -> Result<ReactionRow, StoreError> {
    if item.is_empty() {
        return Ok(ReactionRow::absent());
    }
    let row: ReactionItem = rows::from_item(item)?;
    let text = |name: String| match row.others.get(&name) {
        Some(Attribute::Text(text)) => Some(text.as_str()),
        _ => None,
    };
    let mut keys = Vec::new();
    for (name, value) in &row.others {
        let Some(hash) = name
            .strip_prefix(REQUEST_PREFIX)
            .and_then(KeyHash::from_stored)
        else {
            continue;
        };
        let Attribute::Text(request) = value else {
            continue;
        };
        let version = match row
            .others
            .get(&format!("{VERSION_PREFIX}{}", hash.as_str()))
        {
            Some(Attribute::Number(version)) => u64::try_from(*version).ok(),
            _ => None,
        };
        let previous =
            text(format!("{PREVIOUS_PREFIX}{}", hash.as_str())).and_then(|p| p.parse().ok());
        if let (Some((state, updated_at_ms)), Some(version), Some(previous_state)) =
            (decode_request(request), version, previous)
        {
            keys.push((
                hash,
                IdempotencyRecord {
                    state,
                    previous_state,
                    version,
                    updated_at_ms,
                },
            ));
        }
    }
    Ok(ReactionRow {
        state: row.state,
        version: row.op_id,
        updated_at_ms: Some(row.updated_at),
        keys,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::attr::{ITEM_ID, OP_ID, UPDATED_AT, USER_ID};
    use likes_core::IdempotencyKey;

    #[test]
    fn requests_round_trip_through_their_compact_form() {
        assert_eq!(encode_request(ReactionState::Dislike, 42), "D|42");
        assert_eq!(decode_request("D|42"), Some((ReactionState::Dislike, 42)));
        for bad in ["", "D", "D|", "DL|1", "X|1", "D|x"] {
            assert_eq!(decode_request(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_stored_row_with_keys_reads_back() {
        let hash = IdempotencyKey::parse("k1").unwrap().hash();
        let h = hash.as_str();
        let item: Item = HashMap::from([
            (USER_ID.into(), string("u")),
            (ITEM_ID.into(), string("i")),
            (STATE.into(), string("LIKE")),
            (OP_ID.into(), number(3)),
            (UPDATED_AT.into(), number(1000)),
            (format!("k#{h}"), string("L|1000")),
            (format!("v#{h}"), number(3)),
            (format!("p#{h}"), string("DISLIKE")),
            // A half-written record cannot be replayed and is skipped.
            ("k#AAAAAAAAAAA".into(), string("L|9")),
        ]);
        let row = row_from_item(item).unwrap();
        assert_eq!(row.state, ReactionState::Like);
        assert_eq!(row.version, 3);
        assert_eq!(
            row.keys,
            vec![(
                hash,
                IdempotencyRecord {
                    state: ReactionState::Like,
                    previous_state: ReactionState::Dislike,
                    version: 3,
                    updated_at_ms: 1000
                }
            )]
        );
    }

    #[test]
    fn a_none_target_never_creates_a_row() {
        let request = WriteRequest {
            target: ReactionState::None,
            key: None,
            if_match: None,
        };
        let flip = FlipExpression::new(&request, 1);
        assert_eq!(
            flip.condition,
            "(attribute_exists(#state) AND #state <> :target)"
        );
        assert!(flip
            .update
            .ends_with(" REMOVE #retraction, #reason, #cause, #retracted_in, liked_at"));
        let like = FlipExpression::new(
            &WriteRequest {
                target: ReactionState::Like,
                ..request
            },
            1,
        );
        assert!(like.update.contains("liked_at = :now"));
        assert!(like
            .update
            .ends_with(" REMOVE #retraction, #reason, #cause, #retracted_in"));
    }
}
