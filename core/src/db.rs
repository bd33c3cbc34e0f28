//! Every SQL statement texfleet runs, in one place (the model is River's queue SQL).
//!
//! The queue protocol, in short:
//! - the API inserts a `Queued` row and its files in one transaction; a trigger sends
//!   `NOTIFY texfleet_jobs` so that idle schedulers wake at once;
//! - a scheduler claims with `FOR UPDATE SKIP LOCKED`, so concurrent schedulers never block on or
//!   double-claim a row, and writes its lease (owner + expiry) into the row;
//! - every later write of the scheduler names its lease owner and `status = 'Running'`, so a
//!   scheduler that lost its job (cancelled, or its lease rescued) cannot overwrite the outcome.

use crate::model::{
    ClaimedJob, Diagnostic, Engine, ErrorCode, Job, JobError, JobStatus, NewJob, SourceFile,
};
use crate::Config;
use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod, Runtime};
use futures::StreamExt;
use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;
use time::OffsetDateTime;
use tokio_postgres::{AsyncMessage, GenericClient, NoTls, Row};
use uuid::Uuid;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

pub type Pool = deadpool_postgres::Pool;

/// Channel a trigger notifies whenever a job becomes claimable (payload: the job id).
pub const JOBS_QUEUED_CHANNEL: &str = "texfleet_jobs";
/// Channel a trigger notifies whenever a job reaches a final state (payload: the job id).
pub const JOBS_FINISHED_CHANNEL: &str = "texfleet_job_finished";

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Postgres could not be reached or dropped the connection: worth retrying later.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Query(tokio_postgres::Error),
    #[error("unexpected data in the database: {0}")]
    Corrupt(String),
}

impl From<tokio_postgres::Error> for DbError {
    fn from(error: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        let unavailable_states = [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::CONNECTION_FAILURE,
            SqlState::CONNECTION_EXCEPTION,
            SqlState::TOO_MANY_CONNECTIONS,
        ];
        match error.code() {
            None => DbError::Unavailable(error.to_string()),
            Some(code) if unavailable_states.contains(code) => {
                DbError::Unavailable(error.to_string())
            }
            Some(_) => DbError::Query(error),
        }
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        DbError::Unavailable(error.to_string())
    }
}

pub type DbResult<T> = Result<T, DbError>;

/// A pool for `database_url` (one of the three roles' URLs in [`Config`]) whose waits are
/// bounded, so that a request fails fast with `503` while Postgres is down instead of hanging,
/// and recovers by itself once it is back.
pub fn pool(config: &Config, database_url: &str) -> anyhow::Result<Pool> {
    let pg_config = tokio_postgres::Config::from_str(database_url)?;
    let manager = Manager::from_config(
        pg_config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(manager)
        .max_size(config.database_pool_size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(5)))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()?)
}

async fn connect(database_url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(database_url, NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(%error, "postgres connection closed");
        }
    });
    Ok(client)
}

/// Applies the SQL files of `migrations/` that this database has not seen yet.
pub async fn migrate(database_url: &str) -> anyhow::Result<Vec<String>> {
    let mut client = connect(database_url).await?;
    let report = embedded::migrations::runner()
        .run_async(&mut client)
        .await?;
    Ok(report
        .applied_migrations()
        .iter()
        .map(|m| m.to_string())
        .collect())
}

/// This database's deployment id (see migrations/V3__deployment.sql).
pub async fn deployment_id(pool: &Pool) -> DbResult<Uuid> {
    Ok(pool
        .get()
        .await?
        .query_one("SELECT id FROM deployment", &[])
        .await?
        .get(0))
}

/// Creates an empty database beside the one `admin_url` names (for tests and benchmarks) and
/// returns its URL; `admin_url` must be URL-form and name a role that may create databases.
pub async fn create_database(admin_url: &str, name: &str) -> anyhow::Result<String> {
    let client = connect(admin_url).await?;
    client
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await?;
    let (prefix, _) = admin_url
        .rsplit_once('/')
        .ok_or_else(|| anyhow::anyhow!("a URL-form database URL"))?;
    Ok(format!("{prefix}/{name}"))
}

/// Drops a database made by [`create_database`], whoever is still connected to it.
pub async fn drop_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let client = connect(admin_url).await?;
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await?;
    Ok(())
}

