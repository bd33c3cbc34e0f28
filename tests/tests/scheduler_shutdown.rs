//! SIGTERM: the scheduler stops claiming, lets running compiles finish within its grace period
//! and hands the rest back to the queue, untouched, for another scheduler.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{container_of_running_job, SchedulerProcess, TestApp, ENDLESS, HELLO};

const GRACE_SECONDS: u64 = 20;

/// A compile of a few seconds: longer than the moments between its start and the signal,
/// far shorter than the grace period.
const BUSY_FOR_SECONDS: &str = "\\documentclass{article}\\begin{document}\\count1=0 \
    \\loop\\advance\\count1 by 1 \\ifnum\\count1<15000000 \\repeat done counting\\end{document}";

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_running_compiles_within_the_grace_and_hands_the_rest_to_another() {
    let app = TestApp::spawn_api_only(|config| {
        config.shutdown_grace_seconds = GRACE_SECONDS;
        config.scheduler_slots = 2;
        config.max_running_per_project = 2;
        config.idle_project_slots = 0;
    })
    .await;
    let mut stopping =
        SchedulerProcess::spawn(&app.config, &format!("stopping-{}", uuid::Uuid::new_v4()));
    let busy = app
        .submit(json!({ "input_latex": BUSY_FOR_SECONDS, "timeout_seconds": 120 }))
        .await;
    let endless = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 300 }))
        .await;
    let (busy_id, endless_id) = (busy.id(), endless.id());
    container_of_running_job(busy_id).await;
    container_of_running_job(endless_id).await;

    stopping.send_sigterm();
    let signalled = Instant::now();
    let busy_then = app.get_json(&format!("/compile/{busy_id}")).await;
    assert_eq!(busy_then["status"], "Running", "{busy_then:#}");
    // No new claims after the signal.
    let later = app.submit(json!({ "input_latex": HELLO })).await;

    let status = stopping
        .exited(Duration::from_secs(GRACE_SECONDS + 30))
        .await;
    let stopped_after = signalled.elapsed();
    assert!(status.success(), "the scheduler exited with {status}");
    assert!(
        stopped_after >= Duration::from_secs(GRACE_SECONDS)
            && stopped_after < Duration::from_secs(GRACE_SECONDS + 15),
        "the scheduler stopped {stopped_after:?} after SIGTERM, its grace is {GRACE_SECONDS} s"
    );

    // The compile that could finish within the grace did, with its PDF.
    let busy = app.get_json(&format!("/compile/{busy_id}")).await;
    assert_eq!(busy["status"], "Succeeded", "{busy:#}");
    assert!(app.text_of(busy_id).await.contains("done counting"));
    // The endless one was handed back untouched, its container removed.
    let endless: Value = app.get_json(&format!("/compile/{endless_id}")).await;
    assert_eq!(endless["status"], "Queued", "{endless:#}");
    assert_eq!(
        app.job_column::<Option<String>>(endless_id, "lease_owner")
            .await,
        None
    );
    assert_eq!(
        app.count_jobs(&format!("id = '{endless_id}' AND attempts = 0"))
            .await,
        1,
        "a handed-back job keeps its attempts"
    );
    assert!(texfleet_e2e::containers_of_job(endless_id).await.is_empty());
    assert_eq!(
        app.get_json(&format!("/compile/{}", later.id())).await["status"],
        "Queued"
    );

    // Another scheduler takes the handed-back job, and the one queued meanwhile.
    let next_id = format!("next-{}", uuid::Uuid::new_v4());
    let _next = SchedulerProcess::spawn(&app.config, &next_id);
    container_of_running_job(endless_id).await;
    assert_eq!(
        app.job_column::<Option<String>>(endless_id, "lease_owner")
            .await,
        Some(next_id)
    );
    let later = app.wait_terminal(later.id(), Duration::from_secs(60)).await;
    assert_eq!(later["status"], "Succeeded", "{later:#}");
    app.delete_as(&app.token, &format!("/compile/{endless_id}"))
        .await;
}
