//! Every error of the API answers with its status and an `application/problem+json` body whose
//! `code` is the one docs/API.md gives. These tests run the API alone (jobs stay Queued).

use reqwest::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::{RequestBuilder, Response};
use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{TestApp, HELLO};

/// Asserts the status, the problem content type and code, and returns the body.
async fn assert_problem(response: Response, status: u16, code: &str) -> Value {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], status);
    assert_eq!(body["code"], code, "{body:#}");
    assert_eq!(body["request_id"], request_id);
    for field in ["type", "title", "detail"] {
        assert!(
            body[field].as_str().is_some_and(|s| !s.is_empty()),
            "{field} missing in {body:#}"
        );
    }
    body
}

fn error_fields(body: &Value) -> Vec<&str> {
    body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_tokens_are_401_with_a_bearer_challenge() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let post = || app.http.post(format!("{}/compile", app.url)).json(&body);
    let cases: Vec<RequestBuilder> = vec![
        post(),
        post().header("Authorization", format!("Basic {}", app.token)),
        post().header("Authorization", "Bearer"),
        post().bearer_auth("tf_not-a-real-token"),
        app.http
            .get(format!("{}/compile/{}", app.url, uuid::Uuid::new_v4())),
    ];
    for request in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.headers()[WWW_AUTHENTICATE], "Bearer");
        assert_problem(response, 401, "unauthorized").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_projects_id_is_403_and_its_jobs_are_404() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let (other_project, _, theirs) = app.other_project_with_job().await;
    let response = app
        .post_compile(&json!({ "project_id": other_project, "input_latex": HELLO }))
        .await;
    assert_problem(response, 403, "forbidden").await;

    let id = theirs.id();
    for path in [
        format!("/compile/{id}"),
        format!("/compile/{id}/pdf"),
        format!("/compile/{id}/log"),
    ] {
        assert_problem(app.get(&path).await, 404, "not_found").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_jobs_and_routes_are_404() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    for path in [
        format!("/compile/{}", uuid::Uuid::new_v4()),
        "/compile/not-a-uuid".to_string(),
        format!("/compile/{}/pdf", uuid::Uuid::new_v4()),
        "/no/such/route".to_string(),
    ] {
        assert_problem(app.get(&path).await, 404, "not_found").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn body_errors_are_400_413_415_and_422() {
    let app = TestApp::spawn_api_only(|config| config.max_body_bytes = 4096).await;
    let post = || {
        app.http
            .post(format!("{}/compile", app.url))
            .bearer_auth(&app.token)
    };

    let response = post()
        .header("Content-Type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_problem(response, 415, "unsupported_media_type").await;
    let response = post().send().await.unwrap();
    assert_problem(response, 415, "unsupported_media_type").await;

    let response = post()
        .header("Content-Type", "application/json")
        .body("{\"project_id\": ")
        .send()
        .await
        .unwrap();
    assert_problem(response, 400, "invalid_json").await;

    let big = json!({ "project_id": app.project_id, "input_latex": "x".repeat(8192) });
    let response = post().json(&big).send().await.unwrap();
    assert_problem(response, 413, "payload_too_large").await;

    let cases = [
        (
            json!({ "project_id": app.project_id, "input_latex": HELLO, "colour": "red" }),
            vec!["colour"],
        ),
        (
            json!({ "project_id": app.project_id, "input_latex": HELLO, "latex": HELLO }),
            vec!["latex"],
        ),
        (json!({ "project_id": app.project_id }), vec!["input_latex"]),
        (json!({ "input_latex": HELLO }), vec!["project_id"]),
        (
            json!({ "project_id": app.project_id, "input_latex": HELLO, "engine": "troff" }),
            vec!["engine"],
        ),
        (
            json!({ "project_id": app.project_id, "input_latex": HELLO, "timeout_seconds": 100000 }),
            vec!["timeout_seconds"],
        ),
        (
            json!({ "project_id": app.project_id, "input_latex": HELLO,
                    "files": [{ "path": "../../etc/passwd", "content": "x" }, { "path": "/abs.tex", "content": "x" }] }),
            vec!["files[0].path", "files[1].path"],
        ),
        (
            json!({ "project_id": app.project_id, "main": "paper/main.tex",
                    "files": [{ "path": "paper/other.tex", "content": HELLO }] }),
            vec!["main"],
        ),
        (
            json!({ "project_id": app.project_id, "main": "paper/main.tex",
                    "files": [{ "path": "paper/main.tex", "content": HELLO },
                              { "path": "paper/output.pdf", "content": "%PDF" }] }),
            vec!["files[1].path"],
        ),
        (
            json!({ "project_id": app.project_id, "input_latex": HELLO,
                    "files": [{ "path": "main.tex", "content": HELLO }] }),
            vec!["files[0].path"],
        ),
        (json!([1, 2, 3]), vec![""]),
    ];
    for (body, fields) in cases {
        let problem = assert_problem(
            post().json(&body).send().await.unwrap(),
            422,
            "validation_failed",
        )
        .await;
        assert_eq!(error_fields(&problem), fields, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn accepted_jobs_answer_202_with_location_and_a_queued_job_has_no_pdf_yet() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let response = app
        .post_compile(&json!({ "project_id": app.project_id, "latex": HELLO, "engine": "xelatex" }))
        .await;
    assert_eq!(response.status(), 202);
    let location = response.headers()["location"].to_str().unwrap().to_string();
    let job: Value = response.json().await.unwrap();
    assert_eq!(location, format!("/compile/{}", job.id()));
    assert_eq!(job["status"], "Queued");
    assert_eq!(job["engine"], "xelatex");
    assert_eq!(job["project_id"], app.project_id.to_string());
    assert_eq!(job["diagnostics"], json!([]));
    for field in [
        "started_at",
        "finished_at",
        "duration_ms",
        "pdf_storage_key",
        "log_storage_key",
        "error",
    ] {
        assert!(job[field].is_null(), "{field} should be null: {job:#}");
    }

    assert_eq!(
        job["links"],
        json!({ "self": location, "pdf": null, "log": null, "synctex": null,
                "thumbnail": null })
    );
    let fetched: Value = app.get(&location).await.json().await.unwrap();
    assert_eq!(fetched, job);
    assert_problem(app.get(&format!("{location}/pdf")).await, 409, "not_ready").await;
    assert_problem(app.get(&format!("{location}/log")).await, 409, "not_ready").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_readiness_need_no_token() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    assert_eq!(
        app.http
            .get(format!("{}/healthz", app.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        app.http
            .get(format!("{}/readyz", app.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}
