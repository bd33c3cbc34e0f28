//! Postgres stops for ten seconds while clients submit: the API answers 503 `unavailable`
//! meanwhile, recovers without a restart, and every job that got a 202 finishes.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_e2e::{dev_script, eventually, TestApp, HELLO};

#[tokio::test(flavor = "multi_thread")]
async fn the_service_rides_out_a_postgres_outage() {
    let app = TestApp::spawn().await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let mut accepted = Vec::new();
    let mut unavailable = 0;
    let started = Instant::now();
    let mut stopped_at = None;
    let mut restarted = false;
    while started.elapsed() < Duration::from_secs(16) {
        let elapsed = started.elapsed();
        if stopped_at.is_none() && elapsed > Duration::from_secs(2) {
            dev_script("pg", "stop");
            stopped_at = Some(Instant::now());
        }
        if let Some(at) = stopped_at {
            if !restarted && at.elapsed() >= Duration::from_secs(10) {
                dev_script("pg", "start");
                restarted = true;
            }
        }
        let response = app.post_compile(&body).await;
        match response.status().as_u16() {
            202 => accepted.push(
                response.json::<Value>().await.unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ),
            503 => {
                assert!(response.headers().contains_key("retry-after"));
                let problem: Value = response.json().await.unwrap();
                assert_eq!(problem["code"], "unavailable");
                unavailable += 1;
            }
            other => panic!(
                "unexpected status {other}: {}",
                response.text().await.unwrap()
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if !restarted {
        dev_script("pg", "start");
    }
    assert!(unavailable > 0, "the API never reported the outage");
    eventually(
        Duration::from_secs(30),
        "the API is ready again",
        || async {
            app.http
                .get(format!("{}/readyz", app.url))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        },
    )
    .await;
    assert!(accepted.len() > 10);
    for id in &accepted {
        let job = app.wait_terminal(id, Duration::from_secs(180)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
}
