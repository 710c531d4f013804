//! `GET /v1/leaderboard?window=day|all&limit=10`, public: the most-liked items, read from the
//! scores the leaderboard consumer applied from the event log, each event once.

use lambda_http::http::header::CACHE_CONTROL;
use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::clock::{now_ms, rfc3339};
use likes_core::leaderboard::Window;
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
    window: &'static str,
    items: Vec<BoardItem>,
    as_of: Option<String>,
}

pub async fn get_leaderboard(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let params = request.query_string_parameters();
    let window = Window::parse(params.first("window").unwrap_or("all"), now_ms())?;
    let limit = likes_core::page::limit(params.first("limit"), 10)?;
    let board = app.leaderboard()?.board(&window, limit).await?;
    Ok(respond_json(
        Response::builder()
            .status(200)
            .header(CACHE_CONTROL, SHARED_BOARD),
        &BoardBody {
            window: window.name(),
            items: board
                .entries
                .into_iter()
                .map(|e| BoardItem {
                    item_id: e.item_id,
                    like_count: e.like_count,
                })
                .collect(),
            as_of: board.as_of_ms.map(rfc3339),
        },
    ))
}
