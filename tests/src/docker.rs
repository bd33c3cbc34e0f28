//! The sandbox containers on the Docker engine, seen from outside, and the canaries the
//! hostile suite looks for.

use crate::wait::{eventually, eventually_some};
use std::time::Duration;

/// Containers of a job that still exist: created for it (labelled with its id) or taken from
/// the warm pool (renamed `texfleet-<job id>-<attempt>`).
pub async fn containers_of_job(job_id: &str) -> Vec<String> {
    containers_of_job_where(job_id, &[]).await
}

async fn containers_of_job_where(job_id: &str, more: &[(&str, &str)]) -> Vec<String> {
    let label = format!("org.texfleet.job={job_id}");
    let name = format!("texfleet-{job_id}");
    let mut found = Vec::new();
    for filter in [("label", label.as_str()), ("name", name.as_str())] {
        let filters: Vec<(&str, &str)> = std::iter::once(filter)
            .chain(more.iter().copied())
            .collect();
        found.extend(sandbox_containers(&filters).await);
    }
    found.sort();
    found.dedup();
    found
}

/// Waits until the job `job_id` has a started container (a created one may not run yet:
/// `docker exec` refuses it), and returns its id.
pub async fn container_of_running_job(job_id: &str) -> String {
    eventually_some(
        Duration::from_secs(60),
        "the job's container runs",
        || async {
            containers_of_job_where(job_id, &[("status", "running")])
                .await
                .pop()
        },
    )
    .await
}

/// The Docker engine the tests and the scheduler use (`DOCKER_HOST`), at its API version.
pub async fn docker_engine() -> bollard::Docker {
    bollard::Docker::connect_with_defaults()
        .unwrap()
        .negotiate_version()
        .await
        .unwrap()
}

/// Ids of the containers (running or not) matching every Docker list filter given.
pub async fn sandbox_containers(filters: &[(&str, &str)]) -> Vec<String> {
    let docker = docker_engine().await;
    let filters: std::collections::HashMap<&str, Vec<String>> = filters
        .iter()
        .map(|(key, value)| (*key, vec![value.to_string()]))
        .collect();
    let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

/// Asserts that a finished job's container is removed promptly (the scheduler removes it
/// while it uploads, so it may outlive the job's final state by a moment).
pub async fn assert_container_removed(job_id: &str) {
    eventually(
        Duration::from_secs(10),
        &format!("the container of job {job_id} is removed"),
        || async { containers_of_job(job_id).await.is_empty() },
    )
    .await;
}
/// The canaries `./dev/test` plants: a secret in this process's environment (shared with the
/// in-process scheduler) and the path of a host file that holds the same secret.
pub fn canary() -> (String, String) {
    let secret =
        std::env::var("CANARY_SECRET").expect("CANARY_SECRET (run the suite through ./dev/test)");
    let file =
        std::env::var("CANARY_FILE").expect("CANARY_FILE (run the suite through ./dev/test)");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().trim(),
        secret,
        "the host canary file holds the secret"
    );
    (secret, file)
}

/// Runs `command` in a running container as `user` (`uid:gid`), as `docker exec` does, and
/// returns what it printed.
pub async fn exec_in(container: &str, user: &str, command: &[&str]) -> String {
    use bollard::exec::StartExecResults;
    use futures::StreamExt;
    let docker = docker_engine().await;
    let config = bollard::models::ExecConfig {
        cmd: Some(command.iter().map(|arg| arg.to_string()).collect()),
        user: Some(user.to_string()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let exec = docker.create_exec(container, config).await.unwrap();
    let mut printed = Vec::new();
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&exec.id, None).await.unwrap()
    {
        while let Some(Ok(frame)) = output.next().await {
            printed.extend_from_slice(&frame.into_bytes());
        }
    }
    String::from_utf8_lossy(&printed).into_owned()
}
