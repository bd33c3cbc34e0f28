//! The compatibility corpus (`tests/corpus/`): small projects of the kinds people bring from
//! Overleaf, each compiled as one job and checked by what a reader would check: the text of the
//! PDF (bibliographies resolved, indexes and glossaries printed, cross-references filled in),
//! its images and embedded figures, and its fonts. Each is compiled twice: the two PDFs must be
//! the same bytes (deterministic results). Then once more, with a comment added at the end of
//! the main file, so that it starts from what the first compiles left (the preamble format and
//! the auxiliary files): it must give the same bytes too.
//!
//! Each folder holds `project/` (the files; `main.tex` is the main document) and
//! `expect.json`: `engine`, `contains` and `lacks` (text, whitespace folded), and optionally
//! `images` and `forms` (at least that many image or figure objects), `fonts`, and `main`: the
//! main document's path among the files, sent as the request's `main` instead of `main.tex`.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{files_field, files_of, pdf_objects_of_subtype, pdf_text, TestApp};

/// Corpus projects whose later compile must load the preamble format.
const KEEP_THEIR_PREAMBLE: [&str; 8] = [
    "beamer",
    "biber",
    "thesis",
    "tikz",
    "lang-german",
    "lang-french",
    "main-in-folder",
    "fontawesome-pdflatex",
];

fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("expect.json").exists())
        .collect();
    entries.sort();
    entries
}

/// The request for a corpus project: every file, and the main document named by `main`, or
/// else `main.tex`, sent as `<name>.tex`. The whole corpus shares one texfleet project, and a
/// document's preamble format and auxiliary files are kept per main path: each corpus project
/// is its own document, as several documents of one project are.
fn request(project: &Path, expect: &Value, name: &str) -> Value {
    let mut files = files_of(project);
    // The largest timeout: speed is `texfleet bench`'s to judge, not a loaded CI machine's.
    let mut request = json!({ "engine": expect["engine"], "timeout_seconds": 300 });
    if let Some(main) = expect["main"].as_str() {
        assert!(files.iter().any(|(path, _)| path == main), "{main}");
        request["main"] = json!(main);
    } else {
        let main = files
            .iter_mut()
            .find(|(path, _)| path == "main.tex")
            .expect("main.tex");
        main.0 = format!("{name}.tex");
        request["main"] = json!(main.0);
    }
    request["files"] = files_field(files);
    request
}

/// The same request with a comment appended to the main file: the same document, but not the
/// same request, so the result cache does not answer it.
fn with_comment(mut request: Value) -> Value {
    const COMMENT: &str = "\n% edited\n";
    let main = request["main"].as_str().unwrap().to_string();
    for file in request["files"].as_array_mut().unwrap() {
        if file["path"] == main.as_str() {
            let mut content = BASE64
                .decode(file["content_base64"].as_str().unwrap())
                .unwrap();
            content.extend_from_slice(COMMENT.as_bytes());
            file["content_base64"] = json!(BASE64.encode(content));
        }
    }
    request
}

