//! The hostile-input suite: documents that try to run a command, read, leak, write, exhaust or
//! flood, compiled on the real stack beside a normal document. Canaries are planted by
//! `./dev/test`: a secret (hex) in this process's environment, which the in-process scheduler
//! shares, and a file on the host holding it. No canary, no line of the image's /etc/passwd and
//! no trace of the host's mount table may reach any PDF (text with whitespace removed, streams
//! inflated), log or API response; each job must end as expected within its limit, and each
//! must have a log; the normal job must succeed; no container may remain.
//!
//! Every case names the layer it attacks, and is written so that it fails if that layer goes:
//! a read that succeeded would put what it read into the PDF text.

mod cases;

use cases::{Case, COMMAND_MARKER, MOUNTINFO_MARKERS, PASSWD_MARKERS, XAMPL_MARKER};
use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{assert_container_removed, canary, pdf_bytes_inflated, pdf_text, TestApp};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

#[tokio::test(flavor = "multi_thread")]
async fn hostile_documents_leak_nothing_run_nothing_and_end_as_expected() {
    let (secret, host_file) = canary();
    let app = TestApp::spawn_with(|config| {
        config.sandbox_memory_mb = 256;
        config.max_log_bytes = 1024 * 1024;
        config.max_pdf_bytes = 2 * 1024 * 1024;
        config.max_synctex_bytes = 1024 * 1024;
        config.kill_grace_seconds = 5;
        // One project submits every case; this suite is not about sharing slots.
        config.idle_project_slots = 0;
    })
    .await;
    let cases = cases::cases(&host_file);
    assert!(
        cases.len() >= 50,
        "the suite must hold at least 50 hostile documents"
    );

    // The default year first, where each case must also end as expected; then every other
    // year's image, built by the same script with the same hardening, where a case may end
    // otherwise (a package the image lacks) but must leak nothing, run nothing and end in time.
    let default = app.config.default_texlive.clone();
    let others = app
        .config
        .sandbox_images
        .keys()
        .filter(|year| **year != default);
    let info = app.get_json("/info").await;
    for year in std::iter::once(&default).chain(others) {
        // An engine a year withholds is refused before anything runs (the API's own tests).
        let offered = info["texlive_years"]
            .as_array()
            .unwrap()
            .iter()
            .find(|listed| listed["year"] == year.as_str())
            .map(|listed| listed["engines"].clone())
            .unwrap();
        let cases: Vec<&Case> = cases
            .iter()
            .filter(|case| offered.as_array().unwrap().iter().any(|e| e == case.engine))
            .collect();
        let mut submitted = Vec::new();
        for case in &cases {
            let job = app
                .submit(json!({ "input_latex": case.document, "engine": case.engine,
                                "timeout_seconds": case.timeout, "files": case.files,
                                "halt_on_error": case.halt_on_error, "texlive": year }))
                .await;
            submitted.push(job.id().to_string());
        }
        let mut failures = Vec::new();
        for (case, id) in cases.iter().zip(&submitted) {
            let job = app.wait_terminal(id, Duration::from_secs(600)).await;
            let strict = *year == default;
            if let Err(problem) = check_case(&app, case, strict, &job, &secret).await {
                failures.push(format!(
                    "{} (TeX Live {year}): {problem}\n{job:#}",
                    case.name
                ));
            }
            assert_container_removed(id).await;
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }
    let normal = app
        .submit(json!({ "input_latex": texfleet_e2e::HELLO }))
        .await;

    let normal = app
        .wait_terminal(normal.id(), Duration::from_secs(300))
        .await;
    assert_eq!(normal["status"], "Succeeded", "{normal:#}");
    assert_container_removed(normal.id()).await;
}

/// Checks that nothing of the host, the image or a command leaked into what the job shows,
/// and that it ended in time; `strict`, also that it ended as the case expects and showed what
/// the case says it shows.
async fn check_case(
    app: &TestApp,
    case: &Case,
    strict: bool,
    job: &Value,
    secret: &str,
) -> Result<(), String> {
    let status = job["status"].as_str().unwrap();
    let code = job["error"]["code"].as_str();
    if strict && !case.expect.iter().any(|(s, c)| *s == status && *c == code) {
        return Err(format!(
            "ended {status} {code:?}, expected one of {:?}",
            case.expect
        ));
    }
    let started = OffsetDateTime::parse(job["started_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let finished = OffsetDateTime::parse(job["finished_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let limit = f64::from(case.timeout + app.config.kill_grace_seconds) + 5.0;
    let took = (finished - started).as_seconds_f64();
    if took > limit {
        return Err(format!("took {took} s, more than {limit} s"));
    }

    let id = job.id();
    let log = app.get(&format!("/compile/{id}/log")).await;
    if log.status() != 200 {
        return Err(format!("no log: {}", log.status()));
    }
    let log_text = log.text().await.unwrap();
    if let Some(expected) = case.log_contains.filter(|_| strict) {
        if !log_text.contains(expected) {
            return Err(format!("log lacks {expected:?}"));
        }
    }
    if let Some(forbidden) = case.log_lacks.filter(|f| log_text.contains(f)) {
        return Err(format!("log holds {forbidden:?}"));
    }
    let mut exposed: Vec<(&str, String)> = vec![("job JSON", job.to_string()), ("log", log_text)];
    if status == "Succeeded" {
        let pdf = app.pdf_of(id).await;
        let text: String = pdf_text(&pdf).split_whitespace().collect();
        if let Some(expected) = case.text_contains.filter(|_| strict) {
            if !text.contains(expected) {
                return Err(format!("PDF text lacks {expected:?}: {text:?}"));
            }
        }
        if let Some(forbidden) = case.text_lacks.filter(|f| text.contains(f)) {
            return Err(format!("PDF text holds {forbidden:?}: {text:?}"));
        }
        exposed.push(("PDF text", text));
        let streams = String::from_utf8_lossy(&pdf_bytes_inflated(&pdf)).into_owned();
        if let Some(forbidden) = case.streams_lack.filter(|f| streams.contains(f)) {
            return Err(format!("PDF streams hold {forbidden:?}"));
        }
        exposed.push(("PDF streams", streams));
    }
    let forbidden = [secret]
        .into_iter()
        .chain(PASSWD_MARKERS.iter().copied())
        .chain(MOUNTINFO_MARKERS.iter().copied())
        .chain([COMMAND_MARKER, XAMPL_MARKER]);
    for (place, haystack) in &exposed {
        for marker in forbidden.clone() {
            // The log echoes what the document asked for; only what came back counts there.
            let echoed = *place == "log" && case.document.contains(marker);
            if !echoed && haystack.contains(marker) {
                return Err(format!("{marker:?} leaked into the {place}"));
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_file_paths_are_refused_before_anything_is_queued() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let paths = [
        "../escape.tex",
        "/etc/passwd",
        "a/../../b.tex",
        "a/./b.tex",
        "nul\u{0}byte.tex",
        "new\nline.tex",
        "tab\there.tex",
        "$(id).tex",
        "`id`.tex",
        "a;b.tex",
        "-shell-escape.tex",
        ".latexmkrc",
        "dir/.hidden",
        " leading-space.tex",
        "trailing-space /x.tex",
        "two  spaces.tex",
        "non\u{a0}breaking.tex",
        "back\\slash.tex",
        "main.tex",
        "output.pdf",
        "output.pdf/x.tex",
        "trailing/",
        "",
    ];
    for path in paths {
        let response = app
            .post_compile(&json!({ "project_id": app.project_id, "input_latex": "x",
                                   "files": [{ "path": path, "content": "x" }] }))
            .await;
        assert_eq!(response.status(), 422, "{path:?} was accepted");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body["errors"][0]["field"], "files[0].path",
            "{path:?}: {body:#}"
        );
    }
    for (files, field) in [
        (
            json!([{ "path": "a", "content": "x" }, { "path": "a/b.tex", "content": "x" }]),
            "files[1].path",
        ),
        (
            json!([{ "path": "main.tex/x.tex", "content": "x" }]),
            "files[0].path",
        ),
    ] {
        let response = app
            .post_compile(
                &json!({ "project_id": app.project_id, "input_latex": "x", "files": files }),
            )
            .await;
        assert_eq!(response.status(), 422);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["errors"][0]["field"], field, "{body:#}");
    }
    let many: Vec<Value> = (0..=texfleet_core::validate::MAX_FILES)
        .map(|i| json!({ "path": format!("f{i}.tex"), "content": "x" }))
        .collect();
    let response = app
        .post_compile(&json!({ "project_id": app.project_id, "input_latex": "x", "files": many }))
        .await;
    assert_eq!(response.status(), 422);
    assert_eq!(
        app.count_jobs("true").await,
        0,
        "a refused request queued a job"
    );
}
