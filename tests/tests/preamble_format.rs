//! What a document's compile keeps of its preamble as a format for the next compile of the
//! same document: loaded while the preamble and every file it read are unchanged, never
//! stale, never holding more of the main file than its preamble nor less than it set, and
//! dropped when it breaks a pass.

use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    pasted, pdf_pages_rendered, succeeded_text, two_sections_with_style, write_file, TestApp,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_preamble_format_is_loaded_while_its_inputs_are_unchanged_and_never_stale() {
    let app = TestApp::spawn().await;
    let first = app
        .compile(two_sections_with_style(
            "",
            "Body one.",
            "Hello from style one",
        ))
        .await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    assert_eq!(first["incremental"], false);
    let text = succeeded_text(&app, &first).await;
    assert!(
        text.contains("Hello from style one Body one. See section 2."),
        "{text}"
    );

    // An edit of the body: the format is loaded, and the auxiliary files make one pass enough.
    let edited = two_sections_with_style("", "Body two.", "Hello from style one");
    let second = app.compile(edited.clone()).await;
    assert_eq!(second["preamble_cache"], "hit", "{second:#}");
    assert_eq!(second["incremental"], true, "{second:#}");
    let text = succeeded_text(&app, &second).await;
    assert!(
        text.contains("Hello from style one Body two. See section 2."),
        "{text}"
    );
    assert!(text.contains("1 First 1 2 Second"), "the contents: {text}");
    let log = app.log(second.id()).await;
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
    assert_eq!(succeeded_text(&app, &cold).await, text);
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
        .compile(two_sections_with_style(
            "",
            "\\section{Inserted}Body two.",
            "Hello from style one",
        ))
        .await;
    let text = succeeded_text(&app, &moved).await;
    assert!(
        text.contains("1 First 1 2 Inserted 1 3 Second"),
        "the contents: {text}"
    );
    assert!(text.contains("See section 3."), "{text}");

    // A file the preamble read changed: a miss, and the new definition shows.
    let style_changed = app
        .compile(two_sections_with_style(
            "",
            "Body two.",
            "Hello from style two",
        ))
        .await;
    assert_eq!(style_changed["preamble_cache"], "miss", "{style_changed:#}");
    assert!(succeeded_text(&app, &style_changed)
        .await
        .contains("Hello from style two Body two."));

    // The main file's preamble changed: a miss, then a hit again.
    let extra = "\\newcommand{\\Extra}{Preamble three}";
    let preamble_changed = app
        .compile(two_sections_with_style(
            extra,
            "\\Extra.",
            "Hello from style two",
        ))
        .await;
    assert_eq!(
        preamble_changed["preamble_cache"], "miss",
        "{preamble_changed:#}"
    );
    assert!(succeeded_text(&app, &preamble_changed)
        .await
        .contains("Hello from style two Preamble three."));
    let again = app
        .compile(two_sections_with_style(
            extra,
            "\\Extra, again.",
            "Hello from style two",
        ))
        .await;
    assert_eq!(again["preamble_cache"], "hit", "{again:#}");
    assert!(succeeded_text(&app, &again)
        .await
        .contains("Preamble three, again."));
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
    assert!(app
        .log(first.id())
        .await
        .contains("keeping the preamble as a format"));
    let second = app.compile(request("Fontspec two.")).await;
    assert_eq!(second["preamble_cache"], "unavailable", "{second:#}");
    assert!(succeeded_text(&app, &second)
        .await
        .contains("Fontspec two."));
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
    assert!(succeeded_text(&app, &edited).await.contains("Fine."));
    let log = app.log(edited.id()).await;
    assert!(
        log.contains("failed with the project's preamble format; again without it"),
        "{log}"
    );
}

/// Every pass of the body writes text of its own over the preamble format's file.
const FORGE_FORMAT: &str =
    "\\immediate\\openout15=output.fmt \\immediate\\write15{FORGED}\\immediate\\closeout15";

#[tokio::test(flavor = "multi_thread")]
async fn a_format_the_document_rewrites_is_neither_kept_nor_loaded() {
    let app = TestApp::spawn().await;
    let first = app
        .compile(two_sections_with_style("", FORGE_FORMAT, "Style"))
        .await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    assert!(succeeded_text(&app, &first)
        .await
        .contains("See section 2."));
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
    let second = app
        .compile(two_sections_with_style("", &body, "Style"))
        .await;
    assert_eq!(second["preamble_cache"], "hit", "{second:#}");
    assert!(succeeded_text(&app, &second)
        .await
        .contains("See section 3."));
    let log = app.log(second.id()).await;
    assert!(
        log.contains("the compile rewrote the project's preamble format"),
        "{log}"
    );
    assert!(
        !log.contains("failed with the project's preamble format"),
        "{log}"
    );
}

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
    let text = succeeded_text(&app, &honest).await;
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
        let text = succeeded_text(&app, &first).await;
        assert!(text.contains(&format!("{shown}: SECRET-ONE")), "{text}");
        // The same preamble: a format dumped from the whole first file would still hold
        // what followed its preamble.
        let second = app.compile(document("SECRET-TWO")).await;
        let text = succeeded_text(&app, &second).await;
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
async fn what_the_check_of_the_format_runs_through_the_shell_escape_is_in_the_log() {
    let app = TestApp::spawn().await;
    // The check pass, the first to find flag.tex, runs a command and asks xdvipdfmx to put
    // the shell escape's record into the PDF.
    let job = app
        .compile(json!({ "engine": "xelatex", "input_latex": format!(
            "\\documentclass{{minimal}}\\usepackage[T1]{{fontenc}}\n\\begin{{document}}\
             \\IfFileExists{{flag.tex}}{{\\immediate\\write18{{kpsewhich main.tex}}\
             \\special{{pdf:fstream @rec (/tmp/texfleet-shell-escape)}}\
             \\special{{pdf:put @catalog << /TexfleetRecord @rec >>}}}}{{{}}}Checked.\\end{{document}}",
            write_file("flag.tex", "x")
        ) }))
        .await;
    assert!(succeeded_text(&app, &job).await.contains("Checked."));
    let log = app.log(job.id()).await;
    assert!(log.contains("kpsewhich 'main.tex'"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preamble_that_overwrites_the_recorder_cannot_hide_what_it_read() {
    let app = TestApp::spawn().await;
    // The preamble reads macros.tex, then overwrites the dump's recorder (output.fls) with
    // the format's own \openout and padding longer than what the recorder wrote by then.
    let document = |value: &str| {
        json!({ "input_latex": "\\documentclass{article}\n\\input{macros}\n\\makeatletter\n\
            \\ifdefined\\MYLATEX@openout \\let\\rawopenout\\MYLATEX@openout \\else \\let\\rawopenout\\openout \\fi\n\
            \\makeatother\n\\newwrite\\fl\n\\immediate\\rawopenout\\fl=output.fls\n\\immediate\\write\\fl{PWD /work}\n\
            \\newcount\\n\n\\loop\\ifnum\\n<600 \\immediate\\write\\fl{pad pad pad pad pad pad pad pad pad pad}\\advance\\n 1 \\repeat\n\
            \\immediate\\closeout\\fl\n\\begin{document}\nvalue is \\val\n\\end{document}\n",
            "files": [{ "path": "macros.tex", "content": format!("\\def\\val{{{value}}}\n") }] })
    };
    let first = app.compile(document("OLD")).await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    let second = app.compile(document("NEW")).await;
    assert!(succeeded_text(&app, &second).await.contains("value is NEW"));
    assert_eq!(second["preamble_cache"], "miss", "{second:#}");
}
