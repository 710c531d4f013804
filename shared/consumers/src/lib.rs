//! The stream consumers and the freshness they report, as Lambda handlers:
//!
//! - [`Aggregator`]: exactly-once sharded counts, and each shard's watermark.
//! - [`Publisher`]: the Kinesis event log, on its own checkpoint.
//! - [`Pulse`]: every shard's watermark turned into one `as_of`, and probes for quiet shards.
//! - [`Eraser`]: account erasure jobs, one paced slice per record of the Erasures stream.
//! - [`Retractor`]: moderators' actions on the event log, and retraction jobs, one paced
//!   slice per record of the Moderation stream.
//! - [`Leaderboard`]: the read models of the Kinesis event log (the leaderboard's scores
//!   and the likers lists), and the [`BoardRefresher`] that re-ranks the leaderboard's
//!   materialized boards.

mod aggregator;
mod decode;
mod erasure;
mod events;
pub mod leaderboard;
mod log_shards;
mod publisher;
mod pulse;
mod refresher;
mod retraction;
mod stream_shards;
mod ticker;

pub use aggregator::{Aggregator, AggregatorConfig};
pub use decode::{decode, DecodeError};
pub use erasure::{Eraser, EraserConfig};
pub use events::{EventPublisher, PublishFailure};
pub use leaderboard::{Leaderboard, LeaderboardConfig};
pub use log_shards::LogShards;
pub use publisher::{Publisher, PublisherConfig};
pub use pulse::{Pulse, PulseConfig, PulseError, TickReport};
pub use refresher::{BoardRefresher, RefreshError, RefresherConfig};
pub use retraction::{Retractor, RetractorConfig};

pub use likes_core::config::ConfigError;
