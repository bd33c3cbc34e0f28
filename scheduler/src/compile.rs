//! One job from claim to recorded outcome: run the sandbox, read what it produced, decide the
//! job's status ([`crate::outcome`]), upload the PDF and log, and record the outcome under our
//! lease ([`crate::record`]). While it runs, the lease is renewed ([`keep_lease`]); when the lease
//! is lost, the job's [`JobStop`] fires.

use crate::collect::is_valid_pdf;
use crate::compile_state::{self, PreambleCache, Prepared};
use crate::diagnostics;
use crate::job_spec::{deadline, job_spec};
use crate::metrics;
use crate::outcome::{decide, Interrupted, Observed};
use crate::project_files::{self, Fetched};
use crate::record::record;
use crate::sandbox_input::SandboxInput;
use crate::sandbox_run::{self, Ran};
use crate::stop::{JobStop, StopReason};
use crate::upload::{upload_outputs, Outputs};
use crate::Context;
use std::convert::Infallible;
use std::future::Future;
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Outcome};
use texfleet_core::model::{CheckMode, ClaimedJob, JobStatus, Severity, WordCount};
use tracing::Instrument;

pub async fn process(context: &Context, job: ClaimedJob, stop: &JobStop) {
    let span = tracing::info_span!("job", job_id = %job.id, project_id = %job.project_id, attempt = job.attempt);
    async {
        let started = Instant::now();
        let lease = context.config.lease_seconds;
        let renew = || db::renew_lease(&context.db, job.id, &context.owner, lease);
        let result = tokio::select! {
            result = compile_and_upload(context, &job, stop) => result,
            never = keep_lease(context, stop, renew) => match never {},
        };
        record(
            context,
            &job,
            stop,
            result,
            started.elapsed().as_millis() as u64,
        )
        .await;
    }
    .instrument(span)
    .await
}

/// Renews a lease with `renew` every third of its length for as long as the work runs (a
/// compile, a page preview); when the lease is gone, stops it. Postgres errors are only
/// logged: the lease outlives short outages, and rescue by another scheduler shows up as a
/// lost lease once Postgres is back.
pub async fn keep_lease<F, Fut>(context: &Context, stop: &JobStop, renew: F) -> Infallible
where
    F: Fn() -> Fut,
    Fut: Future<Output = db::DbResult<bool>>,
{
    let lease = context.config.lease_seconds;
    let mut ticks = tokio::time::interval(Duration::from_secs(lease).div_f64(3.0));
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match renew().await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!("lease lost; stopping");
                stop.stop(StopReason::LeaseLost);
                return std::future::pending().await;
            }
            Err(error) => tracing::warn!(%error, "could not renew the lease"),
        }
    }
}

