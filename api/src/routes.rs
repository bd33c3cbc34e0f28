//! The handlers of the API's routes (docs/API.md).

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, FieldError, Problem, ProblemBody};
use crate::request;
use crate::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Cancellation};
use texfleet_core::model::{Job, JobStatus};
use uuid::Uuid;

/// The process is alive.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, description = "Alive")))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// How long a successful ping answers `/readyz`: probes arriving together cost one ping, one
/// at a time, not a connection of the pool each.
const READY_FOR: Duration = Duration::from_secs(1);

/// Postgres is reachable.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, description = "Ready"),
    (status = 503, description = "Postgres is unavailable", content_type = "application/problem+json", body = ProblemBody),
))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<serde_json::Value>, Problem> {
    let mut last_ready = state.last_ready.lock().await;
    if !last_ready.is_some_and(|at| at.elapsed() < READY_FOR) {
        db::ping(&state.pool).await?;
        *last_ready = Some(Instant::now());
    }
    Ok(Json(serde_json::json!({ "status": "ready" })))
}

/// A job of the token's project.
#[utoipa::path(get, path = "/compile/{id}", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("Prefer" = Option<String>, Header, description = "wait=<seconds> (at most 60): answer once the job is terminal (or has started, with until=started), or when the wait ends"),
           ("until" = inline(Option<WaitUntil>), Query, description = "What Prefer: wait waits for: terminal (default) or started (the job has left Queued)")),
    responses(
        (status = 200, description = "The job", body = Job, headers(
            ("Preference-Applied" = Option<String>, description = "wait=<seconds>, when Prefer: wait was honoured"),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 404, description = "No such job in this project", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "until is neither terminal nor started", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn get_job(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let Query(query) =
        query.map_err(|e| Problem::validation(vec![FieldError::new("", e.body_text())]))?;
    let until = match query.get("until").map(String::as_str) {
        None | Some("terminal") => WaitUntil::Terminal,
        Some("started") => WaitUntil::Started,
        Some(_) => {
            return Err(Problem::validation(vec![FieldError::new(
                "until",
                "must be terminal or started",
            )]))
        }
    };
    let job = find_job(&state, &auth, &id).await?;
    respond_after_wait(&state, &auth, job, StatusCode::OK, &headers, until).await
}

/// What a `Prefer: wait` on a job waits for.
#[derive(Clone, Copy, PartialEq, Eq, utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum WaitUntil {
    /// The job is `Succeeded`, `Failed`, `TimedOut` or `Cancelled`.
    Terminal,
    /// The job has left `Queued` (a scheduler started it, or it ended).
    Started,
}

impl WaitUntil {
    fn reached(self, job: &Job) -> bool {
        match self {
            WaitUntil::Terminal => job.status.is_terminal(),
            WaitUntil::Started => job.status != JobStatus::Queued,
        }
    }
}

/// Cancel a queued or running job.
#[utoipa::path(delete, path = "/compile/{id}", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id")),
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
    let mut client = state.database.client(auth.project_id).await?;
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
/// job is terminal (or started, as `until` asks) or the wait ends. A job that became terminal
/// while we waited is a `200`.
pub(crate) async fn respond_after_wait(
    state: &AppState,
    auth: &Authenticated,
    job: Job,
    status: StatusCode,
    headers: &HeaderMap,
    until: WaitUntil,
) -> Result<Response, Problem> {
    let Some(seconds) = request::prefer_wait(headers) else {
        return Ok((status, Json(job)).into_response());
    };
    let id = job.id;
    let (job, applied) = state
        .events
        .wait_until(
            (job.project_id, id),
            job,
            |job| until.reached(job),
            Duration::from_secs(seconds),
            || async move {
                read_job(state, auth, id)
                    .await?
                    .ok_or_else(|| Problem::not_found("no such job"))
            },
        )
        .await?;
    let status = if job.status.is_terminal() {
        StatusCode::OK
    } else {
        status
    };
    let mut response = (status, Json(job)).into_response();
    // Only a wait that was honoured says so: a client that reads no such header paces itself.
    if applied {
        let applied =
            HeaderValue::try_from(format!("wait={seconds}")).expect("a number is a header value");
        response
            .headers_mut()
            .insert(HeaderName::from_static("preference-applied"), applied);
    }
    Ok(response)
}

/// A project's jobs, newest first.
#[utoipa::path(get, path = "/projects/{project_id}/compiles", tag = "compile", security(("bearer" = [])),
    params(
        ("project_id" = Uuid, Path, description = "Project id"),
        ("status" = Option<JobStatus>, Query, description = "Only jobs in this state"),
        ("limit" = Option<u32>, Query, description = "1 to 100, default 20; a page holds fewer when its jobs' diagnostics pass 1 MiB (next_cursor goes on)", minimum = 1, maximum = 100),
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
    let project_id = auth.project_in_path(&project_id)?;
    let Query(query) =
        query.map_err(|e| Problem::validation(vec![FieldError::new("", e.body_text())]))?;
    let query = request::parse_list_query(&query).map_err(Problem::validation)?;
    let mut client = state.database.client(auth.project_id).await?;
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
#[schema(example = json!({
    "items": [{ "id": "3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e", "project_id": "6f1c2a4e-0000-4000-8000-000000000001",
                "status": "Queued", "engine": "pdflatex", "created_at": "2026-11-23T17:41:33Z",
                "started_at": null, "finished_at": null, "duration_ms": null, "pdf_storage_key": null,
                "log_storage_key": null, "error": null, "diagnostics": [], "reused_from": null,
                "links": { "self": "/compile/3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e", "pdf": null, "log": null, "synctex": null, "thumbnail": null } }],
    "next_cursor": "MjAyNi0xMS0yM1QxNzo0MTozM1p8M2YyYjhjMWU"
}))]
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
    let mut client = state.database.client(auth.project_id).await?;
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    Ok(db::get_job(&*transaction, auth.project_id, id).await?)
}
