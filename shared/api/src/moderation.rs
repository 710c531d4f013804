//! The moderation endpoints, for tokens with the `likes/moderate` scope only:
//! `POST /v1/moderation/users/{user_id}/retractions` starts a job that turns the user's
//! reactions (or one item's) to NONE through the ordinary pipeline, optionally suspending
//! their writes; `GET /v1/moderation/retractions/{retraction_id}` reports it;
//! `DELETE /v1/moderation/users/{user_id}/suspension` lets the user write again;
//! `DELETE /v1/moderation/items/{item_id}` removes an item: every reaction to it retracted,
//! and from its answer on its writes, count and likers are 410. The retractor does the work,
//! off the Moderation stream, and puts every action on the log.

use std::time::Duration;

use lambda_http::http::header::LOCATION;
use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::clock::rfc3339;
use likes_core::moderation::{Reason, RetractionJob, REMOVAL_CACHE_MS};
use likes_core::{ItemId, JobId, JobStatus};
use likes_store::JobStart;
use serde::{Deserialize, Serialize};

use crate::edge::{self, respond_json};
use crate::{ApiError, App};

/// A retraction body is a reason (at most 200 characters, up to 4 bytes each), a flag and an
/// item id.
const MAX_RETRACTION_BODY: usize = 2048;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetractionRequestBody {
    reason: String,
    #[serde(default)]
    suspend: bool,
    /// Absent or an item id; `null` is no id (the document allows none).
    #[serde(default, deserialize_with = "likes_core::present")]
    item_id: Option<String>,
}

/// A removal's body: why.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemovalRequestBody {
    reason: String,
}

#[derive(Serialize)]
struct RetractionBody<'a> {
    retraction_id: &'a JobId,
    status: JobStatus,
    reactions_retracted: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    item_id: Option<&'a ItemId>,
    reason: &'a str,
    suspend: bool,
    requested_by: &'a str,
    requested_at: String,
}

fn body(job: &RetractionJob) -> RetractionBody<'_> {
    RetractionBody {
        retraction_id: &job.id,
        status: job.status,
        reactions_retracted: job.reactions_retracted,
        user_id: job.user_id.as_deref(),
        item_id: job.item_id.as_ref(),
        reason: &job.reason,
        suspend: job.suspend,
        requested_by: &job.requested_by,
        requested_at: rfc3339(job.requested_at_ms),
    }
}

/// `POST /v1/moderation/users/{user_id}/retractions`: 202 with the new job, or with the
/// user's running one (a second request while one runs starts nothing). The job's first
/// look is made here: a user with nothing to retract (and no suspension asked) is answered
/// done, with 0.
pub async fn retract_user(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let moderator = edge::moderator(&request)?;
    let user = edge::user_id(&request)?;
    let asked: RetractionRequestBody = edge::json_body(&request, MAX_RETRACTION_BODY)?;
    let reason = Reason::parse(&asked.reason)?;
    let item = asked.item_id.as_deref().map(ItemId::parse).transpose()?;
    let now_ms = likes_core::clock::now_ms();
    let mut job = RetractionJob::requested(
        Some(&user),
        item,
        reason,
        asked.suspend,
        &moderator,
        now_ms,
        random(),
    );
    let any = app
        .reactions()?
        .retractable_keys(&user, job.item_id.as_ref(), None, 1, job.cut_ms())
        .await?;
    if any.is_empty() && !job.suspend {
        job.status = JobStatus::Done;
    }
    let start = app.moderation()?.start_retraction(&job).await?;
    tracing::info!(?start, "retraction requested");
    Ok(accepted(start.job()))
}

/// `DELETE /v1/moderation/items/{item_id}` with `{"reason"}`: 202 with the removal's job
/// (the one the item's first removal started, if it was removed already). A new removal is
/// answered only once every container's read of the item's mark is fresh enough to see it,
/// so no write that starts after the answer is accepted.
pub async fn remove_item(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let moderator = edge::moderator(&request)?;
    let item = edge::item_id(&request)?;
    let asked: RemovalRequestBody = edge::json_body(&request, MAX_RETRACTION_BODY)?;
    let reason = Reason::parse(&asked.reason)?;
    let now_ms = likes_core::clock::now_ms();
    let job = RetractionJob::requested(
        None,
        Some(item),
        reason,
        false,
        &moderator,
        now_ms,
        random(),
    );
    let start = app.moderation()?.start_retraction(&job).await?;
    tracing::info!(?start, "item removal requested");
    if let JobStart::Started(_) = start {
        tokio::time::sleep(Duration::from_millis(REMOVAL_CACHE_MS as u64)).await;
    }
    Ok(accepted(start.job()))
}

/// What tells two jobs asked for in one millisecond apart.
fn random() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

/// 202 with a job and where to follow it.
fn accepted(job: &RetractionJob) -> Response<Body> {
    let builder = Response::builder()
        .status(202)
        .header(LOCATION, format!("/v1/moderation/retractions/{}", job.id));
    respond_json(builder, &body(job))
}

/// `GET /v1/moderation/retractions/{retraction_id}`: the job, strongly consistent; an id
/// never issued (or forgotten 30 days after it finished) is 404, a malformed one 400.
pub async fn get_retraction(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    edge::moderator(&request)?;
    let params = request.path_parameters();
    let id = JobId::parse(params.first("retraction_id").unwrap_or_default())?;
    let job = app
        .moderation()?
        .retraction(&id)
        .await?
        .ok_or(ApiError::NotFound("no retraction has this id"))?;
    Ok(respond_json(Response::builder().status(200), &body(&job)))
}

/// `DELETE /v1/moderation/users/{user_id}/suspension`: 204; the user's next write is
/// admitted. Idempotent: lifting no suspension is no change (the action is still logged).
pub async fn lift_suspension(app: &App, request: Request) -> Result<Response<Body>, ApiError> {
    let moderator = edge::moderator(&request)?;
    let user = edge::user_id(&request)?;
    let now_ms = likes_core::clock::now_ms();
    let id = JobId::new(now_ms, random());
    app.moderation()?
        .lift_suspension(&user, &id, &moderator, now_ms)
        .await?;
    tracing::info!(user_id = %user, action_id = %id, "suspension lifted");
    Ok(Response::builder()
        .status(204)
        .body(Body::Empty)
        .expect("static response is valid"))
}
