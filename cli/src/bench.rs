//! `texfleet bench`: the service's speed beside what the compiler alone achieves, in one run
//! on the running stack (`./dev/bench`). Every figure is printed beside its floor as a ratio,
//! so that runs on noisy machines compare. BENCHMARKS.md records the latest figures.
//!
//! - floor: the same compile (supervisor and compile driver) in a sandbox container started
//!   beforehand, nothing around it: no API, queue, container start or upload;
//! - end to end: POST to Succeeded (PDF stored) through the API, per document, p50 and p95;
//! - throughput: hello-world jobs per second at saturation, beside the floor's on as many
//!   containers as the scheduler has slots;
//! - API ingest: POST /compile per second and p99, on a database no scheduler serves;
//! - queue alone: claims and completions per second with a no-op sandbox.

mod ingest;

use crate::client::{job_id, Client, ServerArgs};
use anyhow::{ensure, Context as _};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Outcome};
use texfleet_core::model::{ClaimedJob, Engine, JobStatus, SourceFile, MAIN_FILE};
use texfleet_core::{token, Config};
use texfleet_scheduler::{run_floor, start_floor, Sandbox};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Sequential end-to-end runs per document (and floor runs per document).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Hello-world jobs for the throughput figure.
    #[arg(long, default_value_t = 200)]
    throughput_jobs: usize,
    /// POST /compile requests for the ingest figure.
    #[arg(long, default_value_t = 5000)]
    ingest_requests: usize,
    /// Requests in flight at once for the ingest figure.
    #[arg(long, default_value_t = 32)]
    ingest_concurrency: usize,
    /// Concurrent workers claiming and completing for the queue figure.
    #[arg(long, default_value_t = 8)]
    queue_workers: usize,
    #[command(flatten)]
    server: ServerArgs,
}

struct Document {
    name: &'static str,
    main: &'static str,
    bibliography: Option<&'static str>,
}

const DOCUMENTS: [Document; 3] = [
    Document {
        name: "hello",
        main: include_str!("../../bench/hello.tex"),
        bibliography: None,
    },
    Document {
        name: "article",
        main: include_str!("../../bench/article.tex"),
        bibliography: Some(include_str!("../../bench/refs.bib")),
    },
    Document {
        name: "tikz",
        main: include_str!("../../bench/tikz.tex"),
        bibliography: None,
    },
];

pub async fn run(config: Config, args: BenchArgs) -> anyhow::Result<()> {
    let slots = config.scheduler_slots();
    println!(
        "texfleet bench: {} cores, {} scheduler slots, warm pool {}, {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        slots,
        config.warm_pool_size.unwrap_or(slots),
        OffsetDateTime::now_utc().date()
    );
    let sandbox = Sandbox::connect(&config, "bench", "bench").await?;
    let result = measure(&config, &args, &sandbox, slots).await;
    sandbox.settle().await;
    result
}

async fn measure(
    config: &Config,
    args: &BenchArgs,
    sandbox: &Sandbox,
    slots: usize,
) -> anyhow::Result<()> {
    let client = Client::new(&args.server);
    println!("\nend to end through the service (POST to Succeeded, PDF stored) vs the floor (the same compile in a started sandbox):");
    for document in &DOCUMENTS {
        let mut floor = Vec::new();
        for _ in 0..args.runs {
            floor.push(floor_compile(config, sandbox, document).await?);
        }
        let mut service = Vec::new();
        let mut phases = Phases::default();
        for _ in 0..args.runs {
            let started = Instant::now();
            let job = submit(&client, document, true, false).await?;
            ensure!(
                job["status"] == "Succeeded",
                "{} ended {}",
                document.name,
                job["status"]
            );
            service.push(started.elapsed());
            phases.add(&job, started.elapsed())?;
        }
        let (floor_p50, service_p50, service_p95) = (
            percentile(&floor, 0.5),
            percentile(&service, 0.5),
            percentile(&service, 0.95),
        );
        println!(
            "  {:<8} service p50 {:>6.0} ms  p95 {:>6.0} ms | floor p50 {:>6.0} ms | overhead {:>+5.0} ms | ratio {:.2}",
            document.name,
            ms(service_p50),
            ms(service_p95),
            ms(floor_p50),
            ms(service_p50) - ms(floor_p50),
            ms(service_p50) / ms(floor_p50)
        );
        println!(
            "           where the time goes (means): {}",
            phases.summary(args.runs)
        );
        let mut resubmitted = Vec::new();
        for _ in 0..args.runs {
            let started = Instant::now();
            let job = submit(&client, document, true, true).await?;
            ensure!(
                !job["reused_from"].is_null(),
                "an unchanged {} was compiled again: {job}",
                document.name
            );
            resubmitted.push(started.elapsed());
        }
        let resubmitted_p50 = percentile(&resubmitted, 0.5);
        println!(
            "           unchanged resubmission (result cache): p50 {:>6.1} ms | ratio to the floor {:.3}",
            ms(resubmitted_p50),
            ms(resubmitted_p50) / ms(floor_p50)
        );
    }

    let service_rate = service_throughput(&client, args).await?;
    let floor_rate = floor_throughput(config, sandbox, slots, args.throughput_jobs.min(40)).await?;
    println!(
        "\nthroughput at saturation ({} hello jobs): {service_rate:.2} jobs/s | floor {floor_rate:.2} jobs/s on {slots} containers | {:.0}% of the floor",
        args.throughput_jobs,
        100.0 * service_rate / floor_rate
    );

    ingest::ingest_and_queue(config, args).await
}

