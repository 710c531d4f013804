//! `GET /v1/items/{item_id}/likers`: the handler lives in `likes-api`, shared with the local
//! HTTP front.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    likes_api::run(likes_api::Endpoint::ListLikers).await
}
