//! `GET /v1/leaderboard?namespace=post&window=hour|day|week|all&limit=10`, public: the
//! most-liked items of one namespace, in a window its rules keep (without `namespace`, every
//! namespace's, in `day` or `all`), read from the scores the leaderboard consumer applied
//! from the event log, each event once. A namespace whose like counts only owners see has no
//! public board; an item whose like count the public may not see (its namespace's rules, or
//! its owner) is left off: a rank would tell what the count hides.

use lambda_http::http::header::CACHE_CONTROL;
use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::clock::{now_ms, rfc3339};
use likes_core::leaderboard::{Board, Window, TOP_SIZE};
use likes_core::namespace::{LikeCountRule, Namespace};
use likes_core::{ItemId, ValidationError};
use serde::Serialize;

use crate::edge::respond_json;
use crate::{ApiError, App};

/// The same for every caller and refreshed as the log is applied (seconds): a shared cache
/// may keep it as long as the scores take to move.
const SHARED_BOARD: &str = "public, max-age=5, s-maxage=5, stale-while-revalidate=5";

#[derive(Serialize)]
struct BoardItem {
    item_id: String,
    like_count: i64,
}

#[derive(Serialize)]
struct BoardBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<Namespace>,
    window: &'static str,
    items: Vec<BoardItem>,
    as_of: Option<String>,
}

pub async fn get_leaderboard(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let params = request.query_string_parameters();
    let window = Window::parse(params.first("window").unwrap_or("all"), now_ms())?;
    let limit = likes_core::page::limit(params.first("limit"), 10)?;
    let board = match params.first("namespace") {
        None if matches!(window, Window::All | Window::Day(_)) => Board::global(window),
        None => return Err(ValidationError::GlobalWindow(window.name()).into()),
        Some(raw) => namespace_board(app, Namespace::parse(raw)?, window).await?,
    };
    // The whole materialized top, so the board still fills `limit` when some of it is hidden.
    let namespace = board.namespace.clone();
    let window = board.window.clone();
    let board = app.leaderboard()?.board(&board, TOP_SIZE).await?;
    let items: Vec<ItemId> = board
        .entries
        .iter()
        .filter_map(|e| ItemId::parse(&e.item_id).ok())
        .collect();
    let rules = app.catalog_cache()?.item_rules(&items, now_ms()).await?;
    let shown = |item_id: &str| {
        ItemId::parse(item_id)
            .ok()
            .and_then(|item| rules.get(&item))
            .is_none_or(|rules| rules.shows_likes())
    };
    Ok(respond_json(
        Response::builder()
            .status(200)
            .header(CACHE_CONTROL, SHARED_BOARD),
        &BoardBody {
            namespace,
            window: window.name(),
            items: board
                .entries
                .into_iter()
                .filter(|e| shown(&e.item_id))
                .take(limit)
                .map(|e| BoardItem {
                    item_id: e.item_id,
                    like_count: e.like_count,
                })
                .collect(),
            as_of: board.as_of_ms.map(rfc3339),
        },
    ))
}

/// `namespace`'s board in `window`, where its rules keep that window and show its like
/// counts to the public.
async fn namespace_board(
    app: &App,
    namespace: Namespace,
    window: Window,
) -> Result<Board, ApiError> {
    let rules = app.catalog_cache()?.rules(&namespace, now_ms()).await?;
    if rules.like_count == LikeCountRule::OwnerOnly {
        return Err(ApiError::NotFound(
            "this namespace's like counts are shown to owners only: it has no public board",
        ));
    }
    if !rules.leaderboard_windows.contains(&window.kind()) {
        return Err(ValidationError::WindowNotKept {
            namespace: namespace.as_str().to_owned(),
            window: window.name(),
        }
        .into());
    }
    Ok(Board {
        namespace: Some(namespace),
        window,
    })
}
