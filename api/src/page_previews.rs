//! Page previews: `GET /compile/{id}/pages/{page}?width=W` answers with a PNG of one page of a
//! Succeeded job's PDF. The first request for a page at a width queues its render (a scheduler
//! runs it in a sandbox: the PDF is as hostile as the document) and waits for it; the image is
//! kept beside the PDF, and later requests stream it with its `ETag`. What a project may have
//! under way is bounded in the database (`db::request_preview`).

use crate::auth::Authenticated;
use crate::downloads::{stream, strong_etag, PngBytes};
use crate::problem::{AuthenticatedProblems, FieldError, Problem, ProblemBody};
use crate::routes::find_job;
use crate::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use std::collections::HashMap;
use std::time::Duration;
use texfleet_core::db::{self, PreviewRequest};
use texfleet_core::model::{
    short_job_id, JobStatus, PagePreview, PreviewStatus, PREVIEW_PAGES, THUMBNAIL_WIDTHS,
};
use uuid::Uuid;

/// How long a request waits for its render before it is told to ask again: a render takes
/// seconds, and at most 25 s in its sandbox.
const RENDER_WAIT: Duration = Duration::from_secs(40);
/// The header that tells the page's width and height as shown, in points: where a click on
/// the image is on the page (for `sync/pdf`).
const PAGE_SIZE: HeaderName = HeaderName::from_static("page-size");
/// The width of a preview whose request names none, in pixels.
pub const DEFAULT_WIDTH: u32 = 800;

/// One page of a Succeeded job's PDF as a PNG, rendered the first time it is asked for.
#[utoipa::path(get, path = "/compile/{id}/pages/{page}", tag = "compile", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id"),
           ("page" = u32, Path, description = "A page of the PDF, from 1"),
           ("width" = Option<u32>, Query, description = "The image's width in pixels, 16 to 1200 (default 800); its height follows the page's shape, at most 4 times the width"),
           ("If-None-Match" = Option<String>, Header, description = "An ETag of this image: 304 if it is the same")),
    responses(
        (status = 200, description = "The page", content_type = "image/png", body = PngBytes, headers(
            ("ETag" = String, description = "Strong: the SHA-256 of the image"),
            ("Content-Disposition" = String, description = "inline; filename=\"<short_job_id>-page-<page>-<width>.png\""),
            ("Page-Size" = String, description = "The page's width and height as shown, in points (595.28 841.89): where a point of the image is on the page, for sync/pdf"),
            ("X-Request-Id" = String, description = "The request's id"),
        )),
        (status = 304, description = "The client's copy (If-None-Match) is this image"),
        (status = 404, description = "No such job in this project, no such page in its PDF, or the page could not be rendered", content_type = "application/problem+json", body = ProblemBody),
        (status = 409, description = "The job has not Succeeded, or the page is still being rendered: ask again (not_ready)", content_type = "application/problem+json", body = ProblemBody),
        (status = 422, description = "page or width out of bounds", content_type = "application/problem+json", body = ProblemBody),
        (status = 429, description = "The project has 8 previews under way, or the job 500 in all (rate_limited)", content_type = "application/problem+json", body = ProblemBody),
        AuthenticatedProblems,
    ))]
