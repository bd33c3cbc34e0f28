//! Second compiles: an edited copy of a document compiled again after a first compile. The
//! service starts from what the project's first compile left (the preamble format and the
//! auxiliary files); the floor's second run is the compiler run again where its auxiliary
//! files are (latexmk again in the same directory, as on a laptop), without a format.

use super::floor::{durations, floor, floor_job};
use super::{ms, percentile_ms, submit, submit_succeeded, Document, Figures};
use crate::client::Client;
use serde_json::json;
use std::time::Instant;
use texfleet_core::Config;
use texfleet_scheduler::Sandbox;

/// The sentence each second compile adds after `\begin{document}`: new in every bench, so
/// that no earlier bench's identical request is answered by the result cache.
fn edit(bench: &str, run: usize) -> String {
    format!("Edit number {run} of bench {bench}. ")
}

pub async fn second_compiles(
    config: &Config,
    sandbox: &Sandbox,
    client: &Client,
    documents: &[&Document],
    runs: usize,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    let bench = uuid::Uuid::new_v4().simple().to_string();
    println!("\nsecond compile of an edited copy: the service (preamble format and auxiliary files kept) vs the floor's second run (auxiliary files kept):");
    for document in documents {
        let first = floor(
            config,
            sandbox,
            &floor_job(document, None),
            Default::default(),
        )
        .await?;
        let previous = first.handed_on();
        let mut floor_runs = Vec::new();
        for run in 0..runs {
            let job = floor_job(document, Some(&edit(&bench, run)));
            floor_runs.push(floor(config, sandbox, &job, previous.clone()).await?);
        }
        // The project's first compile of this document (edited too: the unchanged document
        // is the result cache's), then the edited copies.
        submit(client, document, Some(&edit(&bench, runs)), true).await?;
        let mut service = Vec::new();
        let mut cache = Vec::new();
        for run in 0..runs {
            let started = Instant::now();
            let job = submit_succeeded(client, document, Some(&edit(&bench, run)), true).await?;
            service.push(ms(started.elapsed()));
            cache.push(format!(
                "{}{}",
                job["preamble_cache"].as_str().unwrap_or("off"),
                if job["incremental"] == true {
                    "+aux"
                } else {
                    ""
                }
            ));
        }
        let floor_ms = durations(&floor_runs);
        let (service_p50, floor_p50) =
            (percentile_ms(&service, 0.5), percentile_ms(&floor_ms, 0.5));
        cache.sort();
        cache.dedup();
        println!(
            "  {:<8} service p50 {:>6.0} ms ({}) | floor second run p50 {:>6.0} ms | ratio {:.2}",
            document.name,
            service_p50,
            cache.join(", "),
            floor_p50,
            service_p50 / floor_p50
        );
        figures.second.push(json!({
            "document": document.name,
            "service_ms": service,
            "floor_second_run_ms": floor_ms,
            "cache": cache,
            "ratio_p50": service_p50 / floor_p50,
        }));
    }
    Ok(())
}
