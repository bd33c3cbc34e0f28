//! Writing the end of a compile to Postgres under our lease: the outcome, a retry after an
//! infrastructure failure, or a hand-back at shutdown. Writes are retried while Postgres is
//! unreachable, so that a restart of Postgres does not cost a finished compile.

use crate::metrics;
use crate::outcome::Interrupted;
use crate::stop::{JobStop, StopReason};
use crate::Context;
use backon::{ExponentialBuilder, Retryable};
use std::time::Duration;
use texfleet_core::db::{self, DbError, Outcome};
use texfleet_core::model::{storage_keys, ClaimedJob, ErrorCode, JobError, JobStatus};

/// Records the result of a compile: `elapsed_ms` is its time in this scheduler.
pub async fn record(
    context: &Context,
    job: &ClaimedJob,
    stop: &JobStop,
    result: Result<Outcome, Interrupted>,
    elapsed_ms: u64,
) {
    let owner = context.owner.as_str();
    let recorded = match (stop.reason(), result) {
        (Some(StopReason::Shutdown), _) => {
            tracing::info!("handing the job back to the queue for shutdown");
            with_db_retries(|| db::hand_back_job(&context.db, job.id, owner))
                .await
                .map(|held| held.then_some(JobStatus::Queued))
        }
        (reason @ Some(_), _) | (reason @ None, Err(Interrupted::Stopped)) => {
            tracing::info!(?reason, "the job was taken from us; nothing to record");
            Ok(None)
        }
        (None, Ok(outcome)) => {
            tracing::info!(status = outcome.status.as_str(), elapsed_ms, "job finished");
            let finished = finish_or_fall_back(context, job, outcome).await;
            if let Ok(Some((end_to_end, recorded))) = &finished {
                let error = recorded.error.as_ref();
                count_finished(job, recorded.status, error.map(|e| e.code));
                metrics::END_TO_END
                    .with_label_values(&[job.engine.as_str()])
                    .observe(*end_to_end);
                if let Some(limit) = error.and_then(|e| limit_name(e.code)) {
                    metrics::LIMITS_HIT.with_label_values(&[limit]).inc();
                }
            }
            finished.map(|held| held.map(|(_, recorded)| recorded.status))
        }
        (None, Err(error)) => {
            let backoff = retry_backoff(job.attempt);
            let cause = error_chain(&error);
            tracing::warn!(%cause, ?backoff, "infrastructure failure");
            let code = match error {
                Interrupted::Storage(_) | Interrupted::Files(_) => ErrorCode::StorageError,
                _ => {
                    crate::docker_health::check_after_failure(context).await;
                    ErrorCode::SandboxError
                }
            };
            metrics::RETRIES.with_label_values(&[code.as_str()]).inc();
            let error = JobError {
                code,
                message: error.to_string(),
            };
            let recorded = with_db_retries(|| {
                db::retry_or_fail_job(&context.db, job.id, owner, backoff, &error)
            })
            .await;
            if let Ok(Some(JobStatus::Failed)) = recorded {
                count_finished(job, JobStatus::Failed, Some(code));
            }
            recorded
        }
    };
    match recorded {
        Ok(Some(status)) => tracing::debug!(status = status.as_str(), "outcome recorded"),
        Ok(None) => {
            tracing::info!("lease not held when recording; outcome dropped");
            // The client may have cancelled it at any moment, even during the upload.
            discard_outputs_of_cancelled(context, job).await;
        }
        Err(error) => {
            tracing::error!(%error, "could not record the outcome; the lease will expire and the job run again")
        }
    }
}

/// Records the outcome and returns the job's end-to-end time with what was recorded (None
/// when the lease is gone). If Postgres refuses the outcome for its data (not for an outage),
/// the job ends `Failed` without it instead, and the objects uploaded for it are deleted, so
/// that nothing stays stored that no row records.
async fn finish_or_fall_back(
    context: &Context,
    job: &ClaimedJob,
    outcome: Outcome,
) -> Result<Option<(f64, Outcome)>, DbError> {
    let finisher = &context.finisher;
    let error = match with_db_retries(|| finisher.finish((job.id, job.attempt), &outcome)).await {
        Err(error @ (DbError::Query(_) | DbError::Corrupt(_))) => error,
        finished => return finished.map(|held| held.map(|time| (time, outcome))),
    };
    tracing::error!(cause = %error_chain(&error), "the outcome could not be recorded; recording a failure instead");
    delete_outputs(
        context,
        job,
        "could not delete an unrecorded output; retention will",
    )
    .await;
    let fallback = Outcome::new(
        JobStatus::Failed,
        Some(JobError {
            code: ErrorCode::SandboxError,
            message: "the outcome of the compile could not be recorded".to_string(),
        }),
        Vec::new(),
        outcome.duration_ms,
        outcome.image_id,
    );
    let finished = with_db_retries(|| finisher.finish((job.id, job.attempt), &fallback)).await;
    finished.map(|held| held.map(|time| (time, fallback)))
}

/// Deletes what an upload stored before the client's cancellation stopped the compile, so
/// that no object outlives the job's last state. Only for a job whose row says `Cancelled`:
/// a stop that merely looked like a cancellation (another scheduler finished the job after
/// our lease was lost) must not delete that scheduler's outputs.
async fn discard_outputs_of_cancelled(context: &Context, job: &ClaimedJob) {
    match with_db_retries(|| db::is_cancelled(&context.db, job.id)).await {
        Ok(true) => {
            delete_outputs(
                context,
                job,
                "could not delete a cancelled job's output; retention will",
            )
            .await
        }
        Ok(false) => {}
        Err(error) => {
            tracing::warn!(%error, "could not read whether the job was cancelled; retention will delete its outputs")
        }
    }
}

async fn delete_outputs(context: &Context, job: &ClaimedJob, on_failure: &str) {
    for key in storage_keys(job.id) {
        if let Err(error) = context.storage.delete(&key).await {
            tracing::warn!(%error, key, "{on_failure}");
        }
    }
}

fn count_finished(job: &ClaimedJob, status: JobStatus, code: Option<ErrorCode>) {
    let code = code.map_or("none", ErrorCode::as_str);
    metrics::JOBS_FINISHED
        .with_label_values(&[status.as_str(), job.engine.as_str(), code])
        .inc();
}

/// The sandbox limit an error code reports, as the `limit` label.
fn limit_name(code: ErrorCode) -> Option<&'static str> {
    match code {
        ErrorCode::Timeout => Some("timeout"),
        ErrorCode::MemoryLimit => Some("memory"),
        ErrorCode::OutputLimit => Some("output"),
        _ => None,
    }
}

/// Retries a database write while Postgres is unavailable (for about a minute).
async fn with_db_retries<T, F, Fut>(write: F) -> Result<T, DbError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbError>>,
{
    write
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(10))
                .with_max_times(10)
                .with_jitter(),
        )
        .when(|error| matches!(error, DbError::Unavailable(_)))
        .notify(|error, delay| tracing::warn!(%error, ?delay, "database unavailable; retrying"))
        .await
}

/// An error with its causes, for the logs (clients see only the outermost message).
fn error_chain(error: &dyn std::error::Error) -> String {
    std::iter::successors(Some(error), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// Exponential back-off with full jitter between attempts of a job: 2^attempt seconds at
/// most, capped at a minute.
fn retry_backoff(attempt: i32) -> Duration {
    let ceiling = 2f64.powi(attempt.clamp(0, 6)).min(60.0);
    Duration::from_secs_f64(rand::random::<f64>() * ceiling)
}
