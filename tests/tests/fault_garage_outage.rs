//! Garage stops after jobs were queued: each job compiles once, its uploads fail and are
//! retried in place (the scheduler counts every retry), and once Garage is back every job
//! succeeds on its first attempt with its PDF and its log stored. A job past retention whose
//! objects cannot be deleted meanwhile is kept, and deleted by a run after the outage.

use serde_json::json;
use std::time::Duration;
use texfleet_core::storage::StorageError;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    eventually, eventually_some, free_port, scheduler_metric, Outage, TestApp, HELLO,
};

#[tokio::test(flavor = "multi_thread")]
async fn uploads_wait_out_an_object_store_outage() {
    let metrics_address = format!("127.0.0.1:{}", free_port());
    let app = TestApp::spawn_with(|config| {
        config.scheduler_metrics_addr = metrics_address.clone();
        config.retention_days = 1;
        config.retention_interval_seconds = 1;
    })
    .await;
    let http = reqwest::Client::new();
    let upload_retries =
        || scheduler_metric(&http, &metrics_address, "texfleet_upload_retries_total");
    let retention_kept = || {
        scheduler_metric(
            &http,
            &metrics_address,
            "texfleet_retention_jobs_total{result=\"kept\"}",
        )
    };
    let before = eventually_some(
        Duration::from_secs(30),
        "the scheduler serves metrics",
        upload_retries,
    )
    .await;
    let expired = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(expired["status"], "Succeeded", "{expired:#}");
    let expired_id = expired.id();
    let mut outage = Outage::begin("garage");
    let kept_before = retention_kept().await.unwrap();
    app.execute(&format!(
        "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE id = '{expired_id}'"
    ))
    .await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let job = app.submit(json!({ "input_latex": HELLO })).await;
        ids.push(job.id().to_string());
    }
    eventually_some(
        Duration::from_secs(90),
        "an upload failed and is retried",
        || async { (upload_retries().await? > before).then_some(()) },
    )
    .await;
    eventually_some(
        Duration::from_secs(90),
        "retention could not delete the expired job's objects",
        || async { (retention_kept().await? > kept_before).then_some(()) },
    )
    .await;
    assert_eq!(
        app.get(&format!("/compile/{expired_id}")).await.status(),
        200,
        "a job whose objects could not be deleted was deleted"
    );
    assert_eq!(
        app.count_jobs(&format!(
            "status IN ('Succeeded', 'Failed') AND id <> '{expired_id}'"
        ))
        .await,
        0,
        "a job ended while the object store was down"
    );
    outage.end();
    for id in &ids {
        let job = app.wait_terminal(id, Duration::from_secs(120)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        assert_eq!(
            app.count_jobs(&format!("id = '{id}' AND attempts = 1"))
                .await,
            1,
            "the job was compiled more than once: {job:#}"
        );
        let pdf = app
            .storage
            .get_bytes(job["pdf_storage_key"].as_str().unwrap())
            .await
            .unwrap();
        assert!(pdf.starts_with(b"%PDF-"));
        let log = app.get(&format!("/compile/{id}/log")).await;
        assert_eq!(log.status(), 200);
        assert!(log.text().await.unwrap().contains("Output written on"));
    }
    eventually(
        Duration::from_secs(30),
        "the next retention run deletes the expired job",
        || async { app.get(&format!("/compile/{expired_id}")).await.status() == 404 },
    )
    .await;
    for key in ["pdf_storage_key", "log_storage_key"] {
        let key = expired[key].as_str().unwrap();
        assert!(
            matches!(
                app.storage.get_bytes(key).await,
                Err(StorageError::NotFound(_))
            ),
            "{key} is still stored"
        );
    }
}
