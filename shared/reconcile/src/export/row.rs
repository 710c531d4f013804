//! One line of a data file: parsed into a row, classified, and added to the recount.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use likes_core::likers::LikeAt;
use likes_core::pipeline::Counts;
use likes_core::{ItemId, ReactionState};
use likes_store::freshness::PROBE_ITEM;
use serde::Deserialize;

use crate::ReconcileError;

/// Foreign rows, and reactions in an unknown state, reported with their keys; beyond this they
/// are only counted, so a wrong table cannot fill memory with its keys.
pub const FOREIGN_REPORTED: usize = 100;

/// A line of a DYNAMODB_JSON data file.
#[derive(Deserialize)]
struct Line {
    #[serde(rename = "Item")]
    item: serde_dynamo::Item,
}

/// The attributes of a Reactions row the recount reads; the others are ignored. The order
/// and time of its last flip are read as whatever they hold: a row whose are not numbers
/// still counts, it only cannot repair a likers entry.
#[derive(Deserialize)]
struct Row {
    user_id: String,
    item_id: String,
    state: Option<String>,
    op_id: Option<serde_json::Value>,
    created_at: Option<serde_json::Value>,
    updated_at: Option<serde_json::Value>,
    liked_at: Option<serde_json::Value>,
}

impl Row {
    /// The like this row holds, at its flip's order, when its order and time are numbers.
    fn like_at(&self) -> Option<LikeAt> {
        Some(LikeAt {
            // 0 for a row from before rows kept their creation time, as the pipeline reads it.
            row_created_ms: match &self.created_at {
                None => 0,
                Some(created) => created.as_i64()?,
            },
            op_id: self.op_id.as_ref()?.as_u64()?,
            // A LIKE row's `liked_at` is its flip's time, `updated_at` on rows without it.
            liked_at_ms: self
                .liked_at
                .as_ref()
                .or(self.updated_at.as_ref())?
                .as_i64()?,
        })
    }
}

/// Every like an export holds, by item and user, at its flip's order.
pub type ExportedLikes = BTreeMap<(ItemId, String), LikeAt>;

/// The keys of a row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowKey {
    pub user_id: String,
    pub item_id: String,
}

/// The Reactions table recounted from an export.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recount {
    /// Every item with at least one reaction row, in any state.
    pub per_item: BTreeMap<ItemId, Counts>,
    /// Every row of the export, of every kind.
    pub rows_read: u64,
    pub reactions: u64,
    /// The pulse's probe rows (`item_id` `#probe`).
    pub probes: u64,
    /// Rows that are neither reactions nor probes.
    pub foreign_rows: u64,
    /// The first [`FOREIGN_REPORTED`] of them.
    pub foreign: Vec<RowKey>,
    /// Reaction rows in a state the service never writes (or none): counted as no change, as
    /// the aggregator counts them, and reported.
    pub unknown_state_rows: u64,
    /// The first [`FOREIGN_REPORTED`] of them, with the state they hold.
    pub unknown_states: Vec<UnknownStateRow>,
    /// Every like, kept only when asked for ([`Recount::with_likes`]): what the likers
    /// lists are repaired from. Likes whose order is unreadable are counted apart.
    pub likes: Option<ExportedLikes>,
    pub unreadable_likes: u64,
    /// Every dislike, kept beside the likes: with them, every reaction a removed item must
    /// not hold.
    pub dislikes: BTreeSet<(ItemId, String)>,
}

/// Reaction rows in a state that is not LIKE, DISLIKE or NONE: one row with its keys, as the
/// export reader finds it, or an item's number of them, as Athena's recount gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, Deserialize)]
pub struct UnknownStateRow {
    pub item_id: String,
    /// `None` from Athena, which groups by item.
    pub user_id: Option<String>,
    /// `None` when the row has no `state` attribute at all (or from Athena).
    pub state: Option<String>,
    pub rows: u64,
}

impl Recount {
    /// A recount that also keeps every like.
    pub fn with_likes() -> Self {
        Self {
            likes: Some(ExportedLikes::new()),
            ..Self::default()
        }
    }

