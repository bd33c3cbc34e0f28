//! The life of a sandbox container: create, start, attach, run one job, remove. With
//! [`crate::isolation`] (how every container is confined) and [`crate::inventory`] (listing
//! them), this is every Docker Engine API call texfleet makes.
//!
//! A compile is one container, created for one job and removed after it whatever happened.
//! The job goes in and the results come out through the attach stream (stdin/stdout), never
//! through bind mounts or the archive API: the work directory is a tmpfs that the archive API
//! cannot see, and the Docker host may be remote (`DOCKER_HOST`), sharing no filesystem with us.

use crate::isolation::{host_config, CONTAINER_USER};
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, EventsOptionsBuilder,
    RemoveContainerOptionsBuilder, RenameContainerOptionsBuilder, WaitContainerOptions,
};
use futures::StreamExt;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use texfleet_core::Config;
use texfleet_sandbox::CHECK_ARG;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// The job label of a warm pool container until it takes a job (it is renamed then).
pub const POOL_LABEL_PREFIX: &str = "pool-";
/// Labels on every sandbox container, so that leftovers can be found and traced to a job.
pub const JOB_LABEL: &str = "org.texfleet.job";
pub const SCHEDULER_LABEL: &str = "org.texfleet.scheduler";
/// The deployment (database) a container belongs to; sweeps never look past their own.
pub const DEPLOYMENT_LABEL: &str = "org.texfleet.deployment";
/// The TeX Live year of a sandbox image (sandbox-image/base/build.sh sets it).
const TEXLIVE_LABEL: &str = "org.texfleet.texlive";

const SUPERVISOR: &str = "texfleet-supervisor";
/// What we keep of the supervisor's stderr, for our own logs.
const MAX_STDERR_BYTES: usize = 64 * 1024;
/// How long after a container was killed its OOM event may still be on its way to the engine.
const OOM_EVENT_GRACE: Duration = Duration::from_secs(5);

pub type DockerError = bollard::errors::Error;

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

/// A sandbox container created and started ahead of demand, its supervisor waiting on stdin
/// for exactly one job. It is destroyed after that job: never reused.
#[derive(Debug)]
pub struct WarmContainer {
    pub id: String,
    pub label: String,
    pub created: Instant,
}

enum Ended {
    Finished(Result<(), DockerError>),
    DeadlineHit,
    Stopped,
}

#[derive(Clone)]
pub struct Sandbox {
    pub(crate) docker: bollard::Docker,
    /// The image's content id (`sha256:...`), which names exactly what compiles.
    image_id: String,
    /// Its TeX Live year, from its `org.texfleet.texlive` label.
    texlive: String,
    host_config: HostConfig,
    scheduler_id: String,
    pub(crate) deployment: String,
    removals: TaskTracker,
}

impl Sandbox {
    /// Whether the engine answers (`GET /_ping`).
    pub async fn ping(&self) -> Result<(), DockerError> {
        self.docker.ping().await.map(drop)
    }

