//! Live counts over WebSockets: what a watcher may send and what it is sent, where a
//! subscription is kept, and when a push of an item's counts is the last one it needs.
//!
//! A watcher sends `{"action": "subscribe" | "unsubscribe", "item_ids": [...]}` with 1 to
//! [`MAX_SUBSCRIBE`] valid item ids; anything else is answered with an error and changes
//! nothing. It is sent `counts` (at most once a second per item while the count moves, and
//! once on subscribe), `stale` (fall back to polling the public count route) and `error`.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::clock::rfc3339;
use crate::namespace::ShownCounts;
use crate::ItemId;

/// Item ids one subscribe or unsubscribe message may name.
pub const MAX_SUBSCRIBE: usize = 50;
/// Items one connection may watch at once: its row lists them (at most ~13 KB).
pub const MAX_WATCHED: usize = 100;
/// A push covers an event once its `as_of` is this far past the event's time. The event time
/// is the writer's clock just before its UpdateItem, the watermarks behind `as_of` are
/// DynamoDB's commit times rounded down to the second: one second covers both.
pub const COVER_MARGIN_MS: i64 = 1000;

/// What a watcher asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Subscribe(Vec<ItemId>),
    Unsubscribe(Vec<ItemId>),
}

/// Reads a watcher's message. `Err` is the detail of the error it is answered with.
pub fn parse_action(body: &str) -> Result<Action, String> {
    let message: Value = serde_json::from_str(body)
        .map_err(|_| "a message is a JSON object with an action".to_owned())?;
    let Some(message) = message.as_object() else {
        return Err("a message is a JSON object with an action".into());
    };
    let subscribe = match message.get("action").and_then(Value::as_str) {
        Some("subscribe") => true,
        Some("unsubscribe") => false,
        Some(other) => {
            return Err(format!(
                "unknown action {other:?}: use subscribe or unsubscribe"
            ))
        }
        None => return Err("the message has no action: use subscribe or unsubscribe".into()),
    };
    if let Some(unknown) = message
        .keys()
        .find(|k| !matches!(k.as_str(), "action" | "item_ids"))
    {
        return Err(format!("unknown member {unknown:?}"));
    }
    let Some(ids) = message.get("item_ids").and_then(Value::as_array) else {
        return Err("item_ids must be an array of item ids".into());
    };
    if ids.is_empty() || ids.len() > MAX_SUBSCRIBE {
        return Err(format!(
            "item_ids must hold 1 to {MAX_SUBSCRIBE} ids, got {}",
            ids.len()
        ));
    }
    let mut items = BTreeSet::new();
    for id in ids {
        let Some(id) = id.as_str() else {
            return Err("item_ids must be an array of item ids".into());
        };
        items.insert(ItemId::parse(id).map_err(|err| err.to_string())?);
    }
    let items = items.into_iter().collect();
    Ok(if subscribe {
        Action::Subscribe(items)
    } else {
        Action::Unsubscribe(items)
    })
}

/// What a watcher is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ServerMessage {
    /// The counts as the public sees them (a count the item's rules hide is `null`).
    Counts {
        item_id: String,
        #[serde(flatten)]
        counts: ShownCounts,
        /// RFC 3339; `null` when unknown.
        as_of: Option<String>,
    },
    /// Live counts of the item are behind: poll `GET /v1/items/{item_id}/like-count`.
    Stale {
        item_id: String,
    },
    Error {
        detail: String,
    },
}

