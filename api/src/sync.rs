//! SyncTeX queries on a Succeeded job, as an editor asks them: where in the PDF a source line
//! is (`/sync/code`), and which source line a point of a page shows (`/sync/pdf`).
//!
//! The job's SyncTeX file is read from the object store and parsed here, in the API's
//! process, not in a sandbox: parsing is bounded in bytes and records ([`synctex`]) and runs
//! on a blocking thread, a few at a time and one per project, each holding one of the
//! project's download places. The parsed file is kept for the next queries of the same job,
//! each project's within a share of the cache ([`cache`]).

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, FieldError, Problem, ProblemBody};
use crate::routes::find_job;
use crate::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use query::{PdfBox, SourcePlace};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use synctex::{Synctex, Unreadable};

pub use cache::SyncCache;
use texfleet_core::model::JobStatus;

/// How long a query waits for another's parse before it is told to retry.
const PARSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Where a source line is in the PDF.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CodeToPdf {
    /// The boxes the line made (of the nearest line that made any, for a blank line), at most
    /// 64, in page order; empty when the file made nothing.
    pub pdf: Vec<PdfBox>,
}

/// Which source line a point of the PDF shows.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PdfToCode {
    /// The place, or none when the page shows nothing of the project's sources there.
    pub code: Vec<SourcePlace>,
}

/// Forward search: the boxes of the PDF that a line of a project file made.
#[utoipa::path(get, path = "/compile/{id}/sync/code", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("file" = String, Query, description = "A project path, as in files[] (main.tex, chapters/one.tex)"),
           ("line" = u32, Query, description = "A line of that file, from 1")),
    responses(
        (status = 200, description = "The boxes, in PDF points from the page's top left corner", body = CodeToPdf),
        (status = 404, description = "No such job in this project, or the job has no SyncTeX file", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job has not Succeeded (not_ready)", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "file or line missing or invalid, or a SyncTeX file too large to query", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn code_to_pdf(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<CodeToPdf>, Problem> {
    let query = fields(query)?;
    let file = query.get("file").filter(|file| !file.is_empty());
    let line = number(&query, "line");
    let (Some(file), Ok(line)) = (file, &line) else {
        let mut errors = Vec::new();
        if file.is_none() {
            errors.push(FieldError::new("file", "must be a project path"));
        }
        errors.extend(line.err());
        return Err(Problem::validation(errors));
    };
    let line = *line;
    let synctex = parsed(&state, &auth, &id).await?;
    Ok(Json(CodeToPdf {
        pdf: synctex.forward(file, line),
    }))
}

/// Inverse search: the source line that a point of a page of the PDF shows.
#[utoipa::path(get, path = "/compile/{id}/sync/pdf", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("page" = u32, Query, description = "A page of the PDF, from 1"),
           ("h" = f64, Query, description = "Points from the page's left edge"),
           ("v" = f64, Query, description = "Points from the page's top edge")),
    responses(
        (status = 200, description = "The source place", body = PdfToCode),
        (status = 404, description = "No such job in this project, or the job has no SyncTeX file", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job has not Succeeded (not_ready)", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "page, h or v missing or invalid, or a SyncTeX file too large to query", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn pdf_to_code(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(id): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<PdfToCode>, Problem> {
    let query = fields(query)?;
    let (page, h, v) = (
        number(&query, "page"),
        point(&query, "h"),
        point(&query, "v"),
    );
    let (Ok(page), Ok(h), Ok(v)) = (&page, &h, &v) else {
        let errors = [page.err(), h.err(), v.err()]
            .into_iter()
            .flatten()
            .collect();
        return Err(Problem::validation(errors));
    };
    let synctex = parsed(&state, &auth, &id).await?;
    Ok(Json(PdfToCode {
        code: synctex.inverse(*page, *h, *v).into_iter().collect(),
    }))
}

fn fields(
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<HashMap<String, String>, Problem> {
    query
        .map(|Query(query)| query)
        .map_err(|e| Problem::validation(vec![FieldError::new("", e.body_text())]))
}

fn number(query: &HashMap<String, String>, name: &str) -> Result<u32, FieldError> {
    query
        .get(name)
        .and_then(|value| value.parse().ok())
        .filter(|&value| value >= 1)
        .ok_or_else(|| FieldError::new(name, "must be a whole number from 1"))
}

fn point(query: &HashMap<String, String>, name: &str) -> Result<f64, FieldError> {
    query
        .get(name)
        .and_then(|value| value.parse::<f64>().ok())
        .filter(|value| value.is_finite())
        .ok_or_else(|| FieldError::new(name, "must be a number of points"))
}

/// The parsed SyncTeX file of a Succeeded job of the token's project.
async fn parsed(state: &AppState, auth: &Authenticated, id: &str) -> Result<Arc<Synctex>, Problem> {
    let job = find_job(state, auth, id).await?;
    if job.status != JobStatus::Succeeded {
        return Err(Problem::not_ready(format!(
            "the job is {}; SyncTeX queries answer once it has Succeeded",
            job.status.as_str()
        )));
    }
    let Some(key) = job.synctex_storage_key else {
        return Err(Problem::not_found("the job has no SyncTeX file"));
    };
    let cache = &state.sync_cache;
    let unreadable = |why: &str| Problem::validation(vec![FieldError::new("", why)]);
    if let Some(kept) = cache.get(&key) {
        return kept.map_err(unreadable);
    }
    let _slot = state.downloads.take(auth.project_id).ok_or_else(|| {
        Problem::rate_limited("too many downloads of this project in flight; retry", 1)
    })?;
    let parsing = tokio::time::timeout(PARSE_WAIT, cache.place_to_parse(auth.project_id))
        .await
        .map_err(|_| Problem::rate_limited("other SyncTeX files are being read; retry", 1))?;
    if let Some(kept) = cache.get(&key) {
        return kept.map_err(unreadable);
    }
    let bytes = state.storage.get_bytes(&key).await?;
    parse_and_keep(cache.clone(), parsing, auth.project_id, key, bytes)
        .await
        .map_err(|_| Problem::internal())?
        .map_err(unreadable)
}

/// Parses a file on a blocking thread that holds the place to parse and keeps what it read,
/// whether or not its query still waits: a query dropped as its parse starts would otherwise
/// free the place for another parse of the same file, again and again, each running to its end.
fn parse_and_keep(
    cache: Arc<SyncCache>,
    parsing: cache::PlaceToParse,
    project: uuid::Uuid,
    key: String,
    bytes: Vec<u8>,
) -> tokio::task::JoinHandle<Result<Arc<Synctex>, &'static str>> {
    tokio::task::spawn_blocking(move || {
        let _parsing = parsing;
        let parsed = read(&bytes, cache::MAX_WEIGHT);
        cache.keep(key, project, parsed.clone());
        parsed
    })
}

/// Parses a file, refused when it would weigh more than `max_weight`.
fn read(bytes: &[u8], max_weight: usize) -> Result<Arc<Synctex>, &'static str> {
    Synctex::parse(bytes)
        .and_then(|parsed| match parsed.weight() > max_weight {
            true => Err(Unreadable::TooLarge),
            false => Ok(Arc::new(parsed)),
        })
        .map_err(|why| match why {
            Unreadable::TooLarge => "the job's SyncTeX file is too large to query",
            Unreadable::NotSynctex => "the job's SyncTeX file cannot be read",
        })
}

mod cache;
mod query;
mod synctex;
#[cfg(test)]
mod tests;