/// `document` as the scheduler would have claimed it.
fn floor_job(document: &Document) -> ClaimedJob {
    let mut files = vec![SourceFile {
        path: MAIN_FILE.to_string(),
        content: document.main.as_bytes().to_vec(),
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
        halt_on_error: false,
        timeout_seconds: 120,
        attempt: 1,
        waited_seconds: 0.0,
        source_date_epoch: 0,
        main: MAIN_FILE.to_string(),
        files,
    }
}

/// Whether a sandbox's output archive holds a PDF.
fn has_pdf(stdout: &[u8]) -> bool {
    stdout.windows(5).any(|bytes| bytes == b"%PDF-")
}

/// One floor compile in a started container: from the job spec written to the outputs read.
async fn floor_compile(
    config: &Config,
    sandbox: &Sandbox,
    document: &Document,
) -> anyhow::Result<Duration> {
    let container = start_floor(sandbox).await?;
    let started = Instant::now();
    let run = run_floor(sandbox, config, container, &floor_job(document)).await?;
    let elapsed = started.elapsed();
    ensure!(
        has_pdf(&run.stdout),
        "the floor compile of {} produced no PDF",
        document.name
    );
    Ok(elapsed)
}

/// Submits `document`; `cache` lets the server reuse an identical earlier result, which the
/// compile measurements must not.
async fn submit(
    client: &Client,
    document: &Document,
    wait: bool,
    cache: bool,
) -> anyhow::Result<Value> {
    let mut body =
        json!({ "project_id": client.project(), "input_latex": document.main, "cache": cache });
    if let Some(bibliography) = document.bibliography {
        body["files"] = json!([{ "path": "refs.bib", "content": bibliography }]);
    }
    client.submit(&body, wait.then_some(60)).await
}

/// Jobs per second from the first submission to the last job's end, by the server's clock.
async fn service_throughput(client: &Client, args: &BenchArgs) -> anyhow::Result<f64> {
    let mut ids = Vec::new();
    for _ in 0..args.throughput_jobs {
        ids.push(job_id(&submit(client, &DOCUMENTS[0], false, false).await?)?);
    }
    let mut first_created = None;
    let mut last_finished = None;
    for id in &ids {
        let job = client.wait_terminal(id).await?;
        ensure!(
            job["status"] == "Succeeded",
            "a throughput job ended {}",
            job["status"]
        );
        let created = parse_time(&job["created_at"])?;
        let finished = parse_time(&job["finished_at"])?;
        first_created = Some(first_created.map_or(created, |t: OffsetDateTime| t.min(created)));
        last_finished = Some(last_finished.map_or(finished, |t: OffsetDateTime| t.max(finished)));
    }
    let span =
        (last_finished.context("no jobs")? - first_created.context("no jobs")?).as_seconds_f64();
    Ok(ids.len() as f64 / span)
}

/// Hello-world compiles per second on `floors` containers in parallel.
async fn floor_throughput(
    config: &Config,
    sandbox: &Sandbox,
    lanes: usize,
    total: usize,
) -> anyhow::Result<f64> {
    // Every container is started before the clock: the floor is the compiles alone.
    let per_lane = total.div_ceil(lanes);
    let mut containers = Vec::new();
    for _ in 0..lanes {
        let mut lane = Vec::new();
        for _ in 0..per_lane {
            lane.push(start_floor(sandbox).await?);
        }
        containers.push(lane);
    }
    let started = Instant::now();
    let runs = containers.into_iter().map(|lane| async move {
        for container in lane {
            let run = run_floor(sandbox, config, container, &floor_job(&DOCUMENTS[0])).await?;
            ensure!(has_pdf(&run.stdout), "a floor compile produced no PDF");
        }
        anyhow::Ok(())
    });
    for result in futures::future::join_all(runs).await {
        result?;
    }
    Ok((per_lane * lanes) as f64 / started.elapsed().as_secs_f64())
}

/// Where a job's time went, from its own timestamps: waiting to be claimed, compiling in the
/// sandbox, the sandbox and upload work around the compile, and the API and notification path
/// to the client.
#[derive(Default)]
struct Phases {
    queue: f64,
    compile: f64,
    around: f64,
    client: f64,
}

impl Phases {
    fn add(&mut self, job: &Value, observed: Duration) -> anyhow::Result<()> {
        let created = parse_time(&job["created_at"])?;
        let started = parse_time(&job["started_at"])?;
        let finished = parse_time(&job["finished_at"])?;
        let compile = job["duration_ms"].as_f64().context("duration_ms")?;
        self.queue += (started - created).as_seconds_f64() * 1000.0;
        self.compile += compile;
        self.around += (finished - started).as_seconds_f64() * 1000.0 - compile;
        self.client += ms(observed) - (finished - created).as_seconds_f64() * 1000.0;
        Ok(())
    }

    fn summary(&self, runs: usize) -> String {
        let n = runs.max(1) as f64;
        format!(
            "queue {:.0} ms, compile {:.0} ms, container and upload {:.0} ms, API and notification {:.0} ms",
            self.queue / n,
            self.compile / n,
            self.around / n,
            self.client / n
        )
    }
}

fn parse_time(value: &Value) -> anyhow::Result<OffsetDateTime> {
    let text = value.as_str().context("a timestamp")?;
    Ok(OffsetDateTime::parse(
        text,
        &time::format_description::well_known::Rfc3339,
    )?)
}

fn percentile(samples: &[Duration], quantile: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let index =
        ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(index).copied().unwrap_or_default()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
