//! Project isolation, enforced by Postgres row-level security and visible through every route;
//! tokens; listing; rate limits; the OpenAPI document; the client CLI.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_core::{db, token};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{TestApp, HELLO};
use time::OffsetDateTime;

async fn api_role(app: &TestApp) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&app.config.api_database_url, tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client
}

/// A transaction of the API role bound to `project`, as the API opens for each request.
async fn as_project(
    client: &mut tokio_postgres::Client,
    project: uuid::Uuid,
) -> tokio_postgres::Transaction<'_> {
    let transaction = client.transaction().await.unwrap();
    transaction
        .execute(
            "SELECT set_config('texfleet.project_id', $1, true)",
            &[&project.to_string()],
        )
        .await
        .unwrap();
    transaction
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_role_sees_only_the_project_it_sets_and_nothing_without_one() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let ours = app.submit(json!({ "input_latex": HELLO })).await;
    let (other_project, _, theirs) = app.other_project_with_job().await;
    let their_id: uuid::Uuid = theirs.id().parse().unwrap();

    let mut client = api_role(&app).await;
    let count = |rows: Vec<tokio_postgres::Row>| rows.len();
    assert_eq!(
        count(client.query("SELECT id FROM jobs", &[]).await.unwrap()),
        0,
        "no project set must show nothing"
    );
    assert_eq!(
        count(
            client
                .query("SELECT job_id FROM job_files", &[])
                .await
                .unwrap()
        ),
        0
    );
    assert!(
        client.query("SELECT * FROM api_tokens", &[]).await.is_err(),
        "the API role must not read tokens"
    );
    assert!(client.query("SELECT * FROM projects", &[]).await.is_err());

    let transaction = as_project(&mut client, app.project_id).await;
    let visible: Vec<uuid::Uuid> = transaction
        .query("SELECT id FROM jobs", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(visible, vec![ours.id().parse::<uuid::Uuid>().unwrap()]);
    assert!(transaction
        .query_opt("SELECT id FROM jobs WHERE id = $1", &[&their_id])
        .await
        .unwrap()
        .is_none());
    let updated = transaction
        .execute(
            "UPDATE jobs SET status = 'Cancelled' WHERE id = $1",
            &[&their_id],
        )
        .await
        .unwrap();
    assert_eq!(updated, 0, "another project's job was updated");
    let insert = transaction
        .execute("INSERT INTO jobs (id, project_id, engine, texlive, timeout_seconds, max_attempts) VALUES ($1, $2, 'pdflatex', '2024', 10, 1)",
            &[&uuid::Uuid::new_v4(), &other_project])
        .await;
    assert!(insert.is_err(), "a job was inserted into another project");
    drop(transaction);

    // Every other statement of the API role, each in a transaction of its own, as project A.
    let their_files = || async {
        let owner = app.pool.get().await.unwrap();
        owner
            .query(
                "SELECT path, content FROM job_files WHERE job_id = $1 ORDER BY path",
                &[&their_id],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, Vec<u8>>(1)))
            .collect::<Vec<_>>()
    };
    let files_before = their_files().await;
    for (statement, why) in [
        (
            format!("DELETE FROM jobs WHERE id = '{their_id}'"),
            "deleted another project's job",
        ),
        (
            format!("DELETE FROM job_files WHERE job_id = '{their_id}'"),
            "deleted another project's files",
        ),
        (
            format!("INSERT INTO job_files (job_id, path, content) VALUES ('{their_id}', 'extra.tex', '')"),
            "added a file to another project's job",
        ),
        (
            format!("UPDATE job_files SET content = 'x' WHERE job_id = '{their_id}'"),
            "changed another project's files",
        ),
        (
            format!("UPDATE jobs SET project_id = '{}' WHERE id = '{}'", other_project, ours.id()),
            "moved a job into another project",
        ),
        (
            format!("INSERT INTO page_previews (job_id, project_id, page, width) VALUES ('{their_id}', '{}', 1, 100)", app.project_id),
            "queued a page preview of another project's job as ours",
        ),
        (
            format!("INSERT INTO page_previews (job_id, project_id, page, width) VALUES ('{their_id}', '{other_project}', 1, 100)"),
            "queued a page preview in another project",
        ),
    ] {
        let transaction = as_project(&mut client, app.project_id).await;
        let changed = transaction.execute(&statement, &[]).await;
        assert!(matches!(changed, Ok(0) | Err(_)), "{why}: {changed:?}");
    }
    assert_eq!(
        app.count_jobs(&format!("id = '{their_id}' AND status = 'Queued'"))
            .await,
        1
    );
    assert_eq!(their_files().await, files_before);
    assert_eq!(app.count_rows("page_previews", "true").await, 0);
    assert_eq!(
        app.count_jobs(&format!("project_id = '{}'", app.project_id))
            .await,
        1
    );

    // The scheduler's role reads every job, but no token or project.
    let (scheduler, connection) =
        tokio_postgres::connect(&app.config.scheduler_database_url, tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    assert_eq!(
        count(scheduler.query("SELECT id FROM jobs", &[]).await.unwrap()),
        2
    );
    for table in ["api_tokens", "projects"] {
        let read = scheduler
            .query(&format!("SELECT * FROM {table}"), &[])
            .await;
        assert!(read.is_err(), "the scheduler role read {table}");
    }
    assert!(
        scheduler
            .execute(&format!("INSERT INTO job_files (job_id, path, content) VALUES ('{their_id}', 'x.tex', '')"), &[])
            .await
            .is_err(),
        "the scheduler role changed a job's files"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_route_reaches_another_projects_jobs() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let (other_project, other_token, theirs) = app.other_project_with_job().await;
    let id = theirs.id();
    for path in [
        format!("/compile/{id}"),
        format!("/compile/{id}/pdf"),
        format!("/compile/{id}/log"),
    ] {
        assert_eq!(
            app.get(&path).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    let cancel = app.delete_as(&app.token, &format!("/compile/{id}")).await;
    assert_eq!(cancel.status(), StatusCode::NOT_FOUND);
    let list = app
        .get(&format!("/projects/{other_project}/compiles"))
        .await;
    assert_eq!(list.status(), StatusCode::FORBIDDEN);
    assert_eq!(list.json::<Value>().await.unwrap()["code"], "forbidden");
    let still: Value = app
        .get_as(&other_token, &format!("/compile/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(still["status"], "Queued");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bearer_scheme_is_read_whatever_its_case() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let answer = app
            .http
            .get(format!("{}/info", app.url))
            .header("authorization", format!("{scheme} {}", app.token))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{scheme}");
    }
    let basic = app
        .http
        .get(format!("{}/info", app.url))
        .header("authorization", format!("Basic {}", app.token))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_and_revoked_tokens_are_401_and_use_is_recorded() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let client = app.pool.get().await.unwrap();
    let expired = token::generate();
    let yesterday = OffsetDateTime::now_utc() - Duration::from_secs(86_400);
    db::create_token(
        &**client,
        app.project_id,
        "old",
        &token::hash(&expired),
        Some(yesterday),
    )
    .await
    .unwrap();
    let revoked = token::generate();
    let revoked_id = db::create_token(
        &**client,
        app.project_id,
        "gone",
        &token::hash(&revoked),
        None,
    )
    .await
    .unwrap();
    let live = app
        .get_as(&revoked, &format!("/compile/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(
        live.status(),
        StatusCode::NOT_FOUND,
        "the token works before it is revoked"
    );
    assert!(db::revoke_token(&**client, revoked_id).await.unwrap());
    for secret in [&expired, &revoked] {
        let response = app
            .get_as(secret, &format!("/compile/{}", uuid::Uuid::new_v4()))
            .await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    let tokens = db::list_tokens(&**client, app.project_id).await.unwrap();
    let used = tokens.iter().find(|t| t.id == revoked_id).unwrap();
    assert!(used.last_used_at.is_some(), "last_used_at was not recorded");
}

#[tokio::test(flavor = "multi_thread")]
async fn listing_pages_newest_first_with_a_cursor_and_filters_by_status() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            app.submit(json!({ "input_latex": HELLO })).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    app.delete_as(&app.token, &format!("/compile/{}", ids[0]))
        .await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/projects/{}/compiles?limit=2", app.project_id);
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let page: Value = app.get(&path).await.json().await.unwrap();
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 2);
        seen.extend(items.iter().map(|job| job.id().to_string()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first);
    let cancelled: Value = app
        .get(&format!(
            "/projects/{}/compiles?status=Cancelled",
            app.project_id
        ))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled["items"].as_array().unwrap().len(), 1);
    assert_eq!(cancelled["items"][0]["id"], ids[0].as_str());
    for query in [
        "limit=0",
        "limit=101",
        "status=Done",
        "cursor=xyz",
        "colour=red",
    ] {
        let response = app
            .get(&format!("/projects/{}/compiles?{query}", app.project_id))
            .await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{query}"
        );
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_over_its_rate_gets_429_with_retry_after() {
    let app = TestApp::spawn_api_only(|config| {
        config.rate_limit_per_second = 1;
        config.rate_limit_burst = 3;
    })
    .await;
    let unknown_job = || async { app.get(&format!("/compile/{}", uuid::Uuid::new_v4())).await };
    // However slowly the requests go, the burst is granted and then at most one a second.
    let started = Instant::now();
    let mut allowed = 0;
    let limited = loop {
        let response = unknown_job().await;
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            break response;
        }
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        allowed += 1;
        let budget = 3 + started.elapsed().as_secs() + 1;
        assert!(
            allowed <= budget,
            "{allowed} requests allowed, the budget was {budget}"
        );
    };
    assert!(
        allowed >= 3,
        "only {allowed} requests of the burst of 3 were allowed"
    );
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    let problem: Value = limited.json().await.unwrap();
    assert_eq!(problem["code"], "rate_limited", "{problem:#}");
    // The wait the server asked for is enough.
    tokio::time::sleep(Duration::from_secs(retry_after)).await;
    assert_eq!(unknown_job().await.status(), StatusCode::NOT_FOUND);
    let (_, other_token) = app.other_project().await;
    let other = app
        .get_as(&other_token, &format!("/compile/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(
        other.status(),
        StatusCode::NOT_FOUND,
        "another token has its own budget"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openapi_document_describes_every_route_and_the_job() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let document: Value = app
        .http
        .get(format!("{}/openapi.json", app.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for (path, method) in [
        ("/compile", "post"),
        ("/compile/{id}", "get"),
        ("/compile/{id}", "delete"),
        ("/compile/{id}/pdf", "get"),
        ("/compile/{id}/log", "get"),
        ("/projects/{project_id}/compiles", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
    ] {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path} is not documented"
        );
    }
    let job = &document["components"]["schemas"]["Job"]["properties"];
    for field in [
        "id",
        "project_id",
        "status",
        "engine",
        "created_at",
        "started_at",
        "finished_at",
        "duration_ms",
        "pdf_storage_key",
        "log_storage_key",
        "error",
        "diagnostics",
    ] {
        assert!(job[field].is_object(), "Job.{field} is not documented");
    }
    assert!(document["components"]["securitySchemes"]["bearer"].is_object());
}
