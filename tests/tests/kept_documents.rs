//! The cap on the documents of one project whose compile state is kept: a project's first
//! compile of one document more drops the state of the document compiled longest ago.

use serde_json::{json, Value};
use texfleet_e2e::TestApp;

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

#[tokio::test(flavor = "multi_thread")]
async fn a_project_keeps_the_state_of_its_documents_compiled_last_and_drops_the_oldest() {
    let app = TestApp::spawn_with(|config| config.kept_documents_per_project = 2).await;
    for main in ["one.tex", "two.tex"] {
        let job = app.compile(document_at(main, 1)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
    let first_two = kept_documents(&app).await;
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
