//! Retention on the real stack: finished jobs past it are deleted with their objects (their
//! page previews too).

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;
use texfleet_core::storage::StorageError;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{eventually, TestApp, ENDLESS, HELLO};

/// Asserts that the store answers "no such key" for `key`, not any other failure.
async fn assert_not_stored(app: &TestApp, key: &str) {
    match app.storage.get_bytes(key).await {
        Err(StorageError::NotFound(_)) => {}
        Err(other) => panic!("{key}: {other}"),
        Ok(_) => panic!("{key} is still stored"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_jobs_past_retention_are_deleted_with_their_objects() {
    let app = TestApp::spawn_with(|config| {
        config.retention_days = 1;
        config.retention_interval_seconds = 1;
    })
    .await;
    let succeeded = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(succeeded["status"], "Succeeded");
    let preview = app
        .get(&format!("/compile/{}/pages/1?width=100", succeeded.id()))
        .await;
    assert_eq!(preview.status(), StatusCode::OK);
    let short = succeeded.id().split('-').next().unwrap();
    let preview_key = format!("compiles/{short}/pages/1-100.png");
    assert!(app.storage.get_bytes(&preview_key).await.is_ok());
    let failed = app
        .compile(json!({ "input_latex": "\\documentclass{article}\\begin{document}\\undefined\\end{document}" }))
        .await;
    assert_eq!(failed["status"], "Failed");
    let cancelled = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 60 }))
        .await;
    let cancelled = app.cancel(cancelled.id()).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    let cancelled: Value = cancelled.json().await.unwrap();
    let recent = app.compile(json!({ "input_latex": HELLO })).await;
    let queued = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 60 }))
        .await;
    let old = [&succeeded, &failed, &cancelled].map(|job| job.id().to_string());
    let aged = app
        .execute(&format!(
            "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE id::text IN ('{}')",
            old.join("', '")
        ))
        .await;
    assert_eq!(aged, 3);

    for id in &old {
        eventually(
            Duration::from_secs(30),
            &format!("the old job {id} is deleted"),
            || async { app.get(&format!("/compile/{id}")).await.status() == StatusCode::NOT_FOUND },
        )
        .await;
    }
    for key in [
        &succeeded["pdf_storage_key"],
        &succeeded["log_storage_key"],
        &failed["log_storage_key"],
        &json!(preview_key),
    ] {
        assert_not_stored(&app, key.as_str().unwrap()).await;
    }
    let recent_key = recent["pdf_storage_key"].as_str().unwrap();
    assert!(
        app.storage.get_bytes(recent_key).await.is_ok(),
        "a recent PDF was deleted"
    );
    assert_eq!(
        app.get(&format!("/compile/{}", queued.id())).await.status(),
        StatusCode::OK
    );
    app.cancel(queued.id()).await;
}
