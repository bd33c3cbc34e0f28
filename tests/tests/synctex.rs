//! SyncTeX: every engine writes it, a Succeeded job stores it beside the PDF and serves it, and
//! it maps a line of the document to the page it is on.

use flate2::read::GzDecoder;
use serde_json::{json, Value};
use std::io::Read;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{texfleet_command, TestApp};

/// A document whose fifth line holds a word that lands on page 1.
const DOCUMENT: &str = "\\documentclass{article}\n\\begin{document}\nFirst paragraph.\n\n\
                        Line five holds SYNCMARKER here.\n\\end{document}\n";

/// The pages on which the SyncTeX file places boxes of `line` of the main document.
fn pages_of_line(synctex: &str, line: u32) -> Vec<u32> {
    let tag = synctex
        .lines()
        .filter_map(|l| l.strip_prefix("Input:"))
        .find_map(|rest| {
            let (tag, path) = rest.split_once(':')?;
            path.ends_with("main.tex").then(|| tag.to_string())
        })
        .expect("the main document is an input");
    let record = format!("{tag},{line}:");
    let mut page = None;
    let mut pages = Vec::new();
    for entry in synctex.lines() {
        if let Some(number) = entry.strip_prefix('{') {
            page = number.parse().ok();
        } else if entry.starts_with('}') {
            page = None;
        } else if let Some(page) = page {
            let kind = entry.chars().next().unwrap_or(' ');
            if "[(hvxkg$".contains(kind)
                && entry[1..].starts_with(&record)
                && !pages.contains(&page)
            {
                pages.push(page);
            }
        }
    }
    pages
}

