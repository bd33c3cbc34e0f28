//! Garage stops after jobs were queued: each job compiles once, its uploads fail and are
//! retried in place (the scheduler counts every retry), and once Garage is back every job
//! succeeds on its first attempt with its PDF and its log stored.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::{dev_script, eventually_some, free_port, TestApp, HELLO};

/// The scheduler's `texfleet_upload_retries_total`, read from its own metrics endpoint.
async fn upload_retries(http: &reqwest::Client, address: &str) -> Option<f64> {
    let text = http
        .get(format!("http://{address}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("texfleet_upload_retries_total "))
        .and_then(|value| value.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_wait_out_an_object_store_outage() {
    let metrics_address = format!("127.0.0.1:{}", free_port());
    let app = TestApp::spawn_with(|config| {
        config.scheduler_metrics_addr = metrics_address.clone();
    })
    .await;
    let http = reqwest::Client::new();
    let before = eventually_some(
        Duration::from_secs(30),
        "the scheduler serves metrics",
        || upload_retries(&http, &metrics_address),
    )
    .await;
    // Fails when Garage is not running, so the outage cannot silently not happen.
    dev_script("garage", "stop");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let job = app.submit(json!({ "input_latex": HELLO })).await;
        ids.push(job["id"].as_str().unwrap().to_string());
    }
    eventually_some(
        Duration::from_secs(90),
        "an upload failed and is retried",
        || async {
            let retries = upload_retries(&http, &metrics_address).await?;
            (retries > before).then_some(())
        },
    )
    .await;
    assert_eq!(
        app.count_jobs("status IN ('Succeeded', 'Failed')").await,
        0,
        "a job ended while the object store was down"
    );
    dev_script("garage", "start");
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
}
