//! What a project keeps of its documents' compiles for their next compiles: only what its
//! sources say (never what a compile wrote over them), for a bounded number of documents,
//! and nothing once a compile from nothing (`"cache": false`) has asked for it to go.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::TestApp;

async fn text_of(app: &TestApp, job: &Value) -> String {
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    app.text_of(job.id()).await
}

/// A pasted document with `body`, whose preamble is the line `\documentclass{article}`.
fn pasted(body: &str) -> Value {
    json!({ "input_latex": format!("\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n") })
}

/// Tells whether `flag.aux` was there when the compile began (as a restored file).
const FLAG_CHECK: &str = "\\IfFileExists{flag.aux}{FLAGGED}{CLEAN}";
const WRITE_FLAG: &str =
    "\\immediate\\openout15=flag.aux \\immediate\\write15{\\relax}\\immediate\\closeout15 Flag.";

#[tokio::test(flavor = "multi_thread")]
async fn a_format_is_not_dumped_from_sources_the_compile_rewrote() {
    let app = TestApp::spawn().await;
    // The body rewrites main.tex with a preamble that defines \planted (written through a
    // macro, so that the file holds one `\begin{document}` only, as a format's key needs).
    let rewrite = "\\def\\b{\\string\\begin}\\newwrite\\w\\immediate\\openout\\w=main.tex \
        \\immediate\\write\\w{\\string\\documentclass{article}\\string\\def\\string\\planted{PLANTED}}\
        \\immediate\\write\\w{\\b{document}Hello\\string\\end{document}}\\immediate\\closeout\\w Hello";
    let first = app.compile(pasted(rewrite)).await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    let id = first.id();
    let log = app.log(id).await;
    assert!(log.contains("the compile rewrote main.tex"), "{log}");

    let honest = app
        .compile(pasted("\\ifdefined\\planted PLANTED\\else CLEAN\\fi"))
        .await;
    let text = text_of(&app, &honest).await;
    assert!(
        text.contains("CLEAN") && !text.contains("PLANTED"),
        "{text}"
    );
    assert_ne!(honest["preamble_cache"], "hit", "{honest:#}");
}

/// A document whose preamble keeps the main file's last line, `secret`, after
/// `\end{document}`, and whose body prints it.
fn saving_its_last_line(secret: &str) -> Value {
    let main = format!(
        "\\documentclass{{article}}\n\\newread\\mainfile\\openin\\mainfile=main.tex\n\\def\\saved{{}}\n\
         \\def\\grab{{\\ifeof\\mainfile\\else\\readline\\mainfile to\\lineread\\ifx\\lineread\\empty\\else\
         \\xdef\\saved{{\\lineread}}\\fi\\expandafter\\grab\\fi}}\n{{\\endlinechar=-1 \\grab}}\n\
         \\begin{{document}}\nSaved: \\saved.\n\\end{{document}}\n{secret}\n"
    );
    json!({ "input_latex": main })
}

