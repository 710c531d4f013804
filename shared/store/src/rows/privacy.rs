//! The Privacy table's rows: a user's settings row and their block rows.

use likes_core::LikesVisibility;
use serde::{Deserialize, Serialize};

/// The key of a Privacy row: the settings row `#settings`, or a block row `b#<user id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivacyKey {
    pub user_id: String,
    pub entry: String,
}

/// A user's settings row. A visibility never set reads as public, and a user who never
/// blocked anybody has no `blocks`.
#[derive(Debug, Clone, Deserialize)]
pub struct SettingsRow {
    pub user_id: String,
    #[serde(default)]
    pub likes_visibility: LikesVisibility,
    #[serde(default)]
    pub blocks: u64,
}

/// A block row: its user blocks the user its entry names, since `blocked_at` (epoch ms).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlockRow {
    pub user_id: String,
    pub entry: String,
    pub blocked_at: i64,
}