pub async fn ping(pool: &Pool) -> DbResult<()> {
    pool.get().await?.simple_query("SELECT 1").await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Projects and tokens

pub async fn create_project(client: &impl GenericClient, name: &str) -> DbResult<Uuid> {
    let id = Uuid::new_v4();
    client
        .execute(
            "INSERT INTO projects (id, name) VALUES ($1, $2)",
            &[&id, &name],
        )
        .await?;
    Ok(id)
}

pub async fn project_exists(client: &impl GenericClient, id: Uuid) -> DbResult<bool> {
    Ok(client
        .query_opt("SELECT 1 FROM projects WHERE id = $1", &[&id])
        .await?
        .is_some())
}

pub async fn create_token(
    client: &impl GenericClient,
    project_id: Uuid,
    name: &str,
    token_hash: &[u8],
    expires_at: Option<OffsetDateTime>,
) -> DbResult<Uuid> {
    let id = Uuid::new_v4();
    client
        .execute(
            "INSERT INTO api_tokens (id, project_id, name, token_hash, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
            &[&id, &project_id, &name, &token_hash, &expires_at],
        )
        .await?;
    Ok(id)
}

/// The token's project, if the hash names a live token. The SQL function (migration V4) runs
/// as the owner, so the API role never reads the tokens table; it refreshes `last_used_at` at
/// most once a minute so that authentication does not turn every request into a write.
pub async fn authenticate(
    client: &impl GenericClient,
    token_hash: &[u8],
) -> DbResult<Option<Uuid>> {
    let row = client
        .query_one("SELECT authenticate($1)", &[&token_hash])
        .await?;
    Ok(row.get(0))
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

pub struct TokenInfo {
    pub id: Uuid,
    pub name: String,
    pub created_at: OffsetDateTime,
    pub expires_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub last_used_at: Option<OffsetDateTime>,
}

pub async fn list_tokens(
    client: &impl GenericClient,
    project_id: Uuid,
) -> DbResult<Vec<TokenInfo>> {
    let rows = client
        .query(
            "SELECT id, name, created_at, expires_at, revoked_at, last_used_at
             FROM api_tokens WHERE project_id = $1 ORDER BY created_at",
            &[&project_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| TokenInfo {
            id: row.get(0),
            name: row.get(1),
            created_at: row.get(2),
            expires_at: row.get(3),
            revoked_at: row.get(4),
            last_used_at: row.get(5),
        })
        .collect())
}

/// Revokes a token; false when no live token has that id.
pub async fn revoke_token(client: &impl GenericClient, token_id: Uuid) -> DbResult<bool> {
    let revoked = client
        .execute(
            "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
            &[&token_id],
        )
        .await?;
    Ok(revoked == 1)
}

// ---------------------------------------------------------------------------------------------
// Jobs, as the API sees them

const JOB_COLUMNS: &str = "id, project_id, status, engine, created_at, started_at, finished_at,
    duration_ms, pdf_storage_key, log_storage_key, error_code, error_message, diagnostics";

fn job_from_row(row: &Row) -> DbResult<Job> {
    let status: &str = row.get("status");
    let engine: &str = row.get("engine");
    let error_code: Option<&str> = row.get("error_code");
    let error = match error_code {
        None => None,
        Some(code) => Some(JobError {
            code: ErrorCode::parse(code)
                .ok_or_else(|| DbError::Corrupt(format!("error code {code:?}")))?,
            message: row
                .get::<_, Option<String>>("error_message")
                .unwrap_or_default(),
        }),
    };
    let diagnostics: serde_json::Value = row.get("diagnostics");
    Ok(Job {
        id: row.get("id"),
        project_id: row.get("project_id"),
        status: JobStatus::parse(status)
            .ok_or_else(|| DbError::Corrupt(format!("status {status:?}")))?,
        engine: Engine::parse(engine)
            .ok_or_else(|| DbError::Corrupt(format!("engine {engine:?}")))?,
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
pub async fn queued_jobs(client: &impl GenericClient, project_id: Uuid) -> DbResult<i64> {
    let row = client
        .query_one(
            "SELECT count(*) FROM jobs WHERE project_id = $1 AND status = 'Queued'",
            &[&project_id],
        )
        .await?;
    Ok(row.get(0))
}

/// Cancels a queued or running job of the project. `Ok(None)` when there is no such job;
/// a terminal job is returned unchanged as `Err(job)` inside `Ok`.
pub async fn cancel_job(
    client: &impl GenericClient,
    project_id: Uuid,
    id: Uuid,
) -> DbResult<Option<Result<Job, Job>>> {
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
    match cancelled {
        Some(row) => Ok(Some(Ok(job_from_row(&row)?))),
        None => Ok(get_job(client, project_id, id).await?.map(Err)),
    }
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

/// A project's jobs, newest first, after `after` (keyset pagination, so pages stay stable
/// while jobs are added), optionally only those in `status`. Returns up to `limit` jobs and
/// whether more follow.
pub async fn list_jobs(
    client: &impl GenericClient,
    project_id: Uuid,
    status: Option<JobStatus>,
    after: Option<ListPosition>,
    limit: i64,
) -> DbResult<(Vec<Job>, bool)> {
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
    Ok((jobs, more))
}

// ---------------------------------------------------------------------------------------------
// Jobs, as the scheduler sees them

/// Claims up to `limit` claimable jobs for `owner` with a lease of `lease_seconds`, never
/// letting a project run more than `per_project` jobs at once.
///
/// Fairness: each project with queued work offers its oldest jobs, at most its free share
/// of `per_project`; offers are taken in turns (a project's running jobs plus the offer's rank
/// within the project), oldest first within a turn. So a project with a thousand queued jobs
/// cannot starve one that submits a single job. The transaction-scoped advisory lock makes
/// the running counts exact across concurrent schedulers; SKIP LOCKED passes over rows that
/// the API is cancelling at that moment.
pub async fn claim_jobs(
    pool: &Pool,
    owner: &str,
    lease_seconds: u64,
    limit: usize,
    per_project: usize,
) -> DbResult<Vec<ClaimedJob>> {
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&CLAIM_LOCK])
        .await?;
    let rows = transaction
        .query(
            "WITH running AS (
                 SELECT project_id, count(*) AS jobs FROM jobs
                 WHERE status = 'Running' GROUP BY project_id
             ), waiting AS (
                 SELECT DISTINCT project_id FROM jobs
                 WHERE status = 'Queued' AND run_after <= now()
             ), offers AS (
                 SELECT offer.id, offer.created_at, coalesce(running.jobs, 0) + offer.rank AS turn
                 FROM waiting
                 LEFT JOIN running USING (project_id)
                 CROSS JOIN LATERAL (
                     SELECT id, created_at, row_number() OVER (ORDER BY created_at) AS rank
                     FROM jobs
                     WHERE jobs.project_id = waiting.project_id
                       AND status = 'Queued' AND run_after <= now()
                     ORDER BY created_at
                     LIMIT greatest($4 - coalesce(running.jobs, 0), 0)
                 ) AS offer
                 ORDER BY turn, offer.created_at
                 LIMIT $3
             ), claimable AS (
                 SELECT id FROM jobs WHERE id IN (SELECT id FROM offers) FOR UPDATE SKIP LOCKED
             )
             UPDATE jobs SET status = 'Running', started_at = now(), attempts = attempts + 1,
                             lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2)
             FROM claimable WHERE jobs.id = claimable.id
             RETURNING jobs.id, jobs.project_id, jobs.engine, jobs.halt_on_error,
                       jobs.timeout_seconds, jobs.attempts,
                       extract(epoch FROM now() - jobs.created_at)::float8",
            &[
                &owner,
                &(lease_seconds as f64),
                &(limit as i64),
                &(per_project as i64),
            ],
        )
        .await?;
    transaction.commit().await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = rows.iter().map(|row| row.get(0)).collect();
    let mut files: HashMap<Uuid, Vec<SourceFile>> = HashMap::new();
    for row in client
        .query(
            "SELECT job_id, path, content FROM job_files WHERE job_id = ANY($1)",
            &[&ids],
        )
        .await?
    {
        files.entry(row.get(0)).or_default().push(SourceFile {
            path: row.get(1),
            content: row.get(2),
        });
    }
    rows.iter()
        .map(|row| {
            let id: Uuid = row.get(0);
            let engine: &str = row.get(2);
            Ok(ClaimedJob {
                id,
                project_id: row.get(1),
                engine: Engine::parse(engine)
                    .ok_or_else(|| DbError::Corrupt(format!("engine {engine:?}")))?,
                halt_on_error: row.get(3),
                timeout_seconds: row.get::<_, i32>(4) as u32,
                attempt: row.get(5),
                waited_seconds: row.get(6),
                files: files.remove(&id).unwrap_or_default(),
            })
        })
        .collect()
}

/// Key of the advisory lock that serialises claims (an arbitrary constant: "texfleet").
const CLAIM_LOCK: i64 = 0x7465_7866_6c65_6574;

/// Extends `owner`'s lease on a running job; false when the lease is gone (the job was
/// cancelled, or rescued after the lease expired), which tells the compile to stop.
pub async fn renew_lease(pool: &Pool, id: Uuid, owner: &str, lease_seconds: u64) -> DbResult<bool> {
    let client = pool.get().await?;
    let renewed = client
        .execute(
            "UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $3)
             WHERE id = $1 AND lease_owner = $2 AND status = 'Running'",
            &[&id, &owner, &(lease_seconds as f64)],
        )
        .await?;
    Ok(renewed == 1)
}

/// Returns running jobs whose lease expired (their scheduler died or lost Postgres) to the
/// queue, or fails them once they have used every attempt. Any scheduler may run this.
pub async fn rescue_expired_leases(pool: &Pool) -> DbResult<Vec<(Uuid, JobStatus)>> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "UPDATE jobs SET
                 status = CASE WHEN attempts < max_attempts THEN 'Queued' ELSE 'Failed' END,
                 finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE now() END,
                 error_code = CASE WHEN attempts < max_attempts THEN NULL ELSE 'sandbox_error' END,
                 error_message = CASE WHEN attempts < max_attempts THEN NULL
                                 ELSE 'the scheduler running the job stopped answering on every attempt' END,
                 run_after = now(), lease_owner = NULL, lease_expires_at = NULL
             WHERE status = 'Running' AND lease_expires_at < now()
             RETURNING id, status",
            &[],
        )
        .await?;
    rows.iter()
        .map(|row| {
            let status: &str = row.get(1);
            let status = JobStatus::parse(status)
                .ok_or_else(|| DbError::Corrupt(format!("status {status:?}")))?;
            Ok((row.get(0), status))
        })
        .collect()
}

