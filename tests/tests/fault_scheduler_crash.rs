//! `kill -9` of a scheduler in the middle of compiles: another scheduler rescues its jobs, every
//! job succeeds, what is stored for each comes from the attempt that finished it and nothing
//! else is stored, and no container of the killed scheduler (warm ones included) is left.
//!
//! The killed scheduler's leases and heartbeat are expired by the test (as time would expire
//! them), so the rescue does not hang on a short lease that a loaded machine could also let
//! expire under a live scheduler.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{containers_of_job, eventually, sandbox_containers, SchedulerProcess, TestApp};

/// About two seconds of TeX arithmetic, so that the crash lands mid-compile.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<4000000 \\repeat Done.\\end{document}";

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_schedulers_jobs_run_again_elsewhere_exactly_once() {
    let app = TestApp::spawn_api_only(|config| {
        config.lease_seconds = 10;
        config.scheduler_slots = 2;
    })
    .await;
    let first_id = format!("first-{}", uuid::Uuid::new_v4());
    let mut first = SchedulerProcess::spawn(&app.config, &first_id);
    let mut ids = Vec::new();
    for _ in 0..4 {
        let job = app.submit(json!({ "input_latex": SLOW })).await;
        ids.push(job.id().to_string());
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
    let expired = app
        .execute(&format!(
            "UPDATE jobs SET lease_expires_at = now() WHERE lease_owner = '{first_id}' AND status = 'Running'"
        ))
        .await;
    assert!(expired >= 1, "the killed scheduler held no running job");
    app.execute(&format!(
        "UPDATE schedulers SET heartbeat_at = now() - interval '1 hour' WHERE id = '{first_id}'"
    ))
    .await;

    let second_id = format!("second-{}", uuid::Uuid::new_v4());
    let second = SchedulerProcess::spawn(&app.config, &second_id);
    for id in &ids {
        let job = app.wait_terminal(id, Duration::from_secs(120)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        let rescued_job = app
            .count_jobs(&format!("id = '{id}' AND attempts > 1"))
            .await;
        // The objects (PDF, log, SyncTeX) come from the attempt that finished the job: a rescued job's from the
        // second scheduler's attempt, never one left by the killed scheduler's.
        let key = job["pdf_storage_key"].as_str().unwrap();
        let origin = app.storage.origin(key).await.unwrap().unwrap();
        if rescued_job == 1 {
            assert_eq!(origin, format!("{second_id} attempt 2"), "{id}");
        } else {
            assert!(
                origin == format!("{first_id} attempt 1")
                    || origin == format!("{second_id} attempt 1"),
                "{id}: {origin}"
            );
        }
        let folder = key.trim_end_matches("output.pdf");
        let mut stored = app.storage.list(folder).await.unwrap();
        stored.sort();
        assert_eq!(
            stored,
            [
                format!("{folder}output.log"),
                format!("{folder}output.pdf"),
                format!("{folder}output.synctex.gz")
            ],
            "{id}"
        );
    }
    let rescued = app.count_jobs("attempts > 1").await;
    assert!(rescued >= 1, "no job was rescued from the killed scheduler");
    let label = format!("org.texfleet.scheduler={first_id}");
    eventually(
        Duration::from_secs(60),
        "every container of the killed scheduler, warm ones included, is removed",
        || async { sandbox_containers(&[("label", &label)]).await.is_empty() },
    )
    .await;
    drop(second);
}
