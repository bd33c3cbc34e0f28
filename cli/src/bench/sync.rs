//! What an editor asks on every click and every page it shows, on a thesis of about thirty
//! pages: the SyncTeX queries (the first of a job, its file read and parsed, and the next
//! ones, the parsed file kept), forward and inverse; and page previews, rendered on demand and
//! then served from the store. Timed at the client.

use super::report::Figures;
use super::{ms, percentile};
use crate::client::Client;
use anyhow::ensure;
use serde_json::json;
use std::time::{Duration, Instant};

/// Queries of each kind timed.
const QUERIES: usize = 100;

pub async fn sync_queries(client: &Client, figures: &mut Figures) -> anyhow::Result<()> {
    let (document, lines) = thesis();
    let body = json!({ "project_id": client.project(), "input_latex": document, "cache": false });
    let job = client.submit(&body, Some(60)).await?;
    ensure!(
        job["status"] == "Succeeded",
        "the thesis ended {}",
        job["status"]
    );
    let id = job["id"].as_str().unwrap_or_default().to_string();
    let ask = |path: String| async move {
        let started = Instant::now();
        let answer = client.call(reqwest::Method::GET, &path, None).await?;
        anyhow::Ok((started.elapsed(), answer.unwrap_or_default()))
    };
    let (first, _) = ask(format!("/compile/{id}/sync/code?file=main.tex&line=3")).await?;
    let mut forward = Vec::new();
    let mut pages = 0;
    for query in 0..QUERIES {
        let line = 1 + (query * 37) % lines;
        let (took, answer) =
            ask(format!("/compile/{id}/sync/code?file=main.tex&line={line}")).await?;
        forward.push(took);
        for found in answer["pdf"].as_array().into_iter().flatten() {
            pages = pages.max(found["page"].as_u64().unwrap_or(0));
        }
    }
    ensure!(pages > 20, "the thesis made {pages} pages");
    let mut inverse = Vec::new();
    for query in 0..QUERIES {
        let page = 1 + query as u64 % pages;
        let (h, v) = (100 + query * 13 % 300, 100 + query * 29 % 500);
        let (took, answer) = ask(format!("/compile/{id}/sync/pdf?page={page}&h={h}&v={v}")).await?;
        ensure!(
            answer["code"][0]["file"] == "main.tex",
            "page {page}: {answer}"
        );
        inverse.push(took);
    }
    let quantiles =
        |samples: &[Duration]| (ms(percentile(samples, 0.5)), ms(percentile(samples, 0.9)));
    let ((forward_p50, forward_p90), (inverse_p50, inverse_p90)) =
        (quantiles(&forward), quantiles(&inverse));
    println!(
        "\nSyncTeX queries on a {pages}-page thesis: first (read and parsed) {:.1} ms | forward p50 {forward_p50:.2} ms, p90 {forward_p90:.2} ms | inverse p50 {inverse_p50:.2} ms, p90 {inverse_p90:.2} ms",
        ms(first)
    );
    let previews = page_previews(client, &id).await?;
    figures.sync = json!({
        "pages": pages, "first_ms": ms(first), "forward_p50_ms": forward_p50,
        "forward_p90_ms": forward_p90, "inverse_p50_ms": inverse_p50, "inverse_p90_ms": inverse_p90,
        "previews": previews,
    });
    Ok(())
}

/// Renders of the first page timed one after another (each at a width of its own, so each is
/// a render), then the same images asked again (served from the store).
const RENDERS: u32 = 20;

async fn page_previews(client: &Client, id: &str) -> anyhow::Result<serde_json::Value> {
    let mut rendered = Vec::new();
    let mut stored = Vec::new();
    for round in [&mut rendered, &mut stored] {
        for width in (0..RENDERS).map(|n| 400 + n) {
            let started = Instant::now();
            let png = client.output(id, &format!("pages/1?width={width}")).await?;
            round.push(started.elapsed());
            ensure!(png.starts_with(b"\x89PNG"), "page 1 at {width} is no PNG");
        }
    }
    let quantiles =
        |samples: &[Duration]| (ms(percentile(samples, 0.5)), ms(percentile(samples, 0.9)));
    let ((rendered_p50, rendered_p90), (stored_p50, stored_p90)) =
        (quantiles(&rendered), quantiles(&stored));
    println!(
        "First-page previews: rendered on demand p50 {rendered_p50:.1} ms, p90 {rendered_p90:.1} ms | from the store p50 {stored_p50:.1} ms, p90 {stored_p90:.1} ms"
    );
    Ok(json!({
        "rendered_p50_ms": rendered_p50, "rendered_p90_ms": rendered_p90,
        "stored_p50_ms": stored_p50, "stored_p90_ms": stored_p90,
    }))
}

/// A report of six chapters of five sections of prose, and its number of lines.
fn thesis() -> (String, usize) {
    let sentence = "The measured values agree with the model within the stated uncertainty, \
                    and the residuals show no structure that a further term would explain. ";
    let mut document = String::from("\\documentclass{report}\n\\begin{document}\n");
    for chapter in 1..=6 {
        document.push_str(&format!("\\chapter{{Chapter {chapter}}}\n"));
        for section in 1..=5 {
            document.push_str(&format!("\\section{{Section {chapter}.{section}}}\n"));
            for _ in 0..4 {
                document.push_str(&sentence.repeat(6));
                document.push_str("\n\n");
            }
        }
    }
    document.push_str("\\end{document}\n");
    let lines = document.lines().count();
    (document, lines)
}
