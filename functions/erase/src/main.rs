//! The Erasures stream's handler: the logic lives in `likes-aggregator`, shared with the
//! local stream poller.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    likes_aggregator::run_eraser().await
}
