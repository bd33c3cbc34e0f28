//! The outputs of a job: its PDF, its log, its SyncTeX file and its thumbnail, streamed from object storage
//! (each download holds one of its project's places while it is read). Each is sent with a strong
//! `ETag`, the SHA-256 of its bytes recorded by the scheduler that stored it, so a client that
//! has it already gets `304 Not Modified` without a read of the object store. A job that
//! reused an earlier result (the result cache) serves that job's objects, with their hashes.

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, Problem, ProblemBody};
use crate::routes::find_job;
use crate::AppState;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use texfleet_core::model::{short_job_id, Job, JobStatus};
use tokio_util::io::ReaderStream;
use uuid::Uuid;

/// Downloads of one project that may be in flight at once (each holds a connection to the
/// object store while its client reads).
pub const MAX_PER_PROJECT: usize = 16;

/// The PDF of a Succeeded job, streamed from object storage.
#[utoipa::path(get, path = "/compile/{id}/pdf", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("If-None-Match" = Option<String>, Header, description = "An ETag of this PDF: 304 if it is the same")),
    responses(
        (status = 200, description = "The PDF", content_type = "application/pdf", body = PdfBytes, headers(
            ("ETag" = String, description = "Strong: the SHA-256 of the PDF"),
            ("Content-Disposition" = String, description = "inline; filename=\"<short_job_id>.pdf\""),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 304, description = "The client's copy (If-None-Match) is this PDF"),
        (status = 404, description = "No such job in this project", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job has not Succeeded (not_ready)", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn get_pdf(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    request: HeaderMap,
) -> Result<Response, Problem> {
    let job = find_job(&state, &auth, &id).await?;
    let key = match (job.status, job.pdf_storage_key) {
        (JobStatus::Succeeded, Some(key)) => key,
        (status, _) => {
            return Err(Problem::not_ready(format!(
                "the job is {}; a PDF exists only once it has Succeeded",
                status.as_str()
            )))
        }
    };
    let disposition = format!("inline; filename=\"{}.pdf\"", short_job_id(job.id));
    let etag = job.pdf_sha256.as_deref().map(strong_etag);
    stream(
        &state,
        auth.project_id,
        &key,
        "application/pdf",
        Some(disposition),
        etag,
        &request,
    )
    .await
}

/// The SyncTeX file of a Succeeded job, which maps positions in the PDF to source lines.
#[utoipa::path(get, path = "/compile/{id}/synctex", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("If-None-Match" = Option<String>, Header, description = "An ETag of this file: 304 if it is the same")),
    responses(
        (status = 200, description = "The SyncTeX file (gzip)", content_type = "application/gzip", body = GzipBytes, headers(
            ("ETag" = String, description = "Strong: the SHA-256 of the file"),
            ("Content-Disposition" = String, description = "attachment; filename=\"<short_job_id>.synctex.gz\""),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 304, description = "The client's copy (If-None-Match) is this file"),
        (status = 404, description = "No such job in this project, or the job has no SyncTeX file", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job has not ended yet (not_ready)", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn get_synctex(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    request: HeaderMap,
) -> Result<Response, Problem> {
    let job = find_job(&state, &auth, &id).await?;
    let disposition = format!(
        "attachment; filename=\"{}.synctex.gz\"",
        short_job_id(job.id)
    );
    let stored = (job.synctex_storage_key.clone(), job.synctex_sha256.clone());
    let output = Optional {
        what: "a SyncTeX file",
        content_type: "application/gzip",
        disposition,
    };
    optional(&state, &auth, &job, stored, output, &request).await
}

/// The first page of a Succeeded job that asked for it, as a PNG (`"thumbnail_width"`).
#[utoipa::path(get, path = "/compile/{id}/thumbnail", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("If-None-Match" = Option<String>, Header, description = "An ETag of this image: 304 if it is the same")),
    responses(
        (status = 200, description = "The first page, as wide as the job asked", content_type = "image/png", body = PngBytes, headers(
            ("ETag" = String, description = "Strong: the SHA-256 of the image"),
            ("Content-Disposition" = String, description = "inline; filename=\"<short_job_id>-thumbnail.png\""),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 304, description = "The client's copy (If-None-Match) is this image"),
        (status = 404, description = "No such job in this project, or the job has no thumbnail", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job has not ended yet (not_ready)", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn get_thumbnail(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    request: HeaderMap,
) -> Result<Response, Problem> {
    let job = find_job(&state, &auth, &id).await?;
    let disposition = format!(
        "inline; filename=\"{}-thumbnail.png\"",
        short_job_id(job.id)
    );
    let stored = (
        job.thumbnail_storage_key.clone(),
        job.thumbnail_sha256.clone(),
    );
    let output = Optional {
        what: "a thumbnail",
        content_type: "image/png",
        disposition,
    };
    optional(&state, &auth, &job, stored, output, &request).await
}

/// An output a job may or may not have once it has ended.
struct Optional {
    /// What it is, as the problems name it.
    what: &'static str,
    content_type: &'static str,
    disposition: String,
}

/// `output` of `job`, stored at the key with the SHA-256 of `stored`: `409` before the job
/// ends, `404` when it ended without one.
async fn optional(
    state: &AppState,
    auth: &Authenticated,
    job: &Job,
    stored: (Option<String>, Option<String>),
    output: Optional,
    request: &HeaderMap,
) -> Result<Response, Problem> {
    let what = output.what;
    let status = job.status.as_str();
    if !job.status.is_terminal() {
        return Err(Problem::not_ready(format!(
            "the job is {status}; {what} exists only once it has Succeeded"
        )));
    }
    let (Some(key), sha256) = stored else {
        return Err(Problem::not_found(format!(
            "the job ended {status} without {what}"
        )));
    };
    let etag = sha256.as_deref().map(strong_etag);
    stream(
        state,
        auth.project_id,
        &key,
        output.content_type,
        Some(output.disposition),
        etag,
        request,
    )
    .await
}

/// An object streamed from the store with its type, disposition and strong `ETag`, or `304`
/// when the client has it; `429` when the project has [`MAX_PER_PROJECT`] downloads in flight.
pub(crate) async fn stream(
    state: &AppState,
    project: Uuid,
    key: &str,
    content_type: &'static str,
    disposition: Option<String>,
    etag: Option<HeaderValue>,
    request: &HeaderMap,
) -> Result<Response, Problem> {
    if let Some(unchanged) = not_modified(request, etag.as_ref()) {
        return Ok(unchanged);
    }
    let slot = state.downloads.take(project).ok_or_else(|| {
        Problem::rate_limited("too many downloads of this project in flight; retry", 1)
    })?;
    let object = state.storage.get(key).await?;
    // The place is the project's until the last byte is sent (or the client goes away).
    let chunks = ReaderStream::new(object.body.into_async_read()).map(move |chunk| {
        let _ = &slot;
        chunk
    });
    let mut response = Body::from_stream(chunks).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(disposition) = disposition {
        headers.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::try_from(disposition).expect("hex digits are a header value"),
        );
    }
    if let Some(length) = object.content_length {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    if let Some(etag) = etag {
        headers.insert(header::ETAG, etag);
    }
    Ok(response)
}

/// The compile log of a finished job.
#[utoipa::path(get, path = "/compile/{id}/log", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("If-None-Match" = Option<String>, Header, description = "An ETag of this log: 304 if it is the same")),
    responses(
        (status = 200, description = "The log", content_type = "text/plain", body = String, headers(
            ("ETag" = String, description = "Strong: the SHA-256 of the log"),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 304, description = "The client's copy (If-None-Match) is this log"),
        (status = 404, description = "No such job in this project", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job has no log yet (not_ready)", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn get_log(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    request: HeaderMap,
) -> Result<Response, Problem> {
    let job = find_job(&state, &auth, &id).await?;
    let Some(key) = job.log_storage_key else {
        return Err(Problem::not_ready(format!(
            "the job is {} and has no log yet",
            job.status.as_str()
        )));
    };
    let etag = job.log_sha256.as_deref().map(strong_etag);
    let content_type = "text/plain; charset=utf-8";
    stream(
        &state,
        auth.project_id,
        &key,
        content_type,
        None,
        etag,
        &request,
    )
    .await
}

/// A PDF's bytes, as the OpenAPI document names a binary body.
#[allow(dead_code)] // read by the OpenAPI derive only
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct PdfBytes(Vec<u8>);

/// A gzip file's bytes, as the OpenAPI document names a binary body.
#[allow(dead_code)] // read by the OpenAPI derive only
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct GzipBytes(Vec<u8>);

/// A PNG's bytes, as the OpenAPI document names a binary body.
#[allow(dead_code)] // read by the OpenAPI derive only
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct PngBytes(Vec<u8>);

pub(crate) fn strong_etag(sha256: &str) -> HeaderValue {
    HeaderValue::try_from(format!("\"{sha256}\"")).expect("hex digits are a header value")
}

/// `304 Not Modified` when `If-None-Match` names `etag`, by the weak comparison RFC 9110 asks
/// for this header (a `W/` prefix does not matter), or is `*` (the output exists: the caller
/// checked). An output stored before hashes were recorded has no ETag but answers `*`.
fn not_modified(request: &HeaderMap, etag: Option<&HeaderValue>) -> Option<Response> {
    let wanted = etag.and_then(|etag| etag.to_str().ok());
    let matches = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(','))
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || Some(tag.strip_prefix("W/").unwrap_or(tag)) == wanted);
    matches.then(|| {
        let mut response = StatusCode::NOT_MODIFIED.into_response();
        if let Some(etag) = etag {
            response.headers_mut().insert(header::ETAG, etag.clone());
        }
        response
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, HeaderValue::try_from(value).unwrap());
        headers
    }

    #[test]
    fn if_none_match_finds_the_tag_in_a_list_weak_or_not() {
        let etag = strong_etag("ab12");
        for value in ["\"ab12\"", "\"x\", \"ab12\"", "W/\"ab12\"", "*"] {
            let answer = not_modified(&asking(value), Some(&etag)).expect(value);
            assert_eq!(answer.status(), StatusCode::NOT_MODIFIED);
            assert_eq!(answer.headers()[header::ETAG], etag);
        }
        for value in ["\"ab1\"", "ab12", "\"AB12\""] {
            assert!(
                not_modified(&asking(value), Some(&etag)).is_none(),
                "{value}"
            );
        }
        assert!(not_modified(&HeaderMap::new(), Some(&etag)).is_none());
        assert_eq!(
            not_modified(&asking("*"), None).unwrap().status(),
            StatusCode::NOT_MODIFIED
        );
        assert!(not_modified(&asking("\"ab12\""), None).is_none());
    }
}
