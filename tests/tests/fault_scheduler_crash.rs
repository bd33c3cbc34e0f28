//! `kill -9` of a scheduler in the middle of compiles: another scheduler rescues its jobs once
//! their leases expire; every job succeeds, none is uploaded twice, no container is left.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::{containers_of_job, eventually, SchedulerProcess, TestApp};

/// About two seconds of TeX arithmetic, so that the crash lands mid-compile.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<4000000 \\repeat Done.\\end{document}";

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_schedulers_jobs_run_again_elsewhere_exactly_once() {
    let app = TestApp::spawn_api_only(|config| {
        config.lease_seconds = 3;
        config.scheduler_slots = 2;
    })
    .await;
    let mut first =
        SchedulerProcess::spawn(&app.config, &format!("first-{}", uuid::Uuid::new_v4()));
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(
            app.submit(json!({ "input_latex": SLOW })).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    eventually(Duration::from_secs(60), "a compile is running", || async {
        for id in &ids {
            if !containers_of_job(id).await.is_empty() {
                return true;
            }
        }
        false
    })
    .await;
    first.kill();

    let second = SchedulerProcess::spawn(&app.config, &format!("second-{}", uuid::Uuid::new_v4()));
    for id in &ids {
        let job = app.wait_terminal(id, Duration::from_secs(120)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
    let (before, after) = (first.uploads(), second.uploads());
    for id in &ids {
        let uploads = before.get(id).unwrap_or(&0) + after.get(id).unwrap_or(&0);
        assert_eq!(uploads, 1, "job {id} was uploaded {uploads} times");
    }
    let rescued = app.count_jobs("attempts > 1").await;
    assert!(rescued >= 1, "no job was rescued from the killed scheduler");
    eventually(
        Duration::from_secs(30),
        "the killed scheduler's containers are removed",
        || async {
            for id in &ids {
                if !containers_of_job(id).await.is_empty() {
                    return false;
                }
            }
            true
        },
    )
    .await;
    drop(second);
}
