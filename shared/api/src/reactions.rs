//! The reaction endpoints: set (PUT reaction, PUT/DELETE like), read, and list liked items.
//! Each reads the request, makes one store call, and writes the answer.

use lambda_http::http::header::{HeaderName, ETAG};
use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::clock::{now_ms, rfc3339};
use likes_core::namespace::Namespace;
use likes_core::{
    Admission, IdempotencyKey, ItemId, LikedCursor, ReactionChange, ReactionState, UserId,
    WriteOutcome, WriteRequest,
};
use serde::{Deserialize, Serialize};

use crate::edge::{self, respond_json};
use crate::{ApiError, App};

/// A reaction body is `{"state": "LIKE"}`: anything past a few hundred bytes is not one.
const MAX_REACTION_BODY: usize = 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetReactionBody {
    state: String,
}

#[derive(Serialize)]
struct ChangeBody<'a> {
    item_id: &'a ItemId,
    state: ReactionState,
    previous_state: ReactionState,
    version: u64,
    client_like_delta: i64,
    client_dislike_delta: i64,
    count_status: likes_core::CountStatus,
    updated_at: Option<String>,
}

#[derive(Serialize)]
struct ReactionBody<'a> {
    item_id: &'a ItemId,
    state: ReactionState,
    version: u64,
    updated_at: Option<String>,
}

#[derive(Serialize)]
struct LikedItemBody {
    item_id: ItemId,
    liked_at: String,
}

#[derive(Serialize)]
struct LikedPageBody {
    items: Vec<LikedItemBody>,
    next_cursor: Option<String>,
}

/// `PUT /v1/items/{item_id}/reaction` with `{"state": …}`; `Idempotency-Key` required.
pub async fn put_reaction(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let item = edge::item_id(&request)?;
    let key = edge::idempotency_key(&request, true)?;
    let if_match = edge::if_match(request.headers())?;
    let body: SetReactionBody = edge::json_body(&request, MAX_REACTION_BODY)?;
    let target: ReactionState = body.state.parse()?;
    if target == ReactionState::Dislike {
        // Where the namespace takes no dislikes, none is written; one set before the rule
        // still counts, and NONE withdraws it.
        let namespace = Namespace::of(&item);
        let rules = app.catalog_cache()?.rules(&namespace, now_ms()).await?;
        if !rules.takes_dislikes() {
            return Err(ApiError::DislikesDisabled(namespace.as_str().to_owned()));
        }
    }
    set_reaction(app, &user, &item, target, key, if_match).await
}

/// `PUT /v1/items/{item_id}/like`: LIKE, `Idempotency-Key` optional.
pub async fn put_like(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    set_from_path(app, request, ReactionState::Like).await
}

/// `DELETE /v1/items/{item_id}/like`: NONE, `Idempotency-Key` optional.
pub async fn delete_like(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    set_from_path(app, request, ReactionState::None).await
}

async fn set_from_path(
    app: &App,
    request: Request,
    target: ReactionState,
) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let item = edge::item_id(&request)?;
    let key = edge::idempotency_key(&request, false)?;
    let if_match = edge::if_match(request.headers())?;
    set_reaction(app, &user, &item, target, key, if_match).await
}

async fn set_reaction(
    app: &App,
    user: &UserId,
    item: &ItemId,
    target: ReactionState,
    key: Option<IdempotencyKey>,
    if_match: Option<u64>,
) -> Result<Response<Body>, ApiError> {
    let request = WriteRequest {
        target,
        key: key.map(|k| k.hash()),
        if_match,
    };
    app.refuse_removed(item).await?;
    let now_ms = likes_core::clock::now_ms();
    // Every write attempt costs a write unit, replays and unchanged ones too: all count.
    let limits = app.rate_limits()?;
    match limits.admit(user, now_ms).await? {
        Admission::Admitted => {}
        Admission::Limited { retry_after_ms } => {
            tracing::info!(item_id = %item, retry_after_ms, "write limited");
            return Err(ApiError::RateLimited {
                limit: limits.limit(),
                retry_after_s: likes_core::limit::retry_after_seconds(retry_after_ms),
            });
        }
        Admission::Suspended => {
            tracing::info!(item_id = %item, "write of a suspended user refused");
            return Err(ApiError::Suspended);
        }
    }
    let outcome = app.reactions()?.set(user, item, &request, now_ms).await?;
    tracing::info!(item_id = %item, ?outcome, "reaction set");
    // Every outcome of a write, as HTTP.
    match outcome {
        WriteOutcome::Applied(change) | WriteOutcome::Unchanged(change) => {
            Ok(change_response(item, &change, false))
        }
        WriteOutcome::Replayed(change) => Ok(change_response(item, &change, true)),
        WriteOutcome::Stale { current } => Err(ApiError::PreconditionFailed { current }),
        WriteOutcome::KeyReused { original } => Err(ApiError::KeyReused { original }),
    }
}

fn change_response(item: &ItemId, change: &ReactionChange, replayed: bool) -> Response<Body> {
    let delta = change.client_delta();
    let mut builder = Response::builder()
        .status(200)
        .header(ETAG, edge::etag(change.version));
    if replayed {
        builder = builder.header(HeaderName::from_static(edge::IDEMPOTENT_REPLAYED), "true");
    }
    respond_json(
        builder,
        &ChangeBody {
            item_id: item,
            state: change.state,
            previous_state: change.previous_state,
            version: change.version,
            client_like_delta: delta.like,
            client_dislike_delta: delta.dislike,
            count_status: change.count_status(),
            updated_at: change.updated_at_ms.map(rfc3339),
        },
    )
}

/// `GET /v1/items/{item_id}/reaction`: strongly consistent; NONE at version 0 when never set.
pub async fn get_reaction(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let item = edge::item_id(&request)?;
    let row = app.reactions()?.get(&user, &item).await?;
    let builder = Response::builder()
        .status(200)
        .header(ETAG, edge::etag(row.version));
    Ok(respond_json(
        builder,
        &ReactionBody {
            item_id: &item,
            state: row.state,
            version: row.version,
            updated_at: row.updated_at_ms.map(rfc3339),
        },
    ))
}

/// `GET /v1/users/me/liked-items?limit=20&cursor=…`: newest first, signed cursor.
pub async fn list_liked_items(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let params = request.query_string_parameters();
    let limit =
        likes_core::page::limit(params.first("limit"), likes_core::page::DEFAULT_LIST_LIMIT)?;
    let (key, after) = app
        .cursor_secret()?
        .open(params.first("cursor"), |raw, key| {
            LikedCursor::decode(raw, key, &user)
        })
        .await?;
    let page = app
        .reactions()?
        .liked_page(&user, limit, after.as_ref())
        .await?;
    let body = LikedPageBody {
        items: page
            .items
            .into_iter()
            .map(|liked| LikedItemBody {
                liked_at: rfc3339(liked.liked_at_ms),
                item_id: liked.item_id,
            })
            .collect(),
        next_cursor: page.next.map(|cursor| cursor.encode(&key, &user)),
    };
    Ok(respond_json(Response::builder().status(200), &body))
}
