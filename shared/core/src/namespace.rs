//! What an item is: the namespace its id names (the part before its first `:`, `post:123` →
//! `post`; an id without `:` is in `default`), and the rules a platform sets per namespace:
//! who sees its dislikes (or whether it takes any), who sees its like counts, and which
//! leaderboard windows it keeps. Rules change what is shown, never what is counted: a rule
//! change needs no recount, and hiding a count hides it from the public only.

use serde::{Deserialize, Serialize};

use crate::pipeline::Counts;
use crate::{ItemId, ValidationError};

/// The namespace of every item whose id has no `:`.
pub const DEFAULT_NAMESPACE: &str = "default";
/// The scope of a platform's token that sets namespace rules.
pub const ADMIN_SCOPE: &str = "likes/admin";
/// The scope of a platform service's token that registers items' owners.
pub const ITEMS_SCOPE: &str = "likes/items";
const NAME_MAX_LEN: usize = 64;

/// A namespace name: 1–64 characters of the item id's alphabet without `:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Namespace(String);

impl Namespace {
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
        if raw.is_empty() || raw.len() > NAME_MAX_LEN || !raw.chars().all(allowed) {
            return Err(ValidationError::Namespace(raw.chars().take(64).collect()));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The namespace `item` is in. A prefix no rule can be set for (empty, as in `:x`, or
    /// longer than a name's 64 characters) names a namespace that keeps the defaults.
    pub fn of(item: &ItemId) -> Self {
        Self::of_prefix(item.as_str())
    }

    /// The namespace the prefix of `item_id` names, as [`Self::of`] reads it, for an id
    /// read back from storage.
    pub fn of_prefix(item_id: &str) -> Self {
        match item_id.split_once(':') {
            Some((prefix, _)) => Self(prefix.to_owned()),
            None => Self(DEFAULT_NAMESPACE.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Who sees an item's dislike count, and whether it takes dislikes at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DislikeRule {
    Public,
    /// Counted; shown to the item's owner only.
    OwnerOnly,
    /// A new dislike is refused; those set before still count and can be withdrawn.
    Disabled,
}

/// Who sees an item's like count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LikeCountRule {
    Public,
    OwnerOnly,
}

/// A leaderboard window: the current UTC hour's, day's or ISO week's net likes, or all time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    Hour,
    Day,
    Week,
    All,
}

/// A namespace's rules, every field set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRules {
    pub dislikes: DislikeRule,
    pub like_count: LikeCountRule,
    /// In window order, each once.
    pub leaderboard_windows: Vec<Window>,
}

impl Default for NamespaceRules {
    fn default() -> Self {
        Self {
            dislikes: DislikeRule::Public,
            like_count: LikeCountRule::Public,
            leaderboard_windows: vec![Window::Day, Window::All],
        }
    }
}

/// A `PUT` of rules: each field given replaces the stored one, each missing keeps it; an
/// unknown field or value is refused when the body is read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesChange {
    #[serde(default, deserialize_with = "crate::present")]
    pub dislikes: Option<DislikeRule>,
    #[serde(default, deserialize_with = "crate::present")]
    pub like_count: Option<LikeCountRule>,
    #[serde(default, deserialize_with = "crate::present")]
    pub leaderboard_windows: Option<Vec<Window>>,
}

impl RulesChange {
    /// The same change with its windows in order, each once, as they are stored.
    pub fn normalized(mut self) -> Self {
        if let Some(windows) = &mut self.leaderboard_windows {
            windows.sort_unstable();
            windows.dedup();
        }
        self
    }

    /// `rules` with this change made.
    pub fn applied_to(self, rules: NamespaceRules) -> NamespaceRules {
        let change = self.normalized();
        NamespaceRules {
            dislikes: change.dislikes.unwrap_or(rules.dislikes),
            like_count: change.like_count.unwrap_or(rules.like_count),
            leaderboard_windows: change
                .leaderboard_windows
                .unwrap_or(rules.leaderboard_windows),
        }
    }
}

/// An item's counts as a public reader sees them: a count the rules hide is `null`, with its
/// `*_hidden` flag beside it (absent when shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ShownCounts {
    pub like_count: Option<u64>,
    pub dislike_count: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub like_count_hidden: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dislike_count_hidden: bool,
}

