//! The inventory of sandbox containers on a Docker host, as their labels describe them: for
//! the orphan sweeps (`upkeep`) and for the soak's count of what is left.

use crate::docker::{
    DockerError, Sandbox, DEPLOYMENT_LABEL, JOB_LABEL, POOL_LABEL_PREFIX, SCHEDULER_LABEL,
};
use bollard::query_parameters::ListContainersOptionsBuilder;
use std::collections::HashMap;

/// A sandbox container as its labels describe it.
#[derive(Debug, Clone)]
pub struct SandboxContainer {
    pub id: String,
    /// The job id (or `check-…` for a self-check).
    pub job: String,
    pub scheduler: String,
    pub age_seconds: i64,
}

fn time_now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Sandbox {
    /// Every sandbox container of this deployment on this Docker host, of any scheduler.
    pub async fn list_sandboxes(&self) -> Result<Vec<SandboxContainer>, DockerError> {
        let deployment = format!("{DEPLOYMENT_LABEL}={}", self.deployment);
        let filters = HashMap::from([("label", vec![JOB_LABEL.to_string(), deployment])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let now = time_now_seconds();
        Ok(self
            .docker
            .list_containers(Some(options))
            .await?
            .into_iter()
            .filter_map(|container| {
                let labels = container.labels.unwrap_or_default();
                Some(SandboxContainer {
                    id: container.id?,
                    job: labels.get(JOB_LABEL).cloned().unwrap_or_default(),
                    scheduler: labels.get(SCHEDULER_LABEL).cloned().unwrap_or_default(),
                    age_seconds: now.saturating_sub(container.created.unwrap_or(now)),
                })
            })
            .collect())
    }
}

/// How many job containers (not idle warm-pool ones) of any deployment exist on the
/// `DOCKER_HOST` engine.
pub async fn count_sandbox_containers() -> Result<usize, DockerError> {
    let docker = bollard::Docker::connect_with_defaults()?
        .negotiate_version()
        .await?;
    let filters = HashMap::from([("label", vec![JOB_LABEL.to_string()])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let containers = docker.list_containers(Some(options)).await?;
    let is_job = |labels: &HashMap<String, String>| {
        !labels
            .get(JOB_LABEL)
            .is_some_and(|l| l.starts_with(POOL_LABEL_PREFIX))
    };
    Ok(containers
        .iter()
        .filter(|c| c.labels.as_ref().is_some_and(is_job))
        .count())
}

impl Sandbox {
    /// The arguments the engine passes to an OCI runtime it has registered (`docker info`).
    pub async fn runtime_arguments(&self, runtime: &str) -> Result<Vec<String>, DockerError> {
        let info = self.docker.info().await?;
        Ok(info
            .runtimes
            .unwrap_or_default()
            .remove(runtime)
            .and_then(|runtime| runtime.runtime_args)
            .unwrap_or_default())
    }
}
