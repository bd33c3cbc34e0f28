//! Errors as `application/problem+json` (RFC 9457), shaped exactly as docs/API.md lists them.
//!
//! Every response carries the request's id; problems carry it in the body too. The id lives in
//! a task-local set by [`request_id`], so that any code that builds a [`Problem`] (handlers,
//! extractors, the fallback) can reach it without threading it through every signature.

mod files;
mod infrastructure;

use crate::problem_code::ProblemCode;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use texfleet_core::config::Config;
use texfleet_core::db::QueueLimit;
use tracing::Instrument;
use utoipa::ToSchema;
use uuid::Uuid;

tokio::task_local! {
    static REQUEST_ID: String;
}

pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// The most wrong fields a `422` lists; the rest are counted in its detail.
pub const MAX_LISTED_ERRORS: usize = 50;
/// The longest field name or message a `422` repeats.
const MAX_FIELD_CHARS: usize = 200;

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Seconds a client should wait before retrying a `503`.
const RETRY_AFTER_UNAVAILABLE: u64 = 2;
/// Seconds a client should wait before submitting again to a full project queue.
const RETRY_AFTER_QUEUE_FULL: u64 = 10;

/// Gives each request an id, runs it with the id in scope and echoes the id in a header.
pub async fn request_id(request: Request, next: Next) -> Response {
    let id = Uuid::new_v4().to_string();
    // Every log line of the request carries its id (and, where known, the job's and project's).
    let span = tracing::info_span!("request", request_id = %id, method = %request.method(), path = %request.uri().path());
    let mut response = REQUEST_ID
        .scope(id.clone(), next.run(request))
        .instrument(span)
        .await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug)]
pub struct Problem {
    status: StatusCode,
    code: ProblemCode,
    detail: String,
    errors: Vec<FieldError>,
    retry_after: Option<u64>,
    missing_sha256: Vec<String>,
}

impl Problem {
    fn new(status: StatusCode, code: ProblemCode, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            code,
            detail: detail.into(),
            errors: Vec::new(),
            retry_after: None,
            missing_sha256: Vec::new(),
        }
    }

    #[cfg(test)]
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    pub fn invalid_multipart(detail: impl Into<String>) -> Problem {
        Problem::new(
            StatusCode::BAD_REQUEST,
            ProblemCode::InvalidMultipart,
            detail,
        )
    }

    pub fn invalid_json(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, ProblemCode::InvalidJson, detail)
    }

    /// A `422` listing the first [`MAX_LISTED_ERRORS`] wrong fields (names and messages cut
    /// to size) and counting the rest, so that a hostile body cannot make a huge answer.
    pub fn validation(mut errors: Vec<FieldError>) -> Problem {
        let omitted = errors.len().saturating_sub(MAX_LISTED_ERRORS);
        errors.truncate(MAX_LISTED_ERRORS);
        for error in &mut errors {
            error.field = cut(&error.field, MAX_FIELD_CHARS);
            error.message = cut(&error.message, MAX_FIELD_CHARS);
        }
        let mut detail = errors
            .iter()
            .map(|e| {
                if e.field.is_empty() {
                    e.message.clone()
                } else {
                    format!("{}: {}", e.field, e.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        if omitted > 0 {
            detail.push_str(&format!("; and {omitted} more"));
        }
        Problem {
            errors,
            ..Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ProblemCode::ValidationFailed,
                detail,
            )
        }
    }

    pub fn unauthorized(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNAUTHORIZED, ProblemCode::Unauthorized, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::FORBIDDEN, ProblemCode::Forbidden, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, ProblemCode::NotFound, detail)
    }

    pub fn method_not_allowed() -> Problem {
        Problem::new(
            StatusCode::METHOD_NOT_ALLOWED,
            ProblemCode::MethodNotAllowed,
            "this route does not accept that method",
        )
    }

    pub fn payload_too_large(limit: usize) -> Problem {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ProblemCode::PayloadTooLarge,
            format!(
                "the body exceeds {limit} bytes; base64 makes a file a third larger, so a JSON \
                 body carries at most about {} bytes of binary files: send large projects as \
                 multipart/form-data, which carries files as they are",
                limit / 4 * 3
            ),
        )
    }

    /// The answer to a body that could not be read whole within its limits.
    pub fn unreadable_body(
        error: crate::receiving::BodyError,
        limit: usize,
        seconds: u64,
    ) -> Problem {
        match error {
            crate::receiving::BodyError::TooLarge => Problem::payload_too_large(limit),
            crate::receiving::BodyError::TimedOut => Problem::request_timeout(seconds),
            crate::receiving::BodyError::Broken => {
                Problem::invalid_json("the body could not be read")
            }
            crate::receiving::BodyError::Busy => Problem::unavailable(
                "the server, or this project, is receiving too many request bodies; retry",
            ),
        }
    }

    pub fn request_timeout(seconds: u64) -> Problem {
        Problem::new(
            StatusCode::REQUEST_TIMEOUT,
            ProblemCode::RequestTimeout,
            format!("the body did not arrive within {seconds} seconds"),
        )
    }

    pub fn unsupported_media_type() -> Problem {
        Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ProblemCode::UnsupportedMediaType,
            "send the body as Content-Type: application/json or multipart/form-data",
        )
    }

    /// The `Idempotency-Key` was used in this project for another request: the original job.
    pub fn idempotency_conflict(original: Uuid) -> Problem {
        Problem::new(
            StatusCode::CONFLICT,
            ProblemCode::IdempotencyConflict,
            format!("the Idempotency-Key was used for job {original} with a different request"),
        )
    }

    /// An output of a job that has none (yet).
    pub fn not_ready(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::CONFLICT, ProblemCode::NotReady, detail)
    }

    /// A cancellation of a job that has already ended.
    pub fn already_finished(status: &str) -> Problem {
        Problem::new(
            StatusCode::CONFLICT,
            ProblemCode::AlreadyFinished,
            format!("the job is already {status}"),
        )
    }

    pub fn rate_limited(detail: &str, retry_after_seconds: u64) -> Problem {
        Problem {
            retry_after: Some(retry_after_seconds.max(1)),
            ..Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                ProblemCode::RateLimited,
                detail,
            )
        }
    }

    pub fn queue_full(limit: QueueLimit, config: &Config) -> Problem {
        let detail = match limit {
            QueueLimit::Jobs => format!(
                "the project already has {} queued jobs",
                config.max_queued_per_project
            ),
            QueueLimit::SourceBytes => format!(
                "the project's queued jobs and this one would hold more than {} bytes of sources",
                config.max_queued_bytes_per_project
            ),
        };
        Problem {
            retry_after: Some(RETRY_AFTER_QUEUE_FULL),
            ..Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                ProblemCode::QueueFull,
                detail,
            )
        }
    }

    pub fn unavailable(detail: impl Into<String>) -> Problem {
        Problem {
            retry_after: Some(RETRY_AFTER_UNAVAILABLE),
            ..Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ProblemCode::Unavailable,
                detail,
            )
        }
    }

    /// The server, or the project, holds its share of answers that clients are still reading.
    pub fn answers_held() -> Problem {
        Problem::unavailable(
            "the server, or this project, holds too many answers that clients are still reading; retry",
        )
    }

    pub fn internal() -> Problem {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ProblemCode::Internal,
            "an internal error occurred; quote the request_id when reporting it",
        )
    }
}

