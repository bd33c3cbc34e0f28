//! A scheduler fetching the project files a job names: from its disk cache when a job of the
//! project named them before, and never bytes other than the hash says, whatever the store
//! returns. (A file of its own: the cache's counts are the process's.)

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    eventually_some, free_port, scheduler_metric, slow_store, TestApp, INPUT_BIG as MAIN,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_file_a_job_fetched_is_read_from_the_scheduler_s_disk_by_the_next() {
    let metrics = format!("127.0.0.1:{}", free_port());
    let app = TestApp::spawn_with(|config| config.scheduler_metrics_addr = metrics.clone()).await;
    let hash = app.upload_file(b"From the cache.\n").await;
    for _ in 0..2 {
        let job = app
            .compile(json!({ "input_latex": MAIN, "cache": false,
                             "files": [{ "path": "big.tex", "sha256": hash }] }))
            .await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        assert!(app.text_of(job.id()).await.contains("From the cache."));
    }
    let http = reqwest::Client::new();
    let hits = eventually_some(Duration::from_secs(10), "the scheduler's metrics", || {
        scheduler_metric(
            &http,
            &metrics,
            "texfleet_project_file_cache_total{result=\"hit\"}",
        )
    })
    .await;
    assert_eq!(hits, 1.0, "the second job read the file from the disk");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_file_whose_bytes_are_not_its_hash_fails_the_job_not_compiles_it() {
    let app = TestApp::spawn_with(|config| config.max_attempts = 1).await;
    let hash = app.upload_file(b"Honest.\n").await;
    let key = format!("projects/{}/files/{hash}", app.project_id);
    app.storage
        .put(
            &key,
            b"Forged.\n".to_vec(),
            "application/octet-stream",
            "test",
        )
        .await
        .unwrap();
    let job = app
        .compile(json!({ "input_latex": MAIN, "files": [{ "path": "big.tex", "sha256": hash }] }))
        .await;
    assert_eq!(job["status"], "Failed", "{job:#}");
    assert_eq!(job["error"]["code"], "storage_error", "{job:#}");
    assert!(
        job["links"]["pdf"].is_null(),
        "nothing compiled from the forged bytes"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn files_slower_to_arrive_than_the_job_s_time_allows_time_it_out() {
    // Every request to the store is held four seconds: a file's download outlasts a job of
    // one second and a second of grace.
    let store = slow_store(Duration::from_secs(4)).await;
    let app = TestApp::spawn_with(|config| {
        config.s3_endpoint = store;
        config.kill_grace_seconds = 1;
    })
    .await;
    let hash = app.upload_file(b"Slow to arrive.\n").await;
    let files = [json!({ "path": "big.tex", "sha256": hash })];
    let job = app
        .compile(json!({ "input_latex": MAIN, "timeout_seconds": 1, "files": files }))
        .await;
    assert_eq!(job["status"], "TimedOut", "{job:#}");
    assert_eq!(
        job["error"]["message"],
        "the project files took longer to arrive than the job's timeout allows",
        "{job:#}"
    );
}
