//! Leases and attempts under a live scheduler: a compile longer than its lease keeps it (the
//! scheduler renews it) and runs once; infrastructure failures use up the job's attempts and
//! then fail it with the code of the failure, never as the document's fault.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{free_port, sandbox_containers, TestApp, HELLO};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A compile of several seconds (about 8 on an idle two-core machine), longer than the leases
/// below even when the machine is idle.
const BUSY: &str = "\\documentclass{article}\\begin{document}\\count1=0 \
    \\loop\\advance\\count1 by 1 \\ifnum\\count1<30000000 \\repeat done counting\\end{document}";

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_longer_than_its_lease_keeps_it_and_runs_once() {
    let lease_seconds = 2;
    let app = TestApp::spawn_with(|config| config.lease_seconds = lease_seconds).await;
    let job = app
        .compile(json!({ "input_latex": BUSY, "timeout_seconds": 120 }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let moment =
        |field: &str| OffsetDateTime::parse(job[field].as_str().unwrap(), &Rfc3339).unwrap();
    let ran = moment("finished_at") - moment("started_at");
    assert!(
        ran > time::Duration::seconds(2 * lease_seconds as i64),
        "the compile took {ran}, not longer than two leases of {lease_seconds} s"
    );
    assert_eq!(app.job_column::<i32>(job.id(), "attempts").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_that_keeps_failing_uses_up_the_attempts_and_fails_as_sandbox_error() {
    let app = TestApp::spawn_with(|config| config.max_attempts = 2).await;
    let job = app
        .submit(json!({ "input_latex": "\\loop\\iftrue\\repeat", "timeout_seconds": 120 }))
        .await;
    let id = job.id();
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    let force = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
        .force(true)
        .build();
    for attempt in 1..=2 {
        // Each attempt runs in a container of its own, named after the job and the attempt;
        // the fault removes it from under the job while it runs.
        let name = format!("texfleet-{id}-{attempt}");
        texfleet_e2e::eventually_some(
            Duration::from_secs(60),
            &format!("attempt {attempt} runs and is removed"),
            || async {
                let running = sandbox_containers(&[("name", &name), ("status", "running")]).await;
                let container = running.into_iter().next()?;
                docker
                    .remove_container(&container, Some(force.clone()))
                    .await
                    .ok()
            },
        )
        .await;
    }
    let job = app.wait_terminal(id, Duration::from_secs(60)).await;
    assert_eq!(job["status"], "Failed", "{job:#}");
    assert_eq!(job["error"]["code"], "sandbox_error", "{job:#}");
    assert_eq!(app.job_column::<i32>(id, "attempts").await, 2);
    // The next job runs normally: the failure was the job's containers, not the scheduler.
    let next = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_store_down_longer_than_the_upload_retries_fails_as_storage_error() {
    // Nothing listens at this endpoint: every PUT fails, however often it is tried.
    let app = TestApp::spawn_with(|config| {
        config.s3_endpoint = format!("http://127.0.0.1:{}", free_port());
        config.max_attempts = 1;
    })
    .await;
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let id = job.id();
    let job = app.wait_terminal(id, Duration::from_secs(180)).await;
    assert_eq!(job["status"], "Failed", "{job:#}");
    assert_eq!(job["error"]["code"], "storage_error", "{job:#}");
    assert!(job["pdf_storage_key"].is_null() && job["log_storage_key"].is_null());
    assert_eq!(app.job_column::<i32>(id, "attempts").await, 1);
}
