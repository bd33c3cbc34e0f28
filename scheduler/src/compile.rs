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
use crate::project_files::{self, FetchError, Fetched};
use crate::record::record;
use crate::sandbox_input::{OpenedFile, SandboxInput};
use crate::sandbox_run::{self, Ran};
use crate::stop::{JobStop, StopReason};
use crate::upload::{upload_outputs, Outputs};
use crate::Context;
use std::convert::Infallible;
use std::future::Future;
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Outcome};
use texfleet_core::model::{
    CheckMode, ClaimedJob, ErrorCode, JobError, JobStatus, Severity, WordCount,
};
use texfleet_sandbox::{CompileState, Preamble};
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
        // Files too slow to arrive end the job: another attempt would hold a slot as long.
        let result = match result {
            Err(Interrupted::Files(FetchError::OutOfTime)) => Ok(files_out_of_time(context, &job)),
            result => result,
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
    let fetched = fetch_files(context, job).await?;
    let (fetched_job, streamed) = fetched.map_or((None, Vec::new()), |f| (Some(f.job), f.streamed));
    let job = fetched_job.as_ref().unwrap_or(job);
    let mut prepared = compile_state::prepare(context, job).await;
    let incremental = !prepared.previous.files.is_empty();
    let start = Start {
        preamble: prepared.preamble.clone(),
        format: std::mem::take(&mut prepared.format),
        previous: std::mem::take(&mut prepared.previous),
    };
    let run = job.attempt.to_string();
    let mut attempt = run_in_sandbox(context, job, &run, streamed, start, stop).await?;
    let handed_over = attempt.ran.collected.state.as_ref();
    // The time of a first run that could not start again counts in the job's.
    let mut earlier_ms = 0;
    if prepared.starts_from_state() && handed_over.is_some_and(|state| state.again_in_a_new_sandbox)
    {
        tracing::info!("the compile from kept files could not start again from nothing in its sandbox; again in a new one");
        earlier_ms = attempt.duration_ms();
        let again = format!("{run}-again");
        attempt = again_without_state(context, job, &again, &prepared.preamble, stop).await?;
    }
    let duration_ms = earlier_ms + attempt.duration_ms();
    let Attempt {
        ran: Ran { run, collected },
        image_id,
        ..
    } = attempt;
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
    metrics::COMPILE_TIME
        .with_label_values(&[job.engine.as_str()])
        .observe(duration_ms as f64 / 1000.0);
    let mut outcome = Outcome::new(status, error, diagnostics, Some(duration_ms), image_id);
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

/// The job's files named by hash, fetched into the disk cache and opened there, with the job as
/// the sandbox gets it; None when it names none. They may take as long as a run of the job
/// (and their bytes' time at the floor rate): a slot is held no longer for a job's files.
async fn fetch_files(context: &Context, job: &ClaimedJob) -> Result<Option<Fetched>, Interrupted> {
    if job.stored_files.is_empty() {
        return Ok(None);
    }
    let (cache, storage) = (&context.file_cache, &context.storage);
    let allowed = deadline(&context.config, job.timeout_seconds, 0);
    let fetched = project_files::fetch(cache, storage, job.clone(), allowed).await?;
    Ok(Some(fetched))
}

/// A job whose files took longer to arrive than its time allows: timed out, not tried again.
fn files_out_of_time(context: &Context, job: &ClaimedJob) -> Outcome {
    let error = JobError {
        code: ErrorCode::Timeout,
        message: FetchError::OutOfTime.to_string(),
    };
    let image_id = context.image_id(job).to_string();
    Outcome::new(JobStatus::TimedOut, Some(error), Vec::new(), None, image_id)
}

/// Runs the job again, as `run`, without the kept files and without a loaded format (which
/// may be what failed), and marks it a compile again from nothing: that is what is kept and
/// shown of it.
async fn again_without_state(
    context: &Context,
    job: &ClaimedJob,
    run: &str,
    preamble: &Preamble,
    stop: &JobStop,
) -> Result<Attempt, Interrupted> {
    let streamed = fetch_files(context, job)
        .await?
        .map_or_else(Vec::new, |f| f.streamed);
    let start = Start {
        preamble: match preamble {
            Preamble::Load { .. } => Preamble::Plain,
            preamble => preamble.clone(),
        },
        ..Start::default()
    };
    let mut attempt = run_in_sandbox(context, job, run, streamed, start, stop).await?;
    let state = (attempt.ran.collected.state).get_or_insert_with(Default::default);
    state.restarted = true;
    Ok(attempt)
}

/// What a sandbox starts from besides the job's files: the preamble, the format loaded, and
/// the last compile's files.
#[derive(Default)]
struct Start {
    preamble: Preamble,
    format: Vec<u8>,
    previous: CompileState,
}

/// One run of the job in a sandbox of the image it asks for.
struct Attempt {
    ran: Ran,
    image_id: String,
    wall_ms: i64,
}

impl Attempt {
    /// How long the compile took, by its report, else by our clock.
    fn duration_ms(&self) -> i64 {
        let report = self.ran.collected.report.as_ref();
        report.map_or(self.wall_ms, |r| r.duration_ms as i64)
    }
}

/// Runs the job in a sandbox as its run `run` (its container's name).
async fn run_in_sandbox(
    context: &Context,
    job: &ClaimedJob,
    run: &str,
    streamed: Vec<OpenedFile>,
    start: Start,
    stop: &JobStop,
) -> Result<Attempt, Interrupted> {
    let config = &context.config;
    let mut spec = job_spec(config, job, &streamed);
    spec.preamble = start.preamble;
    spec.previous = start.previous;
    let nonce = spec.nonce.clone();
    let head = texfleet_sandbox::job_input(&spec, &start.format);
    let streamed_bytes = spec.streamed_bytes().unwrap_or(0);
    let stdin = SandboxInput::new(head, streamed);
    let deadline = deadline(config, job.timeout_seconds, streamed_bytes);
    let started = Instant::now();
    let Some(sandbox) = context.sandboxes.of(&job.texlive) else {
        return Err(Interrupted::Unserved);
    };
    let ran = sandbox_run::run(
        context,
        sandbox,
        (job.id, run),
        stdin,
        nonce,
        deadline,
        stop,
    )
    .await?;
    Ok(Attempt {
        ran,
        image_id: sandbox.image_id().to_string(),
        wall_ms: started.elapsed().as_millis() as i64,
    })
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
