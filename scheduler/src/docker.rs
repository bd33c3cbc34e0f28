//! The life of a sandbox container: create, start, attach, run one job, remove. With
//! [`attach`] (one job's exchange over the attach stream), [`crate::isolation`] (how every
//! container is confined) and [`crate::inventory`] (listing them), this is every Docker Engine
//! API call texfleet makes.
//!
//! A compile is one container, created for one job and removed after it whatever happened.
//! The job goes in and the results come out through the attach stream (stdin/stdout), never
//! through bind mounts or the archive API: the work directory is a tmpfs that the archive API
//! cannot see, and the Docker host may be remote (`DOCKER_HOST`), sharing no filesystem with us.

use crate::isolation::{host_config, CONTAINER_USER};
use crate::sandbox_input::SandboxInput;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder, RenameContainerOptionsBuilder,
};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use texfleet_core::Config;
use texfleet_sandbox::CHECK_ARG;
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
mod attach;

pub use attach::{oom_event_reported, SandboxRun};

pub type DockerError = bollard::errors::Error;

/// A sandbox container created and started ahead of demand, its supervisor waiting on stdin
/// for exactly one job. It is destroyed after that job: never reused.
#[derive(Debug)]
pub struct WarmContainer {
    pub id: String,
    pub label: String,
    pub created: Instant,
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

    /// The sandbox of the image `image` (a tag or an id) on the engine `docker`, which must
    /// have it, labelled as TeX Live `year` by `sandbox-image/build.sh`.
    pub async fn of_image(
        docker: bollard::Docker,
        config: &Config,
        image: &str,
        year: &str,
        scheduler_id: &str,
        deployment: &str,
    ) -> anyhow::Result<Sandbox> {
        let inspected = docker
            .inspect_image(image)
            .await
            .map_err(|e| anyhow::anyhow!("sandbox image {image}: {e}"))?;
        let texlive = inspected
            .config
            .as_ref()
            .and_then(|config| config.labels.as_ref())
            .and_then(|labels| labels.get(TEXLIVE_LABEL))
            .cloned()
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "sandbox image {image} has no {TEXLIVE_LABEL} label: build it with sandbox-image/build.sh"
                )
            })?;
        anyhow::ensure!(
            texlive == year,
            "sandbox image {image} is TeX Live {texlive}, but sandbox_images names it for {year}"
        );
        let image_id = inspected
            .id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| anyhow::anyhow!("sandbox image {image} has no id"))?;
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

    /// Runs one job (`run` names which of its runs: its attempt, and more for a run again): (a pool container) when given, else in a container created now;
    /// writes `stdin`, reads stdout until the sandbox exits, `deadline` passes, `max_stdout`
    /// bytes arrive or `stop` fires, and removes the container whatever happened.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        job_id: Uuid,
        run: &str,
        warm: Option<WarmContainer>,
        stdin: SandboxInput,
        deadline: Duration,
        max_stdout: usize,
        stop: &CancellationToken,
    ) -> Result<SandboxRun, DockerError> {
        // The container takes the job's name, so that it can be traced to the job.
        let name = format!("texfleet-{job_id}-{run}");
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
    pub async fn check(&self, stdin: SandboxInput) -> Result<SandboxRun, DockerError> {
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

    /// Kills and removes a container with its anonymous volumes.
    pub async fn remove(&self, container: &str) -> Result<(), DockerError> {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        self.docker.remove_container(container, Some(options)).await
    }
}
