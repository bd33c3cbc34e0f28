//! Real documents (`tests/real-documents/`): the sample papers, theses, slides and package
//! documentation that TeX Live's publisher classes and packages ship in Debian (each folder's
//! `document.json` names the Debian package, version and folder it came from). Most come with
//! the PDF their authors built: `expected.txt` is its text (pdftotext). Each document is
//! compiled through the service as a new user would send it, and its text compared with the
//! authors': the words of both, counted, must overlap by `min_similarity` (0.85 unless the
//! document says otherwise, and why, in `why_lower`). A document without a PDF of its authors
//! (`expected.txt` absent) must compile, and its text hold the phrases of its `contains`.
//!
//! Run by `./dev/corpus`, which CI runs; ignored by a plain `cargo test`.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{files_field, files_of, TestApp};
use unicode_normalization::UnicodeNormalization;

const DEFAULT_SIMILARITY: f64 = 0.85;

fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("real-documents");
    let mut documents: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("document.json").exists())
        .collect();
    documents.sort();
    // ./dev/corpus ONLY=<id,id> compiles those alone.
    if let Ok(only) = std::env::var("ONLY") {
        let wanted: Vec<&str> = only.split(',').collect();
        documents.retain(|path| wanted.iter().any(|id| path.ends_with(id)));
    }
    documents
}

/// The words of a text, lower-cased, each counted. NFKC first: fonts map the same letter to a
/// presentation form or not (Arabic's positional forms), and ligatures to one character or two.
fn words(text: &str) -> HashMap<String, usize> {
    let text: String = text.nfkc().collect();
    let mut counts = HashMap::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.chars().count() > 1 {
            *counts.entry(word.to_lowercase()).or_insert(0) += 1;
        }
    }
    counts
}

/// How much two texts share: the words in common, counted, over the larger text's words.
fn similarity(expected: &str, actual: &str) -> f64 {
    let (expected, actual) = (words(expected), words(actual));
    let common: usize = expected
        .iter()
        .map(|(word, n)| (*n).min(actual.get(word).copied().unwrap_or(0)))
        .sum();
    let size = |counts: &HashMap<String, usize>| counts.values().sum::<usize>();
    let larger = size(&expected).max(size(&actual)).max(1);
    common as f64 / larger as f64
}

struct Outcome {
    id: String,
    engine: String,
    seconds: f64,
    verdict: Result<String, String>,
}

async fn judge(app: &TestApp, dir: &Path, job: &Value) -> Result<String, String> {
    if job["status"] != "Succeeded" {
        return Err(format!("{}: {}", job["status"], job["error"]["message"]));
    }
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("document.json")).unwrap()).unwrap();
    let text = app.text_of(job.id()).await;
    match std::fs::read_to_string(dir.join("expected.txt")) {
        Ok(expected) => {
            let needed = meta["min_similarity"]
                .as_f64()
                .unwrap_or(DEFAULT_SIMILARITY);
            let found = similarity(&expected, &text);
            if found >= needed {
                Ok(format!("{found:.2}"))
            } else {
                Err(format!("text similarity {found:.2} < {needed}"))
            }
        }
        Err(_) => {
            // Headings may be set in capitals (IEEEtran's, MNRAS's).
            let folded = text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase();
            let missing: Vec<&str> = meta["contains"]
                .as_array()
                .expect("a document without expected.txt names what its PDF contains")
                .iter()
                .filter_map(Value::as_str)
                .filter(|phrase| !folded.contains(&phrase.to_lowercase()))
                .collect();
            match missing.is_empty() {
                true => Ok("compiled".into()),
                false => Err(format!("the PDF lacks {missing:?}")),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by ./dev/corpus"]
async fn real_documents_compile_to_their_authors_text() {
    let app = TestApp::spawn_with(|config| {
        config.max_running_per_project = 8;
        config.idle_project_slots = 0;
        config.kept_documents_per_project = 256;
        config.max_body_bytes = 64 * 1024 * 1024;
    })
    .await;
    let documents = documents();
    let mut submitted = Vec::new();
    for dir in &documents {
        let meta: Value =
            serde_json::from_slice(&std::fs::read(dir.join("document.json")).unwrap()).unwrap();
        let request = json!({
            "engine": meta["engine"],
            "main": meta["main"],
            // The largest timeout: this test judges text, `texfleet bench` judges speed, and
            // a loaded CI machine runs the heaviest documents at a fraction of this one's pace.
            "timeout_seconds": 300,
            "files": files_field(files_of(&dir.join("files"))),
        });
        let job = app.submit(request).await;
        submitted.push((dir.clone(), meta, job));
    }
    let mut outcomes = Vec::new();
    for (dir, meta, job) in submitted {
        let id = job.id().to_string();
        let job = app.wait_terminal(&id, Duration::from_secs(3600)).await;
        let verdict = judge(&app, &dir, &job).await;
        outcomes.push(Outcome {
            id: dir.file_name().unwrap().to_string_lossy().into_owned(),
            engine: meta["engine"].as_str().unwrap_or("?").to_string(),
            seconds: job["duration_ms"].as_f64().unwrap_or(0.0) / 1000.0,
            verdict,
        });
    }
    println!("\n| document | engine | compile s | result |\n|---|---|---|---|");
    for outcome in &outcomes {
        let result = match &outcome.verdict {
            Ok(score) => format!("ok {score}"),
            Err(why) => format!("FAILED {why}"),
        };
        println!(
            "| {} | {} | {:.1} | {} |",
            outcome.id, outcome.engine, outcome.seconds, result
        );
    }
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.verdict.is_err()).collect();
    println!(
        "\n{} of {} real documents compiled to their authors' text",
        outcomes.len() - failed.len(),
        outcomes.len()
    );
    // The reasons go into the panic message: CI's excerpt may keep only its end.
    assert!(
        failed.is_empty(),
        "failed: {:?}",
        failed
            .iter()
            .map(|o| format!(
                "{} ({:.1} s): {}",
                o.id,
                o.seconds,
                o.verdict.as_ref().unwrap_err()
            ))
            .collect::<Vec<_>>()
    );
}

#[test]
fn the_similarity_counts_words_in_common_over_the_larger_text() {
    assert_eq!(similarity("a bb cc dd", "bb cc dd"), 1.0);
    assert!((similarity("bb cc dd ee", "bb cc xx yy") - 0.5).abs() < 1e-9);
    assert!(similarity("bb bb bb bb", "bb") < 0.3);
    assert_eq!(similarity("\u{FE8D}\u{FEDF}", "\u{0627}\u{0644}"), 1.0);
}