async fn compile_and_upload(
    context: &Context,
    job: &ClaimedJob,
    stop: &JobStop,
) -> Result<Outcome, Interrupted> {
    let config = &context.config;
    let fetched;
    let (job, streamed) = match job.stored_files.is_empty() {
        true => (job, Vec::new()),
        false => {
            let Fetched { job, streamed } =
                project_files::fetch(&context.file_cache, &context.storage, job.clone()).await?;
            fetched = job;
            (&fetched, streamed)
        }
    };
    let mut spec = job_spec(config, job, &streamed);
    let mut prepared = compile_state::prepare(context, job).await;
    let incremental = !prepared.previous.files.is_empty();
    spec.preamble = prepared.preamble.clone();
    spec.previous = std::mem::take(&mut prepared.previous);
    let nonce = spec.nonce.clone();
    let head = texfleet_sandbox::job_input(&spec, &std::mem::take(&mut prepared.format));
    let streamed_bytes = spec.streamed_bytes().unwrap_or(0);
    let stdin = SandboxInput::new(head, streamed);
    let deadline = deadline(config, job.timeout_seconds, streamed_bytes);
    let started = Instant::now();
    let Some(sandbox) = context.sandboxes.of(&job.texlive) else {
        return Err(Interrupted::Unserved);
    };
    let work = (job.id, job.attempt);
    let Ran { run, collected } =
        sandbox_run::run(context, sandbox, work, stdin, nonce, deadline, stop).await?;
    let wall_ms = started.elapsed().as_millis() as i64;
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
    let log = collected
        .log
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let mut diagnostics = diagnostics::parse(&log, &job.main);
    let first_error = diagnostics
        .iter()
        .find(|d| d.severity == Severity::Error)
        .map(|d| d.message.clone());
    // None: no check asked for, or chktex did not run (the log says why).
    let findings = collected
        .state
        .as_ref()
        .and_then(|state| state.findings.as_deref())
        .filter(|_| job.check.is_some());
    diagnostics.extend(diagnostics::from_findings(
        findings.unwrap_or_default(),
        &job.main,
    ));
    let observed = Observed {
        deadline_hit: run.deadline_hit,
        output_over_cap: run.stdout_overflowed || collected.over_cap,
        oom_killed: run.oom_killed,
        reported_limit: collected.report.as_ref().and_then(|r| r.limit),
        has_report: collected.report.is_some(),
        pdf_ok: collected.pdf.as_deref().is_some_and(is_valid_pdf),
        has_errors: first_error.is_some(),
        driver_exit: collected.report.as_ref().and_then(|r| r.exit_code),
        driver_signal: collected.report.as_ref().and_then(|r| r.signal),
        halt_on_error: job.halt_on_error,
        check_stopped: job.check == Some(CheckMode::Error)
            && findings.is_none_or(|findings| !findings.is_empty()),
    };
    let (status, error) = decide(&observed, job.timeout_seconds, first_error.as_deref());
    let duration_ms = collected
        .report
        .as_ref()
        .map_or(wall_ms, |r| r.duration_ms as i64);
    metrics::COMPILE_TIME
        .with_label_values(&[job.engine.as_str()])
        .observe(duration_ms as f64 / 1000.0);
    let mut outcome = Outcome::new(
        status,
        error,
        diagnostics,
        Some(duration_ms),
        sandbox.image_id().to_string(),
    );
    outcome.preamble_cache =
        compile_state::answer(&prepared, collected.state.as_ref()).map(PreambleCache::as_str);
    // A compile whose start from the last compile's files failed ran again from nothing.
    outcome.incremental = incremental
        && !collected
            .state
            .as_ref()
            .is_some_and(|state| state.restarted);
    outcome.checked = findings.is_some();
    outcome.word_count = collected
        .state
        .as_ref()
        .and_then(|state| state.word_count)
        .filter(|_| job.wordcount)
        .map(word_count);
    let outputs = Outputs {
        log: collected.log,
        pdf: collected.pdf,
        synctex: collected.synctex,
        thumbnail: collected.thumbnail,
    };
    let (uploaded, ()) = tokio::join!(
        upload_outputs(context, job, stop, outputs, outcome),
        keep_state(
            context,
            job,
            status,
            prepared,
            collected.state,
            collected.format
        ),
    );
    uploaded
}

/// texcount's numbers as the job shows them.
fn word_count(counted: texfleet_sandbox::WordCount) -> WordCount {
    let [text_words, header_words, other_words, headers, floats, inline_math, displayed_math] =
        counted;
    WordCount {
        text_words,
        header_words,
        other_words,
        headers,
        floats,
        inline_math,
        displayed_math,
    }
}

/// Only a `Succeeded` compile hands its state on: a failed one's may be what failed, and so
/// may the state it started from.
async fn keep_state(
    context: &Context,
    job: &ClaimedJob,
    status: JobStatus,
    prepared: Prepared,
    state: Option<texfleet_sandbox::DriverState>,
    format: Option<Vec<u8>>,
) {
    if status == JobStatus::Succeeded {
        compile_state::keep(context, job, prepared, state, format).await;
    } else {
        compile_state::forget_after_failure(context, job, &prepared).await;
    }
}
