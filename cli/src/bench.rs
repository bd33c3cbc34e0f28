//! `texfleet bench`: the service's speed beside what the compiler alone achieves, in one run
//! on the running stack (`./dev/bench`). Every figure is printed beside its references as a
//! ratio, so that runs on noisy machines compare; the samples go to `bench.json` and are drawn
//! in `bench.svg` ([`report`]). BENCHMARKS.md records the latest figures.
//!
//! - references ([`floor`]): the floor (the same compile in a sandbox container started
//!   beforehand: no API, queue, container start or upload), the peer (a container created and
//!   removed per compile, as `docker run --rm`), and one engine pass;
//! - end to end: POST to Succeeded (PDF stored) through the API, per document, p50 and p95,
//!   compiled from nothing (`"cache": false`), and an unchanged resubmission (result cache);
//! - second compiles of an edited copy ([`second`]);
//! - throughput at saturation, hello and the article, beside the floor's and the peer's
//!   ([`saturation`]), with `--perf` the CPU of each process per job ([`profile`]);
//! - a large project sent by hash beside the same sent whole ([`large_project`]);
//! - API ingest and the queue alone ([`ingest`]), each beside Postgres' own ceiling for the
//!   same writes ([`ceiling`]);
//! - resident memory of the api and scheduler processes, idle and under load ([`rss`]);
//! - with `--reference-image`, the floor and engine pass beside another image's ([`reference`]).

mod ceiling;
mod cpu;
mod floor;
mod ingest;
mod large_project;
mod phases;
mod profile;
mod reference;
mod report;
mod rss;
mod saturation;
mod second;
mod sync;

use crate::client::{Client, ServerArgs};
use anyhow::ensure;
use floor::{durations, floor_job, Run};
use phases::Phases;
use report::{Figures, Latency};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use texfleet_core::db::{self, Outcome};
use texfleet_core::model::JobStatus;
use texfleet_core::{token, Config};
use texfleet_scheduler::{Sandbox, Sandboxes};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Sequential end-to-end runs per document (and floor and peer runs per document).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Hello-world jobs for the throughput figure (the article: a fifth of them).
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
    /// pgbench, which measures Postgres' own ceiling for the ingest and queue figures.
    #[arg(long, default_value = "pgbench")]
    pgbench: PathBuf,
    /// Measure only the API ingest and the queue (no sandbox; bench.json is left as it is).
    #[arg(long)]
    ingest_only: bool,
    /// Measure only what an editor asks: SyncTeX queries and page previews (bench.json is
    /// left as it is).
    #[arg(long)]
    sync_only: bool,
    /// Measure only a large project sent by hash beside the same project sent whole
    /// (bench.json is left as it is).
    #[arg(long)]
    large_project_only: bool,
    /// Measure only the throughput at saturation (bench.json is left as it is).
    #[arg(long)]
    throughput_only: bool,
    /// Record the service's and the peer's throughput runs with `perf record` into this
    /// folder, and print each process's CPU per job.
    #[arg(long, value_name = "DIR")]
    perf: Option<PathBuf>,
    /// Where bench.json and bench.svg are written.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
    /// Another sandbox image (an earlier build) to measure beside this one: the floor and one
    /// engine pass of hello and the article in both, alternating.
    #[arg(long, value_name = "IMAGE")]
    reference_image: Option<String>,
    #[command(flatten)]
    server: ServerArgs,
}

pub struct Document {
    name: &'static str,
    main: &'static str,
    bibliography: Option<&'static str>,
}

const BIBLIOGRAPHY: &str = include_str!("../../bench/refs.bib");
const HELLO: Document = Document {
    name: "hello",
    main: include_str!("../../bench/hello.tex"),
    bibliography: None,
};
const ARTICLE: Document = Document {
    name: "article",
    main: include_str!("../../bench/article.tex"),
    bibliography: Some(BIBLIOGRAPHY),
};
const TIKZ: Document = Document {
    name: "tikz",
    main: include_str!("../../bench/tikz.tex"),
    bibliography: None,
};
/// Twenty common packages with biblatex and a short body.
const PREAMBLE: Document = Document {
    name: "preamble",
    main: include_str!("../../bench/preamble.tex"),
    bibliography: Some(BIBLIOGRAPHY),
};