/// Gives a running job back to the queue untouched (the scheduler is shutting down): the
/// attempt it used is returned too, since the job did nothing wrong.
pub async fn hand_back_job(pool: &Pool, id: Uuid, owner: &str) -> DbResult<bool> {
    let client = pool.get().await?;
    let handed = client
        .execute(
            "UPDATE jobs SET status = 'Queued', attempts = attempts - 1, run_after = now(),
                             started_at = NULL, lease_owner = NULL, lease_expires_at = NULL
             WHERE id = $1 AND lease_owner = $2 AND status = 'Running'",
            &[&id, &owner],
        )
        .await?;
    Ok(handed == 1)
}

/// The lease owner of each of these jobs that is running.
pub async fn running_lease_owners(pool: &Pool, ids: &[Uuid]) -> DbResult<HashMap<Uuid, String>> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "SELECT id, lease_owner FROM jobs WHERE id = ANY($1) AND status = 'Running'",
            &[&ids],
        )
        .await?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

/// Jobs waiting and running across all schedulers, and the age of the oldest queued job in
/// seconds (0 when none waits). Both read only the partial indexes on those states.
pub async fn queue_stats(pool: &Pool) -> DbResult<(i64, i64, f64)> {
    let client = pool.get().await?;
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM jobs WHERE status = 'Queued'),
                    (SELECT count(*) FROM jobs WHERE status = 'Running'),
                    (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
                     FROM jobs WHERE status = 'Queued')",
            &[],
        )
        .await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// A finished job past the retention age, with the objects it owns.
