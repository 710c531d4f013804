//! The Likers table's rows: liked entries as a page and a repair read them.

use serde::Deserialize;

/// A liked entry as a page reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct LikerRow {
    pub user_id: String,
    pub liked_at: i64,
}

/// An entry's key in its bucket: a like's position, or a user's dislike entry.
#[derive(Debug, Clone, Deserialize)]
pub struct LikerKey {
    pub entry: String,
}

/// A liked entry of the Likers table as a repair reads it: its keys and its flip's order.
#[derive(Debug, Clone, Deserialize)]
pub struct LikedEntryRow {
    pub bucket: String,
    pub user_id: String,
    pub row_created: i64,
    pub op_id: u64,
    pub liked_at: i64,
}
