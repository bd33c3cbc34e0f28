//! Finishing jobs, committed in groups. A compile's end is one row update, but each
//! transaction costs Postgres a WAL flush: a scheduler finishing its jobs one transaction
//! each spends most of the queue's time on commits (the queue reached 38% of Postgres' batched
//! ceiling that way). A [`Finisher`] commits every outcome that arrives while the previous
//! group's commit is in flight together, in one statement, so a lone outcome waits for
//! nothing and a burst costs one commit. Each update is fenced by the lease, as in
//! `queue.rs`.

use super::{DbError, DbResult, Pool};
use crate::model::{Diagnostic, JobError, JobStatus, WordCount};
use serde_json::Value;
use std::collections::HashMap;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// The final outcome of a compile, as the scheduler records it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: JobStatus,
    pub error: Option<JobError>,
    pub diagnostics: Vec<Diagnostic>,
    pub pdf_storage_key: Option<String>,
    pub log_storage_key: Option<String>,
    pub synctex_storage_key: Option<String>,
    pub thumbnail_storage_key: Option<String>,
    pub duration_ms: Option<i64>,
    /// Hex SHA-256 of the stored PDF, log, SyncTeX file and thumbnail.
    pub pdf_sha256: Option<String>,
    pub log_sha256: Option<String>,
    pub synctex_sha256: Option<String>,
    pub thumbnail_sha256: Option<String>,
    /// The sandbox image that compiled it (the result cache reuses only the same image's).
    pub image_id: String,
    /// The preamble format cache's answer (`hit`, `miss`, `unavailable`), if it was asked.
    pub preamble_cache: Option<&'static str>,
    /// Whether the compile started from the last compile's auxiliary files.
    pub incremental: bool,
    /// texcount's count, when the job asked for one and got it.
    pub word_count: Option<WordCount>,
    /// chktex checked the sources, as the job asked.
    pub checked: bool,
}

impl Outcome {
    /// An outcome with nothing stored yet (the upload fills in the keys and hashes).
    pub fn new(
        status: JobStatus,
        error: Option<JobError>,
        diagnostics: Vec<Diagnostic>,
        duration_ms: Option<i64>,
        image_id: String,
    ) -> Outcome {
        Outcome {
            status,
            error,
            diagnostics,
            pdf_storage_key: None,
            log_storage_key: None,
            synctex_storage_key: None,
            thumbnail_storage_key: None,
            duration_ms,
            pdf_sha256: None,
            log_sha256: None,
            synctex_sha256: None,
            thumbnail_sha256: None,
            image_id,
            preamble_cache: None,
            incremental: false,
            word_count: None,
            checked: false,
        }
    }
}

/// A job and the attempt of it that ended: the lease is fenced by both, so that an outcome of
/// an attempt that was rescued meanwhile is never recorded over a later attempt's.
pub type JobAttempt = (Uuid, i32);

/// Records the final outcomes of attempts whose lease `owner` holds, in one statement, and
/// returns each finished job's end-to-end time (submission to now); an attempt whose lease
/// `owner` no longer holds is left as it is and missing from the answer.
pub async fn finish_jobs(
    pool: &Pool,
    owner: &str,
    finished: &[(JobAttempt, &Outcome)],
) -> DbResult<HashMap<JobAttempt, f64>> {
    let columns = Columns::of(finished)?;
    let client = pool.get().await?;
    let finish = client.prepare_cached(FINISH_JOBS).await?;
    let rows = client
        .query(
            &finish,
            &[
                &owner,
                &columns.id,
                &columns.status,
                &columns.error_code,
                &columns.error_message,
                &columns.diagnostics,
                &columns.pdf_storage_key,
                &columns.log_storage_key,
                &columns.duration_ms,
                &columns.pdf_sha256,
                &columns.log_sha256,
                &columns.image_id,
                &columns.synctex_storage_key,
                &columns.synctex_sha256,
                &columns.preamble_cache,
                &columns.incremental,
                &columns.word_count,
                &columns.checked,
                &columns.thumbnail_storage_key,
                &columns.thumbnail_sha256,
                &columns.attempt,
            ],
        )
        .await?;
    rows.iter()
        .map(|row| Ok(((row.try_get(0)?, row.try_get(1)?), row.try_get(2)?)))
        .collect()
}

