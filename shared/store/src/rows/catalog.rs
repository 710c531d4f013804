//! Catalog rows: a namespace's rules (`ns#<namespace>`), an item's owner and what they set
//! (`item#<item id>`). A rule or a setting never set is absent and reads as its default.

use likes_core::namespace::{DislikeRule, LikeCountRule, NamespaceRules, Window};
use serde::Deserialize;

/// The prefix of a namespace's rules row key.
pub const NAMESPACE_PREFIX: &str = "ns#";
/// The prefix of an item's owner row key.
pub const ITEM_PREFIX: &str = "item#";

/// An item's owner row.
#[derive(Debug, Clone, Deserialize)]
pub struct ItemOwnerRow {
    pub pk: String,
    pub owner_id: String,
    #[serde(default)]
    pub hide_like_count: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamespaceRow {
    pub pk: String,
    pub dislikes: Option<DislikeRule>,
    pub like_count: Option<LikeCountRule>,
    pub leaderboard_windows: Option<Vec<Window>>,
}

impl NamespaceRow {
    pub fn rules(self) -> NamespaceRules {
        let defaults = NamespaceRules::default();
        NamespaceRules {
            dislikes: self.dislikes.unwrap_or(defaults.dislikes),
            like_count: self.like_count.unwrap_or(defaults.like_count),
            leaderboard_windows: self
                .leaderboard_windows
                .unwrap_or(defaults.leaderboard_windows),
        }
    }
}
