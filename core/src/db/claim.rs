//! The scheduler's claim, the queue's one contended write: a lock per project keeps each
//! project's running count exact without a global lock, and `FOR UPDATE SKIP LOCKED` passes
//! over rows the API is cancelling. The rest of the queue protocol is in `queue.rs`.

use super::{parsed, parsed_opt, DbError, DbResult, Pool};
use crate::model::{ClaimedJob, ContentHash, SourceFile, StoredFile};
use std::collections::HashMap;
use uuid::Uuid;

/// Claims up to `limit` claimable jobs of the TeX Live `years` for `owner` with a lease of
/// `lease_seconds`, never letting a project run more than `per_project` jobs at once.
///
/// Two statements in one transaction. The first picks the projects with claimable work, at
/// most `limit` of them, those with the fewest running jobs first, and takes a
/// transaction-scoped advisory lock per project, in lock-key order (so two claimers never
/// deadlock). The second statement starts after the locks are held, so it sees every claim
/// of those projects that committed before: their running counts are exact, while claimers
/// of other projects go on in parallel (there is no global lock).
///
/// Fairness: each locked project offers its oldest jobs, at most its free share of
/// `per_project`; offers are taken in turns (a project's running jobs plus the offer's rank
/// within the project), oldest first within a turn. So a project with a thousand queued jobs
/// cannot starve one that submits a single job. SKIP LOCKED passes over rows that the API is
/// cancelling at that moment.
pub async fn claim_jobs(
    pool: &Pool,
    owner: &str,
    lease_seconds: u64,
    limit: usize,
    per_project: usize,
    years: &[String],
) -> DbResult<Vec<ClaimedJob>> {
    let mut client = pool.get().await?;
    // A project chosen from a snapshot may have been filled by another claimer by the time
    // its lock is held; the next try chooses again from a fresh snapshot.
    let mut rows = Vec::new();
    for _ in 0..3 {
        let transaction = client.transaction().await?;
        let lock = transaction.prepare_cached(LOCK_WAITING_PROJECTS).await?;
        let projects: Vec<Uuid> = transaction
            .query(
                &lock,
                &[
                    &CLAIM_LOCK_CLASS,
                    &(limit as i64),
                    &(per_project as i64),
                    &years,
                ],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if projects.is_empty() {
            return Ok(Vec::new());
        }
        let claim = transaction.prepare_cached(CLAIM_FROM_PROJECTS).await?;
        rows = transaction
            .query(
                &claim,
                &[
                    &owner,
                    &(lease_seconds as f64),
                    &(limit as i64),
                    &(per_project as i64),
                    &projects,
                    &years,
                ],
            )
            .await?;
        transaction.commit().await?;
        if !rows.is_empty() {
            break;
        }
    }
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = rows.iter().map(|row| row.get(0)).collect();
    let mut files: HashMap<Uuid, Vec<SourceFile>> = HashMap::new();
    let mut stored: HashMap<Uuid, Vec<StoredFile>> = HashMap::new();
    let read_files = client
        .prepare_cached(
            "SELECT job_id, path, content, sha256 FROM job_files WHERE job_id = ANY($1)",
        )
        .await?;
    for row in client.query(&read_files, &[&ids]).await? {
        let path = row.get(1);
        match row.get::<_, Option<Vec<u8>>>(2) {
            Some(content) => files
                .entry(row.get(0))
                .or_default()
                .push(SourceFile { path, content }),
            None => {
                let hash: &[u8] = row.get(3);
                let sha256 = ContentHash(hash.try_into().map_err(|_| {
                    DbError::Corrupt(format!("a job file's hash has {} bytes", hash.len()))
                })?);
                stored
                    .entry(row.get(0))
                    .or_default()
                    .push(StoredFile { path, sha256 })
            }
        }
    }
    rows.iter()
        .map(|row| {
            let id: Uuid = row.get("id");
            Ok(ClaimedJob {
                id,
                project_id: row.get("project_id"),
                engine: parsed(row, "engine")?,
                texlive: row.get("texlive"),
                halt_on_error: row.get("halt_on_error"),
                draft: row.get("draft"),
                wordcount: row.get("wordcount"),
                check: parsed_opt(row, "check_mode")?,
                thumbnail_width: row
                    .get::<_, Option<i32>>("thumbnail_width")
                    .map(|width| width as u32),
                timeout_seconds: row.get::<_, i32>("timeout_seconds") as u32,
                attempt: row.get("attempts"),
                waited_seconds: row.get("waited"),
                source_date_epoch: row.get("source_date_epoch"),
                main: row.get("main_path"),
                use_cache: row.get("use_cache"),
                files: files.remove(&id).unwrap_or_default(),
                stored_files: stored.remove(&id).unwrap_or_default(),
            })
        })
        .collect()
}

/// The class (first key) of the per-project claim locks (an arbitrary constant: "texf").
const CLAIM_LOCK_CLASS: i32 = 0x7465_7866;

/// Locks up to `$2` projects with claimable jobs of the years `$4` and fewer than `$3` running,
/// fewest running first (then the oldest waiting job). The projects are found by a skip scan over the index of queued jobs (one
/// index probe per project, whatever the backlog), and locked in key order once chosen.
const LOCK_WAITING_PROJECTS: &str = "
    WITH RECURSIVE waiting (project_id) AS (
        (SELECT project_id FROM jobs WHERE status = 'Queued' AND texlive = ANY($4)
         ORDER BY project_id LIMIT 1)
        UNION ALL
        SELECT (SELECT next.project_id FROM jobs AS next
                WHERE next.status = 'Queued' AND next.texlive = ANY($4)
                  AND next.project_id > waiting.project_id
                ORDER BY next.project_id LIMIT 1)
        FROM waiting WHERE waiting.project_id IS NOT NULL
    ), chosen AS (
        SELECT waiting.project_id, hashtext(waiting.project_id::text) AS lock_key
        FROM waiting
        CROSS JOIN LATERAL (
            SELECT min(created_at) AS oldest FROM jobs
            WHERE jobs.project_id = waiting.project_id
              AND status = 'Queued' AND texlive = ANY($4) AND run_after <= now()
        ) AS claimable
        CROSS JOIN LATERAL (
            SELECT count(*) AS jobs FROM jobs
            WHERE jobs.project_id = waiting.project_id AND status = 'Running'
        ) AS running
        WHERE claimable.oldest IS NOT NULL AND running.jobs < $3
        ORDER BY running.jobs, claimable.oldest
        LIMIT $2
    )
    SELECT ordered.project_id, pg_advisory_xact_lock($1, ordered.lock_key)
    FROM (SELECT * FROM chosen ORDER BY lock_key OFFSET 0) AS ordered";

/// Claims the oldest jobs of the years `$6` of the locked projects `$5`, in turns (see
/// [`claim_jobs`]).
const CLAIM_FROM_PROJECTS: &str = "
    WITH running AS (
        SELECT project_id, count(*) AS jobs FROM jobs
        WHERE status = 'Running' AND project_id = ANY($5) GROUP BY project_id
    ), offers AS (
        SELECT offer.id, offer.created_at, coalesce(running.jobs, 0) + offer.rank AS turn
        FROM unnest($5::uuid[]) AS waiting (project_id)
        LEFT JOIN running USING (project_id)
        CROSS JOIN LATERAL (
            SELECT id, created_at, row_number() OVER (ORDER BY created_at) AS rank
            FROM jobs
            WHERE jobs.project_id = waiting.project_id
              AND status = 'Queued' AND texlive = ANY($6) AND run_after <= now()
            ORDER BY created_at
            LIMIT greatest($4 - coalesce(running.jobs, 0), 0)
        ) AS offer
        ORDER BY turn, offer.created_at
        LIMIT $3
    ), claimable AS (
        -- The status is checked again on the locked row: a job cancelled since the
        -- statement began is not claimed.
        SELECT id FROM jobs WHERE id IN (SELECT id FROM offers) AND status = 'Queued'
        FOR UPDATE SKIP LOCKED
    )
    UPDATE jobs SET status = 'Running', started_at = now(), attempts = attempts + 1,
                    lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2)
    FROM claimable WHERE jobs.id = claimable.id
    RETURNING jobs.id, jobs.project_id, jobs.engine, jobs.texlive, jobs.halt_on_error,
              jobs.draft, jobs.wordcount, jobs.check_mode, jobs.thumbnail_width,
              jobs.timeout_seconds, jobs.attempts, jobs.main_path, jobs.use_cache,
              extract(epoch FROM now() - jobs.created_at)::float8 AS waited,
              extract(epoch FROM date_trunc('day', jobs.created_at, 'UTC'))::int8
                  AS source_date_epoch";
