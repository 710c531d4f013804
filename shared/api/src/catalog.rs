//! What an item is: its namespace's rules (`GET` public, `PUT` a platform's admin), its owner
//! (`PUT` / `GET …/owner`, a platform service's token), and what the owner controls (`GET` /
//! `PUT …/settings`, whether the public sees its like count) and sees (`GET …/stats`, every
//! count, exact as the public ones). Each reads the request, makes one store call and writes
//! the answer; the count reads apply what they set.

use lambda_http::http::header::CACHE_CONTROL;
use lambda_http::{Body, Request, Response};
use likes_core::clock::{now_ms, rfc3339};
use likes_core::namespace::{Namespace, NamespaceRules, RulesChange, ADMIN_SCOPE, ITEMS_SCOPE};
use likes_core::{ItemId, UserId};
use likes_store::ItemOwner;
use serde::{Deserialize, Serialize};

use crate::counts::SHARED_COUNTS;
use crate::edge::{self, respond_json};
use crate::{ApiError, App};

/// A rules or settings body is a few fields: anything past a kilobyte is not one.
const MAX_BODY: usize = 1024;

#[derive(Serialize)]
struct RulesBody<'a> {
    namespace: &'a Namespace,
    #[serde(flatten)]
    rules: NamespaceRules,
}

/// `GET /v1/namespaces/{namespace}`, public: the rules in force (defaults when never set).
pub async fn get_namespace(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let namespace = edge::namespace(&request)?;
    let rules = app.catalog_cache()?.rules(&namespace, now_ms()).await?;
    Ok(respond_json(
        Response::builder()
            .status(200)
            // The same for every caller, as the counts are: a shared cache keeps them as
            // long as it keeps a count.
            .header(CACHE_CONTROL, SHARED_COUNTS),
        &RulesBody {
            namespace: &namespace,
            rules,
        },
    ))
}

/// `PUT /v1/namespaces/{namespace}` (scope `likes/admin`): each field given replaces its
/// rule; answers every rule as stored.
pub async fn put_namespace(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    edge::scoped(&request, ADMIN_SCOPE)?;
    let namespace = edge::namespace(&request)?;
    let change: RulesChange = edge::json_body(&request, MAX_BODY)?;
    let rules = app
        .catalog()?
        .change_rules(&namespace, change, now_ms())
        .await?;
    tracing::info!(
        namespace = namespace.as_str(),
        ?rules,
        "namespace rules set"
    );
    Ok(respond_json(
        Response::builder().status(200),
        &RulesBody {
            namespace: &namespace,
            rules,
        },
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetOwnerBody {
    owner_id: String,
}

#[derive(Serialize)]
struct OwnerBody<'a> {
    item_id: &'a ItemId,
    owner_id: String,
}

/// `PUT /v1/items/{item_id}/owner` (scope `likes/items`): registers or transfers the item.
pub async fn put_item_owner(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    edge::scoped(&request, ITEMS_SCOPE)?;
    let item = edge::item_id(&request)?;
    let body: SetOwnerBody = edge::json_body(&request, MAX_BODY)?;
    let owner = UserId::parse(&body.owner_id).map_err(|_| {
        likes_core::ValidationError::UserIdParameter(body.owner_id.chars().take(64).collect())
    })?;
    let stored = app.catalog()?.set_owner(&item, &owner, now_ms()).await?;
    Ok(respond_json(
        Response::builder().status(200),
        &OwnerBody {
            item_id: &item,
            owner_id: stored.owner_id,
        },
    ))
}

/// `GET /v1/items/{item_id}/owner` (scope `likes/items`); 404 when nobody owns it.
pub async fn get_item_owner(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    edge::scoped(&request, ITEMS_SCOPE)?;
    let item = edge::item_id(&request)?;
    let owner = app
        .catalog()?
        .owner(&item)
        .await?
        .ok_or(ApiError::NotFound("no owner is registered for this item"))?;
    Ok(respond_json(
        Response::builder().status(200),
        &OwnerBody {
            item_id: &item,
            owner_id: owner.owner_id,
        },
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetItemSettingsBody {
    hide_like_count: bool,
}

#[derive(Serialize)]
struct ItemSettingsBody<'a> {
    item_id: &'a ItemId,
    hide_like_count: bool,
}

/// The item's owner row, if the caller is its owner.
async fn owned_by_caller(
    app: &App,
    item: &ItemId,
    caller: &UserId,
    what: &'static str,
) -> Result<ItemOwner, ApiError> {
    match app.catalog()?.owner(item).await? {
        Some(owner) if owner.owner_id == caller.as_str() => Ok(owner),
        _ => Err(ApiError::NotOwner(what)),
    }
}

/// `GET /v1/items/{item_id}/settings`, the owner only.
pub async fn get_item_settings(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let caller = edge::user(&request)?;
    let item = edge::item_id(&request)?;
    let owner = owned_by_caller(app, &item, &caller, "read its settings").await?;
    Ok(respond_json(
        Response::builder().status(200),
        &ItemSettingsBody {
            item_id: &item,
            hide_like_count: owner.hide_like_count,
        },
    ))
}

/// `PUT /v1/items/{item_id}/settings` `{"hide_like_count": …}`, the owner only: the write is
/// conditional on the caller owning the item when it lands.
pub async fn put_item_settings(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let caller = edge::user(&request)?;
    let item = edge::item_id(&request)?;
    let body: SetItemSettingsBody = edge::json_body(&request, MAX_BODY)?;
    let owner = app
        .catalog()?
        .set_hide_like_count(&item, &caller, body.hide_like_count)
        .await?
        .ok_or(ApiError::NotOwner("change its settings"))?;
    Ok(respond_json(
        Response::builder().status(200),
        &ItemSettingsBody {
            item_id: &item,
            hide_like_count: owner.hide_like_count,
        },
    ))
}

#[derive(Serialize)]
struct StatsBody<'a> {
    item_id: &'a ItemId,
    like_count: u64,
    dislike_count: u64,
    as_of: Option<String>,
}

/// `GET /v1/items/{item_id}/stats`, the owner only: every count, whatever the public sees.
pub async fn get_item_stats(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let caller = edge::user(&request)?;
    let item = edge::item_id(&request)?;
    owned_by_caller(app, &item, &caller, "read its stats").await?;
    let read = app.counts()?.read(std::slice::from_ref(&item)).await?;
    let count = read.counts.get(&item).copied().unwrap_or_default();
    Ok(respond_json(
        // The owner's own view: private (App::handle's default).
        Response::builder().status(200),
        &StatsBody {
            item_id: &item,
            like_count: count.like_count,
            dislike_count: count.dislike_count,
            as_of: read.as_of.map(rfc3339),
        },
    ))
}
