//! The bench's API ingest and queue figures: `POST /compile` into one project's backlog with
//! no scheduler, then claims and completions with a no-op sandbox, on a database of their own.

use super::*;

/// API ingest and the queue alone, on a database of their own that no scheduler serves.
pub(super) async fn ingest_and_queue(
    config: &Config,
    args: &BenchArgs,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    let name = format!("texfleet_bench_{}", Uuid::new_v4().simple());
    let owner_url = db::create_database(&config.database_url, &name).await?;
    let result = ingest_and_queue_in(config, args, &owner_url, figures).await;
    db::drop_database(&config.database_url, &name).await?;
    result
}

async fn ingest_and_queue_in(
    config: &Config,
    args: &BenchArgs,
    owner_url: &str,
    figures: &mut Figures,
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
        address_rate_limit_per_second: 0,
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
    let body = json!({ "project_id": project, "input_latex": HELLO.main, "cache": false });
    let sent = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(args.ingest_requests)));
    let perf = args.perf.as_deref();
    let recording = profile::start_if(perf, "ingest").await?;
    let cpu_before = cpu::busy();
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
    let cpu_ms = cpu::ms_per_job(cpu_before, latencies.len());
    let ingest_processes = profile::per_job_if(recording, latencies.len()).await?;
    figures.ingest = json!({
        "requests": latencies.len(), "concurrency": args.ingest_concurrency,
        "per_second": latencies.len() as f64 / elapsed,
        "p50_ms": ms(percentile(&latencies, 0.5)), "p99_ms": ms(percentile(&latencies, 0.99)),
        "cpu_ms_per_request": cpu_ms,
        "cpu_ms_per_request_by_process": profile::json(&ingest_processes),
    });
    println!(
        "\nAPI ingest ({} POST /compile, {} concurrent, no scheduler): {:.0} requests/s, p50 {:.1} ms, p99 {:.1} ms; busy CPU per request {:.2} ms (client, API and Postgres)",
        latencies.len(),
        args.ingest_concurrency,
        latencies.len() as f64 / elapsed,
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        cpu_ms
    );
    profile::print("ingest (API and client in this process)", &ingest_processes);
    let _ = stop.send(());
    let _ = server.await;

    // The ingested jobs are the queue's work; a no-op sandbox completes each at once.
    let scheduler_pool = db::pool(&bench_config, &bench_config.scheduler_database_url)?;
    let outcome = Outcome::new(
        JobStatus::Succeeded,
        None,
        Vec::new(),
        Some(0),
        String::new(),
    );
    let (claims, completions) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let recording = profile::start_if(perf, "queue").await?;
    let cpu_before = cpu::busy();
    let started = Instant::now();
    let years = bench_config.texlive_years();
    let workers = (0..args.queue_workers).map(|worker| {
        let (pool, outcome, claims, completions, years) = (
            scheduler_pool.clone(),
            outcome.clone(),
            claims.clone(),
            completions.clone(),
            years.clone(),
        );
        tokio::spawn(async move {
            let owner = format!("bench-{worker}");
            let finisher = db::Finisher::start(pool.clone(), owner.clone());
            loop {
                let jobs = db::claim_jobs(&pool, &owner, 60, 16, usize::MAX / 2, &years).await?;
                if jobs.is_empty() {
                    return anyhow::Ok(());
                }
                claims.fetch_add(jobs.len(), Ordering::Relaxed);
                // Each claimed job ends in a slot of its own, as a scheduler's do.
                let finished = jobs
                    .iter()
                    .map(|job| finisher.finish((job.id, job.attempt), &outcome));
                for finished in futures::future::join_all(finished).await {
                    ensure!(finished?.is_some(), "lost a lease");
                    completions.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    });
    for worker in futures::future::join_all(workers).await {
        worker??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let jobs = completions.load(Ordering::Relaxed);
    let cpu_ms = cpu::ms_per_job(cpu_before, jobs);
    let queue_processes = profile::per_job_if(recording, jobs).await?;
    figures.queue = json!({
        "jobs": jobs, "workers": args.queue_workers,
        "claims_per_second": claims.load(Ordering::Relaxed) as f64 / elapsed,
        "completions_per_second": jobs as f64 / elapsed,
        "cpu_ms_per_job": cpu_ms,
        "cpu_ms_per_job_by_process": profile::json(&queue_processes),
    });
    println!(
        "queue alone ({jobs} jobs, {} workers, no-op sandbox): {:.0} claims/s, {:.0} completions/s; busy CPU per job {cpu_ms:.2} ms (claim and completion, workers and Postgres)",
        args.queue_workers,
        claims.load(Ordering::Relaxed) as f64 / elapsed,
        jobs as f64 / elapsed
    );
    profile::print("the queue (workers in this process)", &queue_processes);

    let ceiling = ceiling::measure(
        &args.pgbench,
        perf,
        owner_url,
        (project, &bench_config.default_texlive),
        args.ingest_concurrency,
        args.ingest_requests,
    )
    .await?;
    let ingest_share = figures.ingest["per_second"].as_f64().unwrap_or(0.0) / ceiling.ingest;
    let queue_share = jobs as f64 / elapsed / ceiling.claim_batched;
    figures.ingest["postgres_ceiling_per_second"] = json!(ceiling.ingest);
    figures.ingest["share_of_ceiling"] = json!(ingest_share);
    figures.queue["postgres_ceiling_one_per_second"] = json!(ceiling.claim_one);
    figures.queue["postgres_ceiling_batched_per_second"] = json!(ceiling.claim_batched);
    figures.queue["share_of_batched_ceiling"] = json!(queue_share);
    println!(
        "Postgres' own ceiling (pgbench, bench/pgbench): ingest {:.0} jobs/s (the API reaches {:.0}%), claimed and completed one at a time {:.0} jobs/s, in batches of 16 {:.0} jobs/s (the queue reaches {:.0}%)",
        ceiling.ingest,
        ingest_share * 100.0,
        ceiling.claim_one,
        ceiling.claim_batched,
        queue_share * 100.0
    );
    profile::print("pgbench's ingest", &ceiling.ingest_processes);
    profile::print("pgbench's batched claims", &ceiling.claim_batched_processes);
    Ok(())
}