fn folded(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn pdf_fonts(pdf: &[u8]) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), pdf).unwrap();
    let output = std::process::Command::new("pdffonts")
        .arg(file.path())
        .output()
        .expect("pdffonts");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn check(app: &TestApp, name: &str, expect: &Value, job: &Value) -> Result<(), String> {
    if job["status"] != "Succeeded" {
        return Err(format!("ended {}: {}", job["status"], job["error"]));
    }
    let id = job.id();
    let pdf = app.pdf_of(id).await;
    let text = folded(&pdf_text(&pdf));
    let strings = |key: &str| -> Vec<String> {
        expect[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    for wanted in strings("contains") {
        if !text.contains(&wanted) {
            return Err(format!("{name}: the text lacks {wanted:?}: {text}"));
        }
    }
    for unwanted in strings("lacks") {
        if text.contains(&unwanted) {
            return Err(format!("{name}: the text holds {unwanted:?}: {text}"));
        }
    }
    for (key, subtype) in [("images", "Image"), ("forms", "Form")] {
        let wanted = expect[key].as_u64().unwrap_or(0) as usize;
        let found = pdf_objects_of_subtype(&pdf, subtype);
        if found < wanted {
            return Err(format!("{name}: {found} {key}, expected at least {wanted}"));
        }
    }
    let fonts = pdf_fonts(&pdf);
    for font in strings("fonts") {
        if !fonts.contains(&font) {
            return Err(format!("{name}: font {font} not embedded: {fonts}"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn every_project_of_the_corpus_compiles_to_what_a_reader_expects() {
    // One project submits the whole corpus; this test is not about sharing slots, nor about
    // the cap on the documents whose state a project keeps.
    let app = TestApp::spawn_with(|config| {
        config.idle_project_slots = 0;
        config.kept_documents_per_project = 64;
    })
    .await;
    let mut submitted = Vec::new();
    for entry in corpus() {
        let expect: Value =
            serde_json::from_slice(&std::fs::read(entry.join("expect.json")).unwrap()).unwrap();
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        let request = request(&entry.join("project"), &expect, &name);
        let [job, again] = [
            app.submit(request.clone()).await,
            app.submit(request.clone()).await,
        ]
        .map(|job| job.id().to_string());
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        submitted.push((name, expect, job, again, request));
    }
    assert!(
        submitted.len() >= 9,
        "the corpus holds {} projects",
        submitted.len()
    );
    let mut failures = Vec::new();
    let mut later = Vec::new();
    for (name, expect, id, again, request) in &submitted {
        let job = app.wait_terminal(id, Duration::from_secs(300)).await;
        let second = app.wait_terminal(again, Duration::from_secs(300)).await;
        if job["status"] == "Succeeded" {
            let next = app.submit(with_comment(request.clone())).await;
            later.push((name, expect, id, next.id().to_string()));
        }
        let checked = match check(&app, name, expect, &job).await {
            Ok(()) if second["status"] != "Succeeded" => {
                Err(format!("{name}: the second compile: {second:#}"))
            }
            Ok(()) if app.pdf_of(id).await != app.pdf_of(again).await => Err(format!(
                "{name}: two compiles of the same request gave different PDFs"
            )),
            checked => checked,
        };
        if let Err(problem) = checked {
            let log = app
                .get(&format!("/compile/{id}/log"))
                .await
                .text()
                .await
                .unwrap();
            let tail: String = log
                .lines()
                .rev()
                .take(25)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            failures.push(format!("{problem}\n--- end of its log:\n{tail}"));
        }
    }
    let mut hits = Vec::new();
    for (name, expect, first, id) in later {
        let job = app.wait_terminal(&id, Duration::from_secs(300)).await;
        if job["preamble_cache"] == "hit" {
            hits.push(name.clone());
        }
        let checked = match check(&app, name, expect, &job).await {
            Ok(()) if job["incremental"] != true => Err(format!(
                "{name}: the later compile did not start from the first's files: {job:#}"
            )),
            Ok(()) if app.pdf_of(first).await != app.pdf_of(&id).await => Err(format!(
                "{name}: the later compile ({}) gave other bytes",
                job["preamble_cache"]
            )),
            checked => checked,
        };
        if let Err(problem) = checked {
            failures.push(format!("{problem} (job {id})"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The common kinds keep their preamble as a format. The others say why not in their
    // logs: a preamble that reads what the compile writes (multibib, bib2gls), fonts a format
    // cannot hold (XeTeX, LuaTeX), state a format loses (babel's Hebrew), or a pass with the
    // format that fails (glossaries).
    for kind in KEEP_THEIR_PREAMBLE {
        assert!(
            hits.iter().any(|hit| *hit == kind),
            "{kind} did not load its format; loaded: {hits:?}"
        );
    }
}
