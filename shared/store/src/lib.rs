//! DynamoDB adapters of Likes. Each module owns one use of one AWS service; the domain
//! decisions they act on live in `likes-core`.

mod batch;
pub mod cached_counts;
pub mod catalog;
pub mod counts;
pub mod erasures;
mod error;
mod first_epochs;
pub mod freshness;
pub mod jobs;
pub mod leaderboard;
pub mod likers;
pub mod live;
pub mod metrics;
pub mod moderation;
mod pages;
pub mod privacy;
pub mod pruning;
pub mod rate_limits;
pub mod reactions;
pub mod reconciliation;
pub mod rows;

pub use cached_counts::{CachedCounts, CountsAsOf};
pub use catalog::{CatalogCache, CatalogStore, ItemOwner, ItemRules};
pub use counts::{Advance, CountIntent, CountsStore, CountsWriter, ShardCounting, ShardProgress};
pub use erasures::ErasuresStore;
pub use error::StoreError;
pub use freshness::{FreshnessStore, Watermark};
pub use jobs::JobStart;
pub use leaderboard::{BoardTop, LeaderboardStore};
pub use likers::{LikersPage, LikersStore};
pub use live::{LiveStore, PushClaim, PushClaims, Watch, WatcherPage, Watching};
pub use moderation::{ModerationStore, RemovedItems};
pub use privacy::{Block, BlocksPage, PrivacyStore, Viewer};
pub use rate_limits::RateLimitsStore;
pub use reactions::{LikedItem, LikedPage, ReactionsStore, LIKED_AT_INDEX};
