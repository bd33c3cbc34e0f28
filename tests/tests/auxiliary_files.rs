//! What a document's compile hands on of its auxiliary files to the next compile of the same
//! document: an edit then needs one pass, a file a tool wrote since is built again, and a
//! compile from them that does not end well runs again from nothing, from the sources as
//! they were sent, handing nothing on.

use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{pasted, second_after, succeeded_text, write_file, TestApp};

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
    let text = succeeded_text(&app, &edited).await;
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
    assert!(succeeded_text(&app, &switched)
        .await
        .contains("Second. [1]."));
    let back = app.compile(citing(false, "Third.")).await;
    assert_eq!(back["incremental"], true, "{back:#}");
    let log = app.log(back.id()).await;
    assert!(log.contains("ran bibtex output"), "{log}");
    let mut from_nothing = citing(false, "Third.");
    from_nothing["cache"] = json!(false);
    let expected = succeeded_text(&app, &app.compile(from_nothing).await).await;
    assert!(
        expected.contains("Third. [1]. References [1] Donald E. Knuth."),
        "{expected}"
    );
    assert_eq!(succeeded_text(&app, &back).await, expected);
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
    assert!(succeeded_text(&app, &first).await.contains("Title One"));
    let second = app.compile(request("Title Two")).await;
    assert_eq!(second["incremental"], true, "{second:#}");
    let text = succeeded_text(&app, &second).await;
    assert!(
        text.contains("Title Two") && !text.contains("Title One"),
        "{text}"
    );
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
    let log = app.log(failing.id()).await;
    assert!(log.contains("restored"), "{log}");
    assert!(
        log.contains("did not end well; again from nothing"),
        "{log}"
    );
    // Its files are not handed on: the next compile starts from nothing.
    let next = app.compile(main("Fine again.")).await;
    assert_eq!(next["incremental"], false, "{next:#}");
    assert!(!app.log(next.id()).await.contains("restored"));
    assert!(succeeded_text(&app, &next)
        .await
        .contains("1 One Fine again."));
}

/// Compiles twice a document in a folder that inputs part.tex. The first compile leaves
/// flag.aux among its files; from them, the second runs `sabotage` and fails, and runs again
/// from nothing, where there is no flag. Returns the second job and its log.
async fn compiled_again_from_nothing_after(
    app: &TestApp,
    engine: &str,
    sabotage: &str,
) -> (Value, String) {
    let second = compiled_from_a_flag_after(app, engine, sabotage).await;
    let log = app.log(second.id()).await;
    assert!(log.contains("again from nothing"), "{log}");
    (second, log)
}

