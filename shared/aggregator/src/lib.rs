//! The stream consumers and the freshness they report, as Lambda handlers:
//!
//! - [`Aggregator`]: exactly-once sharded counts, and each shard's watermark.
//! - [`Publisher`]: the Kinesis event log, on its own checkpoint.
//! - [`Pulse`]: every shard's watermark turned into one `as_of`, and probes for quiet shards.
//! - [`Eraser`]: account erasure jobs, one paced slice per record of the Erasures stream.
//! - [`Leaderboard`] and [`Likers`]: read models of the Kinesis event log.

mod aggregator;
mod decode;
mod erasure;
mod events;
pub mod leaderboard;
pub mod likers;
mod log_shards;
mod publisher;
mod pulse;
mod ticker;

use aws_config::BehaviorVersion;
use lambda_runtime::service_fn;

pub use aggregator::{Aggregator, AggregatorConfig};
pub use decode::{decode, DecodeError};
pub use erasure::{Eraser, EraserConfig};
pub use events::{EventPublisher, PublishError, PublishFailure};
pub use leaderboard::{
    BoardRefresher, Leaderboard, LeaderboardConfig, RefreshError, RefresherConfig,
};
pub use likers::{Likers, LikersConfig};
pub use log_shards::{LogShards, LogShardsError};
pub use publisher::{Publisher, PublisherConfig};
pub use pulse::{Pulse, PulseConfig, PulseError, TickReport};

pub use likes_core::config::ConfigError;

/// The whole of the aggregator's `main`.
pub async fn run_aggregator() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = AggregatorConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let aggregator = Aggregator::new(config, aws_sdk_dynamodb::Client::new(&sdk));
    let aggregator = &aggregator;
    lambda_runtime::run(service_fn(move |event| async move {
        aggregator.handle(event).await
    }))
    .await
}

/// The whole of the eraser's `main`.
pub async fn run_eraser() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = EraserConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let eraser = Eraser::new(config, aws_sdk_dynamodb::Client::new(&sdk));
    let eraser = &eraser;
    lambda_runtime::run(service_fn(move |event| async move {
        eraser.handle(event).await
    }))
    .await
}

/// The whole of the publisher's `main`.
pub async fn run_publisher() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = PublisherConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let publisher = Publisher::new(config, aws_sdk_kinesis::Client::new(&sdk));
    let publisher = &publisher;
    lambda_runtime::run(service_fn(move |event| async move {
        publisher.handle(event).await
    }))
    .await
}

/// The whole of the leaderboard consumer's `main`.
pub async fn run_leaderboard() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = LeaderboardConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let leaderboard = Leaderboard::new(config, aws_sdk_dynamodb::Client::new(&sdk));
    let leaderboard = &leaderboard;
    lambda_runtime::run(service_fn(move |event| async move {
        leaderboard.handle(event).await
    }))
    .await
}

/// The whole of the leaderboard refresher's `main`.
pub async fn run_leaderboard_refresh() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = RefresherConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let refresher = BoardRefresher::new(
        config,
        aws_sdk_dynamodb::Client::new(&sdk),
        aws_sdk_kinesis::Client::new(&sdk),
    );
    let refresher = &refresher;
    lambda_runtime::run(service_fn(move |event| async move {
        refresher.handle(event).await
    }))
    .await
}

/// The whole of the likers consumer's `main`.
pub async fn run_likers() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = LikersConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let likers = Likers::new(config, aws_sdk_dynamodb::Client::new(&sdk));
    let likers = &likers;
    lambda_runtime::run(service_fn(move |event| async move {
        likers.handle(event).await
    }))
    .await
}

/// The whole of the pulse's `main`.
pub async fn run_pulse() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = PulseConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let pulse = Pulse::new(
        config,
        aws_sdk_dynamodb::Client::new(&sdk),
        aws_sdk_dynamodbstreams::Client::new(&sdk),
    );
    let pulse = &pulse;
    lambda_runtime::run(service_fn(
        move |event| async move { pulse.handle(event).await },
    ))
    .await
}