    /// Connects to `DOCKER_HOST` (or the local socket), settling on an API version the engine
    /// speaks, and checks that the sandbox image is there.
    pub async fn connect(
        config: &Config,
        scheduler_id: &str,
        deployment: &str,
    ) -> anyhow::Result<Sandbox> {
        let docker = crate::engine_connect::connect_engine(config).await?;
        if config.sandbox_image.is_empty() {
            anyhow::bail!("sandbox_image is not set (TEXFLEET_SANDBOX_IMAGE)");
        }
        let image = docker
            .inspect_image(&config.sandbox_image)
            .await
            .map_err(|e| anyhow::anyhow!("sandbox image {}: {e}", config.sandbox_image))?;
        let texlive = image
            .config
            .as_ref()
            .and_then(|config| config.labels.as_ref())
            .and_then(|labels| labels.get(TEXLIVE_LABEL))
            .cloned()
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "sandbox image {} has no {TEXLIVE_LABEL} label: build it with sandbox-image/build.sh",
                    config.sandbox_image
                )
            })?;
        let image_id = image
            .id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| anyhow::anyhow!("sandbox image {} has no id", config.sandbox_image))?;
        Ok(Sandbox {
            docker,
            image_id,
            texlive,
            host_config: host_config(config),
            scheduler_id: scheduler_id.to_string(),
            deployment: deployment.to_string(),
            removals: TaskTracker::new(),
        })
    }

    pub fn image_id(&self) -> &str {
        &self.image_id
    }

    pub fn texlive(&self) -> &str {
        &self.texlive
    }

    /// Runs one job: in `warm` (a pool container) when given, else in a container created now;
    /// writes `stdin`, reads stdout until the sandbox exits, `deadline` passes, `max_stdout`
    /// bytes arrive or `stop` fires, and removes the container whatever happened.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        job_id: Uuid,
        attempt: i32,
        warm: Option<WarmContainer>,
        stdin: &[u8],
        deadline: Duration,
        max_stdout: usize,
        stop: &CancellationToken,
    ) -> Result<SandboxRun, DockerError> {
        // The container takes the job's name, so that it can be traced to the job.
        let name = format!("texfleet-{job_id}-{attempt}");
        let (container, started) = match warm {
            Some(warm) => {
                let options = RenameContainerOptionsBuilder::default().name(&name).build();
                if let Err(error) = self.docker.rename_container(&warm.id, options).await {
                    self.discard(&warm.id).await;
                    return Err(error);
                }
                (warm.id, true)
            }
            None => (
                self.create(&name, &job_id.to_string(), &[SUPERVISOR])
                    .await?,
                false,
            ),
        };
        let result = self
            .attach_and_run(&container, started, stdin, deadline, max_stdout, stop)
            .await;
        // The outputs are in hand: removing the container (a tenth of a second or more) need
        // not delay the upload and the answer. [`Sandbox::settle`] waits for these removals.
        let sandbox = self.clone();
        self.removals
            .spawn(async move { sandbox.discard(&container).await });
        result
    }

    /// Waits for the container removals still under way (at shutdown, and in the bench).
    pub async fn settle(&self) {
        self.removals.close();
        self.removals.wait().await;
        self.removals.reopen();
    }

    /// Creates and starts a container whose supervisor waits for one job: the warm pool's
    /// stock, so that a job does not wait for container start-up.
    pub async fn warm(&self, label: &str) -> Result<WarmContainer, DockerError> {
        let label = label.to_string();
        let id = self
            .create(&format!("texfleet-{label}"), &label, &[SUPERVISOR])
            .await?;
        if let Err(error) = self.docker.start_container(&id, None).await {
            self.discard(&id).await;
            return Err(error);
        }
        Ok(WarmContainer {
            id,
            label,
            created: Instant::now(),
        })
    }

    /// Whether a container is still running (a warm one: its supervisor waiting for a job).
    pub async fn is_running(&self, container: &str) -> bool {
        let inspected = self.docker.inspect_container(container, None).await;
        let state = inspected.ok().and_then(|c| c.state);
        state.and_then(|s| s.running).unwrap_or(false)
    }

    /// Removes a container we created, logging rather than failing.
    pub async fn discard(&self, container: &str) {
        if let Err(error) = self.remove(container).await {
            tracing::error!(%error, container, "could not remove sandbox container");
        }
        crate::metrics::CONTAINERS.dec();
    }

    /// Runs the supervisor's self-check in a sandbox exactly like a job's.
    pub async fn check(&self, stdin: &[u8]) -> Result<SandboxRun, DockerError> {
        let label = format!("check-{}", Uuid::new_v4());
        let container = self
            .create(
                &format!("texfleet-{label}"),
                &label,
                &[SUPERVISOR, CHECK_ARG],
            )
            .await?;
        let never = CancellationToken::new();
        let deadline = Duration::from_secs(30);
        let result = self
            .attach_and_run(&container, false, stdin, deadline, 1024 * 1024, &never)
            .await;
        self.discard(&container).await;
        result
    }

    /// Creates (does not start) a sandbox container with our labels and isolation.
    pub(crate) async fn create(
        &self,
        name: &str,
        job_label: &str,
        cmd: &[&str],
    ) -> Result<String, DockerError> {
        let labels = HashMap::from([
            (JOB_LABEL.to_string(), job_label.to_string()),
            (SCHEDULER_LABEL.to_string(), self.scheduler_id.clone()),
            (DEPLOYMENT_LABEL.to_string(), self.deployment.clone()),
        ]);
        let body = ContainerCreateBody {
            // By id, not by tag: a tag moved meanwhile must not change what compiles under
            // the id this scheduler records (the result cache matches on it).
            image: Some(self.image_id.clone()),
            cmd: Some(cmd.iter().map(|arg| arg.to_string()).collect()),
            user: Some(CONTAINER_USER.to_string()),
            working_dir: Some("/work".to_string()),
            labels: Some(labels),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            open_stdin: Some(true),
            stdin_once: Some(true),
            tty: Some(false),
            network_disabled: Some(true),
            host_config: Some(self.host_config.clone()),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        let container = self.docker.create_container(Some(options), body).await?.id;
        crate::metrics::CONTAINERS.inc();
        Ok(container)
    }

    async fn attach_and_run(
        &self,
        container: &str,
        already_started: bool,
        stdin: &[u8],
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
            attached.input.write_all(stdin).await?;
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

    /// Kills and removes a container with its anonymous volumes.
    pub async fn remove(&self, container: &str) -> Result<(), DockerError> {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        self.docker.remove_container(container, Some(options)).await
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
