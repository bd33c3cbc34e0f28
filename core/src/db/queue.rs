//! The queue protocol of the scheduler, in one readable place.
//!
//! - **claim** ([`super::claim_jobs`], in `claim.rs`): writes a lease (owner + expiry) into
//!   each claimed row;
//! - **lease** ([`renew_lease`]): the owner renews it while the compile runs;
//! - **fencing**: every later write names the lease owner and `status = 'Running'`, so a
//!   scheduler that lost its job (cancelled, or its lease rescued) cannot overwrite anything;
//! - **finish** ([`finish_jobs`], in `finish.rs`, committed in groups), **retry**
//!   ([`retry_or_fail_job`]), **hand back** ([`hand_back_job`]) end a lease; **rescue** ([`rescue_expired_leases`]) ends the leases
//!   of schedulers that died;
//! - **cancellation** ([`is_cancelled`]): whether a stopped compile's outputs are to go;
//! - **retention** ([`expired_jobs`], [`delete_finished_jobs`]).

use super::{parsed, DbResult, Pool};
use crate::model::{JobError, JobStatus};
use std::collections::HashMap;
use std::time::Duration;
use uuid::Uuid;

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

/// Records that the running compile from nothing `id` has deleted its document's kept state
/// (see `find_reusable`). Fenced by the lease.
pub async fn record_state_cleared(pool: &Pool, id: Uuid, owner: &str) -> DbResult<bool> {
    let client = pool.get().await?;
    let recorded = client
        .execute(
            "UPDATE jobs SET state_cleared_at = now()
             WHERE id = $1 AND lease_owner = $2 AND status = 'Running'",
            &[&id, &owner],
        )
        .await?;
    Ok(recorded == 1)
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
        .map(|row| Ok((row.get("id"), parsed(row, "status")?)))
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

/// The lease owner of each of these jobs or page previews that is running (a sandbox
/// container carries the id of what it runs).
pub async fn running_lease_owners(pool: &Pool, ids: &[Uuid]) -> DbResult<HashMap<Uuid, String>> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "SELECT id, lease_owner FROM jobs WHERE id = ANY($1) AND status = 'Running'
             UNION ALL
             SELECT id, lease_owner FROM page_previews WHERE id = ANY($1) AND status = 'Running'",
            &[&ids],
        )
        .await?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

/// Whether the job was cancelled by its client: its outputs, if an upload finished before the
/// compile was stopped, belong to no outcome.
pub async fn is_cancelled(pool: &Pool, id: Uuid) -> DbResult<bool> {
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "SELECT 1 FROM jobs WHERE id = $1 AND status = 'Cancelled'",
            &[&id],
        )
        .await?;
    Ok(row.is_some())
}

/// The queue's depth across all schedulers.
pub struct QueueStats {
    pub queued: i64,
    pub running: i64,
    /// Age of the oldest queued job in seconds; 0 when none waits.
    pub oldest_queued_seconds: f64,
    /// Queued jobs of a TeX Live year that no live scheduler serves: they wait until one does.
    pub unserved: i64,
}

/// The queue's depth, read only through the partial indexes on the two states; schedulers
/// with a heartbeat at most `live_seconds` old are live.
pub async fn queue_stats(pool: &Pool, live_seconds: u64) -> DbResult<QueueStats> {
    let client = pool.get().await?;
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM jobs WHERE status = 'Queued'),
                    (SELECT count(*) FROM jobs WHERE status = 'Running'),
                    (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
                     FROM jobs WHERE status = 'Queued'),
                    (SELECT count(*) FROM jobs WHERE status = 'Queued' AND texlive NOT IN (
                        SELECT jsonb_object_keys(images) FROM schedulers
                        WHERE heartbeat_at > now() - make_interval(secs => $1)))",
            &[&(live_seconds as f64)],
        )
        .await?;
    Ok(QueueStats {
        queued: row.get(0),
        running: row.get(1),
        oldest_queued_seconds: row.get(2),
        unserved: row.get(3),
    })
}

/// Finished jobs past the retention age, oldest first. Their objects are named by their ids
/// ([`crate::model::storage_keys`]), whatever the rows recorded, so that an object uploaded
/// for an outcome that was never recorded goes with its job too. A job whose outputs a
/// younger job reuses (the result cache) waits until that job is deleted.
pub async fn expired_jobs(pool: &Pool, retention_days: u32, limit: i64) -> DbResult<Vec<Uuid>> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "SELECT id FROM jobs AS original
             WHERE finished_at < now() - make_interval(days => $1)
               AND NOT EXISTS (SELECT 1 FROM jobs WHERE reused_from = original.id)
             ORDER BY finished_at LIMIT $2",
            &[&(retention_days as i32), &limit],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
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
    row.map(|row| parsed(&row, "status")).transpose()
}
