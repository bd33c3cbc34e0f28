//! One run of a sandbox, for a compile or a page preview: in a warm container when the pool has
//! one of the image's year, the input written, the container's stdout read within its cap and
//! collected without trusting it ([`crate::collect`]). A run taken from us, or a container
//! killed from outside, is an interruption (the work goes back to the queue), not an outcome.

use crate::collect::{collect, Bounds, Collected};
use crate::job_spec::max_stdout;
use crate::outcome::{Interrupted, KILLED};
use crate::sandbox_input::SandboxInput;
use crate::stop::JobStop;
use crate::{Context, Sandbox, SandboxRun};
use std::time::Duration;
use uuid::Uuid;

/// What a run did and what it wrote.
pub struct Ran {
    pub run: SandboxRun,
    pub collected: Collected,
}

/// Runs `sandbox` for `(id, run)` (the work's id, and which of its runs: its container's name)
/// with `stdin`, whose report must carry `nonce`, for at
/// most `deadline`.
pub async fn run(
    context: &Context,
    sandbox: &Sandbox,
    (id, run): (Uuid, &str),
    stdin: SandboxInput,
    nonce: String,
    deadline: Duration,
    stop: &JobStop,
) -> Result<Ran, Interrupted> {
    let config = &context.config;
    let warm = context
        .warm_pool
        .as_ref()
        .and_then(|pool| pool.take(sandbox.texlive()));
    let warm_label = warm.as_ref().map(|warm| warm.label.clone());
    let max_stdout = max_stdout(config);
    let run = sandbox
        .run(id, run, warm, stdin, deadline, max_stdout, &stop.token)
        .await;
    if let (Some(pool), Some(label)) = (&context.warm_pool, warm_label) {
        pool.forget(&label);
    }
    let run = run.map_err(Interrupted::Sandbox)?;
    if run.stopped {
        return Err(Interrupted::Stopped);
    }
    // The supervisor's stderr is ours, but it runs beside hostile code: logged escaped and short.
    let stderr = String::from_utf8_lossy(&run.stderr[..run.stderr.len().min(2048)]);
    tracing::debug!(exit_code = run.exit_code, stderr = %stderr.escape_debug(), "sandbox finished");
    let bounds = Bounds {
        nonce,
        max_duration_ms: deadline.as_millis() as u64,
        max_rss_kb: config.sandbox_memory_mb.max(0) as u64 * 1024,
        max_pdf_bytes: config.max_pdf_bytes as u64,
        max_log_bytes: config.max_log_bytes as u64,
        max_synctex_bytes: config.max_synctex_bytes as u64,
    };
    let collected = collect(&run.stdout, &bounds);
    let killed = run.exit_code == Some(KILLED)
        && !(run.oom_killed || run.deadline_hit || run.stdout_overflowed);
    if killed && collected.report.is_none() {
        return Err(Interrupted::KilledFromOutside);
    }
    Ok(Ran { run, collected })
}
