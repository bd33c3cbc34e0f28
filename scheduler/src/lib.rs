//! The scheduler daemon: claims queued jobs and compiles each in its own sandbox container.
//!
//! - [`docker`]: every Docker call (create, attach, kill, remove);
//! - [`compile`]: one job from claim to recorded outcome;
//! - [`collect`]: reading results out of the sandbox without trusting them;
//! - [`diagnostics`]: errors and warnings from the TeX log.
//!
//! The claim loop below keeps at most `slots` compiles running. It sleeps until a job is
//! queued (LISTEN/NOTIFY), a compile finishes, or the slow fallback poll fires; it never spins.

pub mod collect;
pub mod compile;
pub mod diagnostics;
pub mod docker;

use compile::Context;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use texfleet_core::db;
use texfleet_core::storage::Storage;
use texfleet_core::Config;
use tokio::sync::{Notify, Semaphore};

/// Runs the scheduler until `shutdown` resolves, then waits for running compiles to end.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let owner = config.scheduler_id();
    let slots = config.scheduler_slots();
    let context = Arc::new(Context {
        pool: db::pool(&config)?,
        storage: Storage::new(&config),
        sandbox: docker::Sandbox::connect(&config, &owner).await?,
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
    let listener = tokio::spawn(db::listen(
        config.database_url.clone(),
        db::JOBS_QUEUED_CHANNEL,
        wake.clone(),
    ));
    let free_slots = Arc::new(Semaphore::new(slots));
    let poll_interval = Duration::from_secs(config.poll_interval_seconds);
    let active = Arc::new(Mutex::new(HashSet::new()));
    let janitor = tokio::spawn(remove_orphans_periodically(context.clone(), active.clone()));
    tokio::pin!(shutdown);

    loop {
        let free = free_slots.available_permits();
        let mut claimed = 0;
        if free > 0 {
            match db::claim_jobs(&context.pool, &owner, config.lease_seconds, free).await {
                Ok(jobs) => {
                    claimed = jobs.len();
                    for job in jobs {
                        let permit = free_slots.clone().try_acquire_owned()?;
                        let (context, wake, active) =
                            (context.clone(), wake.clone(), active.clone());
                        let job_label = job.id.to_string();
                        active.lock().expect("active set").insert(job_label.clone());
                        tokio::spawn(async move {
                            compile::process(&context, job).await;
                            active.lock().expect("active set").remove(&job_label);
                            drop(permit);
                            wake.notify_one();
                        });
                    }
                }
                Err(error) => tracing::warn!(%error, "claim failed"),
            }
        }
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

    listener.abort();
    janitor.abort();
    tracing::info!("scheduler stopping; waiting for running compiles");
    let _all = free_slots.acquire_many(slots as u32).await?;
    Ok(())
}

/// How often leftover sandbox containers are looked for (also once at start).
const ORPHAN_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// Removes sandbox containers no running compile owns: at start (what a crashed process with
/// our id left) and then on a timer (containers of any scheduler that outlived every limit).
async fn remove_orphans_periodically(context: Arc<Context>, active: Arc<Mutex<HashSet<String>>>) {
    let config = &context.config;
    let max_age = Duration::from_secs(
        u64::from(config.max_timeout_seconds + config.kill_grace_seconds) + 120,
    );
    let mut ticks = tokio::time::interval(ORPHAN_SWEEP_INTERVAL);
    loop {
        ticks.tick().await;
        let active_now = active.lock().expect("active set").clone();
        match context.sandbox.remove_orphans(&active_now, max_age).await {
            Ok(0) => {}
            Ok(removed) => tracing::warn!(removed, "removed orphaned sandbox containers"),
            Err(error) => tracing::warn!(%error, "could not look for orphaned sandbox containers"),
        }
    }
}

/// Runs the supervisor's self-check in a sandbox configured like a job's and returns what it
/// found, property by property (`texfleet sandbox check`).
pub async fn check_sandbox(config: &Config) -> anyhow::Result<Vec<texfleet_sandbox::Check>> {
    let sandbox = docker::Sandbox::connect(config, &config.scheduler_id()).await?;
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
