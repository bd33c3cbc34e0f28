//! Page previews' queue, in one place: the API finds or requests one inside its project's
//! transaction (row-level security shows it that project's previews only); a scheduler claims
//! them with the jobs' lease protocol (claim with SKIP LOCKED, renew, finish or release under
//! the lease, rescue of expired leases).

use super::{parsed, DbResult, Pool};
use crate::model::{ClaimedPreview, PagePreview, PreviewStatus, Rendered};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

/// Previews of one project that may be queued or rendering at once.
pub const MAX_UNFINISHED_PREVIEWS_PER_PROJECT: i64 = 8;
/// Previews one job may have in all (each page at each width is one).
pub const MAX_PREVIEWS_PER_JOB: i64 = 500;
/// Renders of one preview before it fails: a render that loses its scheduler is tried again.
pub const MAX_PREVIEW_ATTEMPTS: i32 = 3;
/// A render that left no image (out of its time or memory, perhaps while the machine was busy)
/// is rendered again when asked for this long after it failed.
pub const RENDER_AGAIN_AFTER_SECONDS: f64 = 60.0;

const PREVIEW_COLUMNS: &str = "job_id, project_id, page, width, status, storage_key, sha256, \
     page_width, page_height, page_count, error_message";

/// What a request for a preview found.
pub enum PreviewRequest {
    /// The preview, requested now or before.
    Found(PagePreview),
    /// The project has [`MAX_UNFINISHED_PREVIEWS_PER_PROJECT`] previews under way, or the job
    /// [`MAX_PREVIEWS_PER_JOB`].
    TooMany,
}

/// The preview of `page` at `width` of the job `job_id` (which the caller found Succeeded in
/// its project), queued now unless it exists or a limit says no.
pub async fn request_preview(
    client: &impl GenericClient,
    job_id: Uuid,
    page: u32,
    width: u32,
) -> DbResult<PreviewRequest> {
    if let Some(preview) = get_preview(client, job_id, page, width).await? {
        let again = preview.status == PreviewStatus::Failed && preview.page_count.is_none();
        if !again {
            return Ok(PreviewRequest::Found(preview));
        }
        let queued = client
            .query_opt(
                &format!(
                    "UPDATE page_previews
                     SET status = 'Queued', attempts = 0, error_message = NULL,
                         finished_at = NULL
                     WHERE job_id = $1 AND page = $2 AND width = $3 AND status = 'Failed'
                       AND page_count IS NULL
                       AND finished_at < now() - make_interval(secs => $4)
                       AND (SELECT count(*) FROM page_previews
                            WHERE status IN ('Queued', 'Running')) < $5
                     RETURNING {PREVIEW_COLUMNS}"
                ),
                &[
                    &job_id,
                    &(page as i32),
                    &(width as i32),
                    &RENDER_AGAIN_AFTER_SECONDS,
                    &MAX_UNFINISHED_PREVIEWS_PER_PROJECT,
                ],
            )
            .await?;
        return Ok(PreviewRequest::Found(match queued {
            Some(row) => preview_from_row(&row)?,
            None => preview,
        }));
    }
    // Counted under row-level security: the project's previews only.
    let inserted = client
        .query_opt(
            &format!(
                "INSERT INTO page_previews (job_id, project_id, page, width)
                 SELECT $1, current_project(), $2, $3
                 WHERE (SELECT count(*) FROM page_previews
                        WHERE status IN ('Queued', 'Running')) < $4
                   AND (SELECT count(*) FROM page_previews WHERE job_id = $1) < $5
                 ON CONFLICT (job_id, page, width) DO NOTHING
                 RETURNING {PREVIEW_COLUMNS}"
            ),
            &[
                &job_id,
                &(page as i32),
                &(width as i32),
                &MAX_UNFINISHED_PREVIEWS_PER_PROJECT,
                &MAX_PREVIEWS_PER_JOB,
            ],
        )
        .await?;
    let found = match inserted {
        Some(row) => Some(preview_from_row(&row)?),
        // Another request inserted it meanwhile, or a limit held.
        None => get_preview(client, job_id, page, width).await?,
    };
    Ok(found.map_or(PreviewRequest::TooMany, PreviewRequest::Found))
}

/// The preview of `page` at `width` of the job `job_id`, if it was requested.
pub async fn get_preview(
    client: &impl GenericClient,
    job_id: Uuid,
    page: u32,
    width: u32,
) -> DbResult<Option<PagePreview>> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {PREVIEW_COLUMNS} FROM page_previews
                 WHERE job_id = $1 AND page = $2 AND width = $3"
            ),
            &[&job_id, &(page as i32), &(width as i32)],
        )
        .await?;
    row.as_ref().map(preview_from_row).transpose()
}

