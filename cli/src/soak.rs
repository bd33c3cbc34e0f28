//! `texfleet soak`: a mixed load (documents that succeed, fail and time out) submitted at a
//! steady rate through the API, then a report of how every job ended, how many sandbox
//! containers are left and how much memory the scheduler holds. Exits non-zero when any job
//! ended other than expected or a container is left. `./dev/test` runs a short one.

use crate::client::{job_id, Client, ServerArgs};
use anyhow::Context as _;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct SoakArgs {
    /// Jobs to submit.
    #[arg(long, default_value_t = 60)]
    jobs: usize,
    /// Submissions per second.
    #[arg(long, default_value_t = 5.0)]
    rate: f64,
    #[command(flatten)]
    server: ServerArgs,
    /// The scheduler's pid, to report its resident memory.
    #[arg(long)]
    scheduler_pid: Option<u32>,
}

/// (name, document, timeout, the status it must end in)
const KINDS: [(&str, &str, u32, &str); 3] = [
    (
        "good",
        "\\documentclass{article}\\begin{document}Soak\\end{document}",
        30,
        "Succeeded",
    ),
    (
        "broken",
        "\\documentclass{article}\\begin{document}\\undefined\\end{document}",
        30,
        "Failed",
    ),
    ("slow", "\\loop\\iftrue\\repeat", 2, "TimedOut"),
];

pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    let client = Client::new(&args.server);
    let started = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(0.01));
    let mut submitted = Vec::new();
    for i in 0..args.jobs {
        let (kind, document, timeout, expected) = KINDS[i % KINDS.len()];
        let body = json!({ "project_id": client.project(), "input_latex": document, "timeout_seconds": timeout, "cache": false });
        let job = client
            .submit(&body, None)
            .await
            .with_context(|| format!("submission {i}"))?;
        submitted.push((job_id(&job)?, kind, expected));
        tokio::time::sleep(interval).await;
    }
    let submit_seconds = started.elapsed().as_secs_f64();

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut unexpected = Vec::new();
    for (id, kind, expected) in &submitted {
        let job = client.wait_terminal(id).await?;
        let status = job["status"].as_str().context("job status")?.to_string();
        *counts.entry(status.clone()).or_default() += 1;
        if status != *expected {
            unexpected.push(format!(
                "{kind} job {id} ended {status}, expected {expected}"
            ));
        }
    }
    // A job's container is removed while its outputs upload, so give removals a moment.
    let mut containers = texfleet_scheduler::count_sandbox_containers().await?;
    for _ in 0..50 {
        if containers == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        containers = texfleet_scheduler::count_sandbox_containers().await?;
    }
    println!(
        "jobs: {} submitted in {submit_seconds:.1} s, all terminal after {:.1} s",
        submitted.len(),
        started.elapsed().as_secs_f64()
    );
    for (status, count) in &counts {
        println!("  {status:<10} {count}");
    }
    println!("sandbox containers left: {containers}");
    if let Some(pid) = args.scheduler_pid {
        println!(
            "scheduler resident memory: {}",
            resident_memory(pid).unwrap_or_else(|| "unknown".into())
        );
    }
    for line in &unexpected {
        println!("unexpected: {line}");
    }
    anyhow::ensure!(
        unexpected.is_empty() && containers == 0,
        "the soak found problems"
    );
    Ok(())
}

fn resident_memory(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.trim_start_matches("VmRSS:").trim().to_string())
}