/// The second compile of [`compiled_again_from_nothing_after`], whatever its log says.
async fn compiled_from_a_flag_after(app: &TestApp, engine: &str, sabotage: &str) -> Value {
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
    app.compile(request(&failing)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_again_from_nothing_reads_the_sources_as_they_were_sent() {
    let app = TestApp::spawn().await;
    let rewrite = write_file("part.tex", "Rewritten part.");
    let (second, _) = compiled_again_from_nothing_after(&app, "pdflatex", &rewrite).await;
    let text = succeeded_text(&app, &second).await;
    assert!(text.contains("Original part."), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_again_from_nothing_clears_a_folder_made_in_a_sources_place() {
    let app = TestApp::spawn().await;
    // LuaTeX's Lua may remove a file and make a folder of its name, which removing files
    // leaves: the source could not be written again.
    let folder = "\\directlua{os.remove('part.tex') lfs.mkdir('part.tex')}";
    let (second, _) = compiled_again_from_nothing_after(&app, "lualatex", folder).await;
    let text = succeeded_text(&app, &second).await;
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
    assert!(app.log(next.id()).await.contains("restored"));
    let text = succeeded_text(&app, &next).await;
    assert!(
        text.contains("Second.") && !text.contains("PLANTED"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_that_cannot_be_cleared_runs_again_in_a_new_sandbox() {
    let app = TestApp::spawn().await;
    // Deeper than the driver may hold folders open at once (256 files): no clearing in the
    // sandbox, so a new one, without the kept files (and so without the flag).
    let deep = "\\directlua{for i = 1, 300 do lfs.mkdir('d') lfs.chdir('d') end}";
    let second = compiled_from_a_flag_after(&app, "lualatex", deep).await;
    assert_eq!(second["status"], "Succeeded", "{second:#}");
    assert_eq!(second["incremental"], false, "{second:#}");
    let log = app.log(second.id()).await;
    assert!(!log.contains("restored"), "{log}");
    assert!(succeeded_text(&app, &second)
        .await
        .contains("Original part."));
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
    assert!(succeeded_text(&app, &honest)
        .await
        .contains("Honest paper."));
    assert!(
        app.log(honest.id()).await.contains("again from nothing"),
        "{}",
        app.log(honest.id()).await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planted_file_that_waits_costs_one_compile_half_its_time() {
    let app = TestApp::spawn().await;
    // Its .aux makes any other compile's pass sleep: no CPU, so no CPU limit ends it; the
    // alarm does. (A LuaTeX compile takes seconds here, building its font names: 25 s for the
    // others.)
    let planting = json!({ "engine": "lualatex", "input_latex": "\\documentclass{article}\n\\directlua{planter=true}\n\\begin{document}\n\
        \\makeatletter\\immediate\\write\\@auxout{\\string\\directlua{if not planter then os.sleep(3600) end}}\\makeatother\n\
        Planted.\n\\end{document}\n" });
    let planted = app.compile(planting).await;
    assert_eq!(planted["status"], "Succeeded", "{planted:#}");
    let honest = |body: &str| {
        json!({ "engine": "lualatex", "timeout_seconds": 25, "input_latex": format!(
            "\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    let waited = app.compile(honest("First.")).await;
    assert_eq!(waited["status"], "Succeeded", "{waited:#}");
    assert_eq!(waited["incremental"], false, "{waited:#}");
    assert!(succeeded_text(&app, &waited).await.contains("First."));
    let next = app.compile(honest("Second.")).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
    let log = app.log(next.id()).await;
    assert!(
        !log.contains("again from nothing"),
        "the planted file is gone: {log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planted_file_that_waits_short_of_the_budget_and_writes_itself_anew_is_not_handed_on() {
    let app = TestApp::spawn().await;
    // Read from the .aux, it waits until TeX has run 7 s (on the shell escape, which costs TeX
    // no CPU), then writes itself into the next .aux, the same: no pass runs again. The
    // planting compile is spared.
    let plant = r"\ifdefined\tfplant\else\gdef\tfplant{\ifdefined\planter\else\loop\ifnum\pdfelapsedtime<458752 \immediate\write18{kpsewhich main.tex}\repeat\fi\AtBeginDocument{\immediate\write\@mainaux{\string\ifdefined\string\tfplant\string\else\string\gdef\string\tfplant{\unexpanded\expandafter{\tfplant}}\string\tfplant\string\fi}}}\tfplant\fi";
    let planting = json!({ "input_latex": format!(
        "\\documentclass{{article}}\n\\gdef\\planter{{}}\n\\begin{{document}}\n\
         \\makeatletter\\ifdefined\\tfplant\\else\\immediate\\write\\@mainaux{{\\unexpanded{{{plant}}}}}\\fi\\makeatother\n\
         Planted.\n\\end{{document}}\n") });
    let planted = app.compile(planting).await;
    assert_eq!(planted["status"], "Succeeded", "{planted:#}");
    let honest = |body: &str| {
        json!({ "timeout_seconds": 20, "input_latex": format!(
            "\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    compiles_slowly_then_from_the_sources(&app, honest).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planted_file_that_slows_the_step_after_the_passes_is_not_handed_on() {
    let app = TestApp::spawn().await;
    // Read from the .aux, it writes a figure whose PostScript spins 7 s of CPU and names it in
    // a special, so that xdvipdfmx converts it after the passes; then it writes itself into
    // the next .aux.
    let plant = r"\ifdefined\tfplant\else\gdef\tfplant{\AtBeginDocument{\immediate\write\@mainaux{\string\ifdefined\string\tfplant\string\else\string\gdef\string\tfplant{\unexpanded\expandafter{\tfplant}}\string\tfplant\string\fi}\newwrite\tfo\immediate\openout\tfo=tfslow.eps\relax\immediate\write\tfo{\@percentchar!PS-Adobe-3.0 EPSF-3.0}\immediate\write\tfo{\@percentchar\@percentchar BoundingBox: 0 0 10 10}\immediate\write\tfo{/t usertime def {usertime t sub 7000 gt {exit} if} loop showpage}\immediate\closeout\tfo\special{PSfile=tfslow.eps llx=0 lly=0 urx=10 ury=10 rwi=100}}}\tfplant\fi";
    let document = |body: &str| {
        json!({ "engine": "xelatex", "timeout_seconds": 20, "input_latex": format!(
            "\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    let planting = document(&format!(
        "\\makeatletter\\ifdefined\\tfplant\\else\\immediate\\write\\@mainaux{{\\unexpanded{{{plant}}}}}\\fi\\makeatother Planted."
    ));
    let planted = app.compile(planting).await;
    assert_eq!(planted["status"], "Succeeded", "{planted:#}");
    compiles_slowly_then_from_the_sources(&app, document).await;
}

/// Compiles `document` twice after a planted file: the first compile, from the planted file,
/// takes more than a quarter of its timeout and hands nothing on; the second starts from the
/// sources.
async fn compiles_slowly_then_from_the_sources(app: &TestApp, document: impl Fn(&str) -> Value) {
    let slowed = app.compile(document("First.")).await;
    let log = app.log(slowed.id()).await;
    assert_eq!(slowed["status"], "Succeeded", "{slowed:#}\n{log}");
    assert_eq!(slowed["incremental"], true, "{slowed:#}\n{log}");
    assert!(
        log.contains(
            "nothing handed on to the next compile: the compile from the last compile's files took"
        ),
        "{log}"
    );
    let next = app.compile(document("Second.")).await;
    assert_eq!(next["status"], "Succeeded", "{next:#}");
    assert_eq!(next["incremental"], false, "from the sources: {next:#}");
    assert!(succeeded_text(app, &next).await.contains("Second."));
}
