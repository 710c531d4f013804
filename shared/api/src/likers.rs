//! `GET /v1/items/{item_id}/likers?limit=20&cursor=…`: who liked an item, newest first, from
//! the likers read model the event log feeds, as the caller may see them (never a private
//! user but themselves, nobody they block or who blocks them); the cursor is signed and bound
//! to the item.

use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::clock::rfc3339;
use likes_core::page::{self, DEFAULT_LIST_LIMIT};
use likes_core::LikersCursor;
use serde::Serialize;

use crate::edge::{self, respond_json};
use crate::{ApiError, App};

#[derive(Serialize)]
struct LikerBody {
    user_id: String,
    liked_at: String,
}

#[derive(Serialize)]
struct LikersPageBody {
    items: Vec<LikerBody>,
    next_cursor: Option<String>,
}

pub async fn list_likers(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    // Who liked what is for signed-in callers only: the route has the JWT authorizer, and
    // the handler refuses a request without its claims too. What they see is theirs.
    let reader = edge::user(&request)?;
    let item = edge::item_id(&request)?;
    let params = request.query_string_parameters();
    let limit = page::limit(params.first("limit"), DEFAULT_LIST_LIMIT)?;
    let (key, after) = app
        .cursor_secret()?
        .open(params.first("cursor"), |raw, key| {
            LikersCursor::decode(raw, key, &item)
        })
        .await?;
    // Asked well, of a removed item: 410.
    app.refuse_removed(&item).await?;
    let mut viewer = app.privacy()?.viewer(&reader);
    // The buckets the item's counted likes went to, as its count rows list them.
    let listed = app.counts()?.liked_buckets(&item).await?;
    let page = app
        .likers()?
        .page(&item, &listed, limit, after.as_ref(), &mut viewer)
        .await?;
    let body = LikersPageBody {
        items: page
            .likers
            .into_iter()
            .map(|liker| LikerBody {
                liked_at: rfc3339(liker.liked_at_ms),
                user_id: liker.user_id,
            })
            .collect(),
        next_cursor: page.next.map(|cursor| cursor.encode(&key, &item)),
    };
    Ok(respond_json(Response::builder().status(200), &body))
}
