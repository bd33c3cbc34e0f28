//! A large project sent by content hash (`texfleet compile --files`'s way) beside the same
//! project sent whole as multipart, where that fits the request cap: the bytes each sends and
//! the time from the first byte to the job's end, for the first compile, an edit of the
//! `.tex` file, and an unchanged resubmission. The figures are random bytes whose presence the
//! article checks (a box per figure, an error if one is missing) without TeX reading them:
//! what is measured is moving them, not typesetting them.

use super::report::Figures;
use super::{ms, ARTICLE, BIBLIOGRAPHY};
use crate::client::Client;
use crate::upload::{submit_by_hash, ByHash};
use anyhow::ensure;
use serde_json::{json, Value};
use std::time::Instant;
use texfleet_core::model::ContentHash;

/// Bytes of one figure.
const FIGURE_BYTES: usize = 4 * 1024 * 1024;

/// A project of `figures` figures and the article that places them; `edit` goes into the
/// article's text.
fn project(figures: usize, seed: u64, edit: &str) -> Vec<(String, Vec<u8>)> {
    let mut placed = String::new();
    let mut files = Vec::new();
    for figure in 0..figures {
        let path = format!("figures/figure-{figure:02}.jpg");
        placed.push_str(&format!(
            "\\IfFileExists{{{path}}}{{\\fbox{{figure {figure}}}}}{{\\errmessage{{no {path}}}}}\n"
        ));
        let mut bytes = vec![0u8; FIGURE_BYTES];
        let mut state = seed ^ (figure as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for chunk in bytes.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        files.push((path, bytes));
    }
    // The run's seed in a comment: each run's article is new to the project's files.
    let ending = format!("{placed}{edit}\n% run {seed:x}\n\\end{{document}}");
    let article = ARTICLE.main.replacen("\\end{document}", &ending, 1);
    files.push(("main.tex".into(), article.into_bytes()));
    files.push(("refs.bib".into(), BIBLIOGRAPHY.as_bytes().to_vec()));
    files
}

/// One way of sending: the bytes on the wire and the time to the job's end.
struct Sent {
    bytes: usize,
    ms: f64,
}

async fn by_hash(client: &Client, files: &[(String, Vec<u8>)]) -> anyhow::Result<Sent> {
    let metadata = json!({ "project_id": client.project(), "main": "main.tex" });
    // What goes besides the uploads: the hashes asked about, then the request naming them.
    let named: Vec<Value> = files
        .iter()
        .map(|(path, content)| json!({ "path": path, "sha256": ContentHash::of(content).hex() }))
        .collect();
    let mut body = metadata.clone();
    body["files"] = Value::Array(named);
    let request = serde_json::to_vec(&body)?.len() + files.len() * 67;
    let started = Instant::now();
    let key = uuid::Uuid::new_v4().to_string();
    let ByHash::Submitted(job, uploaded) =
        submit_by_hash(client, &metadata, files, &key, true).await?
    else {
        anyhow::bail!("the server has no project files");
    };
    finished(client, job).await?;
    Ok(Sent {
        bytes: uploaded + request,
        ms: ms(started.elapsed()),
    })
}

async fn whole(client: &Client, files: &[(String, Vec<u8>)]) -> anyhow::Result<Sent> {
    let metadata = json!({ "project_id": client.project(), "main": "main.tex" });
    let started = Instant::now();
    let key = uuid::Uuid::new_v4().to_string();
    let job = client.submit_files(&metadata, files, &key).await?;
    finished(client, job).await?;
    Ok(Sent {
        bytes: files.iter().map(|(_, content)| content.len()).sum(),
        ms: ms(started.elapsed()),
    })
}

async fn finished(client: &Client, job: Value) -> anyhow::Result<()> {
    let id = crate::client::job_id(&job)?;
    let job = client.wait_terminal(&id).await?;
    ensure!(
        job["status"] == "Succeeded",
        "the large project ended {job}"
    );
    Ok(())
}

/// Sends a project of 25 figures (100 MiB: more than the request cap) and one of 3 (12 MiB,
/// which fits) both ways, and prints the figures.
pub async fn large_project(
    client: &Client,
    max_body_bytes: usize,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    println!(
        "\na large project: bytes sent and time to Succeeded, by hash vs sent whole (multipart):"
    );
    let mut rows = Vec::new();
    let seed = rand_seed();
    for count in [25, 3] {
        let size = count * FIGURE_BYTES;
        // Each way sends figures of its own, so that neither finds the other's result or files.
        for (way, seed) in [
            ("by hash", seed ^ count as u64),
            ("whole", !seed ^ count as u64),
        ] {
            if way == "whole" && size >= max_body_bytes {
                println!(
                    "  {:>5.1} MB sent whole: does not fit the request cap",
                    size as f64 / 1e6
                );
                continue;
            }
            for (step, edit) in [
                ("first compile", ""),
                ("an edit of main.tex", "Edited."),
                ("unchanged", "Edited."),
            ] {
                let files = project(count, seed, edit);
                let sent = match way {
                    "by hash" => by_hash(client, &files).await?,
                    _ => whole(client, &files).await?,
                };
                println!(
                    "  {:>5.1} MB {way:<7} {step:<20} {:>9.3} MB sent, {:>6.0} ms to Succeeded",
                    size as f64 / 1e6,
                    sent.bytes as f64 / 1e6,
                    sent.ms
                );
                rows.push(json!({ "project_bytes": size, "way": way, "step": step,
                                  "bytes_sent": sent.bytes, "ms": sent.ms }));
            }
        }
    }
    figures.large_project = Value::Array(rows);
    Ok(())
}

/// A seed of its own for each run, so that a run uploads what earlier runs did not.
fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| since.as_nanos() as u64)
}
