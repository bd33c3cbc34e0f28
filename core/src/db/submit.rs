//! Submitting a job: an idempotent replay, a result reused from the cache, or a new job in
//! the queue, decided and written in the API's transaction (bound to the job's project).

use super::jobs::{job_from_row, JOB_COLUMNS};
use super::project_files::name_stored_files;
use super::{DbError, DbResult};
use crate::model::{CheckMode, ContentHash, Job, NewJob};
use crate::validate::MAX_JOB_FILES_BYTES;
use deadpool_postgres::GenericClient;
use std::collections::HashMap;
use std::sync::LazyLock;
use tokio_postgres::Row;
use uuid::Uuid;

/// An `Idempotency-Key` and the hash of the request it came with.
pub struct Idempotency<'a> {
    pub key: &'a str,
    pub request_hash: &'a [u8],
}

/// The operator's rules a submission obeys.
pub struct Admission {
    pub max_attempts: i32,
    /// The most queued jobs a project may have.
    pub max_queued: i64,
    /// The most bytes of sources a project's queued jobs may hold.
    pub max_queued_bytes: i64,
    /// Whether a submission may reuse an identical earlier job's result.
    pub result_cache: bool,
    /// Jobs older than this many days are not reused (0: no retention, no age limit).
    pub retention_days: u32,
    /// A scheduler whose heartbeat is older than this is not counted as running an image.
    pub scheduler_live_seconds: u64,
}

/// Which of the queue's limits a submission met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    Jobs,
    SourceBytes,
}

pub enum Submitted {
    /// A new job was queued.
    New(Job),
    /// A new job completed at once with the outputs of an identical earlier one.
    Reused(Job),
    /// The key was used before in this project; `same_request` tells a replay from a conflict.
    Existing { job: Job, same_request: bool },
    /// The project already has its maximum of queued jobs, or of their sources' bytes.
    QueueFull(QueueLimit),
    /// The job names project files the project does not hold (every one of them, sorted).
    MissingFiles(Vec<ContentHash>),
    /// The job's files take this many bytes, more than [`MAX_JOB_FILES_BYTES`].
    FilesTooLarge(i64),
}

/// Submits a job within the caller's transaction; `inputs` is its result cache key
/// ([`crate::cache_key::input_hash`]). With an idempotency key, a job already
/// submitted under it is returned instead. Then, unless the request or the operator opted out,
/// a retained `Succeeded` job of the project with the same inputs (its TeX Live year among
/// them), run by the image every live scheduler serving that year runs for it, on the same
/// UTC day, is reused: the new job is written `Succeeded` with its
/// outputs, and no compile runs. Otherwise a project with `max_queued` jobs waiting gets
/// [`Submitted::QueueFull`], and the job is queued with its files. The id is random (v4) and
/// redrawn if its first segment, which names the job's storage keys, is taken by another job.
pub async fn insert_job(
    transaction: &impl GenericClient,
    job: &NewJob,
    inputs: &[u8],
    admission: &Admission,
    idempotency: Option<Idempotency<'_>>,
) -> DbResult<Submitted> {
    insert_job_drawing_ids(
        transaction,
        job,
        inputs,
        admission,
        idempotency,
        Uuid::new_v4,
    )
    .await
}

