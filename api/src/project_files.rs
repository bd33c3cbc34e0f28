//! Project files by content: `PUT /projects/{id}/files/{sha256}` stores a file's bytes once,
//! `HEAD` of the same path and `POST /projects/{id}/files/missing` say which the project holds,
//! and submissions then name them by hash (`files[].sha256`), so that an edit sends only what
//! changed. Each project has its own store, under row-level security: no project can use or
//! detect another's files. The bytes are checked against the hash while they stream to S3
//! ([`receive`]); the quota is reserved before the first byte (`db::reserve_upload`).

mod receive;

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, FieldError, Problem, ProblemBody};
use crate::AppState;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use texfleet_core::db::{self, Reservation};
use texfleet_core::model::ContentHash;
use texfleet_core::validate::MAX_FILES;
use utoipa::ToSchema;
use uuid::Uuid;

/// A project file the project holds.
#[derive(Serialize, ToSchema)]
pub struct ProjectFile {
    /// Its SHA-256, 64 lowercase hex digits.
    pub sha256: String,
    pub size: u64,
}

/// Hashes to look up.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HashList {
    /// SHA-256s, 64 hex digits each; at most 500.
    pub sha256: Vec<String>,
}

/// Those of the hashes asked about that the project does not hold.
#[derive(Serialize, ToSchema)]
pub struct MissingFiles {
    /// In the order asked, each once.
    pub missing: Vec<String>,
}

/// Upload a project file: its raw bytes, named by their SHA-256.
#[utoipa::path(put, path = "/projects/{project_id}/files/{sha256}", tag = "files", security(("bearer" = [])),
    params(("project_id" = Uuid, Path, description = "The token's project"),
           ("sha256" = String, Path, description = "The SHA-256 of the body, 64 hex digits; the body needs a Content-Length")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "Stored", body = ProjectFile),
        (status = 200, description = "The project held it already (the body is not read)", body = ProjectFile),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 404, description = "The project id is malformed", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "Another upload of this file is under way; retry after Retry-After (upload_in_progress)", content_type = "application/problem+json", body = ProblemBody),
        (status = 411, description = "No Content-Length (length_required)", content_type = "application/problem+json", body = ProblemBody),
        (status = 413, description = "Over max_project_file_bytes, or the project's files would pass project_files_quota_bytes (the detail says which)", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "The hash is malformed, or the body's SHA-256 is another: nothing is stored", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn put_file(
    State(state): State<AppState>,
    auth: Authenticated,
    Path((project_id, sha256)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let project = auth.project_in_path(&project_id)?;
    let sha256 = parse_hash(&sha256, "sha256")?;
    let size = declared_length(&headers)?;
    let config = &state.config;
    if size > config.max_project_file_bytes {
        return Err(Problem::project_file_too_large(
            size,
            config.max_project_file_bytes,
        ));
    }
    let reservation = {
        let mut client = state.database.client(project).await?;
        let transaction = db::begin_project(&mut client, project).await?;
        let reservation = db::reserve_upload(
            &transaction,
            &sha256,
            size,
            config.project_files_quota_bytes,
        )
        .await?;
        transaction.commit().await.map_err(db::DbError::from)?;
        reservation
    };
    let stored = ProjectFile {
        sha256: sha256.hex(),
        size: size as u64,
    };
    match reservation {
        Reservation::Stored => Ok((StatusCode::OK, Json(stored)).into_response()),
        Reservation::Busy => Err(Problem::upload_in_progress()),
        Reservation::OverQuota { used } => Err(Problem::over_files_quota(
            used,
            size,
            config.project_files_quota_bytes,
        )),
        Reservation::Reserved => {
            crate::metrics::PROJECT_FILE_UPLOADS
                .with_label_values(&["started"])
                .inc();
            receive::receive(state.clone(), project, sha256, size, body).await?;
            Ok((StatusCode::CREATED, Json(stored)).into_response())
        }
    }
}

/// Whether the project holds a file: `200` or `404`, no body.
#[utoipa::path(head, path = "/projects/{project_id}/files/{sha256}", tag = "files", security(("bearer" = [])),
    params(("project_id" = Uuid, Path, description = "The token's project"),
           ("sha256" = String, Path, description = "A SHA-256, 64 hex digits")),
    responses(
        (status = 200, description = "The project holds it", headers(
            ("File-Size" = u64, description = "The file's size in bytes"))),
        (status = 403, description = "The token belongs to another project"),
        (status = 404, description = "The project does not hold it (or the hash is malformed)"),
        AuthenticatedProblems,
    ))]
