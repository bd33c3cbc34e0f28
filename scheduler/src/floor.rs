//! The benchmark's floor: a job compiled in a sandbox container that is already started, its
//! supervisor waiting (as a warm-pool container's does), with nothing of the service around
//! it: no API, queue, database, container start or upload. `texfleet bench` times
//! [`run_floor`] beside the service's end-to-end figures.

use crate::docker::{DockerError, Sandbox, SandboxRun, WarmContainer};
use crate::job_spec::{deadline, job_spec, max_stdout};
use std::io::Read;
use texfleet_core::model::ClaimedJob;
use texfleet_core::Config;
use texfleet_sandbox::{CompileState, DriverState, DRIVER_STATE_FILE};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Starts a floor container; [`run_floor`] gives it its one job.
pub async fn start_floor(sandbox: &Sandbox) -> Result<WarmContainer, DockerError> {
    sandbox.warm(&format!("floor-{}", Uuid::new_v4())).await
}

/// Runs `job` in `container`, which is removed afterwards, and returns what came out. With
/// no container, one is created for the job and removed after it, as a service without a
/// warm pool does (`docker run --rm`). `previous` are the auxiliary files of an earlier run
/// ([`handed_on`]): the floor of a second compile is the compiler run again where its
/// auxiliary files are, as on a laptop.
pub async fn run_floor(
    sandbox: &Sandbox,
    config: &Config,
    container: Option<WarmContainer>,
    job: &ClaimedJob,
    previous: CompileState,
) -> Result<SandboxRun, DockerError> {
    let mut spec = job_spec(config, job, &[]);
    spec.previous = previous;
    let stdin = texfleet_sandbox::job_input(&spec, &[]);
    let deadline = deadline(config, job.timeout_seconds, 0);
    let never = CancellationToken::new();
    sandbox
        .run(
            job.id,
            &job.attempt.to_string(),
            container,
            stdin.into(),
            deadline,
            max_stdout(config),
            &never,
        )
        .await
}

/// The auxiliary files a floor run left for the next, read from its output archive.
pub fn handed_on(run: &SandboxRun) -> CompileState {
    let mut archive = tar::Archive::new(run.stdout.as_slice());
    let Ok(entries) = archive.entries() else {
        return CompileState::default();
    };
    for mut entry in entries.flatten() {
        if entry.path_bytes().as_ref() == DRIVER_STATE_FILE.as_bytes() {
            let mut bytes = Vec::new();
            if entry.read_to_end(&mut bytes).is_ok() {
                if let Ok(state) = serde_json::from_slice::<DriverState>(&bytes) {
                    return state.next;
                }
            }
        }
    }
    CompileState::default()
}
