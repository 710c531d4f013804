//! Account erasure: `DELETE /v1/users/me/reactions` starts a job that removes every reaction
//! row of the caller (the eraser does the work, off the Erasures stream), and
//! `GET /v1/users/me/erasure/{erasure_id}` reports its progress. Both speak only of the
//! caller's own jobs: the user is the token's `sub`, and a job is keyed by its user.

use lambda_http::http::header::LOCATION;
use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::{ErasureJob, JobId, JobStatus};
use serde::Serialize;

use crate::edge::{self, respond_json};
use crate::{ApiError, App};

#[derive(Serialize)]
struct ErasureBody<'a> {
    erasure_id: &'a JobId,
    status: JobStatus,
    reactions_erased: u64,
}

fn body(job: &ErasureJob) -> ErasureBody<'_> {
    ErasureBody {
        erasure_id: &job.id,
        status: job.status,
        reactions_erased: job.reactions_erased,
    }
}

/// `DELETE /v1/users/me/reactions`: 202 with the new job, or with the caller's running one
/// (idempotent while it runs). Not held to the write limit: it is one conditional
/// transaction on the caller's own guard row whatever it meets, and a repeated request while
/// a job runs starts nothing.
pub async fn erase_reactions(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let now_ms = likes_core::clock::now_ms();
    let id = JobId::new(now_ms, uuid::Uuid::new_v4().as_u64_pair().0);
    let start = app.erasures()?.start(&user, &id, now_ms).await?;
    tracing::info!(?start, "erasure requested");
    let job = start.job();
    let builder = Response::builder()
        .status(202)
        .header(LOCATION, format!("/v1/users/me/erasure/{}", job.id));
    Ok(respond_json(builder, &body(job)))
}

/// `GET /v1/users/me/erasure/{erasure_id}`: the caller's job, strongly consistent; another
/// user's id reads as no job (404), a malformed one is 400.
pub async fn get_erasure(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let user = edge::user(&request)?;
    let params = request.path_parameters();
    let id = JobId::parse(params.first("erasure_id").unwrap_or_default())?;
    let job = app
        .erasures()?
        .get(&user, &id)
        .await?
        .ok_or(ApiError::NotFound("no erasure of the caller has this id"))?;
    Ok(respond_json(Response::builder().status(200), &body(&job)))
}
