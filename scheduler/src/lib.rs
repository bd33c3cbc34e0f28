//! The scheduler daemon: claims queued jobs and compiles each in its own sandbox container.
//!
//! - [`docker`]: every Docker call (create, attach, kill, remove, list);
//! - [`compile`]: one job from claim to recorded outcome, with its lease heartbeat;
//! - [`collect`]: reading results out of the sandbox without trusting them;
//! - [`diagnostics`]: errors and warnings from the TeX log;
//! - [`upkeep`]: lease rescue, leftover containers and retention, on timers.
//!
//! The claim loop below keeps at most `slots` compiles running. It sleeps until a job is
//! queued (LISTEN/NOTIFY), a compile finishes, or the slow fallback poll fires; it never spins.
//! A notification that a job reached a final state (the client cancelled it) stops its compile.

pub mod collect;
pub mod compile;
pub mod diagnostics;
pub mod docker;
pub mod metrics;
pub mod pool;
pub mod upkeep;

use compile::{Context, JobStop, StopReason};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use texfleet_core::db::{self, Notification};
use texfleet_core::storage::Storage;
use texfleet_core::Config;
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

/// The compiles this scheduler is running, each with its stop signal.
#[derive(Default)]
pub struct RunningJobs {
    jobs: Mutex<HashMap<Uuid, Arc<JobStop>>>,
}

impl RunningJobs {
    fn start(&self, id: Uuid) -> Arc<JobStop> {
        let stop = Arc::new(JobStop::default());
        self.jobs
            .lock()
            .expect("running jobs")
            .insert(id, stop.clone());
        stop
    }

    fn finish(&self, id: Uuid) {
        self.jobs.lock().expect("running jobs").remove(&id);
    }

    fn stop(&self, id: Uuid, reason: StopReason) {
        if let Some(stop) = self.jobs.lock().expect("running jobs").get(&id) {
            stop.stop(reason);
        }
    }

    fn stop_all(&self, reason: StopReason) {
        for stop in self.jobs.lock().expect("running jobs").values() {
            stop.stop(reason);
        }
    }

    pub fn ids(&self) -> Vec<Uuid> {
        self.jobs
            .lock()
            .expect("running jobs")
            .keys()
            .copied()
            .collect()
    }
}

/// Runs the scheduler until `shutdown` resolves. Then it stops claiming, lets running compiles
/// finish for `shutdown_grace_seconds`, and hands the rest back to the queue.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let owner = config.scheduler_id();
    let slots = config.scheduler_slots();
    let pool = db::pool(&config, config.scheduler_database_url())?;
    let deployment = db::deployment_id(&pool).await?.to_string();
    let warm_pool = match config.warm_pool_size.unwrap_or(slots) {
        0 => None,
        size => Some(Arc::new(pool::WarmPool::new(
            size,
            Duration::from_secs(config.warm_pool_max_age_seconds),
        ))),
    };
    let context = Arc::new(Context {
        warm_pool: warm_pool.clone(),
        sandbox: docker::Sandbox::connect(&config, &owner, &deployment).await?,
        pool,
        storage: Storage::new(&config),
        owner: owner.clone(),
        config: config.clone(),
    });
    tracing::info!(
        owner,
        slots,
        image = config.sandbox_image,
        "scheduler started"
    );

    let wake = Arc::new(Notify::new());
    let running = Arc::new(RunningJobs::default());
    let listener = tokio::spawn(db::listen(
        config.scheduler_database_url().to_string(),
        &[db::JOBS_QUEUED_CHANNEL, db::JOBS_FINISHED_CHANNEL],
        {
            let (wake, running) = (wake.clone(), running.clone());
            move |notification: Notification| match notification.channel.as_str() {
                db::JOBS_QUEUED_CHANNEL => wake.notify_one(),
                _ => {
                    if let Ok(id) = Uuid::parse_str(&notification.payload) {
                        running.stop(id, StopReason::Cancelled);
                    }
                }
            }
        },
    ));
    let upkeep = tokio::spawn(upkeep::run(context.clone(), running.clone()));
    let pool_keeper = warm_pool
        .clone()
        .map(|pool| tokio::spawn(pool.maintain(context.clone())));
    let metrics_server = match config.scheduler_metrics_addr.as_str() {
        "" => None,
        addr => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            tracing::info!(addr, "metrics on /metrics");
            Some(tokio::spawn(metrics::serve(listener)))
        }
    };
    let free_slots = Arc::new(Semaphore::new(slots));
    let poll_interval = Duration::from_secs(config.poll_interval_seconds);
    tokio::pin!(shutdown);

    loop {
        let free = free_slots.available_permits();
        let mut claimed = 0;
        if free > 0 {
            let per_project = config.max_running_per_project;
            match db::claim_jobs(
                &context.pool,
                &owner,
                config.lease_seconds,
                free,
                per_project,
            )
            .await
            {
                Ok(jobs) => {
                    claimed = jobs.len();
                    for job in jobs {
                        metrics::QUEUE_WAIT.observe(job.waited_seconds);
                        let permit = free_slots.clone().try_acquire_owned()?;
                        let stop = running.start(job.id);
                        let (context, wake, running) =
                            (context.clone(), wake.clone(), running.clone());
                        tokio::spawn(async move {
                            let id = job.id;
                            compile::process(&context, job, &stop).await;
                            running.finish(id);
                            drop(permit);
                            wake.notify_one();
                        });
                    }
                }
                Err(error) => tracing::warn!(%error, "claim failed"),
            }
        }
        let free_now = free_slots.available_permits();
        metrics::set_slots(slots - free_now, free_now);
        // A full batch means there may be more work: claim again before sleeping.
        if claimed > 0 && claimed == free {
            continue;
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(poll_interval) => {}
            _ = &mut shutdown => break,
        }
    }

    upkeep.abort();
    if let (Some(keeper), Some(pool)) = (pool_keeper, &warm_pool) {
        keeper.abort();
        pool.drain(&context.sandbox).await;
    }
    let grace = Duration::from_secs(config.shutdown_grace_seconds);
    tracing::info!(
        ?grace,
        running = running.ids().len(),
        "scheduler stopping; no new claims"
    );
    if tokio::time::timeout(grace, free_slots.acquire_many(slots as u32))
        .await
        .is_err()
    {
        tracing::warn!("grace period over; handing running jobs back to the queue");
        running.stop_all(StopReason::Shutdown);
        let _all = free_slots.acquire_many(slots as u32).await?;
    }
    context.sandbox.settle().await;
    listener.abort();
    if let Some(server) = metrics_server {
        server.abort();
    }
    Ok(())
}

/// Runs the supervisor's self-check in a sandbox configured like a job's and returns what it
/// found, property by property (`texfleet sandbox check`).
pub async fn check_sandbox(config: &Config) -> anyhow::Result<Vec<texfleet_sandbox::Check>> {
    let sandbox = docker::Sandbox::connect(config, &config.scheduler_id(), "sandbox-check").await?;
    let spec = texfleet_sandbox::CheckSpec {
        uid: docker::SANDBOX_UID,
        memory_bytes: config.sandbox_memory_mb * 1024 * 1024,
        pids_limit: config.sandbox_pids_limit,
        cpus: config.sandbox_cpus,
        work_tmpfs_bytes: config.sandbox_tmpfs_mb * 1024 * 1024,
    };
    let run = sandbox.check(&serde_json::to_vec(&spec)?).await?;
    serde_json::from_slice(&run.stdout).map_err(|error| {
        anyhow::anyhow!(
            "the sandbox check printed no report ({error}): {}",
            String::from_utf8_lossy(&run.stderr)
        )
    })
}
