//! Jobs as the API sees them: read, cancel and list ([`super::submit`] queues them). Every
//! function here and there runs inside a transaction from [`begin_project`], so that row-level
//! security shows the API role one project's rows and no others; the `project_id` conditions
//! below are a second line.

use super::{parsed, parsed_opt, DbError, DbResult};
use crate::model::{Job, JobError, JobLinks, JobStatus, Stored};
use time::OffsetDateTime;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

pub(super) const JOB_COLUMNS: &str = "id, project_id, status, engine, created_at, started_at,
    finished_at, duration_ms, pdf_storage_key, log_storage_key, error_code, error_message,
    diagnostics, reused_from, pdf_sha256, log_sha256, synctex_storage_key, synctex_sha256,
    preamble_cache, incremental, texlive, image_id, word_count, thumbnail_storage_key,
    thumbnail_sha256";

pub(super) fn job_from_row(row: &Row) -> DbResult<Job> {
    let error = parsed_opt(row, "error_code")?.map(|code| JobError {
        code,
        message: row
            .get::<_, Option<String>>("error_message")
            .unwrap_or_default(),
    });
    let diagnostics: serde_json::Value = row.get("diagnostics");
    let status: JobStatus = parsed(row, "status")?;
    let (pdf_storage_key, log_storage_key): (Option<String>, Option<String>) =
        (row.get("pdf_storage_key"), row.get("log_storage_key"));
    let synctex_storage_key: Option<String> = row.get("synctex_storage_key");
    let thumbnail_storage_key: Option<String> = row.get("thumbnail_storage_key");
    let id = row.get("id");
    let stored = Stored {
        pdf: status == JobStatus::Succeeded && pdf_storage_key.is_some(),
        log: log_storage_key.is_some(),
        synctex: synctex_storage_key.is_some(),
        thumbnail: thumbnail_storage_key.is_some(),
    };
    Ok(Job {
        links: JobLinks::of(id, stored),
        id,
        project_id: row.get("project_id"),
        status,
        engine: parsed(row, "engine")?,
        texlive: row.get("texlive"),
        sandbox_image: row.get("image_id"),
        created_at: row.get("created_at"),
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
        duration_ms: row.get("duration_ms"),
        pdf_storage_key,
        log_storage_key,
        synctex_storage_key,
        thumbnail_storage_key,
        error,
        diagnostics: serde_json::from_value(diagnostics)
            .map_err(|e| DbError::Corrupt(format!("diagnostics: {e}")))?,
        reused_from: row.get("reused_from"),
        preamble_cache: row.get("preamble_cache"),
        incremental: row.get("incremental"),
        word_count: row
            .get::<_, Option<serde_json::Value>>("word_count")
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| DbError::Corrupt(format!("word_count: {e}")))?,
        pdf_sha256: row.get("pdf_sha256"),
        log_sha256: row.get("log_sha256"),
        synctex_sha256: row.get("synctex_sha256"),
        thumbnail_sha256: row.get("thumbnail_sha256"),
    })
}

/// Starts a transaction bound to `project_id`: row-level security then shows the API role
/// that project's rows and no others. Every API query after authentication runs in one.
pub async fn begin_project(
    client: &mut deadpool_postgres::Object,
    project_id: Uuid,
) -> DbResult<deadpool_postgres::Transaction<'_>> {
    let transaction = client.transaction().await?;
    let bind = transaction
        .prepare_cached("SELECT set_config('texfleet.project_id', $1, true)")
        .await?;
    transaction
        .execute(&bind, &[&project_id.to_string()])
        .await?;
    Ok(transaction)
}

/// What a request to cancel a job found.
pub enum Cancellation {
    /// The job was queued or running and is now `Cancelled`.
    Cancelled(Job),
    /// The job had already ended; it is returned unchanged.
    AlreadyFinished(Job),
    NotFound,
}

/// Cancels a queued or running job of the project.
pub async fn cancel_job(
    client: &impl GenericClient,
    project_id: Uuid,
    id: Uuid,
) -> DbResult<Cancellation> {
    let cancelled = client
        .query_opt(
            &format!(
                "UPDATE jobs SET status = 'Cancelled', finished_at = now(), lease_owner = NULL,
                                 lease_expires_at = NULL, error_code = 'cancelled',
                                 error_message = 'cancelled by the client'
                 WHERE id = $1 AND project_id = $2 AND status IN ('Queued', 'Running')
                 RETURNING {JOB_COLUMNS}"
            ),
            &[&id, &project_id],
        )
        .await?;
    Ok(match cancelled {
        Some(row) => Cancellation::Cancelled(job_from_row(&row)?),
        None => match get_job(client, project_id, id).await? {
            Some(job) => Cancellation::AlreadyFinished(job),
            None => Cancellation::NotFound,
        },
    })
}

pub async fn get_job(
    client: &impl GenericClient,
    project_id: Uuid,
    id: Uuid,
) -> DbResult<Option<Job>> {
    let row = client
        .query_opt(
            &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1 AND project_id = $2"),
            &[&id, &project_id],
        )
        .await?;
    row.as_ref().map(job_from_row).transpose()
}

/// Where a listing page ends: the `(created_at, id)` of its last job.
pub type ListPosition = (OffsetDateTime, Uuid);

/// The diagnostics a page of jobs holds at most, beyond its first job: a job keeps up to about
/// 150 KB of them, so a hundred of them made pages of 15 MB, each costing the API a second of
/// work and its memory until a slow client had read it.
const PAGE_DIAGNOSTICS_BYTES: i64 = 1024 * 1024;

/// One page of a project's jobs.
pub struct JobList {
    pub jobs: Vec<Job>,
    /// More jobs follow the last of this page.
    pub more: bool,
}

/// A project's jobs, newest first, after `after` (keyset pagination, so pages stay stable
/// while jobs are added), optionally only those in `status`; up to `limit` jobs, fewer when
/// their diagnostics pass [`PAGE_DIAGNOSTICS_BYTES`] (the first always comes).
pub async fn list_jobs(
    client: &impl GenericClient,
    project_id: Uuid,
    status: Option<JobStatus>,
    after: Option<ListPosition>,
    limit: i64,
) -> DbResult<JobList> {
    let (after_created, after_id) = after.unzip();
    let rows = client
        .query(
            &format!(
                "SELECT {JOB_COLUMNS}, octet_length(diagnostics::text) AS diagnostics_bytes
                 FROM jobs
                 WHERE project_id = $1
                   AND ($2::text IS NULL OR status = $2)
                   AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4))
                 ORDER BY created_at DESC, id DESC
                 LIMIT $5"
            ),
            &[
                &project_id,
                &status.map(JobStatus::as_str),
                &after_created,
                &after_id,
                &(limit + 1),
            ],
        )
        .await?;
    // Rows past the byte budget are never decoded.
    let mut jobs = Vec::new();
    let mut bytes = 0;
    for row in rows.iter().take(limit as usize) {
        bytes += i64::from(row.get::<_, i32>("diagnostics_bytes"));
        if !jobs.is_empty() && bytes > PAGE_DIAGNOSTICS_BYTES {
            break;
        }
        jobs.push(job_from_row(row)?);
    }
    let more = rows.len() > jobs.len();
    Ok(JobList { jobs, more })
}
