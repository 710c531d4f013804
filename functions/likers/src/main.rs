//! The event log's likers consumer: the logic lives in `likes-aggregator`, shared with the
//! local stream poller.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    likes_aggregator::run_likers().await
}
