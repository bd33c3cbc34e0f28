//! Word counts (`"wordcount": true`): TeX Live's texcount on the main document and what it
//! includes, run in the job's sandbox after the compile, kept with the job, and a result of
//! its own in the result cache.

use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{texfleet_in, TestApp};

const MAIN: &str = "\\documentclass{article}\n\\begin{document}\n\\section{Introduction}\n\
    Hello world, this is a test of five words. % not these\n\
    \\begin{figure}\\caption{A caption here}\\end{figure}\n\
    Math $x+y$ and\n\\[ a = b \\]\n\\input{part}\n\\end{document}\n";
const PART: &str = "Included text has four.\n";

fn counted(wordcount: bool) -> Value {
    json!({
        "input_latex": MAIN,
        "files": [{ "path": "part.tex", "content": PART }],
        "wordcount": wordcount,
    })
}

/// texcount's count of [`MAIN`] with [`PART`]: nine words and four of the included file and
/// two around the formula in the text, the heading's one, the caption's three.
fn expected() -> Value {
    json!({ "text_words": 15, "header_words": 1, "other_words": 3, "headers": 1,
            "floats": 1, "inline_math": 1, "displayed_math": 1 })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_asked_to_count_shows_texcount_s_count_and_is_a_result_of_its_own() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let plain = app.compile(counted(false)).await;
    assert_eq!(plain["status"], "Succeeded", "{plain:#}");
    assert_eq!(plain["word_count"], Value::Null, "{plain:#}");

    let job = app.compile(counted(true)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(job["reused_from"], Value::Null, "{job:#}");
    assert_eq!(job["word_count"], expected(), "{job:#}");
    let again = app.compile(counted(true)).await;
    assert_eq!(again["reused_from"], job["id"], "{again:#}");
    assert_eq!(again["word_count"], expected(), "{again:#}");
    let shown = app.get_json(&format!("/compile/{}", job.id())).await;
    assert_eq!(shown["word_count"], expected(), "{shown:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_document_that_reshapes_texcount_s_output_has_no_count_and_compiles() {
    let app = TestApp::spawn().await;
    let mut request = counted(true);
    request["input_latex"] = json!(format!("%TC:newtemplate\n%TC:template 1 2 3\n{MAIN}"));
    let job = app.compile(request).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(job["word_count"], Value::Null, "{job:#}");
    let log = app.log(job.id()).await;
    assert!(log.contains("texcount gave no word count"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_prints_the_count_and_counts_without_writing_a_pdf() {
    let app = TestApp::spawn().await;
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("main.tex"), MAIN).unwrap();
    std::fs::write(folder.path().join("part.tex"), PART).unwrap();
    let output = texfleet_in(
        &app,
        folder.path(),
        &["compile", "main.tex", "--files", ".", "--wordcount"],
    );
    let printed = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{printed}");
    assert!(
        printed.contains("words: 15 in text, 1 in headings, 3 elsewhere"),
        "{printed}"
    );
    std::fs::remove_file(folder.path().join("main.pdf")).unwrap();

    let output = texfleet_in(
        &app,
        folder.path(),
        &["wordcount", "main.tex", "--files", "."],
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        printed.starts_with("words: 15 in text, 1 in headings, 3 elsewhere"),
        "{printed}"
    );
    assert!(!folder.path().join("main.pdf").exists());

    std::fs::write(
        folder.path().join("main.tex"),
        format!("%TC:newtemplate\n%TC:template 1 2 3\n{MAIN}"),
    )
    .unwrap();
    let output = texfleet_in(
        &app,
        folder.path(),
        &["wordcount", "main.tex", "--files", "."],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("no word count"), "{printed}");
}

/// What a document's Perl would do if texcount ran it: mark the log, forge the PDF.
const PLANT: &str = "open(my $log, '>>', 'output.log'); print $log \"RAN-BY-TEXCOUNT\\n\";\n\
    open(my $pdf, '>', 'output.pdf'); print $pdf \"%PDF-1.4 forged\\n\";\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_name_that_texcount_would_open_as_a_command_runs_nothing() {
    let app = TestApp::spawn().await;
    let job = app
        .compile(json!({
            "input_latex": "\\documentclass{article}\n%TC:insert \\input{/usr/bin/perl x.pl|}\n\
                \\begin{document}Hello world.\\end{document}\n",
            "files": [{ "path": "x.pl", "content": PLANT }],
            "wordcount": true,
        }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let log = app.log(job.id()).await;
    assert!(!log.contains("RAN-BY-TEXCOUNT"), "{log}");
    assert!(
        log.contains("ran perl /usr/bin/texcount"),
        "texcount ran: {log}"
    );
    assert!(app.text_of(job.id()).await.contains("Hello world"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_document_made_to_keep_texcount_busy_has_no_count_and_compiles() {
    let app = TestApp::spawn().await;
    // Fifteen megabytes of words that TeX never reads (the \input is skipped) and texcount,
    // which follows \input whatever the conditionals say, would take far longer than its 5 s
    // to count.
    let job = app
        .compile(json!({
            "input_latex": "\\documentclass{article}\n\\begin{document}\nShort.\n\
                \\iffalse\\input{words}\\fi\n\\end{document}\n",
            "files": [{ "path": "words.tex", "content": "word ".repeat(3 << 20) }],
            "wordcount": true,
        }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(job["word_count"], Value::Null, "{job:#}");
    let log = app.log(job.id()).await;
    assert!(log.contains("texcount gave no word count"), "{log}");
    let stopped = log
        .lines()
        .any(|line| line.contains("texcount") && line.contains("killed by signal"));
    assert!(stopped, "texcount was stopped at its limit: {log}");
}
