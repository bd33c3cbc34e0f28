//! One job from claim to recorded outcome: run the sandbox, read what it produced, decide the
//! job's status, upload the PDF and log, and record the outcome under our lease.
//!
//! While it runs, a heartbeat renews the job's lease. The job can be taken from us at any
//! moment: cancelled by its client, its lease lost, or the scheduler shutting down. [`JobStop`]
//! carries that decision to the sandbox (which kills the container at once) and to the
//! recording step, which then writes nothing (or, on shutdown, hands the job back).

use crate::collect::{collect, is_valid_pdf, Collected};
use crate::diagnostics;
use crate::docker::{Sandbox, SandboxRun};
use crate::metrics;
use crate::pool::WarmPool;
use backon::{ExponentialBuilder, Retryable};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use texfleet_core::db::{self, DbError, Outcome, Pool};
use texfleet_core::model::{
    log_storage_key, pdf_storage_key, ClaimedJob, ErrorCode, JobError, JobStatus, Severity,
};
use texfleet_core::storage::{Storage, StorageError};
use texfleet_core::Config;
use texfleet_sandbox::{FileSpec, JobSpec, Limit};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Room in the sandbox's stdout for the archive's own headers and the report.
const ARCHIVE_OVERHEAD_BYTES: usize = 1024 * 1024;

pub struct Context {
    pub config: Config,
    pub owner: String,
    pub pool: Pool,
    pub storage: Storage,
    pub sandbox: Sandbox,
    /// Containers started ahead of demand; None when the pool is off.
    pub warm_pool: Option<Arc<WarmPool>>,
}

/// Why a job was taken from this scheduler while it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The client cancelled it (the API already wrote `Cancelled`).
    Cancelled,
    /// Our lease is gone: another scheduler may already run the job.
    LeaseLost,
    /// This scheduler is shutting down and its grace period is over.
    Shutdown,
}

/// The stop signal of one running job: the first reason given wins.
#[derive(Default)]
pub struct JobStop {
    token: CancellationToken,
    reason: OnceLock<StopReason>,
}

impl JobStop {
    pub fn stop(&self, reason: StopReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    fn reason(&self) -> Option<StopReason> {
        self.reason.get().copied()
    }
}

/// Why a compile ended without an outcome to record.
#[derive(Debug, thiserror::Error)]
enum Interrupted {
    /// A failure of our infrastructure rather than of the document: worth another attempt.
    #[error("sandbox failed: {0}")]
    Sandbox(String),
    #[error("storage failed: {0}")]
    Storage(#[from] StorageError),
    #[error("the job was taken from this scheduler")]
    Stopped,
}

pub async fn process(context: &Context, job: ClaimedJob, stop: &JobStop) {
    let span = tracing::info_span!("job", job_id = %job.id, project_id = %job.project_id, attempt = job.attempt);
    async {
        let started = Instant::now();
        let result = tokio::select! {
            result = compile_and_upload(context, &job, stop) => result,
            never = keep_lease(context, &job, stop) => match never {},
        };
        record(context, &job, stop, result, started).await;
    }
    .instrument(span)
    .await
}

/// Renews the lease every third of its length for as long as the compile runs; when the lease
/// is gone, stops the compile. Postgres errors are only logged: the lease outlives short
/// outages, and rescue by another scheduler shows up as a lost lease once Postgres is back.
async fn keep_lease(
    context: &Context,
    job: &ClaimedJob,
    stop: &JobStop,
) -> std::convert::Infallible {
    let lease = context.config.lease_seconds;
    let mut ticks = tokio::time::interval(Duration::from_secs(lease).div_f64(3.0));
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match db::renew_lease(&context.pool, job.id, &context.owner, lease).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!("lease lost; stopping the compile");
                stop.stop(StopReason::LeaseLost);
                return std::future::pending().await;
            }
            Err(error) => tracing::warn!(%error, "could not renew the lease"),
        }
    }
}

