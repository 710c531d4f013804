//! The event log's live counts broadcaster: the logic lives in `likes-live`, shared with the
//! local stream poller.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    likes_live::run_broadcaster().await
}
