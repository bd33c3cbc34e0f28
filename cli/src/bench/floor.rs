//! The references the service is measured against, all in sandbox containers of the same
//! image on the same cores: the floor (a compile in a container started beforehand, as a
//! warm-pool container waits), the peer (a container created, started and removed for each
//! compile, as `docker run --rm` in a service without a pool), and one engine pass (the
//! driver's own timing of its first pass in the floor's container: the compiler alone).

use super::{cpu, ms, Document};
use anyhow::ensure;
use std::io::Read;
use std::time::{Duration, Instant};
use texfleet_core::model::{ClaimedJob, Engine, SourceFile, MAIN_FILE};
use texfleet_core::Config;
use texfleet_sandbox::{CompileState, LOG_FILE};
use texfleet_scheduler::{handed_on, run_floor, start_floor, Sandbox, SandboxRun};
use uuid::Uuid;

/// `document` as the scheduler would have claimed it, its main file edited by `edit` (a
/// sentence after `\begin{document}`, for second compiles).
pub fn floor_job(document: &Document, edit: Option<&str>) -> ClaimedJob {
    let main = match edit {
        Some(edit) => document.main.replacen(
            "\\begin{document}",
            &format!("\\begin{{document}}{edit}\n"),
            1,
        ),
        None => document.main.to_string(),
    };
    let mut files = vec![SourceFile {
        path: MAIN_FILE.to_string(),
        content: main.into_bytes(),
    }];
    if let Some(bibliography) = document.bibliography {
        files.push(SourceFile {
            path: "refs.bib".to_string(),
            content: bibliography.as_bytes().to_vec(),
        });
    }
    ClaimedJob {
        id: Uuid::new_v4(),
        project_id: Uuid::nil(),
        engine: Engine::Pdflatex,
        // The floor runs in the sandbox it is given, whatever the year.
        texlive: String::new(),
        halt_on_error: false,
        draft: false,
        wordcount: false,
        check: None,
        thumbnail_width: None,
        timeout_seconds: 120,
        attempt: 1,
        waited_seconds: 0.0,
        source_date_epoch: 0,
        main: MAIN_FILE.to_string(),
        use_cache: false,
        files,
        stored_files: Vec::new(),
    }
}

/// How one reference compile went.
pub struct Run {
    pub elapsed: Duration,
    pub output: SandboxRun,
}

/// One floor compile in a started container, from the job spec written to the outputs read;
/// `previous` are the auxiliary files of an earlier run in the same "directory".
pub async fn floor(
    config: &Config,
    sandbox: &Sandbox,
    job: &ClaimedJob,
    previous: CompileState,
) -> anyhow::Result<Run> {
    let container = start_floor(sandbox).await?;
    let started = Instant::now();
    let output = run_floor(sandbox, config, Some(container), job, previous).await?;
    finished(started, output)
}

/// One peer compile: a container created for the job and removed after it, all timed.
pub async fn peer(config: &Config, sandbox: &Sandbox, job: &ClaimedJob) -> anyhow::Result<Run> {
    let started = Instant::now();
    let output = run_floor(sandbox, config, None, job, CompileState::default()).await?;
    sandbox.settle().await;
    finished(started, output)
}

fn finished(started: Instant, output: SandboxRun) -> anyhow::Result<Run> {
    let elapsed = started.elapsed();
    ensure!(
        output.stdout.windows(5).any(|bytes| bytes == b"%PDF-"),
        "a reference compile produced no PDF"
    );
    Ok(Run { elapsed, output })
}

impl Run {
    /// What this run hands on to a second compile.
    pub fn handed_on(&self) -> CompileState {
        handed_on(&self.output)
    }

    /// The first engine pass's time as the driver logged it (`pdflatex pass 1 (exit 0, 63 ms)`).
    pub fn first_pass_ms(&self) -> Option<f64> {
        let mut archive = tar::Archive::new(self.output.stdout.as_slice());
        let mut log = String::new();
        for mut entry in archive.entries().ok()?.flatten() {
            if entry.path_bytes().as_ref() == LOG_FILE.as_bytes() {
                entry.read_to_string(&mut log).ok()?;
            }
        }
        let line = log.lines().find(|line| line.contains(" pass 1 ("))?;
        let took = line.rsplit(", ").next()?.strip_suffix(" ms)")?;
        took.parse().ok()
    }
}

/// A reference's throughput and what it cost the machine.
pub struct Throughput {
    pub per_second: f64,
    /// Busy CPU per compile while the compiles ran (the peer's: container lifecycles too).
    pub cpu_ms_per_job: f64,
    /// Busy CPU per container started before the clock (the floor's; none for the peer).
    pub start_cpu_ms: f64,
}

/// Compiles per second of `document` on `lanes` parallel lanes, `total` in all: with
/// containers started beforehand (the floor) or created and removed per compile (the peer).
pub async fn throughput(
    config: &Config,
    sandbox: &Sandbox,
    document: &Document,
    lanes: usize,
    total: usize,
    warm: bool,
) -> anyhow::Result<Throughput> {
    let per_lane = total.div_ceil(lanes);
    let jobs = per_lane * lanes;
    // For the floor, every container is started before the clock: the compiles alone.
    let start_cpu = cpu::busy();
    let mut containers = Vec::new();
    for _ in 0..lanes {
        let mut lane = Vec::new();
        for _ in 0..per_lane {
            lane.push(match warm {
                true => Some(start_floor(sandbox).await?),
                false => None,
            });
        }
        containers.push(lane);
    }
    let start_cpu_ms = match warm {
        true => cpu::ms_per_job(start_cpu, jobs),
        false => 0.0,
    };
    let compile_cpu = cpu::busy();
    let started = Instant::now();
    let runs = containers.into_iter().map(|lane| async move {
        for container in lane {
            let job = floor_job(document, None);
            let output =
                run_floor(sandbox, config, container, &job, CompileState::default()).await?;
            finished(Instant::now(), output)?;
        }
        anyhow::Ok(())
    });
    for result in futures::future::join_all(runs).await {
        result?;
    }
    // The peer's removals are part of its work.
    sandbox.settle().await;
    Ok(Throughput {
        per_second: jobs as f64 / started.elapsed().as_secs_f64(),
        cpu_ms_per_job: cpu::ms_per_job(compile_cpu, jobs),
        start_cpu_ms,
    })
}

/// Milliseconds of each run.
pub fn durations(runs: &[Run]) -> Vec<f64> {
    runs.iter().map(|run| ms(run.elapsed)).collect()
}
