//! Whose kept state a compile receives and for how long: never another project's, the
//! documents compiled last within the project's bounds, and nothing, in any engine, once a
//! compile from nothing (`"cache": false`) has cleared it; no result made from cleared state
//! is reused.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    pasted, succeeded_text, two_sections_with_style, TestApp, FLAG_CHECK, WRITE_FLAG,
};

#[tokio::test(flavor = "multi_thread")]
async fn another_project_never_receives_a_projects_format_or_auxiliary_files() {
    let app = TestApp::spawn().await;
    for body in ["Body one.", "Body two."] {
        app.compile(two_sections_with_style("", body, "Shared style"))
            .await;
    }
    let (project, token) = app.other_project().await;
    let mut request = two_sections_with_style("", "Body three.", "Shared style");
    request["project_id"] = json!(project);
    let submitted: Value = app
        .post_as(&token, "/compile", &request)
        .await
        .json()
        .await
        .unwrap();
    let id = submitted.id();
    let other = loop {
        let job: Value = app
            .get_as(&token, &format!("/compile/{id}"))
            .await
            .json()
            .await
            .unwrap();
        if !["Queued", "Running"].contains(&job["status"].as_str().unwrap()) {
            break job;
        }
        app.assert_scheduler_runs();
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(other["status"], "Succeeded", "{other:#}");
    assert_eq!(other["preamble_cache"], "miss", "{other:#}");
    assert_eq!(other["incremental"], false, "{other:#}");
    let log = app
        .get_as(&token, &format!("/compile/{id}/log"))
        .await
        .text()
        .await
        .unwrap();
    assert!(!log.contains("texfleet: restored"), "{log}");
    // Each project's state is below its own prefix.
    for project in [app.project_id, project] {
        let kept = app
            .storage
            .list(&format!("projects/{project}/"))
            .await
            .unwrap();
        assert!(
            kept.iter().any(|key| key.ends_with("/preamble.fmt")),
            "{project}: {kept:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_from_nothing_deletes_what_the_documents_earlier_compiles_left() {
    let app = TestApp::spawn().await;
    let planted = app.compile(pasted(WRITE_FLAG)).await;
    assert_eq!(planted["status"], "Succeeded", "{planted:#}");
    // A compile from nothing that fails keeps nothing of its own, but still deletes.
    let mut failing = pasted("\\UndefinedMacro");
    failing["cache"] = json!(false);
    failing["halt_on_error"] = json!(true);
    let failed = app.compile(failing).await;
    assert_eq!(failed["status"], "Failed", "{failed:#}");
    let after = app.compile(pasted(FLAG_CHECK)).await;
    assert_eq!(after["incremental"], false, "{after:#}");
    assert!(succeeded_text(&app, &after).await.contains("CLEAN"));

    // One that succeeds keeps its own state, from nothing, for the next compile.
    app.compile(pasted(&format!("{WRITE_FLAG} Again."))).await;
    let mut fresh = pasted("Fresh.");
    fresh["cache"] = json!(false);
    let fresh = app.compile(fresh).await;
    assert_eq!(fresh["status"], "Succeeded", "{fresh:#}");
    let next = app.compile(pasted(&format!("{FLAG_CHECK} Next."))).await;
    assert_eq!(next["incremental"], true, "{next:#}");
    assert!(succeeded_text(&app, &next).await.contains("CLEAN"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_from_nothing_clears_what_every_engine_left_of_the_document() {
    let app = TestApp::spawn().await;
    let mut planted = pasted(WRITE_FLAG);
    planted["engine"] = json!("xelatex");
    let planted = app.compile(planted).await;
    assert_eq!(planted["status"], "Succeeded", "{planted:#}");
    let mut from_nothing = pasted("From nothing.");
    from_nothing["cache"] = json!(false);
    let from_nothing = app.compile(from_nothing).await;
    assert_eq!(from_nothing["engine"], "pdflatex", "{from_nothing:#}");
    let mut after = pasted(FLAG_CHECK);
    after["engine"] = json!("xelatex");
    let after = app.compile(after).await;
    assert_eq!(after["incremental"], false, "{after:#}");
    assert!(succeeded_text(&app, &after).await.contains("CLEAN"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_that_ends_after_one_from_nothing_leaves_its_state_as_that_one_left_it() {
    // Two compiles of the project at once.
    let app = TestApp::spawn_with(|config| config.idle_project_slots = 0).await;
    app.compile(pasted(WRITE_FLAG)).await;
    // From the planted files, and planting again (as a self-copying payload would), slowly.
    let slow = format!(
        "{WRITE_FLAG} \\count255=0 \\loop\\advance\\count255 by 1 \\ifnum\\count255<15000000 \\repeat Slow."
    );
    let slow = app.submit(pasted(&slow)).await;
    let id = slow.id();
    let started = app.wait_started(id).await;
    assert_eq!(started["status"], "Running", "{started:#}");
    let mut fresh = pasted("Fresh.");
    fresh["cache"] = json!(false);
    let fresh = app.compile(fresh).await;
    assert_eq!(fresh["status"], "Succeeded", "{fresh:#}");
    let running = app.get_json(&format!("/compile/{id}")).await;
    assert_eq!(
        running["status"], "Running",
        "the order this test needs: {running:#}"
    );
    let slow = app.wait_terminal(id, Duration::from_secs(60)).await;
    assert_eq!(slow["incremental"], true, "{slow:#}");
    assert!(succeeded_text(&app, &slow).await.contains("Slow."));

    let next = app.compile(pasted(&format!("{FLAG_CHECK} After."))).await;
    assert_eq!(next["incremental"], true, "{next:#}");
    assert!(succeeded_text(&app, &next).await.contains("CLEAN"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_from_nothing_makes_the_documents_earlier_results_not_reusable() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let request = pasted("Earlier.");
    let earlier = app.compile(request.clone()).await;
    assert_eq!(earlier["status"], "Succeeded", "{earlier:#}");
    let again = app.compile(request.clone()).await;
    assert_eq!(again["reused_from"], earlier["id"], "{again:#}");
    let mut from_nothing = pasted("From nothing.");
    from_nothing["cache"] = json!(false);
    app.compile(from_nothing).await;
    let after = app.compile(request).await;
    assert_eq!(after["status"], "Succeeded", "{after:#}");
    assert!(after["reused_from"].is_null(), "{after:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_made_from_state_that_a_compile_from_nothing_then_cleared_is_not_reused() {
    // One job of the project at a time, so that the test orders the claims.
    let app = TestApp::spawn_with(|config| {
        config.result_cache = true;
        config.max_running_per_project = 1;
    })
    .await;
    app.compile(pasted(WRITE_FLAG)).await;
    let mut blocker = pasted("\\loop\\iftrue\\repeat");
    blocker["timeout_seconds"] = json!(120);
    let blocker = app.submit(blocker).await;
    let blocker = blocker.id();
    app.wait_started(blocker).await;
    // The compile from nothing is submitted first but held back, so that a compile submitted
    // after it runs from the planted state before it clears that.
    let mut from_nothing = pasted("From nothing.");
    from_nothing["cache"] = json!(false);
    let from_nothing = app.submit(from_nothing).await;
    let from_nothing = from_nothing.id();
    let held = app
        .execute(&format!(
            "UPDATE jobs SET run_after = now() + interval '1 hour'
             WHERE id = '{from_nothing}' AND status = 'Queued'"
        ))
        .await;
    assert_eq!(held, 1);
    let request = pasted(&format!("{FLAG_CHECK} Reused?"));
    let from_planted = app.submit(request.clone()).await;
    app.delete_as(&app.token, &format!("/compile/{blocker}"))
        .await;
    let from_planted = app
        .wait_terminal(from_planted.id(), Duration::from_secs(60))
        .await;
    assert!(succeeded_text(&app, &from_planted)
        .await
        .contains("FLAGGED"));

    app.execute(&format!(
        "UPDATE jobs SET run_after = now() WHERE id = '{from_nothing}'"
    ))
    .await;
    app.execute("NOTIFY texfleet_jobs").await;
    let cleared = app
        .wait_terminal(from_nothing, Duration::from_secs(60))
        .await;
    assert_eq!(cleared["status"], "Succeeded", "{cleared:#}");

    let again = app.compile(request).await;
    assert!(again["reused_from"].is_null(), "{again:#}");
    assert!(succeeded_text(&app, &again).await.contains("CLEAN"));
}

/// A document at `main` with a cross-reference, so that its state holds an `.aux`; `edit`
/// makes each submission new (else the result cache would answer it without a compile).
fn document_at(main: &str, edit: u32) -> Value {
    let content = format!(
        "\\documentclass{{article}}\\begin{{document}}\\section{{A}}\\label{{a}}Edit {edit}, see~\\ref{{a}}.\\end{{document}}"
    );
    json!({ "main": main, "files": [{ "path": main, "content": content }] })
}

async fn kept_documents(app: &TestApp) -> Vec<String> {
    let prefix = format!("projects/{}/documents/", app.project_id);
    let mut documents: Vec<String> = app
        .storage
        .list(&prefix)
        .await
        .unwrap()
        .iter()
        .filter_map(|key| Some(key.strip_prefix(&prefix)?.split_once('/')?.0.to_string()))
        .collect();
    documents.dedup();
    documents
}

/// Compiles one.tex, then two.tex, and returns the documents whose state the project keeps.
async fn kept_after_compiling_one_then_two(app: &TestApp) -> Vec<String> {
    for main in ["one.tex", "two.tex"] {
        let job = app.compile(document_at(main, 1)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
    kept_documents(app).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_keeps_the_state_of_its_documents_compiled_last_and_drops_the_oldest() {
    let app = TestApp::spawn_with(|config| config.kept_documents_per_project = 2).await;
    let first_two = kept_after_compiling_one_then_two(&app).await;
    assert_eq!(first_two.len(), 2, "{first_two:?}");

    // one.tex again: it becomes the document compiled last, and two.tex the oldest.
    let again = app.compile(document_at("one.tex", 2)).await;
    assert_eq!(again["incremental"], true, "{again:#}");
    let three = app.compile(document_at("three.tex", 1)).await;
    assert_eq!(three["status"], "Succeeded", "{three:#}");
    let kept = kept_documents(&app).await;
    assert_eq!(kept.len(), 2, "{kept:?}");

    let one = app.compile(document_at("one.tex", 3)).await;
    assert_eq!(one["incremental"], true, "{one:#}");
    let two = app.compile(document_at("two.tex", 2)).await;
    assert_eq!(two["status"], "Succeeded", "{two:#}");
    assert_eq!(two["incremental"], false, "two.tex kept its state: {two:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_past_its_bytes_keeps_the_state_of_the_document_compiled_last_only() {
    let app = TestApp::spawn_with(|config| config.kept_bytes_per_project = 1).await;
    let kept = kept_after_compiling_one_then_two(&app).await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    let two = app.compile(document_at("two.tex", 2)).await;
    assert_eq!(two["incremental"], true, "{two:#}");
    let one = app.compile(document_at("one.tex", 2)).await;
    assert_eq!(one["incremental"], false, "one.tex kept its state: {one:#}");
}