/// One row per attempt: `$2..` are the outcomes' columns as arrays of the same length.
const FINISH_JOBS: &str = "
    UPDATE jobs SET status = done.status, finished_at = now(), lease_owner = NULL,
                    lease_expires_at = NULL, error_code = done.error_code,
                    error_message = done.error_message, diagnostics = done.diagnostics,
                    pdf_storage_key = done.pdf_storage_key,
                    log_storage_key = done.log_storage_key, duration_ms = done.duration_ms,
                    pdf_sha256 = done.pdf_sha256, log_sha256 = done.log_sha256,
                    image_id = done.image_id, synctex_storage_key = done.synctex_storage_key,
                    synctex_sha256 = done.synctex_sha256, preamble_cache = done.preamble_cache,
                    incremental = done.incremental, word_count = done.word_count,
                    checked = done.checked, thumbnail_storage_key = done.thumbnail_storage_key,
                    thumbnail_sha256 = done.thumbnail_sha256
    FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::text[],
                $8::text[], $9::int8[], $10::text[], $11::text[], $12::text[], $13::text[],
                $14::text[], $15::text[], $16::bool[], $17::jsonb[], $18::bool[], $19::text[],
                $20::text[], $21::int4[])
        AS done (id, status, error_code, error_message, diagnostics, pdf_storage_key,
                 log_storage_key, duration_ms, pdf_sha256, log_sha256, image_id,
                 synctex_storage_key, synctex_sha256, preamble_cache, incremental, word_count,
                 checked, thumbnail_storage_key, thumbnail_sha256, attempt)
    WHERE jobs.id = done.id AND jobs.attempts = done.attempt AND jobs.lease_owner = $1
      AND jobs.status = 'Running'
    RETURNING jobs.id, jobs.attempts,
              extract(epoch FROM jobs.finished_at - jobs.created_at)::float8";

/// The outcomes of [`finish_jobs`], column by column.
#[derive(Default)]
struct Columns<'a> {
    id: Vec<Uuid>,
    status: Vec<&'static str>,
    error_code: Vec<Option<&'static str>>,
    error_message: Vec<Option<&'a str>>,
    diagnostics: Vec<Value>,
    pdf_storage_key: Vec<Option<&'a str>>,
    log_storage_key: Vec<Option<&'a str>>,
    duration_ms: Vec<Option<i64>>,
    pdf_sha256: Vec<Option<&'a str>>,
    log_sha256: Vec<Option<&'a str>>,
    image_id: Vec<&'a str>,
    synctex_storage_key: Vec<Option<&'a str>>,
    synctex_sha256: Vec<Option<&'a str>>,
    preamble_cache: Vec<Option<&'static str>>,
    incremental: Vec<bool>,
    word_count: Vec<Option<Value>>,
    checked: Vec<bool>,
    thumbnail_storage_key: Vec<Option<&'a str>>,
    thumbnail_sha256: Vec<Option<&'a str>>,
    attempt: Vec<i32>,
}

impl<'a> Columns<'a> {
    fn of(finished: &'a [(JobAttempt, &'a Outcome)]) -> DbResult<Columns<'a>> {
        let mut columns = Columns::default();
        for ((id, attempt), outcome) in finished {
            columns.id.push(*id);
            columns.attempt.push(*attempt);
            columns.status.push(outcome.status.as_str());
            columns
                .error_code
                .push(outcome.error.as_ref().map(|e| e.code.as_str()));
            columns
                .error_message
                .push(outcome.error.as_ref().map(|e| e.message.as_str()));
            columns.diagnostics.push(
                serde_json::to_value(&outcome.diagnostics)
                    .map_err(|e| DbError::Corrupt(format!("diagnostics: {e}")))?,
            );
            columns
                .pdf_storage_key
                .push(outcome.pdf_storage_key.as_deref());
            columns
                .log_storage_key
                .push(outcome.log_storage_key.as_deref());
            columns.duration_ms.push(outcome.duration_ms);
            columns.pdf_sha256.push(outcome.pdf_sha256.as_deref());
            columns.log_sha256.push(outcome.log_sha256.as_deref());
            columns.image_id.push(&outcome.image_id);
            columns
                .synctex_storage_key
                .push(outcome.synctex_storage_key.as_deref());
            columns
                .synctex_sha256
                .push(outcome.synctex_sha256.as_deref());
            columns.preamble_cache.push(outcome.preamble_cache);
            columns.incremental.push(outcome.incremental);
            columns.word_count.push(
                outcome
                    .word_count
                    .map(serde_json::to_value)
                    .transpose()
                    .map_err(|e| DbError::Corrupt(format!("word_count: {e}")))?,
            );
            columns.checked.push(outcome.checked);
            columns
                .thumbnail_storage_key
                .push(outcome.thumbnail_storage_key.as_deref());
            columns
                .thumbnail_sha256
                .push(outcome.thumbnail_sha256.as_deref());
        }
        Ok(columns)
    }
}

