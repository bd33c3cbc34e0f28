//! Three schedulers against one database and 300 jobs: every job ends exactly once, and the
//! project's running cap, below the fleet's slots, holds at every moment.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::{SchedulerProcess, TestApp};

#[tokio::test(flavor = "multi_thread")]
async fn three_schedulers_finish_three_hundred_jobs_exactly_once_within_the_project_cap() {
    let app = TestApp::spawn_api_only(|config| {
        config.scheduler_slots = 2;
        // Six slots in all; the project may use four of them at once.
        config.max_running_per_project = 4;
        // No slot held back for other projects: this project alone may fill its cap.
        config.idle_project_slots = 0;
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
    let most_running = tokio::spawn({
        let pool = app.pool.clone();
        async move {
            let client = pool.get().await.unwrap();
            let mut most = 0;
            loop {
                let row = client
                    .query_one(
                        "SELECT count(*) FILTER (WHERE status = 'Running'),
                                count(*) FILTER (WHERE status IN ('Queued', 'Running'))
                         FROM jobs",
                        &[],
                    )
                    .await
                    .unwrap();
                let (running, unfinished): (i64, i64) = (row.get(0), row.get(1));
                most = most.max(running);
                if unfinished == 0 {
                    return most;
                }
                // A sample every 10 ms: a claim holds its jobs far longer.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    for id in &ids {
        let job = app.wait_terminal(id, Duration::from_secs(600)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
    let logs: Vec<_> = schedulers.iter().map(SchedulerProcess::uploads).collect();
    for id in &ids {
        let uploads: usize = logs.iter().map(|log| log.get(id).unwrap_or(&0)).sum();
        assert_eq!(uploads, 1, "job {id} was uploaded {uploads} times");
    }
    // The cap (4) is below the fleet's slots (6): two schedulers that finish a job and claim
    // the next at once can hold it all run long, so a third may rightly get nothing. The
    // claims must still be shared between processes.
    let working = logs.iter().filter(|log| !log.is_empty()).count();
    assert!(
        working >= 2,
        "one scheduler did all the work: {:?}",
        logs.iter().map(|l| l.len()).collect::<Vec<_>>()
    );
    assert_eq!(
        most_running.await.unwrap(),
        4,
        "the project's running jobs, at their most, against its cap of 4"
    );
    let repeated = app.count_jobs("attempts <> 1").await;
    assert_eq!(repeated, 0, "jobs were claimed more than once");
}
