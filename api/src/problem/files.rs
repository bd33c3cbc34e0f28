//! The answers about project files: uploads refused by a limit, a body that is not what its
//! hash says, and submissions that name files the project does not hold.

use super::{FieldError, Problem, MAX_LISTED_ERRORS};
use crate::problem_code::ProblemCode;
use axum::http::StatusCode;
use texfleet_core::model::ContentHash;

/// Seconds before another upload of a file that is being uploaded is worth trying.
const RETRY_AFTER_UPLOAD: u64 = 2;

impl Problem {
    pub fn project_file_too_large(size: i64, max: i64) -> Problem {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ProblemCode::PayloadTooLarge,
            format!("the file has {size} bytes; a project file has at most {max} (max_project_file_bytes)"),
        )
    }

    pub fn over_files_quota(used: i64, size: i64, quota: i64) -> Problem {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ProblemCode::PayloadTooLarge,
            format!(
                "the project's files take {used} bytes; with this one's {size} they would pass \
                 the project's quota of {quota} bytes (project_files_quota_bytes); files no job \
                 names are deleted after a grace period"
            ),
        )
    }

    pub fn upload_in_progress() -> Problem {
        Problem {
            retry_after: Some(RETRY_AFTER_UPLOAD),
            ..Problem::new(
                StatusCode::CONFLICT,
                ProblemCode::UploadInProgress,
                "another upload of this file is under way; retry, or ask with HEAD whether it is stored",
            )
        }
    }

    pub fn length_required() -> Problem {
        Problem::new(
            StatusCode::LENGTH_REQUIRED,
            ProblemCode::LengthRequired,
            "an upload must say its size in Content-Length",
        )
    }

    pub fn hash_mismatch(actual: &ContentHash) -> Problem {
        Problem::validation(vec![FieldError::new(
            "sha256",
            format!("the body's SHA-256 is {actual}; nothing was stored"),
        )])
    }

    pub fn length_mismatch(received: i64) -> Problem {
        Problem::validation(vec![FieldError::new(
            "Content-Length",
            format!("the body had {received} bytes, not as many as declared; nothing was stored"),
        )])
    }

    /// A submission naming files the project does not hold: every missing hash is listed in
    /// `missing_sha256`, so that a client uploads them all and submits once more.
    pub fn missing_files(missing: Vec<ContentHash>) -> Problem {
        let errors = missing
            .iter()
            .take(MAX_LISTED_ERRORS)
            .map(|hash| {
                FieldError::new(
                    "files",
                    format!("the project holds no file with sha256 {hash}"),
                )
            })
            .collect();
        let count = missing.len();
        Problem {
            detail: format!(
                "{count} file(s) named by sha256 are not among the project's files: upload each \
                 with PUT /projects/{{project_id}}/files/{{sha256}} and submit again"
            ),
            missing_sha256: missing.iter().map(ContentHash::hex).collect(),
            ..Problem::validation(errors)
        }
    }

    pub fn job_files_too_large(bytes: i64, max: i64) -> Problem {
        Problem::validation(vec![FieldError::new(
            "files",
            format!("the job's files take {bytes} bytes; a job's files take at most {max}"),
        )])
    }
}
