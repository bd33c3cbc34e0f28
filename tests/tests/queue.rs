//! The queue's contract on the real stack: cancellation, waiting, idempotency, back-pressure,
//! fairness between projects and retention.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_core::storage::StorageError;
use texfleet_e2e::{containers_of_job, eventually, slow_proxy, TestApp, HELLO};

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
    let again = delete(&app, id).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["code"], "already_finished", "{again:#}");
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
    // One slot: the next job runs only once the scheduler is done with the cancelled one.
    let app = TestApp::spawn_with(|config| config.scheduler_slots = 1).await;
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
    let cancelled: Value = response.json().await.unwrap();
    // Once the scheduler has moved on, it has written nothing over the cancellation.
    let next = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
    let job = app.get_json(&format!("/compile/{id}")).await;
    assert_eq!(
        job, cancelled,
        "the cancelled job changed after its cancellation"
    );
    let short_id = id.split('-').next().unwrap();
    let stored = app
        .storage
        .list(&format!("compiles/{short_id}/"))
        .await
        .unwrap();
    assert_eq!(
        stored,
        Vec::<String>::new(),
        "a cancelled job's outputs were stored"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prefer_wait_holds_the_answer_until_the_job_is_terminal() {
    let app = TestApp::spawn().await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let response = app
        .post_with_headers(&app.token, "/compile", &body, &[("Prefer", "wait=60")])
        .await;
    let answered = std::time::SystemTime::now();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["preference-applied"], "wait=60");
    assert!(response.headers().contains_key("location"));
    let job: Value = response.json().await.unwrap();
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    // The answer came when the job ended, not at the end of the wait.
    let finished = time::OffsetDateTime::parse(
        job["finished_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let late = time::OffsetDateTime::from(answered) - finished;
    assert!(
        late < time::Duration::seconds(5),
        "answered {late} after the job finished"
    );

    let body =
        json!({ "project_id": app.project_id, "input_latex": ENDLESS, "timeout_seconds": 30 });
    let asked = Instant::now();
    let response = app
        .post_with_headers(
            &app.token,
            "/compile",
            &body,
            &[("Prefer", "respond-async, wait=2")],
        )
        .await;
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(10),
        "the server held the answer for {waited:?}, asked for 2 s"
    );
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(response.headers()["preference-applied"], "wait=2");
    let job: Value = response.json().await.unwrap();
    assert!(
        job["status"] == "Queued" || job["status"] == "Running",
        "{job:#}"
    );
    delete(&app, job["id"].as_str().unwrap()).await;
}

async fn post_with_key(app: &TestApp, token: &str, key: &str, body: &Value) -> reqwest::Response {
    app.post_with_headers(token, "/compile", body, &[("Idempotency-Key", key)])
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idempotency_key_returns_the_original_job_or_a_conflict() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let first = post_with_key(&app, &app.token, "key-1", &body).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first: Value = first.json().await.unwrap();
    // The same body with its fields in another order is the same request.
    let reordered = json!({ "input_latex": HELLO, "project_id": app.project_id });
    let replay = post_with_key(&app, &app.token, "key-1", &reordered).await;
    assert_eq!(replay.status(), StatusCode::OK);
    assert_eq!(replay.json::<Value>().await.unwrap(), first);
    let other = json!({ "project_id": app.project_id, "input_latex": "\\relax" });
    let conflict = post_with_key(&app, &app.token, "key-1", &other).await;
    assert_eq!(conflict.status(), StatusCode::CONFLICT);
    let conflict: Value = conflict.json().await.unwrap();
    assert_eq!(conflict["code"], "idempotency_conflict", "{conflict:#}");
    assert!(
        conflict["detail"]
            .as_str()
            .unwrap()
            .contains(first["id"].as_str().unwrap()),
        "the conflict names the original job: {conflict:#}"
    );
    let second = post_with_key(&app, &app.token, "key-2", &other).await;
    assert_eq!(second.status(), StatusCode::ACCEPTED);
    let bad = post_with_key(&app, &app.token, "bad key", &body).await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let bad: Value = bad.json().await.unwrap();
    assert_eq!(bad["code"], "validation_failed");
    assert_eq!(bad["errors"][0]["field"], "Idempotency-Key", "{bad:#}");
    assert_eq!(app.count_jobs("true").await, 2);

    // Keys belong to a project: another project's "key-1" is a job of its own.
    let (other_project, other_token) = app.other_project().await;
    let theirs = json!({ "project_id": other_project, "input_latex": HELLO });
    let theirs = post_with_key(&app, &other_token, "key-1", &theirs).await;
    assert_eq!(theirs.status(), StatusCode::ACCEPTED);
    assert_ne!(theirs.json::<Value>().await.unwrap()["id"], first["id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_submissions_with_one_key_make_one_job() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let answers = futures::future::join_all(
        (0..16).map(|_| post_with_key(&app, &app.token, "one-key", &body)),
    )
    .await;
    let mut statuses = Vec::new();
    let mut ids = Vec::new();
    for answer in answers {
        statuses.push(answer.status().as_u16());
        ids.push(answer.json::<Value>().await.unwrap()["id"].clone());
    }
    statuses.sort();
    assert_eq!(statuses, [[200; 15].as_slice(), &[202]].concat());
    ids.dedup();
    assert_eq!(ids.len(), 1, "the answers name several jobs: {ids:?}");
    assert_eq!(app.count_jobs("true").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_project_queue_answers_429_with_retry_after() {
    let app = TestApp::spawn_api_only(|config| config.max_queued_per_project = 2).await;
    let mut queued = Vec::new();
    for _ in 0..2 {
        queued.push(app.submit(json!({ "input_latex": HELLO })).await);
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
    // A job that leaves the queue, cancelled or claimed, frees its place.
    delete(&app, queued[0]["id"].as_str().unwrap()).await;
    app.submit(json!({ "input_latex": HELLO })).await;
    let scheduler =
        texfleet_core::db::pool(&app.config, &app.config.scheduler_database_url).unwrap();
    let claimed = texfleet_core::db::claim_jobs(&scheduler, "test", 60, 1, 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    app.submit(json!({ "input_latex": HELLO })).await;
    let response = app
        .post_compile(&json!({ "project_id": app.project_id, "input_latex": HELLO }))
        .await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
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

/// Asserts that the store answers "no such key" for `key`, not any other failure.
async fn assert_not_stored(app: &TestApp, key: &str) {
    match app.storage.get_bytes(key).await {
        Err(StorageError::NotFound(_)) => {}
        Err(other) => panic!("{key}: {other}"),
        Ok(_) => panic!("{key} is still stored"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_jobs_past_retention_are_deleted_with_their_objects() {
    let app = TestApp::spawn_with(|config| {
        config.retention_days = 1;
        config.retention_interval_seconds = 1;
    })
    .await;
    let succeeded = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(succeeded["status"], "Succeeded");
    let failed = app
        .compile(json!({ "input_latex": "\\documentclass{article}\\begin{document}\\undefined\\end{document}" }))
        .await;
    assert_eq!(failed["status"], "Failed");
    let cancelled = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 60 }))
        .await;
    let cancelled = delete(&app, cancelled["id"].as_str().unwrap()).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    let cancelled: Value = cancelled.json().await.unwrap();
    let recent = app.compile(json!({ "input_latex": HELLO })).await;
    let queued = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 60 }))
        .await;
    let old = [&succeeded, &failed, &cancelled].map(|job| job["id"].as_str().unwrap().to_string());
    let aged = app
        .execute(&format!(
            "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE id::text IN ('{}')",
            old.join("', '")
        ))
        .await;
    assert_eq!(aged, 3);

    for id in &old {
        eventually(
            Duration::from_secs(30),
            &format!("the old job {id} is deleted"),
            || async { app.get(&format!("/compile/{id}")).await.status() == StatusCode::NOT_FOUND },
        )
        .await;
    }
    for key in [
        &succeeded["pdf_storage_key"],
        &succeeded["log_storage_key"],
        &failed["log_storage_key"],
    ] {
        assert_not_stored(&app, key.as_str().unwrap()).await;
    }
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

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_during_the_upload_leaves_nothing_stored_and_one_after_it_changes_nothing() {
    // Uploads through a proxy that holds each chunk three seconds: the cancellation lands
    // mid-upload, however loaded the machine.
    let garage = texfleet_core::Config::load(None).unwrap().s3_endpoint;
    let upstream = garage.trim_start_matches("http://").to_string();
    let proxy = slow_proxy(upstream, Duration::from_secs(3)).await;
    let app = TestApp::spawn_with(|config| {
        config.s3_endpoint = format!("http://{proxy}");
        config.scheduler_slots = 1;
    })
    .await;
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let id = job["id"].as_str().unwrap().to_string();
    let short_id = id.split('-').next().unwrap().to_string();
    let stored = || {
        let (app, prefix) = (&app, format!("compiles/{short_id}/"));
        async move {
            let mut keys = app.storage.list(&prefix).await.unwrap();
            keys.sort();
            keys
        }
    };
    // The log is stored first; the PDF and the outcome are still to come.
    eventually(Duration::from_secs(120), "the log is uploaded", || async {
        !stored().await.is_empty()
    })
    .await;
    let response = delete(&app, &id).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the job ended before the cancel"
    );
    let cancelled: Value = response.json().await.unwrap();
    // One slot: once the next job ran, the scheduler is done with the cancelled one.
    let next = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
    assert_eq!(app.get_json(&format!("/compile/{id}")).await, cancelled);
    assert_eq!(
        stored().await,
        Vec::<String>::new(),
        "a cancelled job's outputs stayed"
    );

    // A cancel after the end is refused and leaves the outputs where they are.
    let next_id = next["id"].as_str().unwrap();
    let late = delete(&app, next_id).await;
    assert_eq!(late.status(), StatusCode::CONFLICT);
    assert_eq!(
        late.json::<Value>().await.unwrap()["code"],
        "already_finished"
    );
    assert_eq!(app.get_json(&format!("/compile/{next_id}")).await, next);
    assert!(app.pdf_of(next_id).await.starts_with(b"%PDF-"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_id_is_drawn_when_the_short_id_is_taken() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let taken = app.submit(json!({ "input_latex": HELLO })).await;
    let taken_id = taken["id"].as_str().unwrap();
    // Another id with the same first segment, so the same storage keys.
    let colliding: uuid::Uuid = format!("{}-0000-4000-8000-000000000000", &taken_id[..8])
        .parse()
        .unwrap();
    let fresh = uuid::Uuid::new_v4();
    let api = texfleet_core::db::pool(&app.config, &app.config.api_database_url).unwrap();
    let mut client = api.get().await.unwrap();
    let transaction = texfleet_core::db::begin_project(&mut client, app.project_id)
        .await
        .unwrap();
    let job = texfleet_core::model::NewJob {
        project_id: app.project_id,
        engine: texfleet_core::model::Engine::Pdflatex,
        halt_on_error: false,
        timeout_seconds: 30,
        main: "main.tex".into(),
        files: vec![texfleet_core::model::SourceFile {
            path: "main.tex".into(),
            content: HELLO.into(),
        }],
        use_cache: false,
    };
    let submitted =
        texfleet_core::db::insert_job_with_ids(&transaction, &job, None, vec![colliding, fresh])
            .await
            .unwrap();
    transaction.commit().await.unwrap();
    let texfleet_core::db::Submitted::New(inserted) = submitted else {
        panic!("the job was not queued");
    };
    assert_eq!(inserted.id, fresh, "the colliding id was not drawn again");
    assert_eq!(
        app.get_json(&format!("/compile/{fresh}")).await["status"],
        "Queued"
    );
    assert_eq!(app.get_json(&format!("/compile/{taken_id}")).await, taken);
    assert_eq!(app.count_jobs(&format!("id = '{colliding}'")).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_shutting_down_answers_the_requests_that_wait() {
    let mut app = TestApp::spawn_api_only(|_| {}).await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let waiting = tokio::spawn(
        app.http
            .post(format!("{}/compile", app.url))
            .bearer_auth(&app.token)
            .header("Prefer", "wait=60")
            .json(&body)
            .send(),
    );
    // The job is queued, so the request now waits for it (no scheduler runs here).
    eventually(Duration::from_secs(10), "the job is queued", || async {
        app.count_jobs("true").await == 1
    })
    .await;
    let stopped = Instant::now();
    app.stop_api();
    let response = waiting
        .await
        .unwrap()
        .expect("an answer, not a broken connection");
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "answered {:?} after the shutdown began",
        stopped.elapsed()
    );
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let job: Value = response.json().await.unwrap();
    assert_eq!(job["status"], "Queued", "{job:#}");
    assert_eq!(
        app.count_jobs("status = 'Queued'").await,
        1,
        "the job was lost"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_claims_fill_every_project_to_its_cap_and_no_further() {
    const CAP: usize = 2;
    let app = TestApp::spawn_api_only(|_| {}).await;
    let mut projects = vec![(app.project_id, app.token.clone())];
    projects.push(app.other_project().await);
    projects.push(app.other_project().await);
    for (project, token) in &projects {
        for _ in 0..5 {
            let response = app
                .post_as(
                    token,
                    "/compile",
                    &json!({ "project_id": project, "input_latex": HELLO }),
                )
                .await;
            assert_eq!(response.status(), StatusCode::ACCEPTED);
        }
    }
    let scheduler =
        texfleet_core::db::pool(&app.config, &app.config.scheduler_database_url).unwrap();
    let claimers = (0..6).map(|claimer| {
        let scheduler = scheduler.clone();
        tokio::spawn(async move {
            let mut claimed = Vec::new();
            loop {
                let jobs = texfleet_core::db::claim_jobs(
                    &scheduler,
                    &format!("claimer-{claimer}"),
                    60,
                    1,
                    CAP,
                )
                .await
                .unwrap();
                if jobs.is_empty() {
                    return claimed;
                }
                claimed.extend(jobs.into_iter().map(|job| (job.id, job.project_id)));
            }
        })
    });
    let mut claimed: Vec<(uuid::Uuid, uuid::Uuid)> = Vec::new();
    for claimer in futures::future::join_all(claimers).await {
        claimed.extend(claimer.unwrap());
    }
    let distinct: std::collections::HashSet<_> = claimed.iter().map(|(id, _)| *id).collect();
    assert_eq!(distinct.len(), claimed.len(), "a job was claimed twice");
    for (project, _) in &projects {
        let running = claimed.iter().filter(|(_, p)| p == project).count();
        assert_eq!(running, CAP, "project {project} runs {running} jobs");
        assert_eq!(
            app.count_jobs(&format!("project_id = '{project}' AND status = 'Running'"))
                .await,
            CAP as i64
        );
    }
}
