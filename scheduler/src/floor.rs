//! The benchmark's floor: a job compiled in a sandbox container that is already started, its
//! supervisor waiting (as a warm-pool container's does), with nothing of the service around
//! it: no API, queue, database, container start or upload. `texfleet bench` times
//! [`run_floor`] beside the service's end-to-end figures.

use crate::docker::{DockerError, Sandbox, SandboxRun, WarmContainer};
use crate::job_spec::{deadline, job_spec, max_stdout};
use texfleet_core::model::ClaimedJob;
use texfleet_core::Config;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Starts a floor container; [`run_floor`] gives it its one job.
pub async fn start_floor(sandbox: &Sandbox) -> Result<WarmContainer, DockerError> {
    sandbox.warm(&format!("floor-{}", Uuid::new_v4())).await
}

/// Runs `job` in `container`, which is removed afterwards, and returns what came out.
pub async fn run_floor(
    sandbox: &Sandbox,
    config: &Config,
    container: WarmContainer,
    job: &ClaimedJob,
) -> Result<SandboxRun, DockerError> {
    let stdin = serde_json::to_vec(&job_spec(config, job)).expect("a job spec serializes");
    let deadline = deadline(config, job);
    let never = CancellationToken::new();
    sandbox
        .run(
            job.id,
            job.attempt,
            Some(container),
            &stdin,
            deadline,
            max_stdout(config),
            &never,
        )
        .await
}
