//! The leaderboard refresher, run by EventBridge Scheduler: the logic lives in
//! `likes-aggregator`, shared with the local stack's scheduler.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    likes_aggregator::run_leaderboard_refresh().await
}
