//! One job from claim to recorded outcome: run the sandbox, read what it produced, decide the
//! job's status, upload the PDF and log, and record the outcome under our lease.

use crate::collect::{collect, is_valid_pdf, Collected};
use crate::diagnostics;
use crate::docker::{Sandbox, SandboxRun};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Outcome, Pool};
use texfleet_core::model::{
    log_storage_key, pdf_storage_key, ClaimedJob, ErrorCode, JobError, JobStatus, Severity,
};
use texfleet_core::storage::Storage;
use texfleet_core::Config;
use texfleet_sandbox::{FileSpec, JobSpec, Limit};
use tracing::Instrument;

/// Room in the sandbox's stdout for the archive's own headers and the report.
const ARCHIVE_OVERHEAD_BYTES: usize = 1024 * 1024;

pub struct Context {
    pub config: Config,
    pub owner: String,
    pub pool: Pool,
    pub storage: Storage,
    pub sandbox: Sandbox,
}

/// A failure of our infrastructure rather than of the document: worth another attempt.
#[derive(Debug, thiserror::Error)]
enum InfraError {
    #[error("sandbox failed: {0}")]
    Sandbox(String),
    #[error("storage failed: {0}")]
    Storage(#[from] texfleet_core::storage::StorageError),
}

impl InfraError {
    fn code(&self) -> ErrorCode {
        match self {
            InfraError::Sandbox(_) => ErrorCode::SandboxError,
            InfraError::Storage(_) => ErrorCode::StorageError,
        }
    }
}

pub async fn process(context: &Context, job: ClaimedJob) {
    let span = tracing::info_span!("job", job_id = %job.id, project_id = %job.project_id, attempt = job.attempt);
    process_in_span(context, job).instrument(span).await
}

async fn process_in_span(context: &Context, job: ClaimedJob) {
    let started = Instant::now();
    let result = compile_and_upload(context, &job).await;
    let recorded = match result {
        Ok(outcome) => {
            tracing::info!(
                status = outcome.status.as_str(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "job finished"
            );
            db::finish_job(&context.pool, job.id, &context.owner, &outcome)
                .await
                .map(|held| held.then_some(outcome.status))
        }
        Err(error) => {
            let backoff = retry_backoff(job.attempt);
            tracing::warn!(%error, ?backoff, "infrastructure failure");
            let error = JobError {
                code: error.code(),
                message: error.to_string(),
            };
            db::retry_or_fail_job(&context.pool, job.id, &context.owner, backoff, &error).await
        }
    };
    match recorded {
        Ok(Some(status)) => tracing::debug!(status = status.as_str(), "outcome recorded"),
        Ok(None) => tracing::warn!("lease lost before the outcome was recorded; outcome dropped"),
        Err(error) => tracing::error!(%error, "could not record the outcome"),
    }
}

/// Exponential back-off with full jitter: 2^attempt seconds at most, capped at a minute.
fn retry_backoff(attempt: i32) -> Duration {
    let ceiling = 2f64.powi(attempt.clamp(0, 6)).min(60.0);
    Duration::from_secs_f64(rand::random::<f64>() * ceiling)
}

async fn compile_and_upload(context: &Context, job: &ClaimedJob) -> Result<Outcome, InfraError> {
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
    let stdin = serde_json::to_vec(&spec).map_err(|e| InfraError::Sandbox(e.to_string()))?;
    let deadline = Duration::from_secs(u64::from(job.timeout_seconds + config.kill_grace_seconds));
    let max_stdout = config.max_pdf_bytes + config.max_log_bytes + ARCHIVE_OVERHEAD_BYTES;
    let started = Instant::now();
    let run = context
        .sandbox
        .run(job.id, job.attempt, &stdin, deadline, max_stdout)
        .await
        .map_err(|e| InfraError::Sandbox(e.to_string()))?;
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

    if let Some(log) = collected.log {
        let key = log_storage_key(job.id);
        context
            .storage
            .put(&key, log, "text/plain; charset=utf-8")
            .await?;
        outcome.log_storage_key = Some(key);
    }
    if outcome.status == JobStatus::Succeeded {
        let key = pdf_storage_key(job.id);
        let pdf = collected.pdf.unwrap_or_default();
        context.storage.put(&key, pdf, "application/pdf").await?;
        outcome.pdf_storage_key = Some(key);
    }
    Ok(outcome)
}

/// The job's status from what the sandbox did. Only facts we observed ourselves (our deadline,
/// the stdout cap, the engine's OOM flag, the PDF bytes) can make a job succeed or fail; the
/// supervisor's report only refines which limit a failed job hit.
fn decide(
    job: &ClaimedJob,
    run: &SandboxRun,
    collected: &Collected,
    wall_ms: i64,
) -> Result<Outcome, InfraError> {
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
        return Err(InfraError::Sandbox(format!(
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
