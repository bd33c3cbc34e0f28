//! TeX's restricted shell escape without a shell: minted highlights code through latexminted
//! on every engine, its cache is handed on to the document's next compile so that an edit
//! highlights only what changed, and the image's `/bin/sh` runs nothing but a command of the
//! shell escape (the hostile suite tries what a document can send through it).

use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{container_of_running_job, exec_in, TestApp};

fn minted_document(snippets: &[&str]) -> Value {
    let body: String = snippets
        .iter()
        .map(|code| format!("\\begin{{minted}}{{python}}\n{code}\n\\end{{minted}}\n"))
        .collect();
    json!({ "input_latex": format!(
        "\\documentclass{{article}}\n\\usepackage{{minted}}\n\\begin{{document}}\n{body}\\end{{document}}\n") })
}

/// How many times the compile's passes ran latexminted for `subcommand`, by the restricted
/// shell's record (TeX's own log is the last pass's).
fn latexminted_runs(log: &str, subcommand: &str) -> usize {
    log.matches(&format!(
        "texfleet: texfleet-sh: ran \"latexminted '{subcommand}'"
    ))
    .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn minted_highlights_code_on_every_engine() {
    let app = TestApp::spawn().await;
    for engine in ["pdflatex", "xelatex", "lualatex"] {
        let mut request = minted_document(&["def greet(name):\n    return f'Hello {name}'"]);
        request["engine"] = json!(engine);
        request["timeout_seconds"] = json!(120);
        let job = app.compile(request).await;
        assert_eq!(job["status"], "Succeeded", "{engine}: {job:#}");
        let log = app.log(job.id()).await;
        assert!(latexminted_runs(&log, "config") > 0, "{engine}: {log}");
        assert!(log.contains(".highlight.minted"), "{engine}: {log}");
        for unwanted in [
            "texfleet-sh: refused",
            "executable is unavailable",
            "Package minted Error",
        ] {
            assert!(!log.contains(unwanted), "{engine}: {unwanted}: {log}");
        }
        let text = app.text_of(job.id()).await;
        assert!(text.contains("greet"), "{engine}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_highlights_only_the_code_that_changed() {
    let app = TestApp::spawn().await;
    let first = app
        .compile(minted_document(&["print('one')", "print('two')"]))
        .await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    let second = app
        .compile(minted_document(&["print('one')", "print('three')"]))
        .await;
    assert_eq!(second["status"], "Succeeded", "{second:#}");
    assert_eq!(second["incremental"], true, "{second:#}");
    let log = app.log(second.id()).await;
    assert_eq!(latexminted_runs(&log, "batch"), 0, "{log}");
    assert_eq!(latexminted_runs(&log, "highlight"), 1, "{log}");
    let text = app.text_of(second.id()).await;
    assert!(text.contains("one") && text.contains("three") && !text.contains("two"));
}

#[tokio::test(flavor = "multi_thread")]
async fn latex_asks_l3sys_query_for_its_folder_and_files() {
    let app = TestApp::spawn().await;
    let job = app
        .compile(json!({ "main": "main.tex", "files": [
            { "path": "main.tex", "content": "\\documentclass{article}\\begin{document}\n\
                [\\input|\"l3sys-query pwd\" ] [\\input|\"l3sys-query ls *.png\" ]\n\\end{document}\n" },
            { "path": "figure-one.png", "content": "not really" }] }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let text = app.text_of(job.id()).await;
    assert!(
        text.contains("/work") && text.contains("figure-one.png"),
        "{text}"
    );
}

/// A loop long enough to keep a job's container running while the test looks inside.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<40000000 \\repeat Done.\\end{document}";

#[tokio::test(flavor = "multi_thread")]
async fn the_images_sh_runs_only_commands_of_the_shell_escape() {
    let app = TestApp::spawn_with(|config| config.scheduler_slots = 1).await;
    let job = app.submit(json!({ "input_latex": SLOW })).await;
    let id = job.id().to_string();
    let container = container_of_running_job(&id).await;
    let as_compile = |command: &'static [&'static str]| {
        let container = container.clone();
        async move { exec_in(&container, "65101:65101", command).await }
    };
    // A command of the shell escape, as libc hands it over (`sh -c -- CMD`).
    let found = as_compile(&["/usr/bin/sh", "-c", "--", "kpsewhich 'article.cls'"]).await;
    assert!(found.contains("/article.cls"), "{found}");
    for command in [
        &["/usr/bin/sh", "-c", "exit 0"][..],
        &["/usr/bin/sh", "-c", "kpsewhich 'article.cls'; id"],
        &["/usr/bin/sh", "-c", "id"],
        &["/usr/bin/sh", "/etc/passwd"],
        &["/usr/bin/sh", "-c", "kpsewhich '-var-value=PATH'"],
        &["/usr/bin/sh", "-i"],
    ] {
        let printed = as_compile(command).await;
        assert!(
            printed.contains("texfleet-sh: refused"),
            "{command:?}: {printed}"
        );
        assert!(
            !printed.contains("uid=") && !printed.contains("/usr/bin"),
            "{printed}"
        );
    }
    app.wait_terminal(&id, std::time::Duration::from_secs(120))
        .await;
}