impl ServerMessage {
    pub fn counts(item: &ItemId, counts: ShownCounts, as_of: Option<i64>) -> Self {
        Self::Counts {
            item_id: item.as_str().to_owned(),
            counts,
            as_of: as_of.map(rfc3339),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a server message serializes")
    }
}

/// The bucket of an item's watchers a connection's subscription lands in, so a viral item's
/// watchers spread over `buckets` partition keys. Stable across processes (SHA-256).
pub fn watch_bucket(connection_id: &str, buckets: u32) -> u32 {
    let digest = Sha256::digest(connection_id.as_bytes());
    u32::from_be_bytes(digest[..4].try_into().expect("4 bytes")) % buckets.max(1)
}

/// The partition key of one bucket of an item's watchers: `<item_id>#<bucket>`.
pub fn watch_key(item: &ItemId, bucket: u32) -> String {
    format!("{item}#{bucket}")
}

/// True when a push whose counts are honest for `as_of` includes every flip up to
/// `newest_event_ms`: the last push the item needs for those events.
pub fn covers(as_of: Option<i64>, newest_event_ms: i64) -> bool {
    as_of.is_some_and(|as_of| as_of >= newest_event_ms + COVER_MARGIN_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(action: &Action) -> Vec<&str> {
        match action {
            Action::Subscribe(items) | Action::Unsubscribe(items) => {
                items.iter().map(ItemId::as_str).collect()
            }
        }
    }

    #[test]
    fn subscribe_and_unsubscribe_name_distinct_valid_items() {
        let action =
            parse_action(r#"{"action":"subscribe","item_ids":["game:2","game:1","game:2"]}"#)
                .unwrap();
        assert!(matches!(action, Action::Subscribe(_)));
        assert_eq!(ids(&action), ["game:1", "game:2"]);
        let action = parse_action(r#"{"action":"unsubscribe","item_ids":["a"]}"#).unwrap();
        assert!(matches!(action, Action::Unsubscribe(_)));
    }

    #[test]
    fn bad_messages_are_refused_with_a_detail() {
        let many: Vec<String> = (0..=MAX_SUBSCRIBE).map(|n| format!("\"i{n}\"")).collect();
        let too_many = format!(
            r#"{{"action":"subscribe","item_ids":[{}]}}"#,
            many.join(",")
        );
        for (body, detail) in [
            ("not json", "JSON object"),
            ("[1]", "JSON object"),
            (r#"{"action":"watch","item_ids":["a"]}"#, "unknown action"),
            (r#"{"item_ids":["a"]}"#, "no action"),
            (r#"{"action":"subscribe"}"#, "array"),
            (r#"{"action":"subscribe","item_ids":[]}"#, "1 to 50"),
            (too_many.as_str(), "1 to 50"),
            (r#"{"action":"subscribe","item_ids":["bad id"]}"#, "item_id"),
            (
                r#"{"action":"subscribe","item_ids":[7]}"#,
                "array of item ids",
            ),
            (
                r#"{"action":"subscribe","item_ids":["a"],"x":1}"#,
                "unknown member",
            ),
        ] {
            let err = parse_action(body).unwrap_err();
            assert!(err.contains(detail), "{body}: {err}");
        }
        let fifty: Vec<String> = (0..MAX_SUBSCRIBE).map(|n| format!("\"i{n}\"")).collect();
        let fifty = format!(
            r#"{{"action":"subscribe","item_ids":[{}]}}"#,
            fifty.join(",")
        );
        assert_eq!(ids(&parse_action(&fifty).unwrap()).len(), MAX_SUBSCRIBE);
    }

    #[test]
    fn server_messages_have_the_documented_shape() {
        let item = ItemId::parse("game:1").unwrap();
        let counts = crate::pipeline::Counts {
            like_count: 3,
            dislike_count: 1,
        };
        let shown = crate::namespace::NamespaceRules::default().shown(counts, false);
        assert_eq!(
            serde_json::to_value(ServerMessage::counts(&item, shown, Some(1_764_455_190_000)))
                .unwrap(),
            serde_json::json!({"type": "counts", "item_id": "game:1", "like_count": 3,
                "dislike_count": 1, "as_of": "2025-11-29T22:26:30Z"})
        );
        let hidden = crate::namespace::NamespaceRules::default().shown(counts, true);
        assert_eq!(
            serde_json::to_value(ServerMessage::counts(&item, hidden, None)).unwrap(),
            serde_json::json!({"type": "counts", "item_id": "game:1", "like_count": null,
                "like_count_hidden": true, "dislike_count": 1, "as_of": null})
        );
        assert_eq!(
            ServerMessage::Stale {
                item_id: "game:1".into()
            }
            .to_json(),
            r#"{"type":"stale","item_id":"game:1"}"#
        );
        assert_eq!(
            ServerMessage::Error {
                detail: "no".into()
            }
            .to_json(),
            r#"{"type":"error","detail":"no"}"#
        );
    }

    #[test]
    fn buckets_are_stable_and_spread() {
        assert_eq!(watch_bucket("abc=", 8), watch_bucket("abc=", 8));
        let used: BTreeSet<u32> = (0..200)
            .map(|n| watch_bucket(&format!("conn{n}"), 8))
            .collect();
        assert_eq!(used.len(), 8);
        assert!(used.iter().all(|b| *b < 8));
        assert_eq!(watch_key(&ItemId::parse("game:1").unwrap(), 3), "game:1#3");
    }

    #[test]
    fn a_push_covers_events_a_margin_before_its_as_of() {
        assert!(!covers(None, 1_000));
        assert!(!covers(Some(1_500), 1_000));
        assert!(covers(Some(2_000), 1_000));
    }
}
