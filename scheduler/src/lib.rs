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
use std::future::Future;
use std::sync::Arc;
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
                        let (context, wake) = (context.clone(), wake.clone());
                        tokio::spawn(async move {
                            compile::process(&context, job).await;
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
    tracing::info!("scheduler stopping; waiting for running compiles");
    let _all = free_slots.acquire_many(slots as u32).await?;
    Ok(())
}
