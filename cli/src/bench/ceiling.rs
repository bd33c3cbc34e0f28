//! Postgres' own ceiling for the ingest and queue figures: `pgbench` runs the scripts in
//! `bench/pgbench` (the same writes, without the service around them) on the same database
//! and cores, so that each figure reads as a share of what Postgres itself can do here.

use super::profile;
use anyhow::{bail, Context as _};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use uuid::Uuid;

const INGEST: &str = include_str!("../../../bench/pgbench/ingest.sql");
const CLAIM_ONE: &str = include_str!("../../../bench/pgbench/claim_one.sql");
const CLAIM_BATCH: &str = include_str!("../../../bench/pgbench/claim_batch.sql");
/// Jobs a transaction of `claim_batch.sql` claims and completes.
const BATCH: usize = 16;

/// Jobs per second Postgres takes, in each shape.
pub(super) struct Ceiling {
    /// With `--perf`: each process's CPU per job of the ingest and batched-claim runs.
    pub(super) ingest_processes: Option<Vec<(String, f64)>>,
    pub(super) claim_batched_processes: Option<Vec<(String, f64)>>,
    /// A job and its file written in one durable transaction each.
    pub(super) ingest: f64,
    /// Claimed and completed one at a time.
    pub(super) claim_one: f64,
    /// Claimed and completed in batches of [`BATCH`].
    pub(super) claim_batched: f64,
}

/// Runs each script with `clients` connections on the database at `owner_url` (migrated, with
/// `project` in it) for about `jobs` jobs of TeX Live `texlive`: ingest, both claims after an
/// ingest each; recorded by `perf` into `perf` when given.
pub(super) async fn measure(
    pgbench: &Path,
    perf: Option<&Path>,
    owner_url: &str,
    (project, texlive): (Uuid, &str),
    clients: usize,
    jobs: usize,
) -> anyhow::Result<Ceiling> {
    let run = |script: &'static str, transactions: usize| {
        let (pgbench, url) = (pgbench.to_owned(), owner_url.to_owned());
        let defines = [format!("project={project}"), format!("texlive={texlive}")];
        tokio::task::spawn_blocking(move || {
            pgbench_tps(&pgbench, &url, &defines, script, clients, transactions)
        })
    };
    let per_client = (jobs / clients).max(BATCH);
    let recording = profile::start_if(perf, "ingest-pgbench").await?;
    let ingest = run(INGEST, per_client).await??;
    let ingest_processes = profile::per_job_if(recording, per_client * clients).await?;
    let claim_one = run(CLAIM_ONE, per_client).await??;
    run(INGEST, per_client).await??;
    let recording = profile::start_if(perf, "queue-pgbench").await?;
    let claim_batched = run(CLAIM_BATCH, per_client / BATCH).await??;
    let claim_batched_processes =
        profile::per_job_if(recording, per_client / BATCH * BATCH * clients).await?;
    Ok(Ceiling {
        ingest,
        claim_one,
        claim_batched: claim_batched * BATCH as f64,
        ingest_processes,
        claim_batched_processes,
    })
}

/// Transactions per second of one pgbench run of `script` (given on its stdin) with its
/// variables `defines` (`name=value`), without its connection time.
fn pgbench_tps(
    pgbench: &Path,
    url: &str,
    defines: &[String],
    script: &str,
    clients: usize,
    transactions: usize,
) -> anyhow::Result<f64> {
    let mut child = Command::new(pgbench)
        .args(["--no-vacuum", "--file=-", "--jobs=2"])
        .arg(format!("--client={clients}"))
        .arg(format!("--transactions={transactions}"))
        .args(defines.iter().map(|define| format!("--define={define}")))
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", pgbench.display()))?;
    child
        .stdin
        .take()
        .context("pgbench's stdin")?
        .write_all(script.as_bytes())?;
    let output = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "{} failed: {stdout}{}",
            pgbench.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    tps(&stdout).with_context(|| format!("no tps in pgbench's output: {stdout}"))
}

/// The tps of pgbench's report: `tps = 3070.123456 (without initial connection time)`.
fn tps(report: &str) -> Option<f64> {
    report
        .lines()
        .find_map(|line| line.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tps_is_read_from_pgbench_s_report() {
        let report = "number of failed transactions: 0 (0.000%)\n\
                      latency average = 5.206 ms\n\
                      initial connection time = 12.021 ms\n\
                      tps = 3073.517206 (without initial connection time)\n";
        assert_eq!(tps(report), Some(3073.517206));
        assert_eq!(tps("latency average = 5.206 ms\n"), None);
    }
}
