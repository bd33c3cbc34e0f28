//! The handlers of the API's routes (docs/API.md).

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, FieldError, Problem, ProblemBody};
use crate::request::{self, CompileBody, Limits};
use crate::serve::{read_body, BodyError};
use crate::AppState;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::time::Duration;
use texfleet_core::cache_key::input_hash;
use texfleet_core::db::{self, Cancellation, Submitted};
use texfleet_core::model::{Job, JobStatus};
use uuid::Uuid;

/// The process is alive.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, description = "Alive")))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Postgres is reachable.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, description = "Ready"),
    (status = 503, description = "Postgres is unavailable", content_type = "application/problem+json", body = ProblemBody),
))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<serde_json::Value>, Problem> {
    db::ping(&state.pool).await?;
    Ok(Json(serde_json::json!({ "status": "ready" })))
}

/// Queue a compile job.
#[utoipa::path(post, path = "/compile", tag = "compile", security(("bearer" = [])),
    request_body(content = CompileBody, content_type = "application/json"),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "1-255 visible ASCII characters"),
        ("Prefer" = Option<String>, Header, description = "wait=<seconds> (at most 60)"),
    ),
    responses(
        (status = 202, description = "Queued", body = Job),
        (status = 200, description = "Terminal within the Prefer wait, an idempotent replay, or an identical earlier result reused (reused_from)", body = Job),
        (status = 400, description = "The body is not JSON", content_type = "application/problem+json", body = ProblemBody),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The Idempotency-Key was used with another body", content_type = "application/problem+json", body = ProblemBody),
        (status = 413, description = "The body is over the size limit", content_type = "application/problem+json", body = ProblemBody),
        (status = 415, description = "The body is not application/json", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "A field is missing or invalid", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn submit(
    State(state): State<AppState>,
    auth: Authenticated,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    if !is_json(&headers) {
        return Err(Problem::unsupported_media_type());
    }
    let config = &state.config;
    let timeout = Duration::from_secs(config.body_timeout_seconds);
    let body = read_body(body, config.max_body_bytes, timeout)
        .await
        .map_err(|error| match error {
            BodyError::TooLarge => Problem::payload_too_large(config.max_body_bytes),
            BodyError::TimedOut => Problem::request_timeout(config.body_timeout_seconds),
            BodyError::Broken => Problem::invalid_json("the body could not be read"),
        })?;
    if request::exceeds_member_budget(&body, request::MAX_MEMBERS) {
        return Err(Problem::validation(vec![FieldError::new(
            "",
            format!(
                "the body has more than {} fields in all; a compile needs far fewer",
                request::MAX_MEMBERS
            ),
        )]));
    }
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| Problem::invalid_json(format!("the body is not valid JSON: {e}")))?;
    if let Some(project_id) = request::project_id(&value) {
        if project_id != auth.project_id {
            return Err(Problem::forbidden(
                "the token does not belong to this project",
            ));
        }
    }
    let limits = Limits {
        default_timeout_seconds: state.config.default_timeout_seconds,
        max_timeout_seconds: state.config.max_timeout_seconds,
    };
    let new_job = request::parse(&value, &limits).map_err(Problem::validation)?;
    let key = request::idempotency_key(&headers).map_err(|e| Problem::validation(vec![e]))?;
    // serde_json's maps are sorted, so equal bodies hash equally whatever their key order.
    let request_hash = Sha256::digest(serde_json::to_vec(&value).unwrap_or_default()).to_vec();
    let idempotency = key.as_deref().map(|key| db::Idempotency {
        key,
        request_hash: &request_hash,
    });
    let mut client = state.pool.get().await.map_err(db::DbError::from)?;
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    let admission = db::Admission {
        max_attempts: config.max_attempts,
        max_queued: config.max_queued_per_project,
        result_cache: config.result_cache,
        retention_days: config.retention_days,
        scheduler_live_seconds: config.lease_seconds,
    };
    let inputs = input_hash(&new_job, config);
    let submitted =
        db::insert_job(&*transaction, &new_job, &inputs, &admission, idempotency).await?;
    transaction.commit().await.map_err(db::DbError::from)?;
    drop(client);
    let looked_up = new_job.use_cache && config.result_cache;
    let (job, status) = match submitted {
        Submitted::New(job) => {
            tracing::info!(job_id = %job.id, project_id = %job.project_id, "job queued");
            crate::metrics::JOBS_SUBMITTED
                .with_label_values(&[job.engine.as_str()])
                .inc();
            if looked_up {
                crate::metrics::RESULT_CACHE
                    .with_label_values(&["miss"])
                    .inc();
            }
            (job, StatusCode::ACCEPTED)
        }
        // Complete already: answered as a finished job is.
        Submitted::Reused(job) => {
            tracing::info!(job_id = %job.id, reused_from = ?job.reused_from, "result reused");
            crate::metrics::RESULT_CACHE
                .with_label_values(&["hit"])
                .inc();
            (job, StatusCode::OK)
        }
        Submitted::Existing {
            job,
            same_request: true,
        } => (job, StatusCode::OK),
        Submitted::Existing {
            job,
            same_request: false,
        } => return Err(Problem::idempotency_conflict(job.id)),
        Submitted::QueueFull => return Err(Problem::queue_full(config.max_queued_per_project)),
    };
    let location = format!("/compile/{}", job.id);
    let mut response = respond_after_wait(&state, &auth, job, status, &headers).await?;
    response.headers_mut().insert(
        header::LOCATION,
        HeaderValue::try_from(location).expect("a path is a header value"),
    );
    Ok(response)
}

/// A job of the token's project.
#[utoipa::path(get, path = "/compile/{id}", tag = "compile", security(("bearer" = [])),
    params(("id" = String, Path, description = "Job id"),
           ("Prefer" = Option<String>, Header, description = "wait=<seconds> (at most 60)")),
    responses(
        (status = 200, description = "The job", body = Job),
        (status = 404, description = "No such job in this project", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn get_job(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let job = find_job(&state, &auth, &id).await?;
    respond_after_wait(&state, &auth, job, StatusCode::OK, &headers).await
}

/// Cancel a queued or running job.
#[utoipa::path(delete, path = "/compile/{id}", tag = "compile", security(("bearer" = [])),
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "Cancelled", body = Job),
        (status = 404, description = "No such job in this project", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job is already terminal", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn cancel(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Job>, Problem> {
    let id = Uuid::parse_str(&id).map_err(|_| Problem::not_found("no such job"))?;
    let mut client = state.pool.get().await.map_err(db::DbError::from)?;
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    let cancelled = db::cancel_job(&*transaction, auth.project_id, id).await?;
    transaction.commit().await.map_err(db::DbError::from)?;
    match cancelled {
        Cancellation::NotFound => Err(Problem::not_found("no such job")),
        Cancellation::Cancelled(job) => {
            tracing::info!(job_id = %job.id, project_id = %job.project_id, "job cancelled");
            Ok(Json(job))
        }
        Cancellation::AlreadyFinished(job) => Err(Problem::already_finished(job.status.as_str())),
    }
}

/// Answers with the job, first holding the response for `Prefer: wait=<s>` (RFC 7240) until the
/// job is terminal or the wait ends. A job that became terminal while we waited is a `200`.
async fn respond_after_wait(
    state: &AppState,
    auth: &Authenticated,
    job: Job,
    status: StatusCode,
    headers: &HeaderMap,
) -> Result<Response, Problem> {
    let Some(seconds) = request::prefer_wait(headers) else {
        return Ok((status, Json(job)).into_response());
    };
    let job = state
        .events
        .wait_until_terminal(job, Duration::from_secs(seconds), |id| async move {
            read_job(state, auth, id)
                .await?
                .ok_or_else(|| Problem::not_found("no such job"))
        })
        .await?;
    let status = if job.status.is_terminal() {
        StatusCode::OK
    } else {
        status
    };
    let applied =
        HeaderValue::try_from(format!("wait={seconds}")).expect("a number is a header value");
    Ok((
        status,
        [(HeaderName::from_static("preference-applied"), applied)],
        Json(job),
    )
        .into_response())
}

/// A project's jobs, newest first.
#[utoipa::path(get, path = "/projects/{project_id}/compiles", tag = "compile", security(("bearer" = [])),
    params(
        ("project_id" = String, Path, description = "Project id"),
        ("status" = Option<JobStatus>, Query, description = "Only jobs in this state"),
        ("limit" = Option<u32>, Query, description = "1 to 100, default 20", minimum = 1, maximum = 100),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 404, description = "The project id is malformed", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "A query parameter is invalid", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn list(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(project_id): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<JobPage>, Problem> {
    let project_id =
        Uuid::parse_str(&project_id).map_err(|_| Problem::not_found("no such project"))?;
    if project_id != auth.project_id {
        return Err(Problem::forbidden(
            "the token does not belong to this project",
        ));
    }
    let Query(query) =
        query.map_err(|e| Problem::validation(vec![FieldError::new("", e.body_text())]))?;
    let query = request::parse_list_query(&query).map_err(Problem::validation)?;
    let mut client = state.pool.get().await.map_err(db::DbError::from)?;
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    let page = db::list_jobs(
        &*transaction,
        project_id,
        query.status,
        query.after,
        query.limit,
    )
    .await?;
    let next_cursor = page
        .more
        .then(|| page.jobs.last())
        .flatten()
        .map(|job| request::encode_cursor((job.created_at, job.id)));
    Ok(Json(JobPage {
        items: page.jobs,
        next_cursor,
    }))
}

/// A page of a project's jobs.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct JobPage {
    pub items: Vec<Job>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

pub async fn not_found() -> Problem {
    Problem::not_found("no such route")
}

pub async fn method_not_allowed() -> Problem {
    Problem::method_not_allowed()
}

/// A job of the caller's project. A malformed id, an unknown id and another project's job are
/// all the same `404`, so that ids of other projects cannot be probed.
pub(crate) async fn find_job(
    state: &AppState,
    auth: &Authenticated,
    id: &str,
) -> Result<Job, Problem> {
    let missing = || Problem::not_found("no such job");
    let id = Uuid::parse_str(id).map_err(|_| missing())?;
    read_job(state, auth, id).await?.ok_or_else(missing)
}

/// Reads a job in a transaction bound to the caller's project (row-level security).
async fn read_job(
    state: &AppState,
    auth: &Authenticated,
    id: Uuid,
) -> Result<Option<Job>, Problem> {
    let mut client = state.pool.get().await.map_err(db::DbError::from)?;
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    Ok(db::get_job(&*transaction, auth.project_id, id).await?)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}