/// An error, as RFC 9457 `application/problem+json`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "type": "urn:texfleet:problem:validation_failed",
    "title": "Unprocessable Entity",
    "status": 422,
    "detail": "engine: must be one of pdflatex, xelatex, lualatex",
    "code": "validation_failed",
    "errors": [{ "field": "engine", "message": "must be one of pdflatex, xelatex, lualatex" }],
    "request_id": "0d3c8e52-7f0b-4d53-9a5e-1c2b3d4e5f60"
}))]
pub struct ProblemBody {
    /// `urn:texfleet:problem:<code>`.
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    pub code: ProblemCode,
    /// The fields that were wrong, for `validation_failed`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// Every project file a submission named that the project does not hold (`422`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_sha256: Vec<String>,
    /// The request's id, also in the `X-Request-Id` header.
    pub request_id: String,
}

/// The error answers that every route behind a token may give, documented once for all of
/// them in the OpenAPI document.
#[allow(dead_code)] // read by the OpenAPI derive only
#[derive(utoipa::IntoResponses)]
pub enum AuthenticatedProblems {
    /// No, malformed, unknown, revoked or expired token
    #[response(status = 401, content_type = "application/problem+json")]
    Unauthorized(ProblemBody),
    /// Too many requests for this token
    #[response(status = 429, content_type = "application/problem+json")]
    RateLimited(ProblemBody),
    /// Postgres is unavailable
    #[response(status = 503, content_type = "application/problem+json")]
    Unavailable(ProblemBody),
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = ProblemBody {
            type_uri: format!("urn:texfleet:problem:{}", self.code.as_str()),
            title: self
                .status
                .canonical_reason()
                .unwrap_or("Error")
                .to_string(),
            status: self.status.as_u16(),
            detail: self.detail,
            code: self.code,
            errors: self.errors,
            missing_sha256: self.missing_sha256,
            request_id: REQUEST_ID.try_with(Clone::clone).unwrap_or_default(),
        };
        let json = serde_json::to_vec(&body).unwrap_or_default();
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            json,
        )
            .into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