fn preview_from_row(row: &Row) -> DbResult<PagePreview> {
    Ok(PagePreview {
        job_id: row.get("job_id"),
        project_id: row.get("project_id"),
        page: row.get::<_, i32>("page") as u32,
        width: row.get::<_, i32>("width") as u32,
        status: parsed(row, "status")?,
        storage_key: row.get("storage_key"),
        sha256: row.get("sha256"),
        page_size: match (
            row.get::<_, Option<i32>>("page_width"),
            row.get::<_, Option<i32>>("page_height"),
        ) {
            (Some(width), Some(height)) => Some([width as u32, height as u32]),
            _ => None,
        },
        page_count: row.get::<_, Option<i32>>("page_count").map(|n| n as u32),
        error_message: row.get("error_message"),
    })
}

/// A project one of whose renders in the last [`RECENT_RENDER_SECONDS`] took this long is
/// heavy: an editor's renders take about a second each, however many it asks for; a PDF built
/// to drag Ghostscript to its limits takes ten.
pub const HEAVY_RENDER_SECONDS: f64 = 5.0;
/// What ends a render's run, whatever its outcome: how long it took, kept for the turns.
const RENDER_TIMED: &str =
    "last_render_seconds = extract(epoch FROM now() - started_at), last_render_at = now()";
/// The window in which a project's render time is counted.
pub const RECENT_RENDER_SECONDS: f64 = 300.0;

/// Claims up to `limit` queued previews for `owner` with a lease of `lease_seconds`: the
/// oldest of each project, one per project and claim, never more than `per_project` rendering
/// for a project at once, so that one project's pages cannot hold every slot; at most
/// `limit - kept_for_light` of them for heavy projects ([`HEAVY_RENDER_SECONDS`]), so that
/// projects whose PDFs take long to render leave a slot to the others however many they are.
pub async fn claim_previews(
    pool: &Pool,
    owner: &str,
    lease_seconds: u64,
    (limit, kept_for_light): (usize, usize),
    per_project: usize,
) -> DbResult<Vec<ClaimedPreview>> {
    let client = pool.get().await?;
    let claim = client.prepare_cached(CLAIM_PREVIEWS).await?;
    let rows = client
        .query(
            &claim,
            &[
                &owner,
                &(lease_seconds as f64),
                &(limit as i64),
                &(per_project as i64),
                &HEAVY_RENDER_SECONDS,
                &(limit.saturating_sub(kept_for_light) as i64),
                &RECENT_RENDER_SECONDS,
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| ClaimedPreview {
            id: row.get("id"),
            job_id: row.get("job_id"),
            project_id: row.get("project_id"),
            page: row.get::<_, i32>("page") as u32,
            width: row.get::<_, i32>("width") as u32,
            attempt: row.get("attempts"),
            pdf_storage_key: row.get("pdf_storage_key"),
        })
        .collect())
}

/// The oldest queued preview of each project with fewer than `$4` rendering, at most `$3`, in
/// turns: light projects before heavy ones (one of whose renders in the last `$7` seconds took
/// `$5` seconds or more), and of each kind the one that used the least render time in that
/// window first (then the oldest request), so that a project whose renders are heavy waits
/// behind the others, not they behind it; heavy projects take at most `$6` of them. A
/// render's time is its last run's, kept when it is queued again. The job must still be its
/// project's and have a PDF.
const CLAIM_PREVIEWS: &str = "
    WITH rendering AS (
        SELECT project_id, count(*) FILTER (WHERE status = 'Running') AS previews,
               coalesce(sum(seconds), 0)::float8 AS recent_seconds,
               coalesce(max(seconds), 0)::float8 AS longest
        FROM (SELECT project_id, status,
                     CASE WHEN status = 'Running'
                          THEN extract(epoch FROM now() - started_at)
                          WHEN last_render_at > now() - make_interval(secs => $7)
                          THEN last_render_seconds END AS seconds
              FROM page_previews
              WHERE project_id IN (SELECT project_id FROM page_previews WHERE status = 'Queued'))
             AS renders
        GROUP BY project_id
    ), offers AS (
        SELECT DISTINCT ON (queued.project_id) queued.id, queued.created_at,
               rendering.recent_seconds, rendering.longest >= $5::float8 AS heavy
        FROM page_previews AS queued
        JOIN rendering USING (project_id)
        WHERE queued.status = 'Queued' AND rendering.previews < $4
        ORDER BY queued.project_id, queued.created_at
    ), turns AS (
        SELECT id, heavy,
               row_number() OVER (ORDER BY heavy, recent_seconds, created_at) AS turn,
               row_number() OVER (PARTITION BY heavy ORDER BY recent_seconds, created_at)
                   AS turn_of_its_kind
        FROM offers
    ), claimable AS (
        SELECT id FROM page_previews
        WHERE id IN (SELECT id FROM turns
                     WHERE turn <= $3 AND (NOT heavy OR turn_of_its_kind <= $6))
          AND status = 'Queued'
        FOR UPDATE SKIP LOCKED
    )
    UPDATE page_previews AS preview
    SET status = 'Running', attempts = preview.attempts + 1, started_at = now(),
        lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2)
    FROM claimable, jobs
    WHERE preview.id = claimable.id AND jobs.id = preview.job_id
      AND jobs.project_id = preview.project_id AND jobs.pdf_storage_key IS NOT NULL
    RETURNING preview.id, preview.job_id, preview.project_id, preview.page, preview.width,
              preview.attempts, jobs.pdf_storage_key";

