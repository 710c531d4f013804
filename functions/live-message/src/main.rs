//! A live WebSocket route: the logic lives in `likes-live`, shared with the local front.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    likes_live::run_socket("live-message").await
}
