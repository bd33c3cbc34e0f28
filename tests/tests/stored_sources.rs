//! What a project's sources hold in the database is bounded: the sources of its queued jobs
//! count against `max_queued_bytes_per_project`, and a job's sources are deleted when it ends,
//! cancelled or compiled.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{files_field, TestApp, HELLO};

const MIB: usize = 1024 * 1024;

/// A request with `main.tex` and a MiB of data beside it, distinct per `n` (no result cache).
fn with_a_mib(app: &TestApp, n: u8) -> Value {
    json!({
        "project_id": app.project_id,
        "main": "main.tex",
        "files": files_field(vec![
            ("main.tex".into(), HELLO.as_bytes().to_vec()),
            ("data.bin".into(), vec![n; MIB]),
        ]),
    })
}

/// Whether the database holds files of the job `id`.
async fn holds_sources(app: &TestApp, id: &Value) -> bool {
    let id = id.as_str().unwrap();
    app.count_jobs(&format!(
        "id = '{id}' AND EXISTS (SELECT 1 FROM job_files WHERE job_id = jobs.id)"
    ))
    .await
        == 1
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sources_of_queued_jobs_are_bounded_in_bytes_and_a_cancelled_job_keeps_none() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_queued_bytes_per_project = (2 * MIB + MIB / 2) as i64;
    })
    .await;
    let first = app.submit(with_a_mib(&app, 1)).await;
    app.submit(with_a_mib(&app, 2)).await;
    assert!(holds_sources(&app, &first["id"]).await);

    let refused = app.post_compile(&with_a_mib(&app, 3)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["code"], "queue_full");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("more than {} bytes of sources", 2 * MIB + MIB / 2)),
        "{problem}"
    );
    assert_eq!(app.count_jobs("true").await, 2, "nothing of it was kept");

    let id = first.id();
    let cancelled = app.delete_as(&app.token, &format!("/compile/{id}")).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    assert!(!holds_sources(&app, &first["id"]).await);
    let third = app.submit(with_a_mib(&app, 3)).await;
    assert_eq!(
        third["status"], "Queued",
        "the cancelled job's bytes are free"
    );

    let (other_project, other_token) = app.other_project().await;
    let mut elsewhere = with_a_mib(&app, 4);
    elsewhere["project_id"] = json!(other_project);
    let accepted = app.post_as(&other_token, "/compile", &elsewhere).await;
    assert_eq!(accepted.status(), StatusCode::ACCEPTED, "per project");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compiled_job_keeps_no_sources() {
    let app = TestApp::spawn().await;
    let job = app.submit(with_a_mib(&app, 1)).await;
    let id = job.id();
    let job = app.wait_terminal(id, Duration::from_secs(120)).await;
    assert_eq!(job["status"], "Succeeded", "{job}");
    assert!(app.text_of(id).await.contains("Hello"));
    assert!(!holds_sources(&app, &job["id"]).await);
}
