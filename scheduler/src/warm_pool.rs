//! The warm pool: sandbox containers created and started ahead of demand, so that a job does
//! not wait the half second Docker needs to start one. Isolation stays per job: each pool
//! container serves exactly one job and is destroyed after it, with the same settings as a
//! container created for the job. The pool is refilled in the background, and a container
//! that is too old or no longer running is replaced.

use crate::docker::{Sandbox, WarmContainer, POOL_LABEL_PREFIX};
use crate::Context;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often the pool is checked even when nothing was taken from it.
const CHECK_INTERVAL: Duration = Duration::from_secs(10);

pub struct WarmPool {
    size: usize,
    max_age: Duration,
    ready: Mutex<VecDeque<WarmContainer>>,
    /// Labels of every container the pool created that still exists (ready or serving a
    /// job), so that the orphan sweep knows them as ours.
    labels: Mutex<HashSet<String>>,
    taken: Notify,
}

impl WarmPool {
    pub fn new(size: usize, max_age: Duration) -> WarmPool {
        WarmPool {
            size,
            max_age,
            ready: Mutex::default(),
            labels: Mutex::default(),
            taken: Notify::new(),
        }
    }

    /// A ready container for a job (the youngest; older ones are left for replacement), if the
    /// pool has one young enough. The caller runs the job in it and then calls
    /// [`WarmPool::forget`].
    pub fn take(&self) -> Option<WarmContainer> {
        let mut ready = self.ready.lock().expect("pool");
        let young = ready
            .back()
            .is_some_and(|warm| warm.created.elapsed() < self.max_age);
        let warm = if young { ready.pop_back() } else { None };
        drop(ready);
        self.taken.notify_one();
        warm
    }

    /// The container with this label is gone.
    pub fn forget(&self, label: &str) {
        self.labels.lock().expect("pool").remove(label);
    }

    pub fn labels(&self) -> HashSet<String> {
        self.labels.lock().expect("pool").clone()
    }

    /// Keeps the pool full until `stop` fires: replaces containers that are too old or
    /// stopped, and creates new ones after each take. A creation under way is finished, never
    /// cut short: Docker would still make a container that nobody then knows of.
    pub async fn maintain(self: Arc<Self>, context: Arc<Context>, stop: CancellationToken) {
        let sandbox = &context.sandbox;
        while !stop.is_cancelled() {
            self.retire_stale(sandbox).await;
            while self.ready.lock().expect("pool").len() < self.size && !stop.is_cancelled() {
                // Known as ours before it exists, so that no orphan sweep can take it meanwhile.
                let label = format!("{POOL_LABEL_PREFIX}{}", Uuid::new_v4());
                self.labels.lock().expect("pool").insert(label.clone());
                let warmed = sandbox.warm(&label).await;
                match warmed {
                    Ok(warm) => self.ready.lock().expect("pool").push_back(warm),
                    Err(error) => {
                        tracing::warn!(%error, "could not warm a sandbox container");
                        self.forget(&label);
                        break;
                    }
                }
            }
            tokio::select! {
                _ = self.taken.notified() => {}
                _ = tokio::time::sleep(CHECK_INTERVAL) => {}
                _ = stop.cancelled() => {}
            }
        }
    }

    /// Replaces containers that are too old or no longer running. The ready list stays usable
    /// meanwhile: only the stale ones are taken out of it, after they were checked.
    pub async fn retire_stale(&self, sandbox: &Sandbox) {
        let snapshot: Vec<(String, String, bool)> = self
            .ready
            .lock()
            .expect("pool")
            .iter()
            .map(|warm| {
                (
                    warm.id.clone(),
                    warm.label.clone(),
                    warm.created.elapsed() >= self.max_age,
                )
            })
            .collect();
        for (id, label, too_old) in snapshot {
            if !too_old && sandbox.is_running(&id).await {
                continue;
            }
            let removed = {
                let mut ready = self.ready.lock().expect("pool");
                let position = ready.iter().position(|warm| warm.label == label);
                position.and_then(|position| ready.remove(position))
            };
            if removed.is_some() {
                tracing::info!(container = id, "replacing a stale warm container");
                sandbox.discard(&id).await;
                self.forget(&label);
            }
        }
    }

    /// Removes every ready container (at shutdown, once [`WarmPool::maintain`] has ended).
    pub async fn drain(&self, sandbox: &Sandbox) {
        let ready: VecDeque<WarmContainer> = std::mem::take(&mut *self.ready.lock().expect("pool"));
        for warm in ready {
            sandbox.discard(&warm.id).await;
            self.forget(&warm.label);
        }
    }
}
