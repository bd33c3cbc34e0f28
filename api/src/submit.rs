//! `POST /compile`: a submission, as JSON or as `multipart/form-data`, becomes one insert
//! (the job and its files, or a reuse of an identical earlier result) and is answered at once.

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, FieldError, Problem, ProblemBody};
use crate::receiving::{off_the_workers, read_body};
use crate::request::{self, CompileBody, Limits, MultipartBody};
use crate::routes::{respond_after_wait, WaitUntil};
use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use std::sync::Arc;
use std::time::Duration;
use texfleet_core::cache_key::{input_hash, request_hash};
use texfleet_core::db::{self, Submitted};
use texfleet_core::model::{Job, NewJob};

/// Queue a compile job.
#[utoipa::path(post, path = "/compile", tag = "compile", security(("bearer" = [])),
    request_body(content(
        (CompileBody = "application/json"),
        (MultipartBody = "multipart/form-data"),
    )),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "1-255 visible ASCII characters: a retry with the same key and request is the same job"),
        ("Prefer" = Option<String>, Header, description = "wait=<seconds> (at most 60): answer once the job is terminal, or when the wait ends"),
    ),
    responses(
        (status = 202, description = "Queued", body = Job, headers(
            ("Location" = String, description = "The job's path, /compile/{id}"),
            ("Preference-Applied" = Option<String>, description = "wait=<seconds>, when Prefer: wait was honoured"),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 200, description = "Terminal within the Prefer wait, an idempotent replay, or an identical earlier result reused (reused_from)", body = Job, headers(
            ("Location" = String, description = "The job's path, /compile/{id}"),
            ("Preference-Applied" = Option<String>, description = "wait=<seconds>, when Prefer: wait was honoured"),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 400, description = "The body is not JSON, or not a well-formed multipart body", content_type = "application/problem+json", body = ProblemBody),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The Idempotency-Key was used with another request", content_type = "application/problem+json", body = ProblemBody),
        (status = 413, description = "The body is over the size limit", content_type = "application/problem+json", body = ProblemBody),
        (status = 415, description = "The body is neither application/json nor multipart/form-data", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "A field is missing or invalid", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn submit(
    State(state): State<AppState>,
    auth: Authenticated,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let multipart = request::multipart_boundary(&headers);
    if multipart.is_none() && !is_json(&headers) {
        return Err(Problem::unsupported_media_type());
    }
    let config = &state.config;
    let timeout = Duration::from_secs(config.body_timeout_seconds);
    // The body, what is made of it and its place in the receiving budget go before the wait.
    let (job, status) = {
        let (body, place) = read_body(
            body,
            config.max_body_bytes,
            timeout,
            &state.receiving,
            auth.project_id,
        )
        .await
        .map_err(|e| {
            Problem::unreadable_body(e, config.max_body_bytes, config.body_timeout_seconds)
        })?;
        let place = Arc::new(place);
        let limits = Limits {
            default_timeout_seconds: config.default_timeout_seconds,
            max_timeout_seconds: config.max_timeout_seconds,
            texlive_years: config.texlive_years(),
            default_texlive: config.default_texlive.clone(),
        };
        // Each step consumes what the one before made, so that a body is in memory at most
        // `COPIES` times at once; parsing and hashing megabytes runs off the async workers,
        // which serve every other client meanwhile.
        let new_job = match multipart {
            None => {
                let value = off_the_workers(&place, move || json_value(&body)).await?;
                auth.may_name(request::project_id(&value))?;
                off_the_workers(&place, move || request::parse(value, &limits)).await
            }
            Some(boundary) => {
                // The whole body is in memory, so reading its parts never waits.
                let (metadata, uploads) = off_the_workers(&place, move || {
                    futures::executor::block_on(request::read_multipart(body, boundary))
                })
                .await?;
                auth.may_name(request::project_id(&metadata))?;
                off_the_workers(&place, move || {
                    request::parse_multipart(metadata, uploads, &limits)
                })
                .await
            }
        }
        .map_err(Problem::validation)?;
        let key = request::idempotency_key(&headers).map_err(|e| Problem::validation(vec![e]))?;
        let config = state.config.clone();
        let hashed = off_the_workers(&place, move || Hashed {
            request: request_hash(&new_job),
            inputs: input_hash(&new_job, &config),
            new_job,
        })
        .await;
        insert(&state, &auth, &hashed, key.as_deref()).await?
    };
    let location = format!("/compile/{}", job.id);
    let mut response =
        respond_after_wait(&state, &auth, job, status, &headers, WaitUntil::Terminal).await?;
    response.headers_mut().insert(
        header::LOCATION,
        HeaderValue::try_from(location).expect("a path is a header value"),
    );
    Ok(response)
}

/// The largest submission after which the database connection that inserted it is kept.
const KEPT_CONNECTION_BYTES: i64 = 1024 * 1024;

/// A job to insert with its hashes, made before a database connection is taken.
struct Hashed {
    new_job: NewJob,
    /// What an idempotent retry must repeat.
    request: Vec<u8>,
    /// What an identical earlier result must have compiled.
    inputs: Vec<u8>,
}

/// Inserts the job (or finds the one it repeats or reuses) and says how to answer.
async fn insert(
    state: &AppState,
    auth: &Authenticated,
    hashed: &Hashed,
    key: Option<&str>,
) -> Result<(Job, StatusCode), Problem> {
    let config = &state.config;
    let new_job = &hashed.new_job;
    let idempotency = key.map(|key| db::Idempotency {
        key,
        request_hash: &hashed.request,
    });
    let mut client = state.database.client(auth.project_id).await?;
    if new_job.source_bytes() > KEPT_CONNECTION_BYTES {
        client.close_when_dropped();
    }
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    let admission = db::Admission {
        max_attempts: config.max_attempts,
        max_queued: config.max_queued_per_project,
        max_queued_bytes: config.max_queued_bytes_per_project,
        result_cache: config.result_cache,
        retention_days: config.retention_days,
        scheduler_live_seconds: config.lease_seconds,
    };
    let submitted = db::insert_job(
        &transaction,
        new_job,
        &hashed.inputs,
        &admission,
        idempotency,
    )
    .await?;
    transaction.commit().await.map_err(db::DbError::from)?;
    let looked_up = new_job.use_cache && config.result_cache;
    match submitted {
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
            Ok((job, StatusCode::ACCEPTED))
        }
        // Complete already: answered as a finished job is.
        Submitted::Reused(job) => {
            tracing::info!(job_id = %job.id, reused_from = ?job.reused_from, "result reused");
            crate::metrics::RESULT_CACHE
                .with_label_values(&["hit"])
                .inc();
            Ok((job, StatusCode::OK))
        }
        Submitted::Existing {
            job,
            same_request: true,
        } => Ok((job, StatusCode::OK)),
        Submitted::Existing {
            job,
            same_request: false,
        } => Err(Problem::idempotency_conflict(job.id)),
        Submitted::QueueFull(limit) => Err(Problem::queue_full(limit, config)),
        Submitted::MissingFiles(missing) => Err(Problem::missing_files(missing)),
        Submitted::FilesTooLarge(bytes) => Err(Problem::job_files_too_large(
            bytes,
            texfleet_core::validate::MAX_JOB_FILES_BYTES,
        )),
    }
}

/// A JSON body, refused before it is built when it has absurdly many members.
fn json_value(body: &Bytes) -> Result<serde_json::Value, Problem> {
    if request::exceeds_member_budget(body, request::MAX_MEMBERS) {
        return Err(Problem::validation(vec![FieldError::new(
            "",
            format!(
                "the body has more than {} fields in all; a compile needs far fewer",
                request::MAX_MEMBERS
            ),
        )]));
    }
    serde_json::from_slice(body)
        .map_err(|e| Problem::invalid_json(format!("the body is not valid JSON: {e}")))
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}
