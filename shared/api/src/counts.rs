//! The count endpoints: one item's counts, many items' counts, and a browse page (my state
//! and the counts of up to 100 items). Counts are eventually exact; `as_of` says how fresh.
//! The first two are public (no authorizer on their routes): they never look at the caller.
//! Each shows a count only as its namespace's rules and its owner let the public see it (a
//! hidden one is `null`, flagged), whoever asks: the owner reads theirs through `…/stats`.

use std::collections::BTreeMap;

use lambda_http::http::header::CACHE_CONTROL;
use lambda_http::{Body, Request, Response};
use likes_core::clock::{now_ms, rfc3339};
use likes_core::namespace::ShownCounts;
use likes_core::{ItemId, ReactionState, ValidationError};
use serde::{Deserialize, Serialize};

use crate::edge::{self, respond_json};
use crate::{ApiError, App};

/// Ids per batch request: a browse page is 40, the API takes up to 100.
const MAX_BATCH: usize = 100;
/// 100 ids of 128 characters, quoted and comma separated, fit in 16 KB; anything larger is not
/// a batch request.
const MAX_BATCH_BODY: usize = 16 * 1024;
/// Counts are the same for every caller and eventually exact anyway: a shared cache may keep
/// them a few seconds, and serve a stale copy for a while when the origin fails.
pub(crate) const SHARED_COUNTS: &str =
    "public, max-age=1, s-maxage=5, stale-while-revalidate=5, stale-if-error=300";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemIdsBody {
    item_ids: Vec<String>,
}

#[derive(Serialize)]
struct CountBody<'a> {
    item_id: &'a ItemId,
    #[serde(flatten)]
    counts: ShownCounts,
    as_of: Option<String>,
    freshness: &'static str,
}

#[derive(Serialize)]
struct CountsBody {
    counts: BTreeMap<ItemId, ShownCounts>,
    as_of: Option<String>,
}

#[derive(Serialize)]
struct BrowseItem {
    state: ReactionState,
    #[serde(flatten)]
    counts: ShownCounts,
}

/// The counts read for `items`, as the public may see them, and how fresh they are.
async fn shown_counts(
    app: &App,
    items: &[ItemId],
) -> Result<(BTreeMap<ItemId, ShownCounts>, Option<i64>), ApiError> {
    let (read, rules) = tokio::join!(
        app.counts()?.read(items),
        app.catalog_cache()?.item_rules(items, now_ms())
    );
    let (read, mut rules) = (read?, rules?);
    let shown = items
        .iter()
        .map(|item| {
            let count = read.counts.get(item).copied().unwrap_or_default();
            let shown = rules.remove(item).unwrap_or_default().shown(count);
            (item.clone(), shown)
        })
        .collect();
    Ok((shown, read.as_of))
}

#[derive(Serialize)]
struct BrowseBody {
    items: BTreeMap<ItemId, BrowseItem>,
    as_of: Option<String>,
}

/// `GET /v1/items/{item_id}/like-count`, public.
pub async fn get_like_count(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let item = edge::item_id(&request)?;
    app.refuse_removed(&item).await?;
    let (mut shown, as_of) = shown_counts(app, std::slice::from_ref(&item)).await?;
    Ok(respond_json(
        Response::builder()
            .status(200)
            .header(CACHE_CONTROL, SHARED_COUNTS),
        &CountBody {
            counts: shown.remove(&item).expect("the item's counts were read"),
            item_id: &item,
            as_of: as_of.map(rfc3339),
            freshness: "eventual",
        },
    ))
}

/// `POST /v1/items/like-counts:batchGet` with `{"item_ids": [...]}` (at most 100), public.
pub async fn batch_get_like_counts(
    app: &App,
    request: Request,
) -> Result<Response<Body>, ApiError> {
    let items = item_ids(&request)?;
    let (counts, as_of) = shown_counts(app, &items).await?;
    Ok(respond_json(
        Response::builder()
            .status(200)
            .header(CACHE_CONTROL, SHARED_COUNTS),
        &CountsBody {
            counts,
            as_of: as_of.map(rfc3339),
        },
    ))
}

/// `POST /v1/items:batchGet` with `{"item_ids": [...]}`: my state and the counts, per item.
pub async fn batch_get_items(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let items = item_ids(&request)?;
    let (states, read) = tokio::join!(
        app.reactions()?.states(&user, &items),
        shown_counts(app, &items)
    );
    let (mut states, (counts, as_of)) = (states?, read?);
    let body = BrowseBody {
        items: counts
            .into_iter()
            .map(|(item, counts)| {
                let state = states.remove(&item).unwrap_or(ReactionState::None);
                (item, BrowseItem { state, counts })
            })
            .collect(),
        as_of: as_of.map(rfc3339),
    };
    Ok(respond_json(
        Response::builder()
            .status(200)
            // A browse page carries the caller's own states.
            .header(CACHE_CONTROL, edge::PRIVATE),
        &body,
    ))
}

/// The body's `item_ids`: 1 to 100 valid ids, duplicates dropped (first one kept).
fn item_ids(request: &Request) -> Result<Vec<ItemId>, ApiError> {
    let body: ItemIdsBody = edge::json_body(request, MAX_BATCH_BODY)?;
    if body.item_ids.is_empty() || body.item_ids.len() > MAX_BATCH {
        return Err(ValidationError::BatchSize {
            max: MAX_BATCH,
            got: body.item_ids.len(),
        }
        .into());
    }
    let mut seen = std::collections::HashSet::new();
    let mut items = Vec::with_capacity(body.item_ids.len());
    for raw in &body.item_ids {
        let item = ItemId::parse(raw)?;
        if seen.insert(item.clone()) {
            items.push(item);
        }
    }
    Ok(items)
}
