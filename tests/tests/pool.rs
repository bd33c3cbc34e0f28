//! The warm pool: containers started ahead of demand, each serving exactly one job and
//! destroyed after it, refilled in the background.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::{
    container_of_running_job, eventually, eventually_some, sandbox_containers, TestApp,
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

async fn run_and_see_container(app: &TestApp) -> String {
    let job = app.submit(json!({ "input_latex": SLOW })).await;
    let id = job["id"].as_str().unwrap().to_string();
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
    let client = app.pool.get().await.unwrap();
    let deployment: uuid::Uuid = client
        .query_one("SELECT id FROM deployment", &[])
        .await
        .unwrap()
        .get(0);
    let deployment = deployment.to_string();
    let first_warm = eventually_some(Duration::from_secs(60), "the pool is filled", || async {
        Some(warm_containers(&deployment).await).filter(|warm| warm.len() == 1)
    })
    .await;

    let first = run_and_see_container(&app).await;
    assert_eq!(
        first, first_warm[0],
        "the job did not run in the warm container"
    );
    eventually(
        Duration::from_secs(10),
        "the warm container is destroyed after its job",
        || async { sandbox_containers(&[("id", &first)]).await.is_empty() },
    )
    .await;
    let second_warm = eventually_some(Duration::from_secs(60), "the pool is refilled", || async {
        Some(warm_containers(&deployment).await).filter(|warm| warm.len() == 1)
    })
    .await;
    assert_ne!(second_warm[0], first);

    let second = run_and_see_container(&app).await;
    assert_eq!(second, second_warm[0]);
    assert_ne!(second, first, "a container served two jobs");
}