pub async fn get_page(
    State(state): State<AppState>,
    auth: Authenticated,
    Path((id, page)): Path<(String, String)>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    request: HeaderMap,
) -> Result<Response, Problem> {
    let Query(query) =
        query.map_err(|e| Problem::validation(vec![FieldError::new("", e.body_text())]))?;
    let (page, width) = bounds(&page, query.get("width").map(String::as_str))?;
    let job = find_job(&state, &auth, &id).await?;
    if job.status != JobStatus::Succeeded || job.pdf_storage_key.is_none() {
        return Err(Problem::not_ready(format!(
            "the job is {}; its pages exist once it has Succeeded",
            job.status.as_str()
        )));
    }
    let preview =
        match ask(&state, &auth, job.id, page, width).await? {
            PreviewRequest::Found(preview) => preview,
            PreviewRequest::TooMany => return Err(Problem::rate_limited(
                "too many page previews of this project under way (or of this job in all); retry",
                1,
            )),
        };
    let (preview, _) = state
        .events
        .wait_until(
            (auth.project_id, job.id),
            preview,
            |preview| {
                matches!(
                    preview.status,
                    PreviewStatus::Succeeded | PreviewStatus::Failed
                )
            },
            RENDER_WAIT,
            || read(&state, &auth, job.id, page, width),
        )
        .await?;
    match preview {
        PagePreview {
            status: PreviewStatus::Succeeded,
            storage_key: Some(key),
            sha256,
            page_size,
            ..
        } => {
            let disposition = format!(
                "inline; filename=\"{}-page-{page}-{width}.png\"",
                short_job_id(job.id)
            );
            let etag = sha256.as_deref().map(strong_etag);
            let (project, png) = (auth.project_id, "image/png");
            let mut response = stream(
                &state,
                project,
                &key,
                png,
                Some(disposition),
                etag,
                &request,
            )
            .await?;
            if let Some([width, height]) = page_size {
                let points =
                    |hundredths: u32| format!("{}.{:02}", hundredths / 100, hundredths % 100);
                let size = format!("{} {}", points(width), points(height));
                let size = HeaderValue::try_from(size).expect("digits are a header value");
                response.headers_mut().insert(PAGE_SIZE, size);
            }
            Ok(response)
        }
        PagePreview {
            status: PreviewStatus::Failed,
            page_count,
            error_message,
            ..
        } => Err(Problem::not_found(match page_count {
            Some(count) => format!("page {page} does not exist: the PDF has {count} pages"),
            None => format!(
                "page {page} could not be rendered: {}",
                error_message.as_deref().unwrap_or("no image came out")
            ),
        })),
        _ => Err(Problem::not_ready(format!(
            "page {page} is still being rendered; ask again"
        ))),
    }
}

/// The page and width asked for, within bounds.
fn bounds(page: &str, width: Option<&str>) -> Result<(u32, u32), Problem> {
    let page = page
        .parse()
        .ok()
        .filter(|page| PREVIEW_PAGES.contains(page))
        .ok_or_else(|| FieldError::new("page", "must be a whole number from 1 to 100000"));
    let width = match width {
        None => Ok(DEFAULT_WIDTH),
        Some(width) => width
            .parse()
            .ok()
            .filter(|width| THUMBNAIL_WIDTHS.contains(width))
            .ok_or_else(|| FieldError::new("width", "must be a whole number from 16 to 1200")),
    };
    match (page, width) {
        (Ok(page), Ok(width)) => Ok((page, width)),
        (page, width) => Err(Problem::validation(
            [page.err(), width.err()].into_iter().flatten().collect(),
        )),
    }
}

/// Finds the preview, or queues it, in a transaction bound to the caller's project.
async fn ask(
    state: &AppState,
    auth: &Authenticated,
    job_id: Uuid,
    page: u32,
    width: u32,
) -> Result<PreviewRequest, Problem> {
    let mut client = state.database.client(auth.project_id).await?;
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    let asked = db::request_preview(&*transaction, job_id, page, width).await?;
    transaction.commit().await.map_err(db::DbError::from)?;
    Ok(asked)
}

/// The preview as it is now.
async fn read(
    state: &AppState,
    auth: &Authenticated,
    job_id: Uuid,
    page: u32,
    width: u32,
) -> Result<PagePreview, Problem> {
    let mut client = state.database.client(auth.project_id).await?;
    let transaction = db::begin_project(&mut client, auth.project_id).await?;
    db::get_preview(&*transaction, job_id, page, width)
        .await?
        .ok_or_else(|| Problem::not_found("no such page preview"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_widths_are_bounded() {
        assert_eq!(bounds("1", None).unwrap(), (1, DEFAULT_WIDTH));
        assert_eq!(bounds("100000", Some("16")).unwrap(), (100_000, 16));
        assert_eq!(bounds("3", Some("1200")).unwrap(), (3, 1200));
        for (page, width) in [
            ("0", None),
            ("100001", None),
            ("-1", None),
            ("x", None),
            ("1", Some("15")),
            ("1", Some("1201")),
            ("1", Some("")),
        ] {
            assert!(bounds(page, width).is_err(), "{page} {width:?}");
        }
    }
}
