//! Postgres stops for ten seconds, longer than a lease, while a compile runs and clients
//! submit: the API answers 503 `unavailable` and `/readyz` 503 meanwhile, both recover without
//! a restart, the compile that ran through the outage is recorded after it, and every job that
//! got a 202 finishes.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{container_of_running_job, eventually, Outage, TestApp, HELLO};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// About six seconds of TeX arithmetic: it runs while Postgres stops.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<12000000 \\repeat Done.\\end{document}";

#[tokio::test(flavor = "multi_thread")]
async fn the_service_rides_out_a_postgres_outage() {
    let app = TestApp::spawn_with(|config| config.lease_seconds = 4).await;
    let through = app.submit(json!({ "input_latex": SLOW })).await;
    let through = through.id().to_string();
    container_of_running_job(&through).await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let mut accepted = Vec::new();
    let mut accepted_before = 0;
    let mut unavailable = 0;
    let mut not_ready = 0;
    let mut restarted_at = None;
    let started = Instant::now();
    let mut stopped_at = None;
    let mut outage = None;
    while started.elapsed() < Duration::from_secs(16) {
        let elapsed = started.elapsed();
        if stopped_at.is_none() && elapsed > Duration::from_secs(2) {
            outage = Some(Outage::begin("pg"));
            stopped_at = Some(Instant::now());
        }
        let restarted = outage.as_ref().is_some_and(Outage::is_over);
        if let (Some(at), Some(outage)) = (stopped_at, outage.as_mut()) {
            if !restarted && at.elapsed() >= Duration::from_secs(10) {
                // Before the start returns: a scheduler may record as soon as Postgres is up.
                restarted_at = Some(OffsetDateTime::now_utc());
                outage.end();
            } else if !restarted {
                let ready = app.http.get(format!("{}/readyz", app.url)).send().await;
                not_ready += usize::from(ready.is_ok_and(|r| r.status() == 503));
            }
        }
        let response = app.post_compile(&body).await;
        match response.status().as_u16() {
            202 => {
                let id = response.json::<Value>().await.unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string();
                accepted_before += usize::from(stopped_at.is_none());
                accepted.push(id);
            }
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
    let mut outage = outage.expect("the outage began");
    if !outage.is_over() {
        outage.end();
    }
    assert!(unavailable > 0, "the API never reported the outage");
    assert!(not_ready > 0, "/readyz never reported the outage");
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
    assert!(
        accepted_before > 0,
        "nothing was accepted before the outage"
    );
    // Submissions work again once the API is ready.
    accepted.push(
        app.submit(json!({ "input_latex": HELLO })).await["id"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let job = app.wait_terminal(&through, Duration::from_secs(180)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let finished = OffsetDateTime::parse(job["finished_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let restarted_at = restarted_at.expect("Postgres was restarted in the loop");
    assert!(
        finished > restarted_at,
        "the compile that ran through the outage finished before it ended: {job:#}"
    );
    for id in &accepted {
        let job = app.wait_terminal(id, Duration::from_secs(180)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
}
