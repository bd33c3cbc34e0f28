//! Cancelling a job on the real stack: a queued one at once, a running one's container within
//! seconds, and one whose PDF is being stored leaves nothing stored.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{containers_of_job, eventually, slow_store, TestApp, ENDLESS, HELLO};

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_job_is_cancelled_at_once_and_only_once() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let id = job.id();
    let response = app.cancel(id).await;
    assert_eq!(response.status(), StatusCode::OK);
    let cancelled: Value = response.json().await.unwrap();
    assert_eq!(cancelled["status"], "Cancelled");
    assert_eq!(cancelled["error"]["code"], "cancelled");
    assert!(cancelled["finished_at"].is_string());
    let again = app.cancel(id).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["code"], "already_finished", "{again:#}");
    assert_eq!(
        app.cancel(&uuid::Uuid::new_v4().to_string()).await.status(),
        StatusCode::NOT_FOUND
    );
    let (_, other_token) = app.other_project().await;
    let foreign = app.delete_as(&other_token, &format!("/compile/{id}")).await;
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_jobs_container_is_killed_within_two_seconds_of_cancellation() {
    // One slot: the next job runs only once the scheduler is done with the cancelled one.
    let app = TestApp::spawn_with(|config| config.scheduler_slots = 1).await;
    let job = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 120 }))
        .await;
    let id = job.id().to_string();
    eventually(
        Duration::from_secs(60),
        "the compile's container starts",
        || async { !containers_of_job(&id).await.is_empty() },
    )
    .await;
    let cancelled_at = Instant::now();
    let response = app.cancel(&id).await;
    assert_eq!(response.status(), StatusCode::OK);
    eventually(Duration::from_secs(2), "the container is gone", || async {
        containers_of_job(&id).await.is_empty()
    })
    .await;
    assert!(cancelled_at.elapsed() < Duration::from_secs(2));
    let cancelled: Value = response.json().await.unwrap();
    // Once the scheduler has moved on, it has written nothing over the cancellation.
    let next = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
    let job = app.get_json(&format!("/compile/{id}")).await;
    assert_eq!(
        job, cancelled,
        "the cancelled job changed after its cancellation"
    );
    let short_id = id.split('-').next().unwrap();
    let stored = app
        .storage
        .list(&format!("compiles/{short_id}/"))
        .await
        .unwrap();
    assert_eq!(
        stored,
        Vec::<String>::new(),
        "a cancelled job's outputs were stored"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_during_the_upload_leaves_nothing_stored_and_one_after_it_changes_nothing() {
    // Uploads through a proxy that holds each chunk three seconds: the cancellation lands
    // mid-upload, however loaded the machine.
    let store = slow_store(Duration::from_secs(3)).await;
    let app = TestApp::spawn_with(|config| {
        config.s3_endpoint = store;
        config.scheduler_slots = 1;
    })
    .await;
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let id = job.id().to_string();
    let short_id = id.split('-').next().unwrap().to_string();
    let stored = || {
        let (app, prefix) = (&app, format!("compiles/{short_id}/"));
        async move {
            let mut keys = app.storage.list(&prefix).await.unwrap();
            keys.sort();
            keys
        }
    };
    // The log is stored first; the PDF and the outcome are still to come.
    eventually(Duration::from_secs(120), "the log is uploaded", || async {
        !stored().await.is_empty()
    })
    .await;
    let response = app.cancel(&id).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the job ended before the cancel"
    );
    let cancelled: Value = response.json().await.unwrap();
    // One slot: once the next job ran, the scheduler is done with the cancelled one.
    let next = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
    assert_eq!(app.get_json(&format!("/compile/{id}")).await, cancelled);
    assert_eq!(
        stored().await,
        Vec::<String>::new(),
        "a cancelled job's outputs stayed"
    );

    // A cancel after the end is refused and leaves the outputs where they are.
    let next_id = next.id();
    let late = app.cancel(next_id).await;
    assert_eq!(late.status(), StatusCode::CONFLICT);
    assert_eq!(
        late.json::<Value>().await.unwrap()["code"],
        "already_finished"
    );
    assert_eq!(app.get_json(&format!("/compile/{next_id}")).await, next);
    assert!(app.pdf_of(next_id).await.starts_with(b"%PDF-"));
}
