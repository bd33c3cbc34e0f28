//! The same request gives the same PDF, byte for byte, with every engine; an unchanged
//! resubmission reuses the retained result of its project at once, without a container; any
//! change is a miss; downloads carry strong ETags.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{containers_of_job, TestApp, HELLO};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A date, a section, a table of contents and a cross-reference: what a compile writes that
/// could vary.
const DOCUMENT: &str = "\\documentclass{article}\\begin{document}\\tableofcontents\
    \\section{Cached}\\label{s}\\today, see section~\\ref{s}.\\end{document}";

fn id_of(job: &Value) -> &str {
    job.id()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_compiles_of_the_same_request_give_the_same_bytes_with_every_engine() {
    let app = TestApp::spawn().await;
    for engine in ["pdflatex", "xelatex", "lualatex"] {
        let request = json!({ "input_latex": DOCUMENT, "engine": engine, "cache": false });
        let first = app.compile(request.clone()).await;
        let second = app.compile(request).await;
        assert_eq!(first["status"], "Succeeded", "{first:#}");
        assert_eq!(second["status"], "Succeeded", "{second:#}");
        assert!(second["reused_from"].is_null(), "{second:#}");
        let (first_pdf, second_pdf) = (
            app.pdf_of(id_of(&first)).await,
            app.pdf_of(id_of(&second)).await,
        );
        assert!(
            first_pdf == second_pdf,
            "{engine}: two compiles of one request differ"
        );
    }
}

fn moment(job: &Value, field: &str) -> OffsetDateTime {
    OffsetDateTime::parse(job[field].as_str().unwrap(), &Rfc3339).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unchanged_resubmission_reuses_the_result_without_a_container() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let request =
        json!({ "input_latex": DOCUMENT, "files": [{ "path": "extra.tex", "content": "x" }] });
    let original = app.compile(request.clone()).await;
    assert_eq!(original["status"], "Succeeded", "{original:#}");

    let mut body = request.clone();
    body["project_id"] = json!(app.project_id);
    let response = app.post_compile(&body).await;
    assert_eq!(response.status(), 200);
    let location = response.headers()["location"].to_str().unwrap().to_string();
    let reused: Value = response.json().await.unwrap();
    assert_eq!(location, format!("/compile/{}", id_of(&reused)));
    assert_ne!(reused["id"], original["id"]);
    assert_eq!(reused["status"], "Succeeded", "{reused:#}");
    assert_eq!(reused["reused_from"], original["id"]);
    assert_eq!(reused["duration_ms"], original["duration_ms"]);
    assert_eq!(reused["diagnostics"], original["diagnostics"]);
    let answered_in = moment(&reused, "finished_at") - moment(&reused, "created_at");
    assert!(
        answered_in < time::Duration::milliseconds(50),
        "the reused job took {answered_in} to finish"
    );
    assert_eq!(app.get_json(&location).await, reused);
    assert_eq!(
        app.pdf_of(id_of(&reused)).await,
        app.pdf_of(id_of(&original)).await
    );
    // The SyncTeX file is reused with the PDF it describes.
    assert!(original["synctex_storage_key"].is_string(), "{original:#}");
    assert_eq!(
        reused["synctex_storage_key"],
        original["synctex_storage_key"]
    );
    let synctex = |id: String| {
        let app = &app;
        async move {
            let response = app.get(&format!("/compile/{id}/synctex")).await;
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap()
        }
    };
    assert_eq!(
        synctex(id_of(&reused).to_string()).await,
        synctex(id_of(&original).to_string()).await
    );
    let log = |id: String| {
        let app = &app;
        async move {
            app.get(&format!("/compile/{id}/log"))
                .await
                .text()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        log(id_of(&reused).into()).await,
        log(id_of(&original).into()).await
    );
    // No compile ran: never claimed, no container, nothing stored under its own id.
    assert_eq!(
        app.count_jobs(&format!(
            "id = '{}' AND attempts = 0 AND lease_owner IS NULL",
            id_of(&reused)
        ))
        .await,
        1
    );
    assert!(containers_of_job(id_of(&reused)).await.is_empty());
    let short_id = id_of(&reused).split('-').next().unwrap();
    assert!(app
        .storage
        .list(&format!("compiles/{short_id}/"))
        .await
        .unwrap()
        .is_empty());
    // A reused job is an original for nobody: the next resubmission reuses the original too.
    let again: Value = app.post_compile(&body).await.json().await.unwrap();
    assert_eq!(again["reused_from"], original["id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn any_change_another_project_an_opt_out_or_another_image_is_a_miss() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let base = json!({ "project_id": app.project_id, "input_latex": HELLO, "files": [{ "path": "a.tex", "content": "a" }] });
    let original = app.compile(base.clone()).await;
    assert_eq!(original["status"], "Succeeded", "{original:#}");
    let hit: Value = app.post_compile(&base).await.json().await.unwrap();
    assert_eq!(
        hit["reused_from"], original["id"],
        "the unchanged request: {hit:#}"
    );

    let mut changes = Vec::new();
    for (field, value) in [
        ("input_latex", json!(format!("{HELLO}%"))),
        ("files", json!([{ "path": "a.tex", "content": "b" }])),
        ("files", json!([{ "path": "b.tex", "content": "a" }])),
        ("engine", json!("xelatex")),
        ("halt_on_error", json!(true)),
        ("timeout_seconds", json!(59)),
        ("cache", json!(false)),
    ] {
        let mut changed = base.clone();
        changed[field] = value;
        changes.push((format!("{field} changed"), app.token.clone(), changed));
    }
    let (other_project, other_token) = app.other_project().await;
    let mut theirs = base.clone();
    theirs["project_id"] = json!(other_project);
    changes.push(("another project".into(), other_token, theirs));
    for (what, token, body) in changes {
        let response = app.post_as(&token, "/compile", &body).await;
        let job: Value = response.json().await.unwrap();
        assert!(job["reused_from"].is_null(), "{what}: {job:#}");
        assert_eq!(job["status"], "Queued", "{what}: {job:#}");
        app.delete_as(&token, &format!("/compile/{}", id_of(&job)))
            .await;
    }
    // Another sandbox image (as after an upgrade): the original's result no longer stands.
    let upgraded = app
        .execute(&format!(
            "UPDATE schedulers SET images = jsonb_set(images, '{{{}}}', '\"sha256:another-image\"')",
            app.config.default_texlive
        ))
        .await;
    assert_eq!(upgraded, 1);
    let after_upgrade: Value = app.post_compile(&base).await.json().await.unwrap();
    assert!(after_upgrade["reused_from"].is_null(), "{after_upgrade:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn downloads_carry_nosniff_and_strong_etags_that_answer_if_none_match_with_304() {
    let app = TestApp::spawn().await;
    let job = app.compile(json!({ "input_latex": HELLO })).await;
    let id = id_of(&job);
    for (output, disposition) in [
        (
            "pdf",
            Some(format!(
                "inline; filename=\"{}.pdf\"",
                id.split('-').next().unwrap()
            )),
        ),
        ("log", None),
    ] {
        let path = format!("/compile/{id}/{output}");
        let response = app.get(&path).await;
        assert_eq!(response.status(), 200);
        let etag = response.headers()["etag"].to_str().unwrap().to_string();
        // The bytes are the document's: no browser may sniff them into something else.
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        if let Some(disposition) = disposition {
            assert_eq!(
                response.headers()["content-disposition"],
                disposition.as_str()
            );
        }
        let bytes = response.bytes().await.unwrap();
        assert_eq!(
            etag,
            format!("\"{:x}\"", Sha256::digest(&bytes)),
            "{output}"
        );
        let unchanged = app.get_if_none_match(&path, &etag).await;
        assert_eq!(unchanged.status(), 304, "{output}");
        assert_eq!(unchanged.headers()["etag"], etag.as_str());
        assert!(unchanged.bytes().await.unwrap().is_empty());
        let other = app.get_if_none_match(&path, "\"0000\"").await;
        assert_eq!(other.status(), 200, "{output}");
        assert_eq!(other.bytes().await.unwrap(), bytes);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_keeps_an_original_until_no_job_reuses_it() {
    let app = TestApp::spawn_with(|config| {
        config.result_cache = true;
        config.retention_days = 1;
        config.retention_interval_seconds = 1;
    })
    .await;
    let original = app.compile(json!({ "input_latex": HELLO })).await;
    let mut body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let reused: Value = app.post_compile(&body).await.json().await.unwrap();
    assert_eq!(reused["reused_from"], original["id"], "{reused:#}");
    body["input_latex"] = json!(format!("{HELLO}%"));
    let unrelated = app
        .compile(json!({ "input_latex": body["input_latex"] }))
        .await;
    let age = |jobs: &[&Value]| {
        let ids: Vec<&str> = jobs.iter().map(|job| id_of(job)).collect();
        let statement = format!(
            "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE id::text IN ('{}')",
            ids.join("', '")
        );
        let app = &app;
        async move { app.execute(&statement).await }
    };
    let gone = |job: &Value| {
        let path = format!("/compile/{}", id_of(job));
        let app = &app;
        async move { app.get(&path).await.status() == 404 }
    };
    // Once a retention run has deleted the unrelated job, it has passed over the original.
    age(&[&original, &unrelated]).await;
    texfleet_e2e::eventually(
        std::time::Duration::from_secs(30),
        "a retention run",
        || gone(&unrelated),
    )
    .await;
    assert!(
        !gone(&original).await,
        "an original was deleted while a job reuses it"
    );
    assert_eq!(
        app.pdf_of(id_of(&reused)).await,
        app.pdf_of(id_of(&original)).await
    );
    age(&[&reused]).await;
    texfleet_e2e::eventually(
        std::time::Duration::from_secs(30),
        "both are deleted",
        || async { gone(&reused).await && gone(&original).await },
    )
    .await;
    let key = original["pdf_storage_key"].as_str().unwrap();
    assert!(
        app.storage.get_bytes(key).await.is_err(),
        "the original's PDF is still stored"
    );
}
