//! The Likers table's rows: liked entries as the index and a repair read them, and an
//! item's occupancy.

use serde::Deserialize;

/// A liked entry as the Likers table's `by_position` index returns it.
#[derive(Debug, Clone, Deserialize)]
pub struct LikerRow {
    pub user_id: String,
    pub liked_at: i64,
}

/// An entry's key: its bucket and user.
#[derive(Debug, Clone, Deserialize)]
pub struct LikerKey {
    pub bucket: String,
    pub user_id: String,
}

/// A liked entry of the Likers table as a repair reads it: its keys and its flip's order.
#[derive(Debug, Clone, Deserialize)]
pub struct LikedEntryRow {
    pub bucket: String,
    pub user_id: String,
    /// 0 on entries written before entries kept it.
    #[serde(default)]
    pub row_created: i64,
    #[serde(default)]
    pub op_id: u64,
    pub liked_at: i64,
}

/// An item's occupancy row on the Likers table: the buckets that ever held a liked entry (a
/// number set).
#[derive(Debug, Clone, Deserialize)]
pub struct OccupancyRow {
    pub occupied: Vec<u32>,
}