/// [`insert_job`] with the ids drawn by `draw_id`, so that a test can force a collision.
pub(crate) async fn insert_job_drawing_ids(
    transaction: &impl GenericClient,
    job: &NewJob,
    inputs: &[u8],
    admission: &Admission,
    idempotency: Option<Idempotency<'_>>,
    mut draw_id: impl FnMut() -> Uuid,
) -> DbResult<Submitted> {
    if let Some(existing) = find_idempotent(transaction, job.project_id, &idempotency).await? {
        return Ok(existing);
    }
    let hashes: Vec<ContentHash> = job.stored_files.iter().map(|file| file.sha256).collect();
    let sizes = name_stored_files(transaction, &hashes).await?;
    let mut missing: Vec<ContentHash> = hashes
        .into_iter()
        .filter(|hash| !sizes.contains_key(hash))
        .collect();
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Ok(Submitted::MissingFiles(missing));
    }
    let files_bytes = job
        .files
        .iter()
        .map(|file| file.content.len() as i64)
        .sum::<i64>()
        + job
            .stored_files
            .iter()
            .map(|file| sizes[&file.sha256])
            .sum::<i64>();
    if files_bytes > MAX_JOB_FILES_BYTES {
        return Ok(Submitted::FilesTooLarge(files_bytes));
    }
    let original = match job.use_cache && admission.result_cache {
        true => find_reusable(transaction, job, inputs, admission).await?,
        false => None,
    };
    let (key, request_hash) = match &idempotency {
        Some(i) => (Some(i.key), Some(i.request_hash)),
        None => (None, None),
    };
    for _ in 0..8 {
        let id = draw_id();
        let inserted = match original {
            Some(original) => {
                let reuse = transaction.prepare_cached(&INSERT_REUSE).await?;
                transaction
                    .query_opt(
                        &reuse,
                        &[&id, &admission.max_attempts, &key, &request_hash, &original],
                    )
                    .await?
                    .map(|row| job_from_row(&row).map(Submitted::Reused))
            }
            None => {
                let queue = transaction.prepare_cached(&INSERT_QUEUED).await?;
                let row = transaction
                    .query_one(
                        &queue,
                        &[
                            &id,
                            &job.project_id,
                            &job.engine.as_str(),
                            &job.halt_on_error,
                            &(job.timeout_seconds as i32),
                            &admission.max_attempts,
                            &key,
                            &request_hash,
                            &inputs,
                            &job.main,
                            &job.use_cache,
                            &admission.max_queued,
                            &job.source_bytes(),
                            &admission.max_queued_bytes,
                            &job.texlive,
                            &job.draft,
                            &job.wordcount,
                            &job.check.map(CheckMode::as_str),
                            &job.thumbnail_width.map(|width| width as i32),
                        ],
                    )
                    .await?;
                match (
                    row.get::<_, bool>("room_for_a_job"),
                    row.get::<_, bool>("room_for_its_sources"),
                    row.get::<_, Option<Uuid>>("id"),
                ) {
                    (false, _, _) => return Ok(Submitted::QueueFull(QueueLimit::Jobs)),
                    (true, false, _) => return Ok(Submitted::QueueFull(QueueLimit::SourceBytes)),
                    (true, true, Some(_)) => {
                        insert_files(transaction, id, job, &sizes).await?;
                        Some(job_from_row(&row).map(Submitted::New))
                    }
                    (true, true, None) => None,
                }
            }
        };
        if let Some(submitted) = inserted {
            return submitted;
        }
        // The conflict may be a concurrent request with the same key, committed meanwhile.
        if let Some(existing) = find_idempotent(transaction, job.project_id, &idempotency).await? {
            return Ok(existing);
        }
    }
    Err(DbError::Corrupt("no free job id after 8 draws".into()))
}

/// A job written `Succeeded` with the outputs of the original (`$5`) it reuses.
static INSERT_REUSE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO jobs (id, project_id, engine, texlive, halt_on_error, draft, wordcount,
         check_mode, thumbnail_width, timeout_seconds, max_attempts, idempotency_key,
         request_hash, input_hash, main_path,
         status, started_at, finished_at, duration_ms, pdf_storage_key, log_storage_key,
         diagnostics, image_id, reused_from, pdf_sha256, log_sha256, synctex_storage_key,
         synctex_sha256, word_count, checked, thumbnail_storage_key, thumbnail_sha256)
     SELECT $1, project_id, engine, texlive, halt_on_error, draft, wordcount, check_mode,
            thumbnail_width, timeout_seconds,
            $2, $3, $4, input_hash,
            main_path, 'Succeeded', now(), now(), duration_ms, pdf_storage_key, log_storage_key,
            diagnostics, image_id, id, pdf_sha256, log_sha256, synctex_storage_key, synctex_sha256,
            word_count, checked, thumbnail_storage_key, thumbnail_sha256
     FROM jobs WHERE id = $5
     ON CONFLICT DO NOTHING
     RETURNING {JOB_COLUMNS}"
    )
});

/// A queued job, in one statement with the queue limits' check: admitted while the project
/// has fewer than `$12` queued jobs, whose sources with this one's (`$13` bytes) hold at most
/// `$14` bytes, read from the counts that triggers keep (migrations V12, V18), so that its
/// cost does not grow with the backlog. A false `room_for_…` is a full queue; `id` null with
/// room for both is an id or idempotency key taken meanwhile (`ON CONFLICT DO NOTHING`).
static INSERT_QUEUED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH waiting AS (
         SELECT coalesce(sum(queued), 0) < $12::int8 AS room_for_a_job,
                coalesce(sum(queued_bytes), 0) + $13::int8 <= $14::int8 AS room_for_its_sources
         FROM queue_depth WHERE project_id = $2::uuid
     ), job AS (
         INSERT INTO jobs (id, project_id, engine, halt_on_error, timeout_seconds, max_attempts,
                           idempotency_key, request_hash, input_hash, main_path, use_cache,
                           source_bytes, texlive, draft, wordcount, check_mode, thumbnail_width)
         SELECT $1::uuid, $2::uuid, $3::text, $4::boolean, $5::integer, $6::integer, $7::text,
                $8::bytea, $9::bytea, $10::text, $11::boolean, $13::int8, $15::text, $16::boolean,
                $17::boolean, $18::text, $19::integer
         FROM waiting WHERE room_for_a_job AND room_for_its_sources
         ON CONFLICT DO NOTHING
         RETURNING {JOB_COLUMNS}
     )
     SELECT waiting.room_for_a_job, waiting.room_for_its_sources, job.*
     FROM waiting LEFT JOIN job ON true"
    )
});