impl NamespaceRules {
    /// `counts` as the public sees them under these rules, `owner_hides` when the item's
    /// owner hid its like count.
    pub fn shown(&self, counts: Counts, owner_hides: bool) -> ShownCounts {
        let likes = self.shows_likes(owner_hides);
        let dislikes = self.shows_dislikes();
        ShownCounts {
            like_count: likes.then_some(counts.like_count),
            dislike_count: dislikes.then_some(counts.dislike_count),
            like_count_hidden: !likes,
            dislike_count_hidden: !dislikes,
        }
    }

    /// Whether a public reader sees the like count (an owner may hide their item's too).
    pub fn shows_likes(&self, owner_hides: bool) -> bool {
        self.like_count == LikeCountRule::Public && !owner_hides
    }

    /// Whether a public reader sees the dislike count.
    pub fn shows_dislikes(&self) -> bool {
        self.dislikes == DislikeRule::Public
    }

    /// Whether a new dislike is taken.
    pub fn takes_dislikes(&self) -> bool {
        self.dislikes != DislikeRule::Disabled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &[u8]) -> Result<RulesChange, serde_json::Error> {
        serde_json::from_slice(body)
    }

    fn item(id: &str) -> ItemId {
        ItemId::parse(id).unwrap()
    }

    #[test]
    fn an_items_namespace_is_its_prefix_or_default() {
        assert_eq!(Namespace::of(&item("post:123")).as_str(), "post");
        assert_eq!(Namespace::of(&item("post:a:b")).as_str(), "post");
        assert_eq!(Namespace::of(&item("game42")).as_str(), "default");
        assert_eq!(Namespace::of(&item(":x")).as_str(), "");
        assert!(Namespace::parse("post").is_ok());
        for bad in ["", "po:st", "post/x", &"n".repeat(65)] {
            assert!(Namespace::parse(bad).is_err(), "{bad}");
        }
        assert!(Namespace::parse(&"n".repeat(64)).is_ok());
    }

    #[test]
    fn a_change_keeps_what_it_does_not_name_and_orders_the_windows() {
        let change = parse(br#"{"leaderboard_windows": ["all", "hour", "all"]}"#);
        let rules = change.unwrap().applied_to(NamespaceRules::default());
        assert_eq!(rules.dislikes, DislikeRule::Public);
        assert_eq!(rules.leaderboard_windows, [Window::Hour, Window::All]);
        let rules = parse(br#"{"dislikes": "disabled"}"#)
            .unwrap()
            .applied_to(rules);
        assert_eq!(
            (rules.dislikes, rules.leaderboard_windows.len()),
            (DislikeRule::Disabled, 2)
        );
        assert!(!rules.takes_dislikes() && !rules.shows_dislikes());
        assert!(rules.shows_likes(false) && !rules.shows_likes(true));
    }

    #[test]
    fn a_hidden_count_is_null_and_flagged_and_a_shown_one_unflagged() {
        let counts = Counts {
            like_count: 7,
            dislike_count: 2,
        };
        let shown = serde_json::to_value(NamespaceRules::default().shown(counts, false)).unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"like_count": 7, "dislike_count": 2})
        );
        let hidden = NamespaceRules {
            dislikes: DislikeRule::OwnerOnly,
            ..NamespaceRules::default()
        };
        let shown = serde_json::to_value(hidden.shown(counts, true)).unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"like_count": null, "dislike_count": null,
                "like_count_hidden": true, "dislike_count_hidden": true})
        );
    }

    #[test]
    fn unknown_fields_and_values_are_refused() {
        for bad in [
            &br#"{"dislike": "public"}"#[..],
            br#"{"dislikes": "hidden"}"#,
            br#"{"leaderboard_windows": ["month"]}"#,
            br#"{"like_count": "disabled"}"#,
            br#"{"leaderboard_windows": null}"#,
            br#"{"dislikes": null}"#,
            b"nope",
        ] {
            assert!(parse(bad).is_err());
        }
        assert_eq!(parse(b"{}").unwrap(), RulesChange::default());
    }
}
