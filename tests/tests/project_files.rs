//! Project files by content hash: uploaded once (`PUT /projects/{id}/files/{sha256}`), then
//! named by submissions, so that a project above the request cap compiles and an edit sends
//! only what changed. Each project's store is its own; a body that is not its hash stores
//! nothing; the quota holds under concurrent uploads; unused files are collected.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    large_tex, multipart_form as form, sha256_hex as sha256, TestApp, INPUT_BIG as MAIN,
};

async fn head(app: &TestApp, token: &str, project: &str, hash: &str) -> reqwest::StatusCode {
    let url = format!("{}/projects/{project}/files/{hash}", app.url);
    let response = app.http.head(url).bearer_auth(token).send().await.unwrap();
    response.status()
}

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
    let hash = app.upload_file(&big).await;
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
    let small_hash = app.upload_file(&small).await;
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
    let known = app.upload_file(&parts[0]).await;
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
        app.upload_file(part).await;
    }
    let job: Value = app.post_compile(&body).await.json().await.unwrap();
    let job = app.wait_terminal(job.id(), Duration::from_secs(120)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert!(app.text_of(job.id()).await.contains("One. Two. Three."));

    // Multipart: the main document as a part, the rest named in the metadata.
    let metadata = json!({ "project_id": app.project_id, "main": "main.tex", "cache": false,
                           "files": [{ "path": "a.tex", "sha256": hashes[0] }, { "path": "b.tex", "sha256": hashes[1] },
                                     { "path": "c.tex", "sha256": hashes[2] }] });
    let response = app
        .post_multipart(form(&metadata, &[("main.tex", main.as_bytes())]), None)
        .await;
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
    let response = app
        .post_multipart(form(&metadata, &[("main.tex", main.as_bytes())]), None)
        .await;
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
    let hash = app.upload_file(&secret).await;
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
    let upload_to_a = app.put_file_as(&token, &mine, &hash, secret.clone()).await;
    assert_eq!(upload_to_a.status(), 403);
    // B uploading the same bytes stores its own copy: 201, as for any new file, never the
    // 200 that would tell it A holds them.
    let own = app
        .put_file_as(&token, &theirs, &hash, secret.clone())
        .await;
    assert_eq!(own.status(), 201);
    assert_eq!(
        app.put_file_as(&token, &theirs, &hash, secret)
            .await
            .status(),
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
        let response = app
            .put_file_as(&app.token, &project, &claimed, body.clone())
            .await;
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
    let response = app
        .put_file_as(&app.token, &project, "not-a-hash", b"x".to_vec())
        .await;
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
            .map(|(file, hash)| app.put_file_as(&app.token, &project, hash, file.clone())),
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
    let over_quota = app
        .put_file_as(&app.token, &project, &sha256(b"y"), b"y".repeat(200 * 1024))
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
    let response = app
        .put_file_as(&app.token, &project, &sha256(&too_large), too_large)
        .await;
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
async fn tiny_files_count_against_the_quota_at_their_least_charge() {
    let app = TestApp::spawn_with(|config| config.project_files_quota_bytes = 1024 * 1024).await;
    // Each file counts as 64 KiB at least: sixteen of a byte fill 1 MiB.
    for byte in 0..16u8 {
        app.upload_file(&[byte]).await;
    }
    let project = app.project_id.to_string();
    let one_more = app
        .put_file_as(&app.token, &project, &sha256(&[16]), vec![16])
        .await;
    assert_eq!(one_more.status(), 413);
    let info = app.get_json("/info").await;
    assert_eq!(info["project_files"]["count"], 16, "{info:#}");
    assert_eq!(info["project_files"]["bytes"], 16 * 64 * 1024, "{info:#}");
}