pub struct ExpiredJob {
    pub id: Uuid,
    pub storage_keys: Vec<String>,
}

pub async fn expired_jobs(
    pool: &Pool,
    retention_days: u32,
    limit: i64,
) -> DbResult<Vec<ExpiredJob>> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "SELECT id, pdf_storage_key, log_storage_key FROM jobs
             WHERE finished_at < now() - make_interval(days => $1)
             ORDER BY finished_at LIMIT $2",
            &[&(retention_days as i32), &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| ExpiredJob {
            id: row.get(0),
            storage_keys: [row.get::<_, Option<String>>(1), row.get(2)]
                .into_iter()
                .flatten()
                .collect(),
        })
        .collect())
}

/// Deletes finished jobs (their files go with them); a job that is not finished is kept.
pub async fn delete_finished_jobs(pool: &Pool, ids: &[Uuid]) -> DbResult<u64> {
    let client = pool.get().await?;
    Ok(client
        .execute(
            "DELETE FROM jobs WHERE id = ANY($1) AND finished_at IS NOT NULL",
            &[&ids],
        )
        .await?)
}

/// The final outcome of a compile, as the scheduler records it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: JobStatus,
    pub error: Option<JobError>,
    pub diagnostics: Vec<Diagnostic>,
    pub pdf_storage_key: Option<String>,
    pub log_storage_key: Option<String>,
    pub duration_ms: Option<i64>,
}

