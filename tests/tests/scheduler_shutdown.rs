//! SIGTERM: the scheduler stops claiming, lets running compiles finish within its grace period
//! and hands the rest back to the queue, untouched, for another scheduler.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::{containers_of_job, eventually, SchedulerProcess, TestApp, HELLO};

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_hands_unfinished_jobs_back_to_the_queue() {
    let app = TestApp::spawn_api_only(|config| {
        config.shutdown_grace_seconds = 2;
        config.scheduler_slots = 1;
    })
    .await;
    let mut scheduler =
        SchedulerProcess::spawn(&app.config, &format!("stopping-{}", uuid::Uuid::new_v4()));
    let endless = app
        .submit(json!({ "input_latex": "\\loop\\iftrue\\repeat", "timeout_seconds": 120 }))
        .await;
    let id = endless["id"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(120),
        "the compile is running",
        || async { !containers_of_job(&id).await.is_empty() },
    )
    .await;

    let status = scheduler.terminate();
    assert!(status.success(), "the scheduler exited with {status}");
    let job = app
        .get(&format!("/compile/{id}"))
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(job["status"], "Queued", "{job:#}");
    assert!(
        containers_of_job(&id).await.is_empty(),
        "the handed-back compile's container is left"
    );
    let client = app.pool.get().await.unwrap();
    let attempts: i32 = client
        .query_one(
            "SELECT attempts FROM jobs WHERE id = $1",
            &[&id.parse::<uuid::Uuid>().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 0, "a handed-back job keeps its attempts");

    // Another scheduler picks it up; a job submitted meanwhile runs too.
    app.delete_as(&app.token, &format!("/compile/{id}")).await;
    let later = app.submit(json!({ "input_latex": HELLO })).await;
    let _next = SchedulerProcess::spawn(&app.config, &format!("next-{}", uuid::Uuid::new_v4()));
    let job = app
        .wait_terminal(later["id"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(job["status"], "Succeeded");
}
