//! The handlers of CONTRACT.md's routes.

use crate::auth::Authenticated;
use crate::problem::Problem;
use crate::request::{self, Limits};
use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use texfleet_core::db;
use texfleet_core::model::{Job, JobStatus, NewJob};
use tokio_util::io::ReaderStream;
use uuid::Uuid;

pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

pub async fn readyz(State(state): State<AppState>) -> Result<Json<serde_json::Value>, Problem> {
    db::ping(&state.pool).await?;
    Ok(Json(serde_json::json!({ "status": "ready" })))
}

pub async fn submit(
    State(state): State<AppState>,
    auth: Authenticated,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    if !is_json(&headers) {
        return Err(Problem::unsupported_media_type());
    }
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Problem::payload_too_large(state.config.max_body_bytes),
        _ => Problem::invalid_json(rejection.body_text()),
    })?;
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
    let request = request::parse(&value, &limits).map_err(Problem::validation)?;
    let new_job = NewJob {
        project_id: request.project_id,
        engine: request.engine,
        halt_on_error: request.halt_on_error,
        timeout_seconds: request.timeout_seconds,
        files: request.files,
    };
    let job = db::insert_job(&state.pool, &new_job, state.config.max_attempts).await?;
    tracing::info!(job_id = %job.id, project_id = %job.project_id, "job queued");
    let location = format!("/compile/{}", job.id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(job),
    )
        .into_response())
}

pub async fn get_job(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Job>, Problem> {
    Ok(Json(find_job(&state, &auth, &id).await?))
}

pub async fn get_pdf(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let job = find_job(&state, &auth, &id).await?;
    let key = match (job.status, job.pdf_storage_key) {
        (JobStatus::Succeeded, Some(key)) => key,
        (status, _) => {
            return Err(Problem::conflict(format!(
                "the job is {}; a PDF exists only once it has Succeeded",
                status.as_str()
            )))
        }
    };
    let object = state.storage.get(&key).await?;
    let mut response =
        Body::from_stream(ReaderStream::new(object.body.into_async_read())).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/pdf"),
    );
    if let Some(length) = object.content_length {
        headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from(length));
    }
    Ok(response)
}

pub async fn get_log(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let job = find_job(&state, &auth, &id).await?;
    let Some(key) = job.log_storage_key else {
        return Err(Problem::not_found(format!(
            "the job is {} and has no log yet",
            job.status.as_str()
        )));
    };
    let log = state.storage.get_bytes(&key).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], log).into_response())
}

pub async fn not_found() -> Problem {
    Problem::not_found("no such route")
}

pub async fn method_not_allowed() -> Problem {
    Problem::method_not_allowed()
}

/// A job of the caller's project. A malformed id, an unknown id and another project's job are
/// all the same `404`, so that ids of other projects cannot be probed.
async fn find_job(state: &AppState, auth: &Authenticated, id: &str) -> Result<Job, Problem> {
    let missing = || Problem::not_found("no such job");
    let id = Uuid::parse_str(id).map_err(|_| missing())?;
    let client = state.pool.get().await.map_err(db::DbError::from)?;
    db::get_job(&**client, auth.project_id, id)
        .await?
        .ok_or_else(missing)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}