    /// Parses line `line` of data file `key` and adds it.
    pub(crate) fn add_line(
        &mut self,
        key: &str,
        line: u64,
        bytes: &[u8],
    ) -> Result<(), ReconcileError> {
        let invalid = |reason: String| ReconcileError::Row {
            key: key.to_owned(),
            line,
            reason,
        };
        let Line { item } = serde_json::from_slice(bytes)
            .map_err(|e| invalid(format!("not a DynamoDB JSON item: {e}")))?;
        let row: Row = serde_dynamo::from_item(item)
            .map_err(|e| invalid(format!("not a Reactions row: {e}")))?;
        self.rows_read += 1;
        if row.item_id == PROBE_ITEM {
            self.probes += 1;
            return Ok(());
        }
        let Ok(item_id) = ItemId::parse(&row.item_id) else {
            self.foreign_rows += 1;
            if self.foreign.len() < FOREIGN_REPORTED {
                self.foreign.push(RowKey {
                    user_id: row.user_id,
                    item_id: row.item_id,
                });
            }
            return Ok(());
        };
        self.reactions += 1;
        let counts = self.per_item.entry(item_id.clone()).or_default();
        match row
            .state
            .as_deref()
            .and_then(|s| ReactionState::from_str(s).ok())
        {
            Some(ReactionState::Like) => {
                counts.like_count += 1;
                if let Some(likes) = &mut self.likes {
                    match row.like_at() {
                        Some(at) => {
                            likes.insert((item_id, row.user_id), at);
                        }
                        None => self.unreadable_likes += 1,
                    }
                }
            }
            Some(ReactionState::Dislike) => {
                counts.dislike_count += 1;
                // A row whose order is no number is never written again (a retraction adds
                // to it), as a like of one is never listed.
                let readable = row.op_id.as_ref().and_then(|op| op.as_u64()).is_some();
                if self.likes.is_some() && readable {
                    self.dislikes.insert((item_id, row.user_id));
                }
            }
            Some(ReactionState::None) => {}
            None => {
                tracing::warn!(
                    data_file = key, line, user_id = row.user_id, item_id = row.item_id,
                    state = ?row.state, "a reaction row in an unknown state counts as no change"
                );
                self.unknown_state_rows += 1;
                if self.unknown_states.len() < FOREIGN_REPORTED {
                    self.unknown_states.push(UnknownStateRow {
                        item_id: row.item_id,
                        user_id: Some(row.user_id),
                        state: row.state,
                        rows: 1,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(user: &str, item: &str, state: Option<&str>) -> Vec<u8> {
        let mut attrs = serde_json::json!({
            "user_id": {"S": user},
            "item_id": {"S": item},
            "op_id": {"N": "3"},
        });
        if let Some(state) = state {
            attrs["state"] = serde_json::json!({ "S": state });
        }
        serde_json::to_vec(&serde_json::json!({ "Item": attrs })).unwrap()
    }

    fn counts(like_count: u64, dislike_count: u64) -> Counts {
        Counts {
            like_count,
            dislike_count,
        }
    }

    #[test]
    fn reactions_count_per_item_and_none_rows_still_list_their_item() {
        let mut recount = Recount::default();
        for (n, (user, item, state)) in [
            ("a", "game:1", "LIKE"),
            ("b", "game:1", "LIKE"),
            ("c", "game:1", "DISLIKE"),
            ("a", "game:2", "NONE"),
        ]
        .into_iter()
        .enumerate()
        {
            recount
                .add_line("f", n as u64 + 1, &line(user, item, Some(state)))
                .unwrap();
        }
        let game = |id| ItemId::parse(id).unwrap();
        assert_eq!(
            recount.per_item,
            BTreeMap::from([
                (game("game:1"), counts(2, 1)),
                (game("game:2"), counts(0, 0))
            ])
        );
        assert_eq!((recount.rows_read, recount.reactions), (4, 4));
    }

    #[test]
    fn probes_are_counted_apart_and_foreign_rows_reported_with_their_keys() {
        let mut recount = Recount::default();
        recount
            .add_line("f", 1, &line("#probe#3", "#probe", None))
            .unwrap();
        recount
            .add_line("f", 2, &line("x", "not an item", Some("LIKE")))
            .unwrap();
        assert_eq!(
            (recount.rows_read, recount.probes, recount.foreign_rows),
            (2, 1, 1)
        );
        assert_eq!(
            recount.foreign,
            [RowKey {
                user_id: "x".into(),
                item_id: "not an item".into()
            }]
        );
        assert!(recount.per_item.is_empty());
    }

    #[test]
    fn foreign_keys_reported_are_capped() {
        let mut recount = Recount::default();
        for n in 0..FOREIGN_REPORTED as u64 + 5 {
            recount
                .add_line("f", n + 1, &line("x", "a/b", None))
                .unwrap();
        }
        assert_eq!(recount.foreign.len(), FOREIGN_REPORTED);
        assert_eq!(recount.foreign_rows, FOREIGN_REPORTED as u64 + 5);
    }

    #[test]
    fn a_reaction_in_an_unknown_or_missing_state_counts_as_no_change_and_is_reported() {
        let mut recount = Recount::default();
        recount
            .add_line("f", 1, &line("a", "game:1", Some("LIKE")))
            .unwrap();
        recount
            .add_line("data/f.json.gz", 7, &line("u", "game:1", Some("LOVE")))
            .unwrap();
        recount
            .add_line("f", 8, &line("v", "game:2", None))
            .unwrap();
        let game = |id| ItemId::parse(id).unwrap();
        assert_eq!(
            recount.per_item,
            BTreeMap::from([
                (game("game:1"), counts(1, 0)),
                (game("game:2"), counts(0, 0))
            ]),
            "an item whose rows are all unknown is still checked, as 0 and 0"
        );
        assert_eq!((recount.reactions, recount.unknown_state_rows), (3, 2));
        assert_eq!(
            recount.unknown_states,
            [
                UnknownStateRow {
                    item_id: "game:1".into(),
                    user_id: Some("u".into()),
                    state: Some("LOVE".into()),
                    rows: 1
                },
                UnknownStateRow {
                    item_id: "game:2".into(),
                    user_id: Some("v".into()),
                    state: None,
                    rows: 1
                }
            ]
        );
    }

    #[test]
    fn lines_that_are_not_reactions_rows_fail() {
        let mut recount = Recount::default();
        for bad in [
            &b"{\"Item\": {"[..],
            b"{\"item_id\": {\"S\": \"x\"}}",
            br#"{"Item": {"item_id": {"S": "game:1"}}}"#,
        ] {
            assert!(matches!(
                recount.add_line("f", 1, bad),
                Err(ReconcileError::Row { line: 1, .. })
            ));
        }
        assert_eq!(recount.rows_read, 0);
    }
}