/// Records a final outcome and returns the job's end-to-end time (submission to now), or
/// None when `owner` no longer holds the job's lease.
pub async fn finish_job(
    pool: &Pool,
    id: Uuid,
    owner: &str,
    outcome: &Outcome,
) -> DbResult<Option<f64>> {
    let client = pool.get().await?;
    let diagnostics = serde_json::to_value(&outcome.diagnostics)
        .map_err(|e| DbError::Corrupt(format!("diagnostics: {e}")))?;
    let error_code = outcome.error.as_ref().map(|e| e.code.as_str());
    let error_message = outcome.error.as_ref().map(|e| e.message.as_str());
    let row = client
        .query_opt(
            "UPDATE jobs SET status = $3, finished_at = now(), lease_owner = NULL,
                             lease_expires_at = NULL, error_code = $4, error_message = $5,
                             diagnostics = $6, pdf_storage_key = $7, log_storage_key = $8,
                             duration_ms = $9
             WHERE id = $1 AND lease_owner = $2 AND status = 'Running'
             RETURNING extract(epoch FROM finished_at - created_at)::float8",
            &[
                &id,
                &owner,
                &outcome.status.as_str(),
                &error_code,
                &error_message,
                &diagnostics,
                &outcome.pdf_storage_key,
                &outcome.log_storage_key,
                &outcome.duration_ms,
            ],
        )
        .await?;
    Ok(row.map(|row| row.get(0)))
}

/// After an infrastructure failure: back to `Queued` after `backoff`, or `Failed` with `error`
/// once the job has used all its attempts. Returns the status written, or None when `owner`
/// no longer holds the lease.
pub async fn retry_or_fail_job(
    pool: &Pool,
    id: Uuid,
    owner: &str,
    backoff: Duration,
    error: &JobError,
) -> DbResult<Option<JobStatus>> {
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "UPDATE jobs SET
                 status = CASE WHEN attempts < max_attempts THEN 'Queued' ELSE 'Failed' END,
                 run_after = now() + make_interval(secs => $3),
                 finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE now() END,
                 error_code = CASE WHEN attempts < max_attempts THEN NULL ELSE $4 END,
                 error_message = CASE WHEN attempts < max_attempts THEN NULL ELSE $5 END,
                 lease_owner = NULL, lease_expires_at = NULL
             WHERE id = $1 AND lease_owner = $2 AND status = 'Running'
             RETURNING status",
            &[
                &id,
                &owner,
                &backoff.as_secs_f64(),
                &error.code.as_str(),
                &error.message,
            ],
        )
        .await?;
    row.map(|row| {
        let status: &str = row.get(0);
        JobStatus::parse(status).ok_or_else(|| DbError::Corrupt(format!("status {status:?}")))
    })
    .transpose()
}

/// A notification: its channel and payload. [`RECONNECTED`] as payload means notifications
/// may have been missed while the connection was down, so listeners should look again.
pub struct Notification {
    pub channel: String,
    pub payload: String,
}

pub const RECONNECTED: &str = "";

/// Keeps a connection that LISTENs on `channels` and hands every notification to `deliver`,
/// reconnecting after failures (and then delivering [`RECONNECTED`] on each channel).
pub async fn listen(
    database_url: String,
    channels: &'static [&'static str],
    deliver: impl Fn(Notification),
) {
    loop {
        match listen_once(&database_url, channels, &deliver).await {
            Ok(()) => tracing::warn!("notification connection closed; reconnecting"),
            Err(error) => tracing::warn!(%error, "notification connection failed; retrying"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn listen_once(
    database_url: &str,
    channels: &[&str],
    deliver: &impl Fn(Notification),
) -> anyhow::Result<()> {
    let (client, mut connection) = tokio_postgres::connect(database_url, NoTls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
    let listen = client.batch_execute(&statement);
    // The connection must be polled for LISTEN to complete, so drive both until LISTEN is done.
    tokio::pin!(listen);
    loop {
        tokio::select! {
            result = &mut listen => { result?; break; }
            message = messages.next() => match message {
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => return Ok(()),
            },
        }
    }
    for channel in channels {
        deliver(Notification {
            channel: channel.to_string(),
            payload: RECONNECTED.to_string(),
        });
    }
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(n) = message? {
            deliver(Notification {
                channel: n.channel().to_string(),
                payload: n.payload().to_string(),
            });
        }
    }
    Ok(())
}
