//! Project files by content hash: uploaded once (`PUT /projects/{id}/files/{sha256}`), then
//! named by submissions, so that a project above the request cap compiles and an edit sends
//! only what changed. Each project's store is its own; a body that is not its hash stores
//! nothing; the quota holds under concurrent uploads; unused files are collected.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{eventually, texfleet_in, TestApp};

fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

async fn put(
    app: &TestApp,
    token: &str,
    project: &str,
    hash: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    app.http
        .put(format!("{}/projects/{project}/files/{hash}", app.url))
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Uploads `body` to this app's project under its own hash.
async fn upload(app: &TestApp, body: &[u8]) -> String {
    let hash = sha256(body);
    let project = app.project_id.to_string();
    let response = put(app, &app.token, &project, &hash, body.to_vec()).await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    hash
}

async fn head(app: &TestApp, token: &str, project: &str, hash: &str) -> reqwest::StatusCode {
    let url = format!("{}/projects/{project}/files/{hash}", app.url);
    let response = app.http.head(url).bearer_auth(token).send().await.unwrap();
    response.status()
}

/// A `.tex` file of `bytes` bytes: comment lines, then `text`.
fn large_tex(bytes: usize, text: &str) -> Vec<u8> {
    let line = format!("%{}\n", "x".repeat(98));
    let mut tex = line.repeat(bytes / line.len()).into_bytes();
    tex.extend_from_slice(text.as_bytes());
    tex
}

const MAIN: &str = "\\documentclass{article}\\begin{document}\\input{big}\\end{document}\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_project_above_the_request_cap_compiles_from_files_named_by_hash() {
    let app = TestApp::spawn_with(|config| {
        config.max_body_bytes = 1024 * 1024;
        config.result_cache = true;
    })
    .await;
    // Past one part of the multipart upload, and ten times the request cap.
    let big = large_tex(10 * 1024 * 1024, "Read from the large file.\n");
    let whole = app
        .post_compile(&json!({ "project_id": app.project_id, "input_latex": MAIN,
                               "files": [{ "path": "big.tex", "content": String::from_utf8(big.clone()).unwrap() }] }))
        .await;
    assert_eq!(whole.status(), 413, "sent whole, it is over the cap");
    let hash = upload(&app, &big).await;
    let key = format!("projects/{}/files/{hash}", app.project_id);
    let stored = app.storage.get_bytes(&key).await.unwrap();
    assert!(stored == big, "the object is the file, whole");
    let job = app
        .compile(json!({ "input_latex": MAIN, "files": [{ "path": "big.tex", "sha256": hash }] }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert!(app
        .text_of(job.id())
        .await
        .contains("Read from the large file."));
    let info = app.get_json("/info").await;
    assert_eq!(info["project_files"]["count"], 1, "{info:#}");
    assert_eq!(info["project_files"]["bytes"], big.len() as u64, "{info:#}");

    // The same content sent and named is the same input: the result is reused.
    let small = b"Small and sent.\n".to_vec();
    let sent = app
        .compile(json!({ "input_latex": MAIN, "files": [{ "path": "big.tex", "content": "Small and sent.\n" }] }))
        .await;
    assert_eq!(sent["status"], "Succeeded", "{sent:#}");
    let small_hash = upload(&app, &small).await;
    let named = app
        .submit(
            json!({ "input_latex": MAIN, "files": [{ "path": "big.tex", "sha256": small_hash }] }),
        )
        .await;
    assert_eq!(named["reused_from"], sent["id"], "{named:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_missing_hash_is_listed_at_once_then_the_job_compiles_in_json_and_multipart() {
    let app = TestApp::spawn().await;
    let parts = ["One.", "Two.", "Three."].map(|text| format!("{text}\n").into_bytes());
    let hashes: Vec<String> = parts.iter().map(|part| sha256(part)).collect();
    let known = upload(&app, &parts[0]).await;
    let main =
        "\\documentclass{article}\\begin{document}\\input{a}\\input{b}\\input{c}\\end{document}\n";
    let files = json!([{ "path": "a.tex", "sha256": hashes[0] }, { "path": "b.tex", "sha256": hashes[1] },
                       { "path": "c.tex", "sha256": hashes[2].to_uppercase() }]);
    let body = json!({ "project_id": app.project_id, "input_latex": main, "files": files });
    let response = app.post_compile(&body).await;
    assert_eq!(response.status(), 422);
    let problem: Value = response.json().await.unwrap();
    let mut missing = vec![hashes[1].clone(), hashes[2].clone()];
    missing.sort();
    assert_eq!(problem["missing_sha256"], json!(missing), "{problem:#}");
    assert_eq!(problem["code"], "validation_failed");
    assert!(
        !problem.to_string().contains(&known),
        "the held one is not listed: {problem:#}"
    );
    // The batch question gives the same answer, in the order asked.
    let asked = app
        .post_as(
            &app.token,
            &format!("/projects/{}/files/missing", app.project_id),
            &json!({ "sha256": hashes }),
        )
        .await;
    let asked: Value = asked.json().await.unwrap();
    assert_eq!(asked["missing"], json!([hashes[1], hashes[2]]), "{asked:#}");
    for part in &parts[1..] {
        upload(&app, part).await;
    }
    let job: Value = app.post_compile(&body).await.json().await.unwrap();
    let job = app.wait_terminal(job.id(), Duration::from_secs(120)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert!(app.text_of(job.id()).await.contains("One. Two. Three."));

    // Multipart: the main document as a part, the rest named in the metadata.
    let metadata = json!({ "project_id": app.project_id, "main": "main.tex", "cache": false,
                           "files": [{ "path": "a.tex", "sha256": hashes[0] }, { "path": "b.tex", "sha256": hashes[1] },
                                     { "path": "c.tex", "sha256": hashes[2] }] });
    let form = reqwest::multipart::Form::new()
        .part(
            "metadata",
            reqwest::multipart::Part::text(metadata.to_string())
                .mime_str("application/json")
                .unwrap(),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(main.as_bytes().to_vec()).file_name("main.tex"),
        );
    let response = app
        .http
        .post(format!("{}/compile", app.url))
        .bearer_auth(&app.token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let job: Value = response.json().await.unwrap();
    let job = app.wait_terminal(job.id(), Duration::from_secs(120)).await;
    assert!(
        app.text_of(job.id()).await.contains("One. Two. Three."),
        "{job:#}"
    );
    // A metadata entry carries no content: that travels as a part.
    let metadata =
        json!({ "project_id": app.project_id, "files": [{ "path": "d.tex", "content": "x" }] });
    let form = reqwest::multipart::Form::new()
        .part(
            "metadata",
            reqwest::multipart::Part::text(metadata.to_string())
                .mime_str("application/json")
                .unwrap(),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(main.as_bytes().to_vec()).file_name("main.tex"),
        );
    let response = app
        .http
        .post(format!("{}/compile", app.url))
        .bearer_auth(&app.token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    assert!(response
        .text()
        .await
        .unwrap()
        .contains("files[0].content: unknown field"));
}

#[tokio::test(flavor = "multi_thread")]
async fn another_project_can_neither_use_nor_detect_a_projects_files() {
    let app = TestApp::spawn().await;
    let secret = b"Only project A has this.\n".to_vec();
    let hash = upload(&app, &secret).await;
    let (other, token) = app.other_project().await;
    let (mine, theirs) = (app.project_id.to_string(), other.to_string());
    assert_eq!(head(&app, &app.token, &mine, &hash).await, 200);
    assert_eq!(
        head(&app, &token, &mine, &hash).await,
        403,
        "A's store through A's path"
    );
    assert_eq!(
        head(&app, &token, &theirs, &hash).await,
        404,
        "B's own store"
    );
    let asked = app
        .post_as(
            &token,
            &format!("/projects/{theirs}/files/missing"),
            &json!({ "sha256": [hash] }),
        )
        .await;
    assert_eq!(
        asked.json::<Value>().await.unwrap()["missing"],
        json!([hash])
    );
    let response = app
        .post_as(
            &token,
            "/compile",
            &json!({ "project_id": other, "input_latex": MAIN,
                                               "files": [{ "path": "big.tex", "sha256": hash }] }),
        )
        .await;
    assert_eq!(response.status(), 422);
    assert_eq!(
        response.json::<Value>().await.unwrap()["missing_sha256"],
        json!([hash])
    );
    let upload_to_a = put(&app, &token, &mine, &hash, secret.clone()).await;
    assert_eq!(upload_to_a.status(), 403);
    // B uploading the same bytes stores its own copy: 201, as for any new file, never the
    // 200 that would tell it A holds them.
    let own = put(&app, &token, &theirs, &hash, secret.clone()).await;
    assert_eq!(own.status(), 201);
    assert_eq!(
        put(&app, &token, &theirs, &hash, secret).await.status(),
        200,
        "held now"
    );
    assert!(app
        .storage
        .get_bytes(&format!("projects/{theirs}/files/{hash}"))
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_is_not_its_hash_stores_nothing_small_or_in_parts() {
    let app = TestApp::spawn().await;
    let project = app.project_id.to_string();
    for size in [1000, 9 * 1024 * 1024] {
        let body = vec![b'a'; size];
        let claimed = sha256(b"something else");
        let response = put(&app, &app.token, &project, &claimed, body.clone()).await;
        assert_eq!(response.status(), 422, "{size}");
        let problem: Value = response.json().await.unwrap();
        assert!(
            problem["detail"].as_str().unwrap().contains(&sha256(&body)),
            "{problem:#}"
        );
        let key = format!("projects/{project}/files/{claimed}");
        assert!(
            app.storage.get_bytes(&key).await.is_err(),
            "no object at {key}"
        );
        assert_eq!(head(&app, &app.token, &project, &claimed).await, 404);
        assert_eq!(
            app.count_rows("project_files", "true").await,
            0,
            "no reservation left"
        );
    }
    let info = app.get_json("/info").await;
    assert_eq!(info["project_files"]["bytes"], 0, "{info:#}");
    let response = put(&app, &app.token, &project, "not-a-hash", b"x".to_vec()).await;
    assert_eq!(response.status(), 422);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quota_and_the_file_cap_hold_under_concurrent_uploads() {
    let app = TestApp::spawn_with(|config| {
        config.project_files_quota_bytes = 1024 * 1024;
        config.max_project_file_bytes = 300 * 1024;
    })
    .await;
    let project = app.project_id.to_string();
    let files: Vec<Vec<u8>> = (0..8u8).map(|n| vec![n; 200 * 1024]).collect();
    let hashes: Vec<String> = files.iter().map(|file| sha256(file)).collect();
    let answers = futures::future::join_all(
        files
            .iter()
            .zip(&hashes)
            .map(|(file, hash)| put(&app, &app.token, &project, hash, file.clone())),
    )
    .await;
    let stored = answers
        .iter()
        .filter(|answer| answer.status() == 201)
        .count();
    let refused = answers
        .iter()
        .filter(|answer| answer.status() == 413)
        .count();
    assert_eq!((stored, refused), (5, 3), "five of 200 KiB fit in 1 MiB");
    let info = app.get_json("/info").await;
    assert_eq!(info["project_files"]["bytes"], 5 * 200 * 1024, "{info:#}");
    let over_quota = put(
        &app,
        &app.token,
        &project,
        &sha256(b"y"),
        b"y".repeat(200 * 1024),
    )
    .await;
    let detail: Value = over_quota.json().await.unwrap();
    assert!(
        detail["detail"]
            .as_str()
            .unwrap()
            .contains("project_files_quota_bytes"),
        "{detail:#}"
    );
    let too_large = vec![0u8; 300 * 1024 + 1];
    let response = put(&app, &app.token, &project, &sha256(&too_large), too_large).await;
    assert_eq!(response.status(), 413);
    let detail: Value = response.json().await.unwrap();
    assert!(
        detail["detail"]
            .as_str()
            .unwrap()
            .contains("max_project_file_bytes"),
        "{detail:#}"
    );
    // No length, no reservation.
    let stream = futures::stream::iter([Ok::<_, std::io::Error>(b"z".to_vec())]);
    let response = app
        .http
        .put(format!(
            "{}/projects/{project}/files/{}",
            app.url,
            sha256(b"z")
        ))
        .bearer_auth(&app.token)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 411);
}

#[tokio::test(flavor = "multi_thread")]
async fn files_nothing_keeps_are_collected_and_named_ones_stay() {
    let app = TestApp::spawn_with(|config| {
        config.project_files_grace_hours = 0;
        config.retention_interval_seconds = 1;
    })
    .await;
    let unused = upload(&app, b"Nobody names me.\n").await;
    let named = upload(&app, b"Named by a job.\n").await;
    let job = app
        .compile(json!({ "input_latex": MAIN, "files": [{ "path": "big.tex", "sha256": named }] }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let key = |hash: &str| format!("projects/{}/files/{hash}", app.project_id);
    eventually(
        Duration::from_secs(30),
        "the unused file is collected",
        || async {
            app.count_rows("project_files", &format!("sha256 = '\\x{unused}'"))
                .await
                == 0
        },
    )
    .await;
    assert!(app.storage.get_bytes(&key(&unused)).await.is_err());
    assert!(
        app.storage.get_bytes(&key(&named)).await.is_ok(),
        "a retained job names it"
    );
    assert_eq!(
        app.count_rows("project_files", &format!("sha256 = '\\x{named}'"))
            .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_uploads_what_the_project_lacks_and_an_edit_sends_only_that_file() {
    let app = TestApp::spawn().await;
    let folder = tempfile::tempdir().unwrap();
    let write =
        |path: &str, content: &[u8]| std::fs::write(folder.path().join(path), content).unwrap();
    write(
        "main.tex",
        b"\\documentclass{article}\\begin{document}\\input{one}\\input{two}\\end{document}\n",
    );
    write("one.tex", b"First.\n");
    write("two.tex", &large_tex(2 * 1024 * 1024, "Second.\n"));
    let compile = || {
        texfleet_in(
            &app,
            folder.path(),
            &["compile", "main.tex", "--files", "."],
        )
    };
    let uploads = || async {
        let client = app.pool.get().await.unwrap();
        let rows = client
            .query(
                "SELECT encode(sha256, 'hex'), last_uploaded_at FROM project_files ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|row| {
                (
                    row.get::<_, String>(0),
                    row.get::<_, std::time::SystemTime>(1),
                )
            })
            .collect::<Vec<_>>()
    };
    let first = compile();
    let stderr = String::from_utf8_lossy(&first.stderr).to_string();
    assert_eq!(first.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("uploading two.tex") && stderr.contains("uploaded 3 file(s)"),
        "{stderr}"
    );
    let pdf = std::fs::read(folder.path().join("main.pdf")).unwrap();
    assert!(texfleet_e2e::pdf_text(&pdf).contains("First. Second."));
    let after_first = uploads().await;
    assert_eq!(after_first.len(), 3);

    let unchanged = compile();
    let stderr = String::from_utf8_lossy(&unchanged.stderr).to_string();
    assert_eq!(unchanged.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("uploaded"), "nothing to upload: {stderr}");
    assert_eq!(uploads().await, after_first, "no file was sent again");

    write("one.tex", b"First, edited.\n");
    let edited = compile();
    let stderr = String::from_utf8_lossy(&edited.stderr).to_string();
    assert_eq!(edited.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("uploaded 1 file(s)"), "{stderr}");
    let after_edit = uploads().await;
    let new: Vec<_> = after_edit
        .iter()
        .filter(|file| !after_first.contains(file))
        .collect();
    assert_eq!(new.len(), 1, "only the edited file: {new:?}");
    assert_eq!(new[0].0, sha256(b"First, edited.\n"));
    let pdf = std::fs::read(folder.path().join("main.pdf")).unwrap();
    assert!(texfleet_e2e::pdf_text(&pdf).contains("First, edited. Second."));
}