pub async fn head_file(
    State(state): State<AppState>,
    auth: Authenticated,
    Path((project_id, sha256)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let project = auth.project_in_path(&project_id)?;
    let sha256 = ContentHash::parse(&sha256).ok_or_else(|| Problem::not_found("no such file"))?;
    let held = held(&state, project, &[sha256]).await?;
    match held.get(&sha256) {
        Some(size) => Ok((StatusCode::OK, [(FILE_SIZE, size.to_string())]).into_response()),
        None => Err(Problem::not_found(
            "the project holds no file with this hash",
        )),
    }
}

/// The header of a `HEAD` answer that tells the file's size (its `Content-Length` is the empty
/// body's).
const FILE_SIZE: &str = "file-size";

/// Which of the hashes the project does not hold: ask before uploading a folder.
#[utoipa::path(post, path = "/projects/{project_id}/files/missing", tag = "files", security(("bearer" = [])),
    params(("project_id" = Uuid, Path, description = "The token's project")),
    request_body(content = HashList, content_type = "application/json"),
    responses(
        (status = 200, description = "The hashes the project does not hold", body = MissingFiles),
        (status = 400, description = "The body is not JSON of this shape", content_type = "application/problem+json", body = ProblemBody),
        (status = 403, description = "The token belongs to another project", content_type = "application/problem+json", body = ProblemBody),
        (status = 404, description = "The project id is malformed", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "A malformed hash, or more than 500", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn missing(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(project_id): Path<String>,
    body: Result<Json<HashList>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<MissingFiles>, Problem> {
    let project = auth.project_in_path(&project_id)?;
    let Json(list) = body.map_err(|e| Problem::invalid_json(e.body_text()))?;
    if list.sha256.len() > MAX_FILES {
        return Err(Problem::validation(vec![FieldError::new(
            "sha256",
            format!("at most {MAX_FILES} hashes"),
        )]));
    }
    let mut errors = Vec::new();
    let mut hashes = Vec::new();
    for (index, text) in list.sha256.iter().enumerate() {
        match ContentHash::parse(text) {
            Some(hash) if !hashes.contains(&hash) => hashes.push(hash),
            Some(_) => {}
            None => errors.push(FieldError::new(
                format!("sha256[{index}]"),
                "must be 64 hex digits",
            )),
        }
    }
    if !errors.is_empty() {
        return Err(Problem::validation(errors));
    }
    let held = held(&state, project, &hashes).await?;
    Ok(Json(MissingFiles {
        missing: hashes
            .iter()
            .filter(|hash| !held.contains_key(hash))
            .map(ContentHash::hex)
            .collect(),
    }))
}

/// The sizes of those of `hashes` the project holds.
async fn held(
    state: &AppState,
    project: Uuid,
    hashes: &[ContentHash],
) -> Result<std::collections::HashMap<ContentHash, i64>, Problem> {
    let mut client = state.database.client(project).await?;
    let transaction = db::begin_project(&mut client, project).await?;
    Ok(db::stored_files(&transaction, hashes).await?)
}

/// A hash named by `field`, or a `422`.
fn parse_hash(text: &str, field: &str) -> Result<ContentHash, Problem> {
    ContentHash::parse(text)
        .ok_or_else(|| Problem::validation(vec![FieldError::new(field, "must be 64 hex digits")]))
}

/// The body's declared size: uploads say how large they are, so that the quota is reserved
/// before the first byte.
fn declared_length(headers: &HeaderMap) -> Result<i64, Problem> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<i64>().ok())
        .ok_or_else(Problem::length_required)
}
