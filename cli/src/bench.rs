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

    ingest_and_queue(config, args).await
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

/// API ingest and the queue alone, on a database of their own that no scheduler serves.
async fn ingest_and_queue(config: &Config, args: &BenchArgs) -> anyhow::Result<()> {
    let name = format!("texfleet_bench_{}", Uuid::new_v4().simple());
    let owner_url = db::create_database(&config.database_url, &name).await?;
    let result = ingest_and_queue_in(config, args, &owner_url).await;
    db::drop_database(&config.database_url, &name).await?;
    result
}

async fn ingest_and_queue_in(
    config: &Config,
    args: &BenchArgs,
    owner_url: &str,
) -> anyhow::Result<()> {
    db::migrate(owner_url).await?;
    let rename = |url: &str| {
        format!(
            "{}/{}",
            url.rsplit_once('/').map_or(url, |(prefix, _)| prefix),
            owner_url.rsplit('/').next().unwrap_or("")
        )
    };
    let bench_config = Config {
        database_url: owner_url.to_string(),
        api_database_url: rename(config.api_database_url()),
        scheduler_database_url: rename(config.scheduler_database_url()),
        listen_addr: "127.0.0.1:0".into(),
        rate_limit_per_second: 0,
        max_queued_per_project: i64::MAX,
        database_pool_size: 32,
        ..config.clone()
    };
    let owner = db::pool(&bench_config, owner_url)?;
    let project = db::create_project(&**owner.get().await?, "bench").await?;
    let secret = token::generate();
    db::create_token(
        &**owner.get().await?,
        project,
        "bench",
        &token::hash(&secret),
        None,
    )
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(texfleet_api::serve(bench_config.clone(), listener, async {
        let _ = stopped.await;
    }));

    let client = Client::new(&ServerArgs::new(url, secret, project));
    let body = json!({ "project_id": project, "input_latex": DOCUMENTS[0].main, "cache": false });
    let sent = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(args.ingest_requests)));
    let started = Instant::now();
    let workers = (0..args.ingest_concurrency).map(|_| {
        let (client, body, sent, latencies) = (
            client.clone(),
            body.clone(),
            sent.clone(),
            latencies.clone(),
        );
        let total = args.ingest_requests;
        tokio::spawn(async move {
            while sent.fetch_add(1, Ordering::Relaxed) < total {
                let request_started = Instant::now();
                let job = client.submit(&body, None).await?;
                ensure!(job["status"] == "Queued", "ingest answered {job}");
                latencies
                    .lock()
                    .expect("latencies")
                    .push(request_started.elapsed());
            }
            anyhow::Ok(())
        })
    });
    for worker in futures::future::join_all(workers).await {
        worker??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let latencies = latencies.lock().expect("latencies").clone();
    println!(
        "\nAPI ingest ({} POST /compile, {} concurrent, no scheduler): {:.0} requests/s, p50 {:.1} ms, p99 {:.1} ms",
        latencies.len(),
        args.ingest_concurrency,
        latencies.len() as f64 / elapsed,
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99))
    );
    let _ = stop.send(());
    let _ = server.await;

    // The ingested jobs are the queue's work; a no-op sandbox completes each at once.
    let scheduler_pool = db::pool(&bench_config, &bench_config.scheduler_database_url)?;
    let outcome = Outcome {
        status: JobStatus::Succeeded,
        error: None,
        diagnostics: Vec::new(),
        pdf_storage_key: None,
        log_storage_key: None,
        duration_ms: Some(0),
        pdf_sha256: None,
        log_sha256: None,
        image_id: String::new(),
    };
    let (claims, completions) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let started = Instant::now();
    let workers = (0..args.queue_workers).map(|worker| {
        let (pool, outcome, claims, completions) = (
            scheduler_pool.clone(),
            outcome.clone(),
            claims.clone(),
            completions.clone(),
        );
        tokio::spawn(async move {
            let owner = format!("bench-{worker}");
            loop {
                let jobs = db::claim_jobs(&pool, &owner, 60, 16, usize::MAX / 2).await?;
                if jobs.is_empty() {
                    return anyhow::Ok(());
                }
                claims.fetch_add(jobs.len(), Ordering::Relaxed);
                for job in jobs {
                    ensure!(
                        db::finish_job(&pool, job.id, &owner, &outcome)
                            .await?
                            .is_some(),
                        "lost a lease"
                    );
                    completions.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    });
    for worker in futures::future::join_all(workers).await {
        worker??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "queue alone ({} jobs, {} workers, no-op sandbox): {:.0} claims/s, {:.0} completions/s",
        completions.load(Ordering::Relaxed),
        args.queue_workers,
        claims.load(Ordering::Relaxed) as f64 / elapsed,
        completions.load(Ordering::Relaxed) as f64 / elapsed
    );
    Ok(())
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