/// A document whose preamble takes its body in a delimited macro argument (from the file
/// TeX is reading, so the main file is opened once) and prints it again at its start.
fn taking_its_body(secret: &str) -> Value {
    let main = format!(
        "\\documentclass{{article}}\n\\long\\def\\grab#1\\begin#2#3\\end{{\\gdef\\stolen{{#3}}#1\\begin{{#2}}#3\\end}}\n\
         \\AtBeginDocument{{Stolen: \\stolen.}}\n\\grab\n\\begin{{document}}\n{secret}\n\\end{{document}}\n"
    );
    json!({ "input_latex": main })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_format_holds_no_more_of_the_main_file_than_its_preamble() {
    let app = TestApp::spawn().await;
    for (document, shown) in [
        (saving_its_last_line as fn(&str) -> Value, "Saved"),
        (taking_its_body, "Stolen"),
    ] {
        let first = app.compile(document("SECRET-ONE")).await;
        let text = text_of(&app, &first).await;
        assert!(text.contains(&format!("{shown}: SECRET-ONE")), "{text}");
        // The same preamble: a format dumped from the whole first file would still hold
        // what followed its preamble.
        let second = app.compile(document("SECRET-TWO")).await;
        let text = text_of(&app, &second).await;
        assert!(text.contains(&format!("{shown}: SECRET-TWO")), "{text}");
        assert!(!text.contains("SECRET-ONE"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preamble_that_sets_what_a_format_drops_is_not_kept_as_one() {
    let app = TestApp::spawn().await;
    // Glyph names' Unicode values (the text a reader copies out): not in a format.
    let document = |body: &str| {
        json!({ "input_latex": format!(
            "\\documentclass{{article}}\n\\input{{glyphtounicode}}\\pdfgentounicode=1\n\
             \\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    let first = app.compile(document("First.")).await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    let id = first.id();
    let log = app.log(id).await;
    assert!(
        log.contains("whose settings a format does not keep"),
        "{log}"
    );
    let second = app.compile(document("Second.")).await;
    assert_eq!(second["preamble_cache"], "unavailable", "{second:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_main_file_the_key_cannot_hold_is_never_dumped() {
    let app = TestApp::spawn().await;
    // The document's title, which a format would drop: the scheduler asks for no dump.
    let job = app
        .compile(json!({ "input_latex": "\\documentclass{article}\n\\pdfinfo{/Title (Kept)}\n\\begin{document}\nTitled.\n\\end{document}\n" }))
        .await;
    assert_eq!(job["preamble_cache"], "unavailable", "{job:#}");
    let log = app.log(job.id()).await;
    assert!(!log.contains("mylatexformat"), "{log}");
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
    assert!(text_of(&app, &after).await.contains("CLEAN"));

    // One that succeeds keeps its own state, from nothing, for the next compile.
    app.compile(pasted(&format!("{WRITE_FLAG} Again."))).await;
    let mut fresh = pasted("Fresh.");
    fresh["cache"] = json!(false);
    let fresh = app.compile(fresh).await;
    assert_eq!(fresh["status"], "Succeeded", "{fresh:#}");
    let next = app.compile(pasted(&format!("{FLAG_CHECK} Next."))).await;
    assert_eq!(next["incremental"], true, "{next:#}");
    assert!(text_of(&app, &next).await.contains("CLEAN"));
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
    let slow = app
        .wait_terminal(id, std::time::Duration::from_secs(60))
        .await;
    assert_eq!(slow["incremental"], true, "{slow:#}");
    assert!(text_of(&app, &slow).await.contains("Slow."));

    let next = app.compile(pasted(&format!("{FLAG_CHECK} After."))).await;
    assert_eq!(next["incremental"], true, "{next:#}");
    assert!(text_of(&app, &next).await.contains("CLEAN"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_bibliography_database_is_read_again_by_the_next_compile() {
    let app = TestApp::spawn().await;
    let request = |title: &str| {
        json!({
            "main": "paper.tex",
            "files": [
                { "path": "paper.tex", "content": "\\documentclass{article}\n\\begin{document}\nSee \\cite{k}.\n\\bibliographystyle{plain}\n\\bibliography{refs}\n\\end{document}\n" },
                { "path": "refs.bib", "content": format!("@book{{k, author={{A. Author}}, title={{{title}}}, publisher={{P}}, year={{2020}}}}") },
            ],
        })
    };
    let first = app.compile(request("Title One")).await;
    assert!(text_of(&app, &first).await.contains("Title One"));
    let second = app.compile(request("Title Two")).await;
    assert_eq!(second["incremental"], true, "{second:#}");
    let text = text_of(&app, &second).await;
    assert!(
        text.contains("Title Two") && !text.contains("Title One"),
        "{text}"
    );
}

/// The second of two compiles at the same main path, each with `timeout_seconds` 10: the
/// first leaves its files or format, and the second (whose sources are fine) must still end
/// in time, having compiled again from nothing or without the format.
async fn second_after(app: &TestApp, first: Value, second: Value) -> Value {
    let first = app.compile(first).await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    let mut second = second;
    second["timeout_seconds"] = json!(10);
    let second = app.compile(second).await;
    let log = app.log(second.id()).await;
    assert_eq!(second["status"], "Succeeded", "{second:#}\n{log}");
    second
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planted_file_that_makes_passes_loop_costs_a_later_compile_half_its_time_only() {
    let app = TestApp::spawn().await;
    // Its preamble defines \amark, so the line it plants in the .aux loops only elsewhere.
    let planting = json!({ "input_latex": "\\documentclass{article}\n\\def\\amark{}\n\\begin{document}\n\
        \\makeatletter\n\\immediate\\write\\@auxout{\\string\\ifx\\string\\amark\\string\\undefined\
        \\string\\def\\string\\x{\\string\\x}\\string\\expandafter\\string\\x\\string\\fi}\n\\makeatother\n\
        Planted.\n\\end{document}\n" });
    let honest = second_after(&app, planting, pasted("Honest paper.")).await;
    assert!(text_of(&app, &honest).await.contains("Honest paper."));
    assert!(
        app.log(honest.id()).await.contains("again from nothing"),
        "{}",
        app.log(honest.id()).await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_from_kept_files_that_runs_out_of_time_leaves_none_for_the_next() {
    let app = TestApp::spawn().await;
    // Its .aux makes any other compile's pass sleep: no CPU, so no CPU limit ends it. (A
    // LuaTeX compile takes seconds here, building its font names: 25 s for the others.)
    let planting = json!({ "engine": "lualatex", "input_latex": "\\documentclass{article}\n\\directlua{planter=true}\n\\begin{document}\n\
        \\makeatletter\\immediate\\write\\@auxout{\\string\\directlua{if not planter then os.sleep(3600) end}}\\makeatother\n\
        Planted.\n\\end{document}\n" });
    let planted = app.compile(planting).await;
    assert_eq!(planted["status"], "Succeeded", "{planted:#}");
    let honest = |body: &str| {
        json!({ "engine": "lualatex", "timeout_seconds": 25, "input_latex": format!(
            "\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    let slept = app.compile(honest("First.")).await;
    assert_eq!(slept["status"], "TimedOut", "{slept:#}");
    let next = app.compile(honest("Second.")).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
    assert_eq!(next["incremental"], false, "{next:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_format_that_makes_passes_loop_is_dropped_and_costs_a_compile_half_its_time_only() {
    let app = TestApp::spawn().await;
    // \greet loops in the format only: the preamble tells that it is being dumped.
    let document = |body: &str| {
        json!({ "input_latex": format!(
            "\\documentclass{{article}}\n\\makeatletter\n\\ifcsname MYLATEX@cleanup\\endcsname\
             \\gdef\\greet{{\\greet}}\\else\\gdef\\greet{{Hello}}\\fi\n\\makeatother\n\
             \\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    let honest = second_after(&app, document("Draft."), document("\\greet{} world.")).await;
    assert!(text_of(&app, &honest).await.contains("Hello world."));
    assert_eq!(honest["preamble_cache"], "miss", "{honest:#}");
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
    assert!(text_of(&app, &after).await.contains("CLEAN"));
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
    assert!(text_of(&app, &from_planted).await.contains("FLAGGED"));

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
    assert!(text_of(&app, &again).await.contains("CLEAN"));
}
