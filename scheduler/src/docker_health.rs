//! Whether this scheduler's Docker engine answers. A scheduler whose engine is down must not
//! claim: every job it took would fail its attempt. So the engine is pinged every second, and at
//! once after a compile could not use it; when it stops answering the scheduler stops claiming and reports itself unready (`/readyz`,
//! `texfleet_docker_engine_up`), and its running compiles fail their attempt and go back to
//! the queue for the other schedulers. When the engine answers again, what the dead engine
//! left behind (containers of jobs no longer running, warm containers it killed) is removed
//! first, then claims resume.

use crate::metrics;
use crate::stop::RunningJobs;
use crate::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const PING_INTERVAL: Duration = Duration::from_secs(1);
/// An engine slower than this to answer a ping is taken for down.
const PING_TIMEOUT: Duration = Duration::from_secs(3);

/// Shared between the watcher, the claim loop and `/readyz`.
#[derive(Default)]
pub struct DockerHealth {
    down: AtomicBool,
    /// Woken when the engine comes back.
    back: Notify,
}

impl DockerHealth {
    pub fn is_up(&self) -> bool {
        !self.down.load(Ordering::SeqCst)
    }

    /// Resolves when the engine is up (at once when it is).
    pub async fn wait_until_up(&self) {
        loop {
            let back = self.back.notified();
            if self.is_up() {
                return;
            }
            back.await;
        }
    }
}

/// Pings the engine at once after a compile could not use it, so that claiming stops before
/// the next claim rather than at the next tick: each job claimed in between would fail an
/// attempt in milliseconds, and three such failures end a job `Failed`. Only the watcher marks
/// the engine up again (after removing what it left behind).
pub async fn check_after_failure(context: &Context) {
    if context.engine.is_up() && !answers(context).await {
        mark_down(&context.engine);
    }
}

async fn answers(context: &Context) -> bool {
    matches!(
        tokio::time::timeout(PING_TIMEOUT, context.sandboxes.engine().ping()).await,
        Ok(Ok(()))
    )
}

fn mark_down(health: &DockerHealth) {
    if !health.down.swap(true, Ordering::SeqCst) {
        tracing::error!("the Docker engine does not answer; claiming stops until it does");
        metrics::DOCKER_ENGINE_UP.set(0);
    }
}

/// Pings the engine for as long as the scheduler runs; see the module's documentation.
pub async fn watch(context: Arc<Context>, running: Arc<RunningJobs>) {
    let health = &context.engine;
    metrics::DOCKER_ENGINE_UP.set(1);
    let mut tick = tokio::time::interval(PING_INTERVAL);
    loop {
        tick.tick().await;
        match (answers(&context).await, health.is_up()) {
            (false, true) => mark_down(health),
            (true, false) => {
                tracing::warn!("the Docker engine answers again; removing what it left behind");
                if let Some(pool) = &context.warm_pool {
                    pool.retire_stale(&context.sandboxes).await;
                }
                crate::upkeep::sweep_orphans(&context, &running).await;
                health.down.store(false, Ordering::SeqCst);
                metrics::DOCKER_ENGINE_UP.set(1);
                health.back.notify_waiters();
            }
            _ => {}
        }
    }
}