/// Extends `owner`'s lease on a rendering preview; false when it is gone.
pub async fn renew_preview_lease(
    pool: &Pool,
    id: Uuid,
    owner: &str,
    lease_seconds: u64,
) -> DbResult<bool> {
    let client = pool.get().await?;
    let renewed = client
        .execute(
            "UPDATE page_previews SET lease_expires_at = now() + make_interval(secs => $3)
             WHERE id = $1 AND lease_owner = $2 AND status = 'Running'",
            &[&id, &owner, &(lease_seconds as f64)],
        )
        .await?;
    Ok(renewed == 1)
}

/// Records how `owner`'s render of the preview `id` ended; false when the lease was lost.
pub async fn finish_preview(
    pool: &Pool,
    id: Uuid,
    owner: &str,
    rendered: &Rendered,
) -> DbResult<bool> {
    let (status, storage_key, sha256, size, image_id, page_count, message) = match rendered {
        Rendered::Stored {
            storage_key,
            sha256,
            page_size,
            image_id,
        } => (
            "Succeeded",
            Some(storage_key),
            Some(sha256),
            Some(*page_size),
            Some(image_id),
            None,
            None,
        ),
        Rendered::PastTheEnd { page_count } => (
            "Failed",
            None,
            None,
            None,
            None,
            Some(*page_count as i32),
            None,
        ),
        Rendered::Failed { message } => ("Failed", None, None, None, None, None, Some(message)),
    };
    let [width, height] = size.map_or([None, None], |sides| sides.map(|side| Some(side as i32)));
    let client = pool.get().await?;
    let finished = client
        .execute(
            &format!(
                "UPDATE page_previews
             SET status = $3, storage_key = $4, sha256 = $5, page_width = $6,
                 page_height = $7, page_count = $8, error_message = $9, image_id = $10,
                 finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
                 {RENDER_TIMED}
             WHERE id = $1 AND lease_owner = $2 AND status = 'Running'"
            ),
            &[
                &id,
                &owner,
                &status,
                &storage_key,
                &sha256,
                &width,
                &height,
                &page_count,
                &message,
                &image_id,
            ],
        )
        .await?;
    Ok(finished == 1)
}

/// Ends `owner`'s lease on a render that did not finish (the sandbox or storage failed, or the
/// scheduler is stopping): queued again, or Failed once it has used every attempt.
pub async fn release_preview(pool: &Pool, id: Uuid, owner: &str) -> DbResult<bool> {
    let client = pool.get().await?;
    let released = client
        .execute(
            &format!(
                "UPDATE page_previews SET {}
                 WHERE id = $1 AND lease_owner = $2 AND status = 'Running'",
                released()
            ),
            &[&id, &owner],
        )
        .await?;
    Ok(released == 1)
}

/// Releases the previews whose lease expired (their scheduler died); any scheduler may run
/// this. Returns how many.
pub async fn rescue_expired_previews(pool: &Pool) -> DbResult<u64> {
    let client = pool.get().await?;
    Ok(client
        .execute(
            &format!(
                "UPDATE page_previews SET {}
                 WHERE status = 'Running' AND lease_expires_at < now()",
                released()
            ),
            &[],
        )
        .await?)
}

/// A render ended without an outcome: queued again while attempts are left.
fn released() -> String {
    format!(
        "{RENDER_TIMED}, status = CASE WHEN attempts < {MAX_PREVIEW_ATTEMPTS} THEN 'Queued' ELSE 'Failed' END,
         error_message = CASE WHEN attempts < {MAX_PREVIEW_ATTEMPTS} THEN NULL
                         ELSE 'the page could not be rendered on any attempt' END,
         finished_at = CASE WHEN attempts < {MAX_PREVIEW_ATTEMPTS} THEN NULL ELSE now() END,
         lease_owner = NULL, lease_expires_at = NULL"
    )
}
