//! Garage stops while jobs finish: uploads are retried, and the jobs succeed once it is back.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::{dev_script, eventually, TestApp, HELLO};

#[tokio::test(flavor = "multi_thread")]
async fn uploads_wait_out_an_object_store_outage() {
    let app = TestApp::spawn().await;
    dev_script("garage", "stop");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            app.submit(json!({ "input_latex": HELLO })).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // The compiles finish and their uploads fail while Garage is down.
    eventually(
        Duration::from_secs(60),
        "the compiles reach their uploads",
        || async {
            let running = app.count_jobs("status = 'Running'").await;
            running > 0
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    dev_script("garage", "start");
    for id in &ids {
        let job = app.wait_terminal(id, Duration::from_secs(120)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        assert!(app
            .storage
            .get_bytes(job["pdf_storage_key"].as_str().unwrap())
            .await
            .is_ok());
    }
}
