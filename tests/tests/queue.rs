//! The queue's contract on the real stack: cancellation, waiting, idempotency, back-pressure,
//! fairness between projects and retention.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_e2e::{containers_of_job, eventually, TestApp, HELLO};

const ENDLESS: &str = "\\loop\\iftrue\\repeat";

async fn delete(app: &TestApp, id: &str) -> reqwest::Response {
    app.delete_as(&app.token, &format!("/compile/{id}")).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_job_is_cancelled_at_once_and_only_once() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let id = job["id"].as_str().unwrap();
    let response = delete(&app, id).await;
    assert_eq!(response.status(), StatusCode::OK);
    let cancelled: Value = response.json().await.unwrap();
    assert_eq!(cancelled["status"], "Cancelled");
    assert_eq!(cancelled["error"]["code"], "cancelled");
    assert!(cancelled["finished_at"].is_string());
    assert_eq!(delete(&app, id).await.status(), StatusCode::CONFLICT);
    assert_eq!(
        delete(&app, &uuid::Uuid::new_v4().to_string())
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let (_, other_token) = app.other_project().await;
    let foreign = app.delete_as(&other_token, &format!("/compile/{id}")).await;
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_jobs_container_is_killed_within_two_seconds_of_cancellation() {
    let app = TestApp::spawn().await;
    let job = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 120 }))
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(60),
        "the compile's container starts",
        || async { !containers_of_job(&id).await.is_empty() },
    )
    .await;
    let cancelled_at = Instant::now();
    let response = delete(&app, &id).await;
    assert_eq!(response.status(), StatusCode::OK);
    eventually(Duration::from_secs(2), "the container is gone", || async {
        containers_of_job(&id).await.is_empty()
    })
    .await;
    assert!(cancelled_at.elapsed() < Duration::from_secs(2));
    // The scheduler must not overwrite the cancellation with an outcome of its own.
    let job: Value = app
        .get(&format!("/compile/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(job["status"], "Cancelled");
}

#[tokio::test(flavor = "multi_thread")]
async fn prefer_wait_holds_the_answer_until_the_job_is_terminal() {
    let app = TestApp::spawn().await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let response = app
        .post_with_headers(&app.token, "/compile", &body, &[("Prefer", "wait=60")])
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["preference-applied"], "wait=60");
    assert!(response.headers().contains_key("location"));
    let job: Value = response.json().await.unwrap();
    assert_eq!(job["status"], "Succeeded", "{job:#}");

    let body =
        json!({ "project_id": app.project_id, "input_latex": ENDLESS, "timeout_seconds": 30 });
    let response = app
        .post_with_headers(
            &app.token,
            "/compile",
            &body,
            &[("Prefer", "respond-async, wait=1")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(response.headers()["preference-applied"], "wait=1");
    let job: Value = response.json().await.unwrap();
    assert!(
        job["status"] == "Queued" || job["status"] == "Running",
        "{job:#}"
    );
    delete(&app, job["id"].as_str().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idempotency_key_returns_the_original_job_or_a_conflict() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let post = |key: &str, body: Value| {
        app.http
            .post(format!("{}/compile", app.url))
            .bearer_auth(&app.token)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let first = post("key-1", body.clone()).await.unwrap();
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first: Value = first.json().await.unwrap();
    // The same body with its fields in another order is the same request.
    let reordered = json!({ "input_latex": HELLO, "project_id": app.project_id });
    let replay = post("key-1", reordered).await.unwrap();
    assert_eq!(replay.status(), StatusCode::OK);
    assert_eq!(replay.json::<Value>().await.unwrap()["id"], first["id"]);
    let other = json!({ "project_id": app.project_id, "input_latex": "\\relax" });
    assert_eq!(
        post("key-1", other.clone()).await.unwrap().status(),
        StatusCode::CONFLICT
    );
    assert_eq!(
        post("key-2", other).await.unwrap().status(),
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post("bad key", body).await.unwrap().status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let jobs = app.count_jobs("true").await;
    assert_eq!(jobs, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_project_queue_answers_429_with_retry_after() {
    let app = TestApp::spawn_api_only(|config| config.max_queued_per_project = 2).await;
    for _ in 0..2 {
        app.submit(json!({ "input_latex": HELLO })).await;
    }
    let response = app
        .post_compile(&json!({ "project_id": app.project_id, "input_latex": HELLO }))
        .await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert_eq!(
        response.json::<Value>().await.unwrap()["code"],
        "queue_full"
    );
    let (other_project, other_token) = app.other_project().await;
    let response = app
        .post_as(
            &other_token,
            "/compile",
            &json!({ "project_id": other_project, "input_latex": HELLO }),
        )
        .await;
    assert_eq!(
        response.status(),
        StatusCode::ACCEPTED,
        "another project is not limited"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_project_s_backlog_does_not_starve_another() {
    let app = TestApp::spawn_with(|config| {
        config.scheduler_slots = 2;
        config.max_running_per_project = 2;
    })
    .await;
    let mut backlog = Vec::new();
    for _ in 0..200 {
        backlog.push(
            app.submit(json!({ "input_latex": HELLO })).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let (other_project, other_token) = app.other_project().await;
    let single: Value = app
        .post_with_headers(
            &other_token,
            "/compile",
            &json!({ "project_id": other_project, "input_latex": HELLO }),
            &[("Prefer", "wait=60")],
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(single["status"], "Succeeded", "{single:#}");

    let client = app.pool.get().await.unwrap();
    let waiting: i64 = client
        .query_one(
            "SELECT count(*) FROM jobs WHERE project_id = $1 AND status = 'Queued'",
            &[&app.project_id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        waiting > 150,
        "the single job waited for the backlog ({waiting} still queued)"
    );
    for id in backlog {
        delete(&app, &id).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_jobs_past_retention_are_deleted_with_their_objects() {
    let app = TestApp::spawn_with(|config| {
        config.retention_days = 1;
        config.retention_interval_seconds = 1;
    })
    .await;
    let old = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(old["status"], "Succeeded");
    let recent = app.compile(json!({ "input_latex": HELLO })).await;
    let queued = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 60 }))
        .await;
    let old_id: uuid::Uuid = old["id"].as_str().unwrap().parse().unwrap();
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE id = $1",
            &[&old_id],
        )
        .await
        .unwrap();

    let old_key = old["pdf_storage_key"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(30),
        "the old job is deleted",
        || async { app.get(&format!("/compile/{old_id}")).await.status() == StatusCode::NOT_FOUND },
    )
    .await;
    assert!(
        app.storage.get_bytes(&old_key).await.is_err(),
        "the old PDF is still stored"
    );
    assert!(app
        .storage
        .get_bytes(old["log_storage_key"].as_str().unwrap())
        .await
        .is_err());
    let recent_key = recent["pdf_storage_key"].as_str().unwrap();
    assert!(
        app.storage.get_bytes(recent_key).await.is_ok(),
        "a recent PDF was deleted"
    );
    assert_eq!(
        app.get(&format!("/compile/{}", queued["id"].as_str().unwrap()))
            .await
            .status(),
        StatusCode::OK
    );
    delete(&app, queued["id"].as_str().unwrap()).await;
}
