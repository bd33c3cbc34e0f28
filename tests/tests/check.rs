//! Checks (`"check": "warn" | "error"`): chktex on the main document and what it `\input`s,
//! in the job's sandbox before the compile; its findings among the job's diagnostics, and with
//! `"error"` a failed job that was not compiled.

use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{texfleet_in, TestApp};

/// chktex finds a space before a comma on line 3 (column 6), and another in the part.
const MAIN: &str = "\\documentclass{article}\n\\begin{document}\nHello ,world.\n\
    \\input{part}\n\\end{document}\n";
const PART: &str = "Included ,text.\n";
const CLEAN: &str = "\\documentclass{article}\n\\begin{document}\nHello world.\n\\end{document}\n";

fn checked(latex: &str, check: Option<&str>) -> Value {
    json!({
        "input_latex": latex,
        "files": [{ "path": "part.tex", "content": PART }],
        "check": check,
    })
}

fn chktex_findings(job: &Value) -> Vec<Value> {
    job["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["source"] == "chktex")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warn_check_reports_chktex_s_findings_beside_a_compiled_pdf() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let plain = app.compile(checked(MAIN, None)).await;
    assert_eq!(plain["status"], "Succeeded", "{plain:#}");
    assert!(chktex_findings(&plain).is_empty(), "{plain:#}");

    let job = app.compile(checked(MAIN, Some("warn"))).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(
        job["reused_from"],
        Value::Null,
        "a check is a result of its own"
    );
    let findings = chktex_findings(&job);
    let spaced = |file: &str| {
        findings
            .iter()
            .find(|d| d["file"] == file && d["message"].as_str().unwrap().contains("punctuation"))
    };
    let main = spaced("main.tex").unwrap_or_else(|| panic!("{job:#}"));
    assert_eq!((&main["line"], &main["column"]), (&json!(3), &json!(6)));
    assert_eq!(main["severity"], "warning");
    assert!(spaced("part.tex").is_some(), "{job:#}");
    assert!(app.text_of(job.id()).await.contains("Hello"));
    let again = app.compile(checked(MAIN, Some("warn"))).await;
    assert_eq!(again["reused_from"], job["id"], "{again:#}");
    assert_eq!(chktex_findings(&again), findings);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_check_fails_a_document_with_findings_without_compiling_it() {
    let app = TestApp::spawn().await;
    let job = app.compile(checked(MAIN, Some("error"))).await;
    assert_eq!(job["status"], "Failed", "{job:#}");
    assert_eq!(job["error"]["code"], "compile_error", "{job:#}");
    assert!(
        job["error"]["message"].as_str().unwrap().contains("chktex"),
        "{job:#}"
    );
    assert_eq!(job["links"]["pdf"], Value::Null, "{job:#}");
    assert!(!chktex_findings(&job).is_empty(), "{job:#}");
    let log = app.log(job.id()).await;
    assert!(log.contains("the document was not compiled"), "{log}");
    assert!(!log.contains("pdflatex pass"), "{log}");

    let clean = app.compile(checked(CLEAN, Some("error"))).await;
    assert_eq!(clean["status"], "Succeeded", "{clean:#}");
    assert!(chktex_findings(&clean).is_empty(), "{clean:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_of_a_megabyte_gets_a_bounded_check_and_tex_s_own_verdict() {
    let app = TestApp::spawn().await;
    let line = "a ,b ".repeat(200_000);
    let latex =
        format!("\\documentclass{{article}}\n\\begin{{document}}\n{line}\n\\end{{document}}\n");
    let job = app.compile(checked(&latex, Some("warn"))).await;
    let findings = chktex_findings(&job);
    assert!(
        !findings.is_empty() && findings.len() <= 100,
        "{}",
        findings.len()
    );
    // TeX reads at most 200,000 characters of a line: the compile is TeX's to fail, the
    // check's findings stand beside its error.
    assert_eq!(job["status"], "Failed", "{job:#}");
    let log = app.log(job.id()).await;
    assert!(
        log.contains("pdflatex pass 1"),
        "the compile ran after the check: {log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_checks_and_prints_findings_with_their_column() {
    let app = TestApp::spawn().await;
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("main.tex"), MAIN).unwrap();
    std::fs::write(folder.path().join("part.tex"), PART).unwrap();
    let output = texfleet_in(
        &app,
        folder.path(),
        &["compile", "main.tex", "--files", ".", "--check", "warn"],
    );
    let printed = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{printed}");
    assert!(printed.contains("main.tex:3:6: warning: "), "{printed}");
    assert!(printed.contains("(chktex)"), "{printed}");
}