#[tokio::test(flavor = "multi_thread")]
async fn every_engine_s_synctex_maps_a_line_to_its_page_and_is_served() {
    let app = TestApp::spawn().await;
    for engine in ["pdflatex", "xelatex", "lualatex"] {
        let job = app
            .compile(json!({ "input_latex": DOCUMENT, "engine": engine }))
            .await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        let id = job.id();
        let short = id.split('-').next().unwrap();
        let key = format!("compiles/{short}/output.synctex.gz");
        assert_eq!(job["synctex_storage_key"], key.as_str());
        assert_eq!(job["links"]["synctex"], format!("/compile/{id}/synctex"));
        let response = app.get(&format!("/compile/{id}/synctex")).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/gzip");
        let etag = response.headers()["etag"].to_str().unwrap().to_string();
        let compressed = response.bytes().await.unwrap();
        assert_eq!(
            app.storage.get_bytes(&key).await.unwrap(),
            compressed.to_vec(),
            "what is served is what is stored"
        );
        let mut synctex = String::new();
        GzDecoder::new(&compressed[..])
            .read_to_string(&mut synctex)
            .unwrap();
        assert_eq!(pages_of_line(&synctex, 5), [1], "{engine}: {synctex}");
        let cached = app
            .get_if_none_match(&format!("/compile/{id}/synctex"), &etag)
            .await;
        assert_eq!(cached.status(), 304);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_without_synctex_answers_404_and_one_not_ended_409() {
    let app = TestApp::spawn().await;
    let failed = app
        .compile(json!({ "input_latex": "\\documentclass{article}\\begin{document}\\nosuchmacro\\end{document}",
                         "halt_on_error": true }))
        .await;
    assert_eq!(failed["status"], "Failed");
    assert_eq!(failed["synctex_storage_key"], Value::Null);
    assert_eq!(failed["links"]["synctex"], Value::Null);
    let id = failed.id();
    let response = app.get(&format!("/compile/{id}/synctex")).await;
    assert_eq!(response.status(), 404);

    let queued = TestApp::spawn_api_only(|_| {}).await;
    let job = queued.submit(json!({ "input_latex": DOCUMENT })).await;
    let response = queued.get(&format!("/compile/{}/synctex", job.id())).await;
    assert_eq!(response.status(), 409);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "not_ready");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_leads_to_its_box_and_the_box_back_to_the_line_in_every_engine() {
    let app = TestApp::spawn().await;
    let files = json!([{ "path": "ch/two.tex", "content": "\\newpage\nSecond file,\nSYNCTWO on page two.\n" }]);
    for engine in ["pdflatex", "xelatex", "lualatex"] {
        let document = DOCUMENT.replace("\\end{document}", "\\input{ch/two}\n\\end{document}");
        let job = app
            .compile(json!({ "input_latex": document, "files": files, "engine": engine }))
            .await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        let id = job.id();
        let forward = app
            .get_json(&format!("/compile/{id}/sync/code?file=main.tex&line=5"))
            .await;
        let found = &forward["pdf"][0];
        assert_eq!(found["page"], 1, "{engine}: {forward}");
        let (h, v) = (found["h"].as_f64().unwrap(), found["v"].as_f64().unwrap());
        let (width, height) = (
            found["width"].as_f64().unwrap(),
            found["height"].as_f64().unwrap(),
        );
        // Inside the text block of an A4 or letter page.
        assert!(
            h > 50.0 && v > 50.0 && width > 100.0 && height > 1.0,
            "{engine}: {forward}"
        );
        let inverse = app
            .get_json(&format!(
                "/compile/{id}/sync/pdf?page=1&h={}&v={}",
                h + width / 4.0,
                v + height / 2.0
            ))
            .await;
        assert_eq!(
            inverse["code"],
            json!([{ "file": "main.tex", "line": 5, "column": null }]),
            "{engine}"
        );
        let second = app
            .get_json(&format!("/compile/{id}/sync/code?file=ch/two.tex&line=3"))
            .await;
        assert_eq!(second["pdf"][0]["page"], 2, "{engine}: {second}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_queries_answer_only_for_the_project_and_refuse_what_is_not_a_place() {
    let app = TestApp::spawn().await;
    let job = app.compile(json!({ "input_latex": DOCUMENT })).await;
    let id = job.id();
    for query in [
        "sync/code?line=5",
        "sync/code?file=main.tex&line=0",
        "sync/pdf?page=1&h=nan&v=1",
        "sync/pdf?h=1&v=1",
    ] {
        let response = app.get(&format!("/compile/{id}/{query}")).await;
        assert_eq!(response.status(), 422, "{query}");
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["code"], "validation_failed", "{query}: {problem}");
    }
    let nothing = app
        .get_json(&format!(
            "/compile/{id}/sync/code?file=../etc/passwd&line=1"
        ))
        .await;
    assert_eq!(nothing["pdf"], json!([]));
    let (_, other) = app.other_project().await;
    let response = app
        .get_as(
            &other,
            &format!("/compile/{id}/sync/code?file=main.tex&line=5"),
        )
        .await;
    assert_eq!(response.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_asks_both_sync_questions() {
    let app = TestApp::spawn().await;
    let job = app.compile(json!({ "input_latex": DOCUMENT })).await;
    let id = job.id();
    let sync = |question: &[&str]| {
        let output = texfleet_command(&app)
            .args(["sync", id])
            .args(question)
            .output()
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (
            output.status.code(),
            text(&output.stdout),
            text(&output.stderr),
        )
    };
    let (code, boxes, stderr) = sync(&["--line", "main.tex:5"]);
    assert_eq!(code, Some(0), "{stderr}");
    let words: Vec<&str> = boxes.split_whitespace().collect();
    let [_, "1", "h", h, "v", v, "width", width, "height", height, ..] = words[..] else {
        panic!("{boxes}");
    };
    let number = |text: &str| text.parse::<f64>().unwrap();
    let at = format!(
        "1:{}:{}",
        number(h) + number(width) / 4.0,
        number(v) + number(height) / 2.0
    );
    assert_eq!(sync(&["--at", &at]).1, "main.tex:5\n");
    let (code, json, _) = sync(&["--at", &at, "--json"]);
    assert_eq!(code, Some(0));
    let answer: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(answer["code"][0]["line"], 5, "{answer}");
    let (code, _, stderr) = sync(&["--at", "1:2"]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("PAGE:H:V"), "{stderr}");
}
