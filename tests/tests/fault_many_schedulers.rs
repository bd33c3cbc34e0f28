//! Three schedulers against one database and 300 jobs: every job ends exactly once.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::{SchedulerProcess, TestApp};

#[tokio::test(flavor = "multi_thread")]
async fn three_schedulers_finish_three_hundred_jobs_exactly_once() {
    let app = TestApp::spawn_api_only(|config| {
        config.scheduler_slots = 2;
        config.max_running_per_project = 6;
        config.max_queued_per_project = 1000;
    })
    .await;
    let schedulers: Vec<SchedulerProcess> = (0..3)
        .map(|i| {
            SchedulerProcess::spawn(&app.config, &format!("many-{i}-{}", uuid::Uuid::new_v4()))
        })
        .collect();
    let document = "\\documentclass{minimal}\\begin{document}x\\end{document}";
    let mut ids = Vec::new();
    for _ in 0..300 {
        ids.push(
            app.submit(json!({ "input_latex": document })).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for id in &ids {
        let job = app.wait_terminal(id, Duration::from_secs(600)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
    let logs: Vec<_> = schedulers.iter().map(SchedulerProcess::uploads).collect();
    for id in &ids {
        let uploads: usize = logs.iter().map(|log| log.get(id).unwrap_or(&0)).sum();
        assert_eq!(uploads, 1, "job {id} was uploaded {uploads} times");
    }
    assert!(
        logs.iter().all(|log| !log.is_empty()),
        "a scheduler did no work: {:?}",
        logs.iter().map(|l| l.len()).collect::<Vec<_>>()
    );
    let repeated = app.count_jobs("attempts <> 1").await;
    assert_eq!(repeated, 0, "jobs were claimed more than once");
}
