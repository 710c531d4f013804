//! Scheduled reconciliation, run by EventBridge Scheduler: the logic lives in
//! `likes-reconcile`, shared with `likes-local reconcile`.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    likes_reconcile::run().await
}
