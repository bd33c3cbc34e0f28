//! One job's exchange with its container over the attach stream: the job in on stdin, the
//! results out on stdout, within our deadline and the job's cancellation, and how the
//! container ended (the engine's OOM flag, or its events when the flag lost the race).

use super::{DockerError, Sandbox};
use crate::sandbox_input::SandboxInput;
use bollard::container::LogOutput;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, EventsOptionsBuilder, WaitContainerOptions,
};
use futures::StreamExt;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// What we keep of the supervisor's stderr, for our own logs.
const MAX_STDERR_BYTES: usize = 64 * 1024;
/// How long after a container was killed its OOM event may still be on its way to the engine.
const OOM_EVENT_GRACE: Duration = Duration::from_secs(5);

/// What came out of one sandbox run. Nothing in it is trusted yet.
#[derive(Debug, Default)]
pub struct SandboxRun {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The sandbox wrote more than the cap to stdout; we stopped reading and killed it.
    pub stdout_overflowed: bool,
    /// Our outer deadline passed and we killed the container.
    pub deadline_hit: bool,
    /// The job was taken from us (cancelled, lease lost, shutdown) and we killed the container.
    pub stopped: bool,
    /// The kernel's OOM killer fired inside the container's memory cgroup.
    pub oom_killed: bool,
    /// The container's exit code as the engine saw it (informative only: it came from inside).
    pub exit_code: Option<i64>,
}

enum Ended {
    Finished(Result<(), DockerError>),
    DeadlineHit,
    Stopped,
}

impl Sandbox {
    pub(super) async fn attach_and_run(
        &self,
        container: &str,
        already_started: bool,
        stdin: SandboxInput,
        deadline: Duration,
        max_stdout: usize,
        stop: &CancellationToken,
    ) -> Result<SandboxRun, DockerError> {
        let options = AttachContainerOptionsBuilder::default()
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let mut attached = self
            .docker
            .attach_container(container, Some(options))
            .await?;
        // Attach before start, so no output is lost; a warm container is already started, and
        // its supervisor writes nothing before it has read its job.
        if !already_started {
            self.docker.start_container(container, None).await?;
        }

        let mut run = SandboxRun::default();
        let exchange = async {
            stdin.write_to(&mut attached.input).await?;
            attached.input.shutdown().await?;
            while let Some(frame) = attached.output.next().await {
                match frame? {
                    LogOutput::StdOut { message } => {
                        if run.stdout.len() + message.len() > max_stdout {
                            run.stdout_overflowed = true;
                            break;
                        }
                        run.stdout.extend_from_slice(&message);
                    }
                    LogOutput::StdErr { message } => {
                        let room = MAX_STDERR_BYTES.saturating_sub(run.stderr.len());
                        run.stderr
                            .extend_from_slice(&message[..message.len().min(room)]);
                    }
                    _ => {}
                }
            }
            Ok::<_, DockerError>(())
        };
        // Whichever comes first: the sandbox is done, our deadline, or the job is taken from us
        // (pushed by a notification, so a cancelled compile dies at once).
        let ended = tokio::select! {
            result = tokio::time::timeout(deadline, exchange) => match result {
                Ok(finished) => Ended::Finished(finished),
                Err(_elapsed) => Ended::DeadlineHit,
            },
            _ = stop.cancelled() => Ended::Stopped,
        };
        match ended {
            Ended::Finished(result) => result?,
            Ended::DeadlineHit => run.deadline_hit = true,
            Ended::Stopped => run.stopped = true,
        }
        if run.deadline_hit || run.stdout_overflowed || run.stopped {
            self.kill(container).await;
        }
        // Stdout closing does not mean the container is gone; wait so that its state is final.
        let mut wait = self
            .docker
            .wait_container(container, None::<WaitContainerOptions>);
        let _ = tokio::time::timeout(Duration::from_secs(10), wait.next()).await;
        let state = self.docker.inspect_container(container, None).await?.state;
        run.oom_killed = state.as_ref().and_then(|s| s.oom_killed).unwrap_or(false);
        run.exit_code = state.and_then(|s| s.exit_code);
        let killed_by_us = run.deadline_hit || run.stdout_overflowed || run.stopped;
        if run.exit_code == Some(crate::outcome::KILLED) && !run.oom_killed && !killed_by_us {
            run.oom_killed = oom_event_reported(&self.docker, container).await;
            tracing::info!(
                run.oom_killed,
                "killed, and the engine's OOM flag unset: asked its events"
            );
        }
        Ok(run)
    }

    async fn kill(&self, container: &str) {
        if let Err(error) = self.docker.kill_container(container, None).await {
            tracing::debug!(%error, container, "kill failed (it may have exited already)");
        }
    }
}

/// Whether the engine reports an OOM kill of `container`, waiting a grace period for one.
/// The engine's `OOMKilled` flag races the container's exit: under gVisor the host kills
/// the whole sandbox, and the exit can be recorded before the OOM event, so the flag alone
/// made a memory bomb look like a container killed from outside, now and then.
pub async fn oom_event_reported(docker: &bollard::Docker, container: &str) -> bool {
    let unix = |time: SystemTime| {
        let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        format!(
            "{}.{:09}",
            since_epoch.as_secs(),
            since_epoch.subsec_nanos()
        )
    };
    let filters = HashMap::from([
        ("container".to_string(), vec![container.to_string()]),
        ("event".to_string(), vec!["oom".to_string()]),
    ]);
    // Only this container's events match, so `since` may reach far back: that keeps the
    // query right when the engine's clock runs behind ours (`DOCKER_HOST` elsewhere).
    let now = SystemTime::now();
    let options = EventsOptionsBuilder::new()
        .since(&unix(now - Duration::from_secs(3600)))
        .until(&unix(now + OOM_EVENT_GRACE))
        .filters(&filters)
        .build();
    // The engine keeps its last 256 events: on a very busy engine the OOM event may be gone
    // already, and the job is then retried as killed from outside.
    // The stream ends at `until`; the first event it yields is the OOM kill. Our own
    // timeout too, in case an engine streams on past `until`.
    let mut events = docker.events(Some(options));
    let first = tokio::time::timeout(2 * OOM_EVENT_GRACE, events.next()).await;
    matches!(first, Ok(Some(Ok(_))))
}
