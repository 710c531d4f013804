//! The caller's privacy: `GET` / `PUT /v1/users/me/settings` (whether their likes show in
//! other users' likers lists), `PUT` / `DELETE /v1/users/me/blocks/{user_id}` and
//! `GET /v1/users/me/blocks` (whom they block). Each reads the request, makes one store call
//! on the caller's own partition, and writes the answer; the likers lists apply them.

use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::clock::rfc3339;
use likes_core::page::{self, DEFAULT_LIST_LIMIT};
use likes_core::privacy::block_target;
use likes_core::{BlockOutcome, BlocksCursor, LikesVisibility, PrivacySettings};
use serde::{Deserialize, Serialize};

use crate::edge::{self, respond_json};
use crate::{ApiError, App};

/// A settings body is `{"likes_visibility": "private"}`: anything past a few hundred bytes
/// is not one.
const MAX_SETTINGS_BODY: usize = 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetSettingsBody {
    likes_visibility: String,
}

#[derive(Serialize)]
struct SettingsBody {
    likes_visibility: LikesVisibility,
}

#[derive(Serialize)]
struct BlockBody {
    user_id: String,
    blocked_at: String,
}

#[derive(Serialize)]
struct BlocksPageBody {
    items: Vec<BlockBody>,
    next_cursor: Option<String>,
}

fn settings_response(settings: PrivacySettings) -> Response<Body> {
    respond_json(
        Response::builder().status(200),
        &SettingsBody {
            likes_visibility: settings.likes_visibility,
        },
    )
}

/// `GET /v1/users/me/settings`: strongly consistent; public when never set.
pub async fn get_settings(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let settings = app.privacy()?.settings(&user).await?;
    Ok(settings_response(settings))
}

/// `PUT /v1/users/me/settings` with `{"likes_visibility": …}`: the settings as stored.
pub async fn put_settings(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let body: SetSettingsBody = edge::json_body(&request, MAX_SETTINGS_BODY)?;
    let visibility: LikesVisibility = body.likes_visibility.parse()?;
    let settings = app.privacy()?.set_visibility(&user, visibility).await?;
    tracing::info!(%visibility, "likes visibility set");
    Ok(settings_response(settings))
}

/// `PUT /v1/users/me/blocks/{user_id}`: 200 with the block, new or as it was; 409 past the
/// cap. No body is read.
pub async fn put_block(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let other = block_target(&user, edge::user_id(&request)?)?;
    let now_ms = likes_core::clock::now_ms();
    let outcome = app.privacy()?.block(&user, &other, now_ms).await?;
    tracing::info!(?outcome, "block requested");
    let blocked_at_ms = match outcome {
        BlockOutcome::Blocked { blocked_at_ms }
        | BlockOutcome::AlreadyBlocked { blocked_at_ms } => blocked_at_ms,
        BlockOutcome::AtLimit => return Err(ApiError::TooManyBlocks),
    };
    let body = BlockBody {
        user_id: other.as_str().to_owned(),
        blocked_at: rfc3339(blocked_at_ms),
    };
    Ok(respond_json(Response::builder().status(200), &body))
}

/// `DELETE /v1/users/me/blocks/{user_id}`: 204 whether or not the caller blocked that user.
pub async fn delete_block(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let other = block_target(&user, edge::user_id(&request)?)?;
    let was_blocked = app.privacy()?.unblock(&user, &other).await?;
    tracing::info!(was_blocked, "unblock requested");
    Ok(Response::builder()
        .status(204)
        .body(Body::Empty)
        .expect("a bodiless answer is valid"))
}

/// `GET /v1/users/me/blocks?limit=20&cursor=…`: whom the caller blocks, in user id order,
/// strongly consistent, behind a cursor signed and bound to the caller.
pub async fn list_blocks(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let params = request.query_string_parameters();
    let limit = page::limit(params.first("limit"), DEFAULT_LIST_LIMIT)?;
    let (key, after) = app
        .cursor_secret()?
        .open(params.first("cursor"), |raw, key| {
            BlocksCursor::decode(raw, key, &user)
        })
        .await?;
    let page = app
        .privacy()?
        .blocks_page(&user, limit, after.as_ref())
        .await?;
    let body = BlocksPageBody {
        items: page
            .blocks
            .into_iter()
            .map(|block| BlockBody {
                blocked_at: rfc3339(block.blocked_at_ms),
                user_id: block.user_id,
            })
            .collect(),
        next_cursor: page.next.map(|cursor| cursor.encode(&key, &user)),
    };
    Ok(respond_json(Response::builder().status(200), &body))
}