/// The most outcomes one statement records.
const MOST_IN_A_GROUP: usize = 64;

/// Commits the outcomes of one lease owner's jobs in groups (see the module's docs). Clones
/// share one committer task, which ends when the last clone is dropped; should it ever stop,
/// each outcome is recorded on its own instead.
#[derive(Clone)]
pub struct Finisher {
    requests: mpsc::UnboundedSender<Finish>,
    pool: Pool,
    owner: String,
}

struct Finish {
    attempt: JobAttempt,
    outcome: Outcome,
    answer: oneshot::Sender<DbResult<Option<f64>>>,
}

impl Finisher {
    /// A finisher for the jobs `owner` claims; its committer runs on the current runtime.
    pub fn start(pool: Pool, owner: String) -> Finisher {
        let (requests, received) = mpsc::unbounded_channel();
        tokio::spawn(commit_in_groups(pool.clone(), owner.clone(), received));
        Finisher {
            requests,
            pool,
            owner,
        }
    }

    /// Records the final outcome of `attempt` once its group commits, and returns the job's
    /// end-to-end time (submission to now), or None when the owner no longer holds its lease.
    pub async fn finish(&self, attempt: JobAttempt, outcome: &Outcome) -> DbResult<Option<f64>> {
        let (answer, answered) = oneshot::channel();
        let finish = Finish {
            attempt,
            outcome: outcome.clone(),
            answer,
        };
        if self.requests.send(finish).is_ok() {
            if let Ok(answer) = answered.await {
                return answer;
            }
        }
        tracing::error!("the finisher's committer stopped; recording the outcome on its own");
        finish_one(&self.pool, &self.owner, attempt, outcome).await
    }
}

async fn finish_one(
    pool: &Pool,
    owner: &str,
    attempt: JobAttempt,
    outcome: &Outcome,
) -> DbResult<Option<f64>> {
    let times = finish_jobs(pool, owner, &[(attempt, outcome)]).await?;
    Ok(times.get(&attempt).copied())
}

async fn commit_in_groups(
    pool: Pool,
    owner: String,
    mut requests: mpsc::UnboundedReceiver<Finish>,
) {
    let mut group = Vec::with_capacity(MOST_IN_A_GROUP);
    while requests.recv_many(&mut group, MOST_IN_A_GROUP).await > 0 {
        let outcomes: Vec<(JobAttempt, &Outcome)> =
            group.iter().map(|f| (f.attempt, &f.outcome)).collect();
        match finish_jobs(&pool, &owner, &outcomes).await {
            Ok(times) => {
                for finish in group.drain(..) {
                    let _ = finish.answer.send(Ok(times.get(&finish.attempt).copied()));
                }
            }
            // Postgres out of reach: every caller retries in its own time (one by one here,
            // the group would hold up the outcomes that arrive meanwhile).
            Err(DbError::Unavailable(error)) => {
                for finish in group.drain(..) {
                    let error = DbError::Unavailable(error.to_string().into());
                    let _ = finish.answer.send(Err(error));
                }
            }
            Err(error) if group.len() == 1 => {
                if let Some(finish) = group.pop() {
                    let _ = finish.answer.send(Err(error));
                }
            }
            // One outcome Postgres refuses must not fail the rest of its group, and each
            // caller needs an error of its own: the group's outcomes are tried one by one.
            Err(_) => {
                for finish in group.drain(..) {
                    let alone = finish_one(&pool, &owner, finish.attempt, &finish.outcome).await;
                    let _ = finish.answer.send(alone);
                }
            }
        }
    }
}