pub async fn run(config: Config, args: BenchArgs) -> anyhow::Result<()> {
    let slots = config.scheduler_slots();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let date = OffsetDateTime::now_utc().date();
    let warm_pool = config.warm_pool_size.unwrap_or(slots);
    println!(
        "texfleet bench: {cores} cores, {slots} scheduler slots, warm pool {warm_pool}, {date}"
    );
    let mut figures = Figures {
        machine: json!({ "cores": cores, "slots": slots, "warm_pool": warm_pool, "date": date.to_string() }),
        ..Figures::default()
    };
    if args.ingest_only {
        return ingest::ingest_and_queue(&config, &args, &mut figures).await;
    }
    if args.sync_only {
        return sync::sync_queries(&Client::new(&args.server), &mut figures).await;
    }
    if args.large_project_only {
        let client = Client::new(&args.server);
        return large_project::large_project(&client, config.max_body_bytes, &mut figures).await;
    }
    let sandboxes = Sandboxes::connect(&config, "bench", "bench").await?;
    let sandbox = sandboxes.of(&config.default_texlive).ok_or_else(|| {
        anyhow::anyhow!(
            "sandbox_images has no image of the default year {}",
            config.default_texlive
        )
    })?;
    let result = match args.throughput_only {
        true => {
            let client = Client::new(&args.server);
            saturation::throughputs(&config, &args, sandbox, slots, &client, &mut figures).await
        }
        false => measure(&config, &args, sandbox, slots, &mut figures).await,
    };
    sandboxes.settle().await;
    result?;
    match args.throughput_only {
        true => Ok(()),
        false => figures.write(&args.out),
    }
}

async fn measure(
    config: &Config,
    args: &BenchArgs,
    sandbox: &Sandbox,
    slots: usize,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    let client = Client::new(&args.server);
    if let Some(reference_image) = &args.reference_image {
        figures.image_comparison = reference::compare(
            config,
            sandbox,
            reference_image,
            &[&HELLO, &ARTICLE],
            args.runs,
        )
        .await?;
    }
    let idle = rss::resident_mib();
    println!("resident memory at idle: {}", rss::describe(&idle));
    println!("\nend to end through the service (POST to Succeeded, PDF stored, compiled from nothing) vs the floor (the same compile in a started sandbox), the peer (a container per compile) and one engine pass:");
    for document in [&HELLO, &ARTICLE, &TIKZ, &PREAMBLE] {
        figures
            .latency
            .push(latency(config, sandbox, &client, document, args.runs).await?);
    }

    let load = CancellationToken::new();
    let peak = tokio::spawn(rss::peak_while(load.clone()));
    saturation::throughputs(config, args, sandbox, slots, &client, figures).await?;
    load.cancel();
    let peak = peak.await?;
    println!(
        "resident memory under load (peak): {}",
        rss::describe(&peak)
    );
    figures.rss_mib = json!({ "idle": idle, "load_peak": peak });

    second::second_compiles(
        config,
        sandbox,
        &client,
        &[&TIKZ, &PREAMBLE, &ARTICLE],
        args.runs,
        figures,
    )
    .await?;
    sync::sync_queries(&client, figures).await?;
    large_project::large_project(&client, config.max_body_bytes, figures).await?;
    ingest::ingest_and_queue(config, args, figures).await
}

