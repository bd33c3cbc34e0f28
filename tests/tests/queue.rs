//! The queue's contract on the real stack: waiting for a job, back-pressure, fairness between
//! projects, claims up to each project's cap, outcomes committed in groups, and an API shutting
//! down.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{eventually, TestApp, ENDLESS, HELLO};

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
    app.cancel(job.id()).await;
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
    app.cancel(queued[0].id()).await;
    app.submit(json!({ "input_latex": HELLO })).await;
    let scheduler =
        texfleet_core::db::pool(&app.config, &app.config.scheduler_database_url).unwrap();
    let claimed =
        texfleet_core::db::claim_jobs(&scheduler, "test", 60, 1, 1, &app.config.texlive_years())
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
        app.cancel(&id).await;
    }
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
    let years = app.config.texlive_years();
    let claimers = (0..6).map(|claimer| {
        let (scheduler, years) = (scheduler.clone(), years.clone());
        tokio::spawn(async move {
            let mut claimed = Vec::new();
            loop {
                let jobs = texfleet_core::db::claim_jobs(
                    &scheduler,
                    &format!("claimer-{claimer}"),
                    60,
                    1,
                    CAP,
                    &years,
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

/// On one thread every outcome below is handed to the finisher before its committer runs, so
/// each burst is one group.
#[tokio::test]
async fn outcomes_that_arrive_together_commit_together_and_a_refused_one_fails_alone() {
    use texfleet_core::db::{claim_jobs, finish_jobs, DbError, Finisher, Outcome};
    use texfleet_core::model::{ErrorCode, JobError, JobStatus};
    let app = TestApp::spawn_api_only(|_| {}).await;
    for _ in 0..5 {
        app.submit(json!({ "input_latex": HELLO })).await;
    }
    let scheduler =
        texfleet_core::db::pool(&app.config, &app.config.scheduler_database_url).unwrap();
    let years = app.config.texlive_years();
    let jobs = claim_jobs(&scheduler, "finisher", 60, 5, 5, &years)
        .await
        .unwrap();
    assert_eq!(jobs.len(), 5);
    let finisher = Finisher::start(scheduler.clone(), "finisher".to_string());
    let good = Outcome::new(
        JobStatus::Succeeded,
        None,
        Vec::new(),
        Some(5),
        String::new(),
    );
    // Postgres refuses a NUL byte in text.
    let refused = Outcome::new(
        JobStatus::Failed,
        Some(JobError {
            code: ErrorCode::SandboxError,
            message: "a \0 in the message".to_string(),
        }),
        Vec::new(),
        Some(5),
        String::new(),
    );

    let burst = jobs[..3]
        .iter()
        .map(|job| finisher.finish((job.id, job.attempt), &good));
    for finished in futures::future::join_all(burst).await {
        assert!(finished.unwrap().is_some(), "a held lease was not finished");
    }
    assert_eq!(
        app.count_jobs(
            "status = 'Succeeded' AND finished_at = (SELECT max(finished_at) FROM jobs)"
        )
        .await,
        3,
        "the burst was not one transaction"
    );

    let (finished, failed) = futures::join!(
        finisher.finish((jobs[3].id, jobs[3].attempt), &good),
        finisher.finish((jobs[4].id, jobs[4].attempt), &refused)
    );
    assert!(
        finished.unwrap().is_some(),
        "its group's refused outcome failed it"
    );
    assert!(matches!(failed, Err(DbError::Query(_))), "{failed:?}");
    assert_eq!(app.count_jobs("status = 'Succeeded'").await, 4);
    assert_eq!(
        app.count_jobs(&format!("id = '{}' AND status = 'Running'", jobs[4].id))
            .await,
        1
    );
    // Fenced: another owner's outcome, or one of an earlier attempt, changes nothing.
    let last = &jobs[4];
    let other = finish_jobs(
        &scheduler,
        "someone else",
        &[((last.id, last.attempt), &good)],
    )
    .await
    .unwrap();
    assert!(other.is_empty());
    let earlier = finish_jobs(
        &scheduler,
        "finisher",
        &[((last.id, last.attempt - 1), &good)],
    )
    .await
    .unwrap();
    assert!(earlier.is_empty());
    assert_eq!(app.count_jobs("status = 'Running'").await, 1);
}
