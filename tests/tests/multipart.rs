//! `POST /compile` as `multipart/form-data`: a `metadata` part and the files as they are, under
//! the same rules, limits and answers as JSON; and waiting for a job to start.

use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    multipart_form as form, pdf_objects_of_subtype, pdf_text, tiny_png, TestApp, ENDLESS,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_multipart_project_compiles_in_its_main_document_s_folder() {
    let app = TestApp::spawn().await;
    let main = "\\documentclass{article}\\usepackage{graphicx}\\begin{document}\
                Intro \\input{part} \\input{shared}\\includegraphics[width=1cm]{fig/a dot}\\end{document}";
    let response = app.post_multipart(
        form(
            &json!({ "project_id": app.project_id, "main": "paper/main.tex", "engine": "lualatex" }),
            &[
                ("paper/main.tex", main.as_bytes()),
                ("paper/part.tex", b"beside the main document."),
                ("shared.tex", b"From the top level."),
                ("paper/fig/a dot.png", &tiny_png()),
            ],
        ),
        None,
    )
    .await;
    assert_eq!(response.status(), 202);
    let job: Value = response.json().await.unwrap();
    let job = app.wait_terminal(job.id(), Duration::from_secs(120)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(job["engine"], "lualatex");
    let pdf = app.pdf_of(job.id()).await;
    let text = pdf_text(&pdf);
    assert!(
        text.contains("beside the main document.") && text.contains("From the top level."),
        "{text}"
    );
    assert_eq!(pdf_objects_of_subtype(&pdf, "Image"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn multipart_counts_the_bytes_sent_where_json_pays_for_base64() {
    let app = TestApp::spawn_api_only(|config| config.max_body_bytes = 300_000).await;
    // 250 kB of bytes: under the limit as they are, over it in base64.
    let figure: Vec<u8> = (0..250_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&figure);
    let response = app
        .post_compile(&json!({ "project_id": app.project_id, "input_latex": "x",
                               "files": [{ "path": "figure.bin", "content_base64": encoded }] }))
        .await;
    assert_eq!(response.status(), 413);
    let problem: Value = response.json().await.unwrap();
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("base64") && detail.contains("multipart/form-data"),
        "{detail}"
    );
    let response = app
        .post_multipart(
            form(
                &json!({ "project_id": app.project_id }),
                &[("main.tex", b"x"), ("figure.bin", &figure)],
            ),
            None,
        )
        .await;
    assert_eq!(response.status(), 202);
    let job: Value = response.json().await.unwrap();
    let stored: Vec<u8> = {
        let client = app.pool.get().await.unwrap();
        let id: uuid::Uuid = job.id().parse().unwrap();
        client
            .query_one(
                "SELECT content FROM job_files WHERE job_id = $1 AND path = 'figure.bin'",
                &[&id],
            )
            .await
            .unwrap()
            .get(0)
    };
    assert_eq!(stored, figure, "the bytes arrive as they were sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_multipart_body_is_refused_with_the_part_named() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let project = json!({ "project_id": app.project_id });
    let cases: Vec<(Form, u16, &str, &str)> = vec![
        (
            Form::new().part("file", Part::bytes(b"x".to_vec()).file_name("main.tex")),
            422,
            "validation_failed",
            "metadata",
        ),
        (
            form(&project, &[("main.tex", b"x")]).text("note", "hello"),
            422,
            "validation_failed",
            "parts[2]",
        ),
        (
            form(
                &json!({ "project_id": app.project_id, "input_latex": "x" }),
                &[("main.tex", b"x")],
            ),
            422,
            "validation_failed",
            "input_latex",
        ),
        (
            form(&project, &[("a.tex", b"x")]),
            422,
            "validation_failed",
            "main",
        ),
        (
            form(&project, &[("main.tex", b"x"), ("../up.tex", b"y")]),
            422,
            "validation_failed",
            "files[1].path",
        ),
        (
            Form::new().part("metadata", Part::text("{not json")),
            400,
            "invalid_json",
            "",
        ),
    ];
    for (form, status, code, field) in cases {
        let response = app.post_multipart(form, None).await;
        assert_eq!(response.status(), status, "{code} {field}");
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["code"], code, "{problem:#}");
        if !field.is_empty() {
            assert_eq!(problem["errors"][0]["field"], field, "{problem:#}");
        }
    }
    let (other, _) = app.other_project().await;
    let response = app
        .post_multipart(
            form(&json!({ "project_id": other }), &[("main.tex", b"x")]),
            None,
        )
        .await;
    assert_eq!(response.status(), 403);
    let response = app
        .http
        .post(format!("{}/compile", app.url))
        .bearer_auth(&app.token)
        .header("Content-Type", "multipart/form-data; boundary=B")
        .body("--B\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "invalid_multipart");
    let response = app
        .http
        .post(format!("{}/compile", app.url))
        .bearer_auth(&app.token)
        .header("Content-Type", "text/plain")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    assert_eq!(
        app.count_jobs("true").await,
        0,
        "a refused request queued a job"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idempotency_key_covers_multipart_submissions() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let metadata = json!({ "project_id": app.project_id });
    let first = app
        .post_multipart(form(&metadata, &[("main.tex", b"x")]), Some("k1"))
        .await;
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    let again = app
        .post_multipart(form(&metadata, &[("main.tex", b"x")]), Some("k1"))
        .await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);
    let other = app
        .post_multipart(form(&metadata, &[("main.tex", b"y")]), Some("k1"))
        .await;
    assert_eq!(other.status(), 409);
    let problem: Value = other.json().await.unwrap();
    assert_eq!(problem["code"], "idempotency_conflict");
    assert_eq!(app.count_jobs("true").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_waiting_for_the_start_hears_of_it_when_the_job_starts() {
    let app = TestApp::spawn().await;
    let job = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 8 }))
        .await;
    let id = job.id();
    let response = app
        .http
        .get(format!("{}/compile/{id}?until=started", app.url))
        .bearer_auth(&app.token)
        .header("Prefer", "wait=30")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen: Value = response.json().await.unwrap();
    // Answered at the start, not at the end (the job times out after 8 s, inside the wait).
    assert_eq!(seen["status"], "Running", "{seen:#}");
    let response = app.get(&format!("/compile/{id}?until=soon")).await;
    assert_eq!(response.status(), 422);
    let ended = app.wait_terminal(id, Duration::from_secs(60)).await;
    assert_eq!(ended["status"], "TimedOut");
}