/// The job's files, once the job is in (row-level security admits files of the project's own
/// jobs only, so they cannot go into the same statement as the job): the bytes of those sent,
/// the hash and size of those named.
async fn insert_files(
    transaction: &impl GenericClient,
    id: Uuid,
    job: &NewJob,
    sizes: &HashMap<ContentHash, i64>,
) -> DbResult<()> {
    let mut paths: Vec<&str> = job.files.iter().map(|f| f.path.as_str()).collect();
    let mut contents: Vec<Option<&[u8]>> = job
        .files
        .iter()
        .map(|f| Some(f.content.as_slice()))
        .collect();
    let mut hashes: Vec<Option<&[u8]>> = vec![None; job.files.len()];
    let mut file_sizes: Vec<Option<i64>> = vec![None; job.files.len()];
    for file in &job.stored_files {
        paths.push(&file.path);
        contents.push(None);
        hashes.push(Some(file.sha256.0.as_slice()));
        file_sizes.push(Some(sizes[&file.sha256]));
    }
    let insert = transaction
        .prepare_cached(
            "INSERT INTO job_files (job_id, path, content, sha256, size)
             SELECT $1, path, content, sha256, size
             FROM unnest($2::text[], $3::bytea[], $4::bytea[], $5::int8[])
                  AS f (path, content, sha256, size)",
        )
        .await?;
    transaction
        .execute(&insert, &[&id, &paths, &contents, &hashes, &file_sizes])
        .await?;
    Ok(())
}

/// The newest job of the project that a submission with `inputs` may reuse (see
/// [`insert_job`]); a job that itself reused another is never an original. Nor is one that may
/// have started from kept state that a compile from nothing (`"cache": false`) of the same
/// document, in any engine, deletes: it is an original only if every such compile had
/// recorded its deletion (`state_cleared_at`) before the original was claimed. That orders
/// by the deletion itself, not by submission: a compile submitted after the one from nothing
/// can still run first.
async fn find_reusable(
    client: &impl GenericClient,
    job: &NewJob,
    inputs: &[u8],
    admission: &Admission,
) -> DbResult<Option<Uuid>> {
    let row = client
        .query_opt(
            "SELECT id FROM jobs AS original
             WHERE project_id = $1 AND input_hash = $2
               AND status = 'Succeeded' AND reused_from IS NULL
               AND texlive = $5 AND image_id = fleet_sandbox_image($3, $5)
               AND date_trunc('day', created_at, 'UTC') = date_trunc('day', now(), 'UTC')
               AND ($4 = 0 OR finished_at > now() - make_interval(days => $4))
               -- A count, a check or a thumbnail asked for and not given (out of time, say)
               -- is no result for the next request that asks.
               AND NOT (wordcount AND word_count IS NULL)
               AND NOT (check_mode IS NOT NULL AND NOT checked)
               AND NOT (thumbnail_width IS NOT NULL AND thumbnail_storage_key IS NULL)
               AND NOT EXISTS (
                   SELECT 1 FROM jobs AS fresh
                    WHERE fresh.project_id = $1 AND NOT fresh.use_cache
                      AND fresh.main_path = original.main_path
                      AND fresh.id <> original.id
                      AND CASE WHEN fresh.state_cleared_at IS NOT NULL
                               THEN fresh.state_cleared_at > original.started_at
                               -- Still to clear, or it never ran (cancelled while queued).
                               ELSE fresh.status IN ('Queued', 'Running') END)
             ORDER BY finished_at DESC
             LIMIT 1",
            &[
                &job.project_id,
                &inputs,
                &(admission.scheduler_live_seconds as f64),
                &(admission.retention_days as i32),
                &job.texlive,
            ],
        )
        .await?;
    Ok(row.map(|row: Row| row.get(0)))
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
