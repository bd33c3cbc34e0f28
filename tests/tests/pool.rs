//! The warm pool: containers started ahead of demand, each serving exactly one job and
//! destroyed after it, refilled in the background, replaced when too old or stopped, and
//! removed when its scheduler stops.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    container_of_running_job, eventually, eventually_some, sandbox_containers, SchedulerProcess,
    TestApp,
};

/// About two seconds of TeX arithmetic, so that the job's container can be seen running.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<3000000 \\repeat Done.\\end{document}";

/// The deployment's warm containers that are started (their supervisors waiting for a job).
async fn warm_containers(deployment: &str) -> Vec<String> {
    let deployment = format!("org.texfleet.deployment={deployment}");
    sandbox_containers(&[
        ("label", &deployment),
        ("name", "texfleet-pool-"),
        ("status", "running"),
    ])
    .await
}

/// Waits until the deployment has exactly one warm container other than `not`, and returns it.
async fn the_warm_container(deployment: &str, not: &[String], what: &str) -> String {
    eventually_some(Duration::from_secs(60), what, || async {
        let warm = warm_containers(deployment).await;
        (warm.len() == 1 && !not.contains(&warm[0])).then(|| warm[0].clone())
    })
    .await
}

async fn run_and_see_container(app: &TestApp) -> String {
    let job = app.submit(json!({ "input_latex": SLOW })).await;
    let id = job.id().to_string();
    let container = container_of_running_job(&id).await;
    let finished = app.wait_terminal(&id, Duration::from_secs(120)).await;
    assert_eq!(finished["status"], "Succeeded", "{finished:#}");
    container
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warm_container_serves_exactly_one_job_and_is_replaced() {
    let app = TestApp::spawn_with(|config| {
        config.scheduler_slots = 1;
        config.warm_pool_size = Some(1);
    })
    .await;
    let deployment = app.deployment_id().await;
    let first_warm = the_warm_container(&deployment, &[], "the pool is filled").await;

    let first = run_and_see_container(&app).await;
    assert_eq!(
        first, first_warm,
        "the job did not run in the warm container"
    );
    eventually(
        Duration::from_secs(10),
        "the warm container is destroyed after its job",
        || async { sandbox_containers(&[("id", &first)]).await.is_empty() },
    )
    .await;
    let second_warm = the_warm_container(
        &deployment,
        std::slice::from_ref(&first),
        "the pool is refilled",
    )
    .await;

    let second = run_and_see_container(&app).await;
    assert_eq!(second, second_warm);
    assert_ne!(second, first, "a container served two jobs");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warm_container_too_old_or_stopped_is_replaced_and_the_next_job_runs() {
    let app = TestApp::spawn_with(|config| {
        config.scheduler_slots = 1;
        config.warm_pool_size = Some(1);
        config.warm_pool_max_age_seconds = 3;
    })
    .await;
    let deployment = app.deployment_id().await;
    let aged = the_warm_container(&deployment, &[], "the pool is filled").await;
    let young = the_warm_container(
        &deployment,
        std::slice::from_ref(&aged),
        "the old one is replaced",
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "the old one is removed",
        || async { sandbox_containers(&[("id", &aged)]).await.is_empty() },
    )
    .await;

    // A warm container that died while it waited is replaced too.
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    docker
        .kill_container(
            &young,
            None::<bollard::query_parameters::KillContainerOptions>,
        )
        .await
        .unwrap();
    let fresh =
        the_warm_container(&deployment, &[aged, young], "the stopped one is replaced").await;
    assert_eq!(run_and_see_container(&app).await, fresh);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopping_scheduler_removes_its_warm_containers_even_one_being_created() {
    let app = TestApp::spawn_api_only(|config| {
        config.scheduler_slots = 3;
        config.warm_pool_size = Some(3);
    })
    .await;
    let deployment = app.deployment_id().await;
    let label = format!("org.texfleet.deployment={deployment}");
    // Stopped as soon as its first warm container runs, while it creates the next ones.
    for round in 0..3 {
        let mut scheduler = SchedulerProcess::spawn(
            &app.config,
            &format!("draining-{round}-{}", uuid::Uuid::new_v4()),
        );
        eventually(Duration::from_secs(60), "a warm container runs", || async {
            !warm_containers(&deployment).await.is_empty()
        })
        .await;
        let status = scheduler.terminate();
        assert!(status.success(), "the scheduler exited with {status}");
        // A creation Docker was still serving would land a moment after the exit.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let left = sandbox_containers(&[("label", &label)]).await;
        assert_eq!(
            left,
            Vec::<String>::new(),
            "round {round}: containers left after the scheduler stopped"
        );
    }
}