/// One document's end-to-end figures beside its floor, peer and engine pass.
async fn latency(
    config: &Config,
    sandbox: &Sandbox,
    client: &Client,
    document: &Document,
    runs: usize,
) -> anyhow::Result<Latency> {
    let mut floors: Vec<Run> = Vec::new();
    let mut peers: Vec<Run> = Vec::new();
    // Each run is a job of its own: its container is named after the job.
    for _ in 0..runs {
        let job = floor_job(document, None);
        floors.push(floor::floor(config, sandbox, &job, Default::default()).await?);
        let job = floor_job(document, None);
        peers.push(floor::peer(config, sandbox, &job).await?);
    }
    let mut service = Vec::new();
    let mut phases = Phases::default();
    for _ in 0..runs {
        let started = Instant::now();
        let job = submit_succeeded(client, document, None, false).await?;
        service.push(ms(started.elapsed()));
        phases.add(&job, started.elapsed())?;
    }
    let (floor_ms, peer_ms) = (durations(&floors), durations(&peers));
    let engine_pass_ms: Vec<f64> = floors.iter().filter_map(Run::first_pass_ms).collect();
    let p50 = |samples: &[f64]| percentile_ms(samples, 0.5);
    println!(
        "  {:<8} service p50 {:>6.0} ms  p95 {:>6.0} ms | floor p50 {:>6.0} ms, overhead {:>+5.0} ms | peer p50 {:>6.0} ms | one engine pass p50 {:>5.0} ms, ratio {:.2}",
        document.name,
        p50(&service),
        percentile_ms(&service, 0.95),
        p50(&floor_ms),
        p50(&service) - p50(&floor_ms),
        p50(&peer_ms),
        p50(&engine_pass_ms),
        p50(&service) / p50(&engine_pass_ms)
    );
    println!(
        "           where the time goes (means): {}",
        phases.summary(runs)
    );
    let mut resubmission_ms = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let job = submit(client, document, None, true).await?;
        ensure!(
            !job["reused_from"].is_null(),
            "an unchanged {} was compiled again: {job}",
            document.name
        );
        resubmission_ms.push(ms(started.elapsed()));
    }
    println!(
        "           unchanged resubmission (result cache): p50 {:>6.1} ms | ratio to the floor {:.3}",
        p50(&resubmission_ms),
        p50(&resubmission_ms) / p50(&floor_ms)
    );
    Ok(Latency {
        document: document.name,
        service_ms: service,
        floor_ms,
        peer_ms,
        engine_pass_ms,
        resubmission_ms,
    })
}

/// The request for `document`, its main file edited by `edit` as in [`floor_job`]; `cache`
/// lets the server reuse results and start from the document's last compile, which the
/// measurements of compiles from nothing must not.
fn request(client: &Client, document: &Document, edit: Option<&str>, cache: bool) -> Value {
    let job = floor_job(document, edit);
    let main = String::from_utf8_lossy(&job.files[0].content).into_owned();
    let mut body = json!({ "project_id": client.project(), "input_latex": main, "cache": cache });
    if let Some(bibliography) = document.bibliography {
        body["files"] = json!([{ "path": "refs.bib", "content": bibliography }]);
    }
    body
}

/// Submits and waits for the end (`Prefer: wait`).
async fn submit(
    client: &Client,
    document: &Document,
    edit: Option<&str>,
    cache: bool,
) -> anyhow::Result<Value> {
    client
        .submit(&request(client, document, edit, cache), Some(60))
        .await
}

/// [`submit`], failing unless the job Succeeded.
async fn submit_succeeded(
    client: &Client,
    document: &Document,
    edit: Option<&str>,
    cache: bool,
) -> anyhow::Result<Value> {
    let job = submit(client, document, edit, cache).await?;
    ensure!(
        job["status"] == "Succeeded",
        "{} ended {}",
        document.name,
        job["status"]
    );
    Ok(job)
}

fn percentile(samples: &[Duration], quantile: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let index =
        ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(index).copied().unwrap_or_default()
}

/// [`percentile`] of milliseconds.
fn percentile_ms(samples: &[f64], quantile: f64) -> f64 {
    let durations: Vec<Duration> = samples
        .iter()
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0))
        .collect();
    ms(percentile(&durations, quantile))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
