//! What a document's compile hands on to its next compile in the same project: the preamble
//! as a format (loaded while the preamble and every file it read are unchanged, never stale,
//! never across projects) and the auxiliary files (an edit then needs one pass).

use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{pdf_pages_rendered, TestApp};

/// A preamble that reads a file of the project, and a body with a table of contents and a
/// forward reference, which cold take two passes.
fn document(preamble_extra: &str, body: &str, style: &str) -> Value {
    let main = format!(
        "\\documentclass{{article}}\\usepackage{{amsmath}}\\usepackage{{macros}}{preamble_extra}\n\
         \\begin{{document}}\\tableofcontents\n\
         \\section{{First}}\\label{{first}}\\Greeting{{}} {body} See section~\\ref{{second}}.\n\
         \\section{{Second}}\\label{{second}}Text.\\end{{document}}\n"
    );
    json!({
        "input_latex": main,
        "files": [{ "path": "macros.sty", "content": format!("\\newcommand{{\\Greeting}}{{{style}}}\n") }],
    })
}

fn folded(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn text_of(app: &TestApp, job: &Value) -> String {
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    folded(&app.text_of(job.id()).await)
}

async fn log_of(app: &TestApp, job: &Value) -> String {
    app.log(job.id()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preamble_format_is_loaded_while_its_inputs_are_unchanged_and_never_stale() {
    let app = TestApp::spawn().await;
    let first = app
        .compile(document("", "Body one.", "Hello from style one"))
        .await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    assert_eq!(first["incremental"], false);
    let text = text_of(&app, &first).await;
    assert!(
        text.contains("Hello from style one Body one. See section 2."),
        "{text}"
    );

    // An edit of the body: the format is loaded, and the auxiliary files make one pass enough.
    let edited = document("", "Body two.", "Hello from style one");
    let second = app.compile(edited.clone()).await;
    assert_eq!(second["preamble_cache"], "hit", "{second:#}");
    assert_eq!(second["incremental"], true, "{second:#}");
    let text = text_of(&app, &second).await;
    assert!(
        text.contains("Hello from style one Body two. See section 2."),
        "{text}"
    );
    assert!(text.contains("1 First 1 2 Second"), "the contents: {text}");
    let log = log_of(&app, &second).await;
    assert!(log.contains("texfleet: restored"), "{log}");
    assert!(
        log.contains("pdflatex pass 1") && !log.contains("pdflatex pass 2"),
        "{log}"
    );

    // The same request compiled from nothing renders the same pages.
    let mut cold = edited.clone();
    cold["cache"] = json!(false);
    let cold = app.compile(cold).await;
    assert!(cold["preamble_cache"].is_null(), "{cold:#}");
    assert_eq!(cold["incremental"], false);
    assert_eq!(text_of(&app, &cold).await, text);
    let rendered = |job: &Value| {
        let id = job.id().to_string();
        let app = &app;
        async move { pdf_pages_rendered(&app.pdf_of(&id).await) }
    };
    assert!(
        rendered(&cold).await == rendered(&second).await,
        "the cached compile renders differently"
    );

    // An edit that moves labels: the restored files are stale, and a second pass follows.
    let moved = app
        .compile(document(
            "",
            "\\section{Inserted}Body two.",
            "Hello from style one",
        ))
        .await;
    let text = text_of(&app, &moved).await;
    assert!(
        text.contains("1 First 1 2 Inserted 1 3 Second"),
        "the contents: {text}"
    );
    assert!(text.contains("See section 3."), "{text}");

    // A file the preamble read changed: a miss, and the new definition shows.
    let style_changed = app
        .compile(document("", "Body two.", "Hello from style two"))
        .await;
    assert_eq!(style_changed["preamble_cache"], "miss", "{style_changed:#}");
    assert!(text_of(&app, &style_changed)
        .await
        .contains("Hello from style two Body two."));

    // The main file's preamble changed: a miss, then a hit again.
    let extra = "\\newcommand{\\Extra}{Preamble three}";
    let preamble_changed = app
        .compile(document(extra, "\\Extra.", "Hello from style two"))
        .await;
    assert_eq!(
        preamble_changed["preamble_cache"], "miss",
        "{preamble_changed:#}"
    );
    assert!(text_of(&app, &preamble_changed)
        .await
        .contains("Hello from style two Preamble three."));
    let again = app
        .compile(document(extra, "\\Extra, again.", "Hello from style two"))
        .await;
    assert_eq!(again["preamble_cache"], "hit", "{again:#}");
    assert!(text_of(&app, &again)
        .await
        .contains("Preamble three, again."));
}

#[tokio::test(flavor = "multi_thread")]
async fn another_project_never_receives_a_projects_format_or_auxiliary_files() {
    let app = TestApp::spawn().await;
    for body in ["Body one.", "Body two."] {
        app.compile(document("", body, "Shared style")).await;
    }
    let (project, token) = app.other_project().await;
    let mut request = document("", "Body three.", "Shared style");
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
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
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
async fn a_preamble_that_cannot_be_a_format_is_tried_once_and_compiles_as_usual() {
    let app = TestApp::spawn().await;
    // XeTeX cannot dump a format that holds OpenType fonts.
    let request = |body: &str| {
        json!({ "engine": "xelatex", "input_latex": format!(
            "\\documentclass{{article}}\\usepackage{{fontspec}}\n\
             \\begin{{document}}{body}\\end{{document}}") })
    };
    let first = app.compile(request("Fontspec one.")).await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    assert!(log_of(&app, &first)
        .await
        .contains("keeping the preamble as a format"));
    let second = app.compile(request("Fontspec two.")).await;
    assert_eq!(second["preamble_cache"], "unavailable", "{second:#}");
    assert!(text_of(&app, &second).await.contains("Fontspec two."));
    let lua = app
        .compile(json!({ "engine": "lualatex", "input_latex": "\\documentclass{article}\\begin{document}Lua.\\end{document}" }))
        .await;
    assert_eq!(lua["preamble_cache"], "unavailable", "{lua:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pass_that_fails_with_the_format_runs_again_without_it() {
    let app = TestApp::spawn().await;
    let main =
        "\\documentclass{article}\\usepackage{amsmath}\n\\begin{document}Fine.\\end{document}";
    let first = app.compile(json!({ "input_latex": main })).await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    // A last line ending in a comment, with no newline after it: mylatexformat's scan of
    // the preamble runs past the end of the file, and the pass with the format fails.
    let edited = app
        .compile(json!({ "input_latex": format!("{main} %") }))
        .await;
    assert_eq!(edited["status"], "Succeeded", "{edited:#}");
    assert_eq!(edited["preamble_cache"], "miss", "{edited:#}");
    assert!(text_of(&app, &edited).await.contains("Fine."));
    let log = log_of(&app, &edited).await;
    assert!(
        log.contains("failed with the project's preamble format; again without it"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restored_file_that_a_pass_rewrites_calls_for_another_pass() {
    let app = TestApp::spawn().await;
    let main = |sections: &str| {
        json!({ "input_latex": format!(
            "\\documentclass{{article}}\\begin{{document}}\\tableofcontents{sections}\\end{{document}}") })
    };
    app.compile(main("\\section{One}x")).await;
    // A section added at the end: no label moves, so LaTeX asks for no rerun; only the
    // restored table of contents, rewritten by the pass, tells that another is needed.
    let edited = app.compile(main("\\section{One}x\\section{Two}y")).await;
    assert_eq!(edited["incremental"], true, "{edited:#}");
    let text = text_of(&app, &edited).await;
    assert!(text.contains("Contents 1 One 1 2 Two 1"), "{text}");
}

const REFERENCES: &str = "@book{knuth84, author = {Donald E. Knuth}, title = {The TeXbook}, \
                          publisher = {Addison-Wesley}, year = {1984}}\n";

/// A document citing the book, its bibliography built by bibtex (natbib) or by biber
/// (biblatex): both tools write the same `.bbl`, in forms the other package cannot read.
fn citing(biblatex: bool, body: &str) -> Value {
    let main = match biblatex {
        true => format!(
            "\\documentclass{{article}}\\usepackage{{biblatex}}\\addbibresource{{refs.bib}}\n\
             \\begin{{document}}{body} \\cite{{knuth84}}.\\printbibliography\\end{{document}}\n"
        ),
        false => format!(
            "\\documentclass{{article}}\\usepackage[numbers]{{natbib}}\n\
             \\begin{{document}}{body} \\cite{{knuth84}}.\
             \\bibliographystyle{{plainnat}}\\bibliography{{refs}}\\end{{document}}\n"
        ),
    };
    json!({ "input_latex": main, "files": [{ "path": "refs.bib", "content": REFERENCES }] })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bibliography_another_tool_wrote_since_is_built_again() {
    let app = TestApp::spawn().await;
    app.compile(citing(false, "First.")).await;
    // The same document switched to biblatex, and back: bibtex's input is as it was, but the
    // .bbl handed on is biber's.
    let switched = app.compile(citing(true, "Second.")).await;
    assert!(text_of(&app, &switched).await.contains("Second. [1]."));
    let back = app.compile(citing(false, "Third.")).await;
    assert_eq!(back["incremental"], true, "{back:#}");
    let log = log_of(&app, &back).await;
    assert!(log.contains("ran bibtex output"), "{log}");
    let mut from_nothing = citing(false, "Third.");
    from_nothing["cache"] = json!(false);
    let expected = text_of(&app, &app.compile(from_nothing).await).await;
    assert!(
        expected.contains("Third. [1]. References [1] Donald E. Knuth."),
        "{expected}"
    );
    assert_eq!(text_of(&app, &back).await, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_that_fails_from_the_last_files_runs_from_nothing_and_hands_nothing_on() {
    let app = TestApp::spawn().await;
    let main = |body: &str| {
        json!({ "input_latex": format!(
            "\\documentclass{{article}}\\begin{{document}}\\tableofcontents\\section{{One}}{body}\\end{{document}}") })
    };
    app.compile(main("Fine.")).await;
    let failing = app.compile(main("\\UndefinedMacro")).await;
    assert_eq!(failing["incremental"], false, "{failing:#}");
    let log = log_of(&app, &failing).await;
    assert!(log.contains("restored"), "{log}");
    assert!(
        log.contains("did not end well; again from nothing"),
        "{log}"
    );
    // Its files are not handed on: the next compile starts from nothing.
    let next = app.compile(main("Fine again.")).await;
    assert_eq!(next["incremental"], false, "{next:#}");
    assert!(!log_of(&app, &next).await.contains("restored"));
    assert!(text_of(&app, &next).await.contains("1 One Fine again."));
}

/// Every pass of the body writes text of its own over the preamble format's file.
const FORGE_FORMAT: &str =
    "\\immediate\\openout15=output.fmt \\immediate\\write15{FORGED}\\immediate\\closeout15";

#[tokio::test(flavor = "multi_thread")]
async fn a_format_the_document_rewrites_is_neither_kept_nor_loaded() {
    let app = TestApp::spawn().await;
    let first = app.compile(document("", FORGE_FORMAT, "Style")).await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    assert!(text_of(&app, &first).await.contains("See section 2."));
    // The check pass after the dump ran the body too: what is kept is the dump's format.
    let prefix = format!("projects/{}/", app.project_id);
    let kept = app.storage.list(&prefix).await.unwrap();
    let key = kept.iter().find(|key| key.ends_with("/preamble.fmt"));
    let format = app
        .storage
        .get_bytes(key.expect("a kept format"))
        .await
        .unwrap();
    assert!(
        !format.windows(6).any(|w| w == b"FORGED"),
        "the document's text was kept"
    );

    // A new section moves the one referred to: a second pass runs after the first rewrote
    // the format, and loads none.
    let body = format!("{FORGE_FORMAT}\\section{{Inserted}}");
    let second = app.compile(document("", &body, "Style")).await;
    assert_eq!(second["preamble_cache"], "hit", "{second:#}");
    assert!(text_of(&app, &second).await.contains("See section 3."));
    let log = log_of(&app, &second).await;
    assert!(
        log.contains("the compile rewrote the project's preamble format"),
        "{log}"
    );
    assert!(
        !log.contains("failed with the project's preamble format"),
        "{log}"
    );
}

/// Compiles twice a document in a folder that inputs part.tex. The first compile leaves
/// flag.aux among its files; from them, the second runs `sabotage` and fails, and runs again
/// from nothing, where there is no flag. Returns the second job and its log.
async fn compiled_again_from_nothing_after(
    app: &TestApp,
    engine: &str,
    sabotage: &str,
) -> (Value, String) {
    let request = |body: &str| {
        let main = format!(
            "\\documentclass{{article}}\\begin{{document}}\\input{{part}} {body}\\end{{document}}"
        );
        json!({
            "engine": engine,
            "main": "paper/main.tex",
            "files": [
                { "path": "paper/main.tex", "content": main },
                { "path": "paper/part.tex", "content": "Original part." },
            ],
        })
    };
    app.compile(request(&write_file("flag.aux", "x"))).await;
    let failing = format!("\\IfFileExists{{flag.aux}}{{{sabotage}\\UndefinedMacro}}{{}}");
    let second = app.compile(request(&failing)).await;
    let log = log_of(app, &second).await;
    assert!(log.contains("again from nothing"), "{log}");
    (second, log)
}

fn write_file(name: &str, text: &str) -> String {
    format!("\\immediate\\openout15={name} \\immediate\\write15{{{text}}}\\immediate\\closeout15 ")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_again_from_nothing_reads_the_sources_as_they_were_sent() {
    let app = TestApp::spawn().await;
    let rewrite = write_file("part.tex", "Rewritten part.");
    let (second, _) = compiled_again_from_nothing_after(&app, "pdflatex", &rewrite).await;
    let text = text_of(&app, &second).await;
    assert!(text.contains("Original part."), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_again_from_nothing_clears_a_folder_made_in_a_sources_place() {
    let app = TestApp::spawn().await;
    // LuaTeX's Lua may remove a file and make a folder of its name, which removing files
    // leaves: the source could not be written again.
    let folder = "\\directlua{os.remove('part.tex') lfs.mkdir('part.tex')}";
    let (second, _) = compiled_again_from_nothing_after(&app, "lualatex", folder).await;
    let text = text_of(&app, &second).await;
    assert!(text.contains("Original part."), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_class_a_compile_writes_is_not_handed_on_to_the_next() {
    let app = TestApp::spawn().await;
    let planted = write_file(
        "article.cls",
        "\\string\\ProvidesClass{article}\\string\\LoadClass{report}\\string\\AtEndDocument{PLANTED}",
    );
    let planting = app
        .compile(json!({ "input_latex": format!(
            "\\documentclass{{article}}\\begin{{document}}\\tableofcontents {planted}First.\\end{{document}}") }))
        .await;
    assert_eq!(planting["status"], "Succeeded", "{planting:#}");
    let next = app
        .compile(json!({ "input_latex":
            "\\documentclass{article}\\begin{document}\\tableofcontents\\section{A}Second.\\end{document}" }))
        .await;
    assert!(log_of(&app, &next).await.contains("restored"));
    let text = text_of(&app, &next).await;
    assert!(
        text.contains("Second.") && !text.contains("PLANTED"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_that_cannot_be_cleared_ends_with_the_reason_in_its_log() {
    let app = TestApp::spawn().await;
    // Deeper than the driver may hold folders open at once (256 files).
    let deep = "\\directlua{for i = 1, 300 do lfs.mkdir('d') lfs.chdir('d') end}";
    let (second, log) = compiled_again_from_nothing_after(&app, "lualatex", deep).await;
    assert_eq!(second["status"], "Failed", "{second:#}");
    assert!(
        log.contains("the compile left what cannot be cleared (Too many open files"),
        "{log}"
    );
    let id = second.id();
    assert_eq!(app.get(&format!("/compile/{id}/pdf")).await.status(), 409);
}
