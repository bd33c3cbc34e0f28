//! The compile pipeline end to end: HTTP in, a real sandbox container, the PDF in Garage.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{assert_container_removed, pdf_text, TestApp, HELLO};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A 1x1 PNG, to check that binary files reach the sandbox intact.
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

fn id_of(job: &Value) -> &str {
    job.id()
}

/// Checks a Succeeded job: its PDF is in the bucket at exactly compiles/<short id>/output.pdf,
/// the API serves the same bytes, the text has `words`, and its container is gone.
async fn assert_succeeded_with_text(app: &TestApp, job: &Value, words: &[&str]) {
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let id = id_of(job);
    let short = id.split('-').next().unwrap();
    let key = format!("compiles/{short}/output.pdf");
    assert_eq!(job["pdf_storage_key"], key);
    assert_eq!(
        job["log_storage_key"],
        format!("compiles/{short}/output.log")
    );
    assert!(job["duration_ms"].as_i64().unwrap() > 0);
    assert!(job["error"].is_null());
    assert_eq!(
        job["links"],
        json!({ "self": format!("/compile/{id}"), "pdf": format!("/compile/{id}/pdf"),
                "log": format!("/compile/{id}/log"), "synctex": format!("/compile/{id}/synctex"),
                "thumbnail": null })
    );

    let stored = app
        .storage
        .get_bytes(&key)
        .await
        .expect("the PDF is in the bucket");
    assert!(stored.starts_with(b"%PDF-"));
    let text = pdf_text(&stored);
    for word in words {
        assert!(text.contains(word), "{word:?} not in the PDF text {text:?}");
    }
    let served = app.get(&format!("/compile/{id}/pdf")).await;
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "application/pdf");
    assert_eq!(served.bytes().await.unwrap().as_ref(), stored.as_slice());
    assert_container_removed(id).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hello_world_through_input_latex_and_latex() {
    let app = TestApp::spawn().await;
    for field in ["input_latex", "latex"] {
        let submitted = app.submit(json!({ field: HELLO })).await;
        assert_eq!(submitted["status"], "Queued");
        assert!(submitted["pdf_storage_key"].is_null());
        let job = app
            .wait_terminal(id_of(&submitted), Duration::from_secs(120))
            .await;
        assert_succeeded_with_text(&app, &job, &["Hello from texfleet"]).await;

        let log = app.get(&format!("/compile/{}/log", id_of(&job))).await;
        assert_eq!(log.status(), 200);
        assert!(log.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"));
        assert!(log.text().await.unwrap().contains("This is pdfTeX"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_document_with_an_input_file_and_an_image() {
    let app = TestApp::spawn().await;
    let main = "\\documentclass{article}\\usepackage{graphicx}\\begin{document}\
                Main text. \\input{chapters/one}\\includegraphics[width=1cm]{img/dot.png}\\end{document}";
    let job = app
        .compile(json!({ "input_latex": main, "files": [
            { "path": "chapters/one.tex", "content": "Words from the chapter file." },
            { "path": "img/dot.png", "content_base64": PNG_BASE64 } ] }))
        .await;
    assert_succeeded_with_text(&app, &job, &["Main text.", "Words from the chapter file."]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_engine_compiles() {
    let app = TestApp::spawn().await;
    for engine in ["pdflatex", "xelatex", "lualatex"] {
        let document = format!(
            "\\documentclass{{article}}\\begin{{document}}Typeset by {engine}\\end{{document}}"
        );
        let job = app
            .compile(json!({ "input_latex": document, "engine": engine }))
            .await;
        assert_eq!(job["engine"], engine);
        assert_succeeded_with_text(&app, &job, &[&format!("Typeset by {engine}")]).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postscript_figure_compiles_under_pdflatex_and_xelatex_with_a_short_timeout() {
    let app = TestApp::spawn().await;
    let figure = "%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 300 50\n\
                  /Helvetica findfont 10 scalefont setfont 5 20 moveto (Drawn by Ghostscript) show\n\
                  showpage\n";
    for engine in ["pdflatex", "xelatex"] {
        // Shorter than the CPU seconds a figure's conversion is given.
        let job = app
            .compile(
                json!({ "engine": engine, "timeout_seconds": 20, "input_latex":
                "\\documentclass{article}\\usepackage{graphicx}\\begin{document}\
                 Figure: \\includegraphics{fig}\\end{document}",
                "files": [{ "path": "fig.eps", "content": figure }] }),
            )
            .await;
        assert_succeeded_with_text(&app, &job, &["Figure:", "Drawn by Ghostscript"]).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_undefined_control_sequence_fails_with_a_diagnostic_naming_its_line() {
    let app = TestApp::spawn().await;
    let document =
        "\\documentclass{article}\n\\begin{document}\n\n\\undefinedmacro\n\\end{document}\n";
    let job = app.compile(json!({ "input_latex": document })).await;
    assert_eq!(job["status"], "Failed", "{job:#}");
    assert_eq!(job["error"]["code"], "compile_error");
    assert!(job["pdf_storage_key"].is_null());
    let diagnostics = job["diagnostics"].as_array().unwrap();
    assert!(
        diagnostics.iter().any(|d| d["severity"] == "error"
            && d["file"] == "main.tex"
            && d["line"] == 4
            && d["message"]
                .as_str()
                .unwrap()
                .contains("Undefined control sequence")),
        "{diagnostics:#?}"
    );
    let pdf = app.get(&format!("/compile/{}/pdf", id_of(&job))).await;
    assert_eq!(pdf.status(), 409);
    assert_container_removed(id_of(&job)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_times_out_within_the_limit_and_keeps_its_log() {
    let app = TestApp::spawn().await;
    let timeout = 3;
    let job = app
        .compile(json!({
            "input_latex": "\\message{BEFORE-THE-LOOP}\\loop\\iftrue\\repeat",
            "timeout_seconds": timeout
        }))
        .await;
    assert_eq!(job["status"], "TimedOut", "{job:#}");
    assert_eq!(job["error"]["code"], "timeout");
    let started = OffsetDateTime::parse(job["started_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let finished = OffsetDateTime::parse(job["finished_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let took = (finished - started).as_seconds_f64();
    let limit = (timeout + app.config.kill_grace_seconds) as f64 + 2.0;
    assert!(took < limit, "took {took}s, more than {limit}s");
    // The log written up to the deadline is kept and served.
    assert_eq!(job["links"]["log"], format!("/compile/{}/log", id_of(&job)));
    let log = app.get(&format!("/compile/{}/log", id_of(&job))).await;
    assert_eq!(log.status(), 200);
    let log = log.text().await.unwrap();
    assert!(log.contains("BEFORE-THE-LOOP"), "{log}");
    assert_container_removed(id_of(&job)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_with_a_pdf_succeeds_unless_halt_on_error_is_set() {
    let app = TestApp::spawn().await;
    let document =
        "\\documentclass{article}\n\\begin{document}\nStill typeset\n\\undefinedmacro\n\\end{document}\n";
    let undefined_on_line_4 = |job: &Value| {
        job["diagnostics"].as_array().unwrap().iter().any(|d| {
            d["severity"] == "error"
                && d["line"] == 4
                && d["message"]
                    .as_str()
                    .unwrap()
                    .contains("Undefined control sequence")
        })
    };
    let tolerated = app.compile(json!({ "input_latex": document })).await;
    assert!(undefined_on_line_4(&tolerated), "{tolerated:#}");
    assert_succeeded_with_text(&app, &tolerated, &["Still typeset"]).await;

    let halted = app
        .compile(json!({ "input_latex": document, "halt_on_error": true }))
        .await;
    assert_eq!(halted["status"], "Failed", "{halted:#}");
    assert_eq!(halted["error"]["code"], "compile_error");
    assert!(undefined_on_line_4(&halted), "{halted:#}");
    assert!(halted["pdf_storage_key"].is_null());
    let halted_id = id_of(&halted);
    assert_eq!(halted["links"]["pdf"], Value::Null);
    assert_eq!(halted["links"]["log"], format!("/compile/{halted_id}/log"));
    let pdf = app.get(&format!("/compile/{}/pdf", id_of(&halted))).await;
    assert_eq!(pdf.status(), 409);
    let short_id = id_of(&halted).split('-').next().unwrap();
    assert_eq!(
        app.storage
            .list(&format!("compiles/{short_id}/"))
            .await
            .unwrap(),
        [format!("compiles/{short_id}/output.log")],
        "a halted job stores its log and no PDF"
    );
}
