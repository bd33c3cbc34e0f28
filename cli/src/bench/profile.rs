//! Where a stage's CPU goes, process by process: `perf record` on every core around the stage
//! (the software clock at 1 kHz, so that a sample is a millisecond of CPU), then each sample
//! counted to its process. `texfleet bench --perf <dir>` prints this per job for the service's
//! and the peer's hello throughput, and leaves the recordings (with call graphs) in `<dir>`
//! for flame graphs.

use anyhow::{ensure, Context as _};
use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Samples per second of each core: one sample is a millisecond of CPU.
const SAMPLES_PER_SECOND: u32 = 1000;

/// A `perf record` of every core, running.
pub struct Recording {
    perf: Child,
    path: PathBuf,
}

/// Starts recording into `<dir>/<stage>.data`, and returns once perf writes.
async fn start(dir: &Path, stage: &str) -> anyhow::Result<Recording> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{stage}.data"));
    let _ = std::fs::remove_file(&path);
    let perf = Command::new("perf")
        .args(["record", "-a", "-g", "-e", "cpu-clock", "-F"])
        .arg(SAMPLES_PER_SECOND.to_string())
        .arg("-o")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("perf (Debian's linux-perf) is needed for --perf")?;
    // perf writes its header once its counters are open on every core.
    for _ in 0..100 {
        if std::fs::metadata(&path).is_ok_and(|file| file.len() > 0) {
            return Ok(Recording { perf, path });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("perf record did not start")
}

impl Recording {
    /// Stops the recording and returns the milliseconds of CPU per job of each process, the
    /// most first (idle excluded).
    fn per_job(mut self, jobs: usize) -> anyhow::Result<Vec<(String, f64)>> {
        let pid = self.perf.id();
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()?;
        // perf ends by SIGINT, or with 128 + SIGINT, once it has written the recording (perf
        // script below reads it whole or fails).
        let ended = self.perf.wait()?;
        ensure!(
            ended.success() || ended.code() == Some(130) || ended.signal() == Some(2),
            "perf record failed: {ended}"
        );
        let script = Command::new("perf")
            .args(["script", "-F", "pid,comm", "-i"])
            .arg(&self.path)
            .stderr(Stdio::null())
            .output()?;
        ensure!(script.status.success(), "perf script failed");
        let mut samples: HashMap<String, usize> = HashMap::new();
        // A live process is named by its command line (texfleet's threads carry tokio's
        // names); any other by the sample's own command (a forked child is its parent until
        // it runs its program: `pdflatex` starts as `texfleet-supervisor`).
        let mut live: HashMap<u32, Option<String>> = HashMap::new();
        for line in String::from_utf8_lossy(&script.stdout).lines() {
            let Some((comm, pid)) = line.trim().rsplit_once(' ') else {
                continue;
            };
            let Ok(pid) = pid.parse::<u32>() else {
                continue;
            };
            if pid == 0 {
                continue;
            }
            let name = live.entry(pid).or_insert_with(|| process_name(pid));
            let name = name.clone().unwrap_or_else(|| comm.trim().to_string());
            *samples.entry(name).or_default() += 1;
        }
        let per_sample_ms = 1000.0 / SAMPLES_PER_SECOND as f64;
        let mut processes: Vec<(String, f64)> = samples
            .into_iter()
            .map(|(name, count)| (name, count as f64 * per_sample_ms / jobs.max(1) as f64))
            .collect();
        processes.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(processes)
    }
}

/// [`start`] when `dir` is given.
pub async fn start_if(dir: Option<&Path>, stage: &str) -> anyhow::Result<Option<Recording>> {
    match dir {
        Some(dir) => Ok(Some(start(dir, stage).await?)),
        None => Ok(None),
    }
}

/// [`Recording::per_job`] of a recording when there is one.
pub async fn per_job_if(
    recording: Option<Recording>,
    jobs: usize,
) -> anyhow::Result<Option<Vec<(String, f64)>>> {
    match recording {
        Some(recording) => Ok(Some(
            tokio::task::spawn_blocking(move || recording.per_job(jobs)).await??,
        )),
        None => Ok(None),
    }
}

/// A live process's name: its program, and for texfleet its subcommand (`texfleet
/// scheduler`). None once it has ended (the sample's thread name stands for it then).
fn process_name(pid: u32) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut args = cmdline
        .split(|byte| *byte == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned());
    let program = args.next()?;
    let program = program.rsplit('/').next().unwrap_or(&program).to_string();
    match program.as_str() {
        "texfleet" => Some(format!("texfleet {}", args.next().unwrap_or_default())),
        "" => None,
        _ => Some(program.split(':').next().unwrap_or(&program).to_string()),
    }
}

/// Prints `what`'s CPU per job by process, when it was recorded.
pub fn print(what: &str, processes: &Option<Vec<(String, f64)>>) {
    if let Some(processes) = processes {
        println!(
            "  {what}'s CPU per job by process (perf): {}",
            describe(processes, 12)
        );
    }
}

/// Each process's CPU per job as a JSON object, when it was recorded.
pub fn json(processes: &Option<Vec<(String, f64)>>) -> serde_json::Value {
    match processes {
        Some(processes) => processes
            .iter()
            .map(|(name, ms)| (name.clone(), serde_json::Value::from(*ms)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        None => serde_json::Value::Null,
    }
}

/// The `most` costliest processes and the rest, as one line.
fn describe(processes: &[(String, f64)], most: usize) -> String {
    let total: f64 = processes.iter().map(|(_, ms)| ms).sum();
    let mut parts: Vec<String> = processes
        .iter()
        .take(most)
        .map(|(name, ms)| format!("{name} {}", short(*ms)))
        .collect();
    let rest: f64 = processes.iter().skip(most).map(|(_, ms)| ms).sum();
    if rest > 0.0 {
        parts.push(format!("other {}", short(rest)));
    }
    format!("{} ms: {}", short(total), parts.join(", "))
}

/// Milliseconds with the digits that tell: none from 10 up, two below 1.
fn short(ms: f64) -> String {
    match ms {
        ms if ms >= 10.0 => format!("{ms:.0}"),
        ms if ms >= 1.0 => format!("{ms:.1}"),
        ms => format!("{ms:.2}"),
    }
}
