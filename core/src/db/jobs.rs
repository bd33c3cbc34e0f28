//! Jobs as the API sees them: submit, read, cancel and list. Every function here runs inside a
//! transaction from [`begin_project`], so that row-level security shows the API role one
//! project's rows and no others; the `project_id` conditions below are a second line.

use super::{parsed, parsed_opt, DbError, DbResult};
use crate::model::{Job, JobError, JobStatus, NewJob};
use time::OffsetDateTime;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

const JOB_COLUMNS: &str = "id, project_id, status, engine, created_at, started_at, finished_at,
    duration_ms, pdf_storage_key, log_storage_key, error_code, error_message, diagnostics";

fn job_from_row(row: &Row) -> DbResult<Job> {
    let error = parsed_opt(row, "error_code")?.map(|code| JobError {
        code,
        message: row
            .get::<_, Option<String>>("error_message")
            .unwrap_or_default(),
    });
    let diagnostics: serde_json::Value = row.get("diagnostics");
    Ok(Job {
        id: row.get("id"),
        project_id: row.get("project_id"),
        status: parsed(row, "status")?,
        engine: parsed(row, "engine")?,
        created_at: row.get("created_at"),
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
        duration_ms: row.get("duration_ms"),
        pdf_storage_key: row.get("pdf_storage_key"),
        log_storage_key: row.get("log_storage_key"),
        error,
        diagnostics: serde_json::from_value(diagnostics)
            .map_err(|e| DbError::Corrupt(format!("diagnostics: {e}")))?,
    })
}

/// Starts a transaction bound to `project_id`: row-level security then shows the API role
/// that project's rows and no others. Every API query after authentication runs in one.
pub async fn begin_project(
    client: &mut deadpool_postgres::Object,
    project_id: Uuid,
) -> DbResult<deadpool_postgres::Transaction<'_>> {
    let transaction = client.transaction().await?;
    transaction
        .execute(
            "SELECT set_config('texfleet.project_id', $1, true)",
            &[&project_id.to_string()],
        )
        .await?;
    Ok(transaction)
}

/// An `Idempotency-Key` and the hash of the request it came with.
pub struct Idempotency<'a> {
    pub key: &'a str,
    pub request_hash: &'a [u8],
}

pub enum Submitted {
    /// A new job was queued.
    New(Job),
    /// The key was used before in this project; `same_request` tells a replay from a conflict.
    Existing { job: Job, same_request: bool },
    /// The project already has its maximum of queued jobs.
    QueueFull,
}

/// Queues a job and its files within the caller's transaction (bound to the job's project).
/// With an idempotency key, a job already submitted under it is returned instead. A project
/// with `max_queued` jobs waiting gets [`Submitted::QueueFull`]. The id is random (v4) and
/// redrawn if its first segment, which names the job's storage keys, is taken by another job.
pub async fn insert_job(
    transaction: &impl GenericClient,
    job: &NewJob,
    max_attempts: i32,
    max_queued: i64,
    idempotency: Option<Idempotency<'_>>,
) -> DbResult<Submitted> {
    if let Some(existing) = find_idempotent(transaction, job.project_id, &idempotency).await? {
        return Ok(existing);
    }
    if queued_jobs(transaction, job.project_id).await? >= max_queued {
        return Ok(Submitted::QueueFull);
    }
    let timeout_seconds = job.timeout_seconds as i32;
    let (key, request_hash) = match &idempotency {
        Some(i) => (Some(i.key), Some(i.request_hash)),
        None => (None, None),
    };
    let mut inserted = None;
    for _ in 0..8 {
        let id = Uuid::new_v4();
        inserted = transaction
            .query_opt(
                &format!(
                    "INSERT INTO jobs (id, project_id, engine, halt_on_error, timeout_seconds,
                                       max_attempts, idempotency_key, request_hash)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                     ON CONFLICT DO NOTHING
                     RETURNING {JOB_COLUMNS}"
                ),
                &[
                    &id,
                    &job.project_id,
                    &job.engine.as_str(),
                    &job.halt_on_error,
                    &timeout_seconds,
                    &max_attempts,
                    &key,
                    &request_hash,
                ],
            )
            .await?;
        if inserted.is_some() {
            break;
        }
        // The conflict may be a concurrent request with the same key, committed meanwhile.
        if let Some(existing) = find_idempotent(transaction, job.project_id, &idempotency).await? {
            return Ok(existing);
        }
    }
    let row = inserted.ok_or_else(|| DbError::Corrupt("no free job id after 8 draws".into()))?;
    let job_row = job_from_row(&row)?;
    let paths: Vec<&str> = job.files.iter().map(|f| f.path.as_str()).collect();
    let contents: Vec<&[u8]> = job.files.iter().map(|f| f.content.as_slice()).collect();
    transaction
        .execute(
            "INSERT INTO job_files (job_id, path, content)
             SELECT $1, path, content FROM unnest($2::text[], $3::bytea[]) AS f (path, content)",
            &[&job_row.id, &paths, &contents],
        )
        .await?;
    Ok(Submitted::New(job_row))
}

async fn find_idempotent(
    client: &impl GenericClient,
    project_id: Uuid,
    idempotency: &Option<Idempotency<'_>>,
) -> DbResult<Option<Submitted>> {
    let Some(idempotency) = idempotency else {
        return Ok(None);
    };
    let row = client
        .query_opt(
            &format!(
                "SELECT {JOB_COLUMNS}, request_hash FROM jobs
                      WHERE project_id = $1 AND idempotency_key = $2"
            ),
            &[&project_id, &idempotency.key],
        )
        .await?;
    row.map(|row| {
        let stored_hash: Option<&[u8]> = row.get("request_hash");
        Ok(Submitted::Existing {
            job: job_from_row(&row)?,
            same_request: stored_hash == Some(idempotency.request_hash),
        })
    })
    .transpose()
}

/// How many jobs of a project wait in the queue (for the per-project queue limit).
async fn queued_jobs(client: &impl GenericClient, project_id: Uuid) -> DbResult<i64> {
    let row = client
        .query_one(
            "SELECT count(*) FROM jobs WHERE project_id = $1 AND status = 'Queued'",
            &[&project_id],
        )
        .await?;
    Ok(row.get(0))
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

/// One page of a project's jobs.
pub struct JobList {
    pub jobs: Vec<Job>,
    /// More jobs follow the last of this page.
    pub more: bool,
}

/// A project's jobs, newest first, after `after` (keyset pagination, so pages stay stable
/// while jobs are added), optionally only those in `status`; up to `limit` jobs.
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
                "SELECT {JOB_COLUMNS} FROM jobs
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
    let more = rows.len() as i64 > limit;
    let jobs = rows
        .iter()
        .take(limit as usize)
        .map(job_from_row)
        .collect::<DbResult<Vec<_>>>()?;
    Ok(JobList { jobs, more })
}