/// Writes the result of a compile, retrying while Postgres is unreachable.
async fn record(
    context: &Context,
    job: &ClaimedJob,
    stop: &JobStop,
    result: Result<Outcome, Interrupted>,
    started: Instant,
) {
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let owner = context.owner.as_str();
    let recorded = match (stop.reason(), result) {
        (Some(StopReason::Shutdown), _) => {
            tracing::info!("handing the job back to the queue for shutdown");
            with_db_retries(|| db::hand_back_job(&context.pool, job.id, owner))
                .await
                .map(|held| held.then_some(JobStatus::Queued))
        }
        (reason @ Some(_), _) | (reason @ None, Err(Interrupted::Stopped)) => {
            tracing::info!(?reason, "the job was taken from us; nothing to record");
            Ok(None)
        }
        (None, Ok(outcome)) => {
            tracing::info!(status = outcome.status.as_str(), elapsed_ms, "job finished");
            let finished =
                with_db_retries(|| db::finish_job(&context.pool, job.id, owner, &outcome)).await;
            if let Ok(Some(end_to_end)) = finished {
                let error = outcome.error.as_ref();
                count_finished(job, outcome.status, error.map(|e| e.code));
                metrics::END_TO_END
                    .with_label_values(&[job.engine.as_str()])
                    .observe(end_to_end);
                if let Some(limit) = error.and_then(|e| limit_name(e.code)) {
                    metrics::LIMITS_HIT.with_label_values(&[limit]).inc();
                }
            }
            finished.map(|held| held.map(|_| outcome.status))
        }
        (None, Err(error)) => {
            let backoff = retry_backoff(job.attempt);
            tracing::warn!(%error, ?backoff, "infrastructure failure");
            let code = match error {
                Interrupted::Storage(_) => ErrorCode::StorageError,
                _ => ErrorCode::SandboxError,
            };
            metrics::RETRIES.with_label_values(&[code.as_str()]).inc();
            let error = JobError {
                code,
                message: error.to_string(),
            };
            let recorded = with_db_retries(|| {
                db::retry_or_fail_job(&context.pool, job.id, owner, backoff, &error)
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
        Ok(None) => tracing::info!("lease not held when recording; outcome dropped"),
        Err(error) => {
            tracing::error!(%error, "could not record the outcome; the lease will expire and the job run again")
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

/// Retries a database write while Postgres is unavailable (for about a minute), so that a
/// restart of Postgres does not cost a finished compile.
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

/// Exponential back-off with full jitter between attempts of a job: 2^attempt seconds at
/// most, capped at a minute.
fn retry_backoff(attempt: i32) -> Duration {
    let ceiling = 2f64.powi(attempt.clamp(0, 6)).min(60.0);
    Duration::from_secs_f64(rand::random::<f64>() * ceiling)
}

async fn compile_and_upload(
    context: &Context,
    job: &ClaimedJob,
    stop: &JobStop,
) -> Result<Outcome, Interrupted> {
    let config = &context.config;
    let spec = JobSpec {
        engine: job.engine.as_str().to_string(),
        halt_on_error: job.halt_on_error,
        timeout_seconds: job.timeout_seconds,
        max_pdf_bytes: config.max_pdf_bytes as u64,
        max_log_bytes: config.max_log_bytes as u64,
        files: job
            .files
            .iter()
            .map(|f| FileSpec {
                path: f.path.clone(),
                content_base64: BASE64.encode(&f.content),
            })
            .collect(),
    };
    let stdin = serde_json::to_vec(&spec).map_err(|e| Interrupted::Sandbox(e.to_string()))?;
    let deadline = Duration::from_secs(u64::from(job.timeout_seconds + config.kill_grace_seconds));
    let max_stdout = config.max_pdf_bytes + config.max_log_bytes + ARCHIVE_OVERHEAD_BYTES;
    let started = Instant::now();
    let warm = context.warm_pool.as_ref().and_then(|pool| pool.take());
    let warm_label = warm.as_ref().map(|warm| warm.label.clone());
    let run = context
        .sandbox
        .run(
            job.id,
            job.attempt,
            warm,
            &stdin,
            deadline,
            max_stdout,
            &stop.token,
        )
        .await;
    if let (Some(pool), Some(label)) = (&context.warm_pool, warm_label) {
        pool.forget(&label);
    }
    let run = run.map_err(|e| Interrupted::Sandbox(e.to_string()))?;
    if run.stopped {
        return Err(Interrupted::Stopped);
    }
    let wall_ms = started.elapsed().as_millis() as i64;
    tracing::debug!(
        exit_code = run.exit_code,
        stderr = %String::from_utf8_lossy(&run.stderr),
        "sandbox finished"
    );
    let collected = collect(
        &run.stdout,
        config.max_pdf_bytes as u64,
        config.max_log_bytes as u64,
    );
    if let Some(report) = &collected.report {
        tracing::info!(
            duration_ms = report.duration_ms,
            cpu_ms = report.cpu_ms,
            max_rss_kb = report.max_rss_kb,
            exit_code = report.exit_code,
            signal = report.signal,
            limit = ?report.limit,
            notes = ?report.notes,
            "sandbox report"
        );
    }
    let mut outcome = decide(job, &run, &collected, wall_ms)?;
    let compile_ms = outcome.duration_ms.unwrap_or(wall_ms);
    metrics::COMPILE_TIME
        .with_label_values(&[job.engine.as_str()])
        .observe(compile_ms as f64 / 1000.0);
    let uploading = Instant::now();

    if let Some(log) = collected.log {
        let key = log_storage_key(job.id);
        upload(
            &context.storage,
            &key,
            log,
            "text/plain; charset=utf-8",
            stop,
        )
        .await?;
        outcome.log_storage_key = Some(key);
    }
    if outcome.status == JobStatus::Succeeded {
        let key = pdf_storage_key(job.id);
        let pdf = collected.pdf.unwrap_or_default();
        upload(&context.storage, &key, pdf, "application/pdf", stop).await?;
        tracing::info!(key, "pdf uploaded");
        outcome.pdf_storage_key = Some(key);
    }
    metrics::UPLOAD_TIME.observe(uploading.elapsed().as_secs_f64());
    Ok(outcome)
}

/// Uploads with retries (about half a minute of back-off), unless the job is taken from us.
async fn upload(
    storage: &Storage,
    key: &str,
    bytes: Vec<u8>,
    content_type: &str,
    stop: &JobStop,
) -> Result<(), Interrupted> {
    if stop.token.is_cancelled() {
        return Err(Interrupted::Stopped);
    }
    let put = || storage.put(key, bytes.clone(), content_type);
    put.retry(
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(10))
            .with_max_times(8)
            .with_jitter(),
    )
    .when(|_| !stop.token.is_cancelled())
    .notify(|error, delay| tracing::warn!(%error, ?delay, key, "upload failed; retrying"))
    .await?;
    Ok(())
}

/// The job's status from what the sandbox did. Only facts we observed ourselves (our deadline,
/// the stdout cap, the engine's OOM flag, the PDF bytes) can make a job succeed or fail; the
/// supervisor's report only refines which limit a failed job hit.
fn decide(
    job: &ClaimedJob,
    run: &SandboxRun,
    collected: &Collected,
    wall_ms: i64,
) -> Result<Outcome, Interrupted> {
    let log = collected
        .log
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let diagnostics = diagnostics::parse(&log);
    let report = collected.report.as_ref();
    let duration_ms = Some(report.map_or(wall_ms, |r| r.duration_ms as i64));
    let limit = report.and_then(|r| r.limit);
    let has_errors = diagnostics.iter().any(|d| d.severity == Severity::Error);
    let pdf_ok = collected.pdf.as_deref().is_some_and(is_valid_pdf);

    let failure = if run.deadline_hit || matches!(limit, Some(Limit::Timeout | Limit::CpuTime)) {
        Some((
            JobStatus::TimedOut,
            ErrorCode::Timeout,
            format!("compile exceeded {} seconds", job.timeout_seconds),
        ))
    } else if run.stdout_overflowed || collected.over_cap || limit == Some(Limit::Output) {
        Some((
            JobStatus::Failed,
            ErrorCode::OutputLimit,
            "the PDF or the log exceeded its size limit".to_string(),
        ))
    } else if run.oom_killed || limit == Some(Limit::Memory) {
        Some((
            JobStatus::Failed,
            ErrorCode::MemoryLimit,
            "compile exceeded the memory limit".to_string(),
        ))
    } else if report.is_none() {
        // The supervisor died without reporting and no limit explains it: our failure, retried.
        return Err(Interrupted::Sandbox(format!(
            "sandbox ended without a report: {}",
            String::from_utf8_lossy(&run.stderr).trim()
        )));
    } else if !pdf_ok {
        let message = diagnostics
            .iter()
            .find(|d| d.severity == Severity::Error)
            .map_or("no PDF was produced".to_string(), |d| {
                format!("no PDF was produced: {}", d.message)
            });
        Some((JobStatus::Failed, ErrorCode::CompileError, message))
    } else if job.halt_on_error && has_errors {
        Some((
            JobStatus::Failed,
            ErrorCode::CompileError,
            "the document has errors and halt_on_error is set".to_string(),
        ))
    } else {
        None
    };
    let (status, error) = match failure {
        Some((status, code, message)) => (status, Some(JobError { code, message })),
        None => (JobStatus::Succeeded, None),
    };
    Ok(Outcome {
        status,
        error,
        diagnostics,
        pdf_storage_key: None,
        log_storage_key: None,
        duration_ms,
    })
}
