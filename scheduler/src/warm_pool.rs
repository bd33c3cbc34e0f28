//! The warm pool: sandbox containers created and started ahead of demand, so that a job does
//! not wait the half second Docker needs to start one. Isolation stays per job: each pool
//! container serves exactly one job and is destroyed after it, with the same settings as a
//! container created for the job. The pool is refilled in the background, and a container
//! that is too old or no longer running is replaced. Each TeX Live year has its own
//! containers, as many as its share of recent jobs ([`demand`]).

mod demand;

use crate::docker::{WarmContainer, POOL_LABEL_PREFIX};
use crate::sandboxes::Sandboxes;
use crate::Context;
use demand::Demand;
use std::collections::{BTreeMap, HashSet, VecDeque};
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
    /// Each year's ready containers, oldest first.
    ready: Mutex<BTreeMap<String, VecDeque<WarmContainer>>>,
    demand: Mutex<Demand>,
    /// Labels of every container the pool created that still exists (ready or serving a
    /// job), so that the orphan sweep knows them as ours.
    labels: Mutex<HashSet<String>>,
    taken: Notify,
}

impl WarmPool {
    /// A pool of `size` containers across `years`, all of `default` until jobs come.
    pub fn new(size: usize, max_age: Duration, years: &[String], default: &str) -> WarmPool {
        WarmPool {
            size,
            max_age,
            ready: Mutex::default(),
            demand: Mutex::new(Demand::new(years, default)),
            labels: Mutex::default(),
            taken: Notify::new(),
        }
    }

    /// A ready container of TeX Live `year` for a job (the youngest; older ones are left for
    /// replacement), if the pool has one young enough. The caller runs the job in it and then
    /// calls [`WarmPool::forget`].
    pub fn take(&self, year: &str) -> Option<WarmContainer> {
        self.demand.lock().expect("pool").record(year);
        let mut ready = self.ready.lock().expect("pool");
        let of_year = ready.entry(year.to_string()).or_default();
        let young = of_year
            .back()
            .is_some_and(|warm| warm.created.elapsed() < self.max_age);
        let warm = if young { of_year.pop_back() } else { None };
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

    /// Keeps each year's share of the pool full until `stop` fires: replaces containers that
    /// are too old or stopped, or beyond their year's share, and creates new ones after each
    /// take. A creation under way is finished, never cut short: Docker would still make a
    /// container that nobody then knows of.
    pub async fn maintain(self: Arc<Self>, context: Arc<Context>, stop: CancellationToken) {
        let sandboxes = &context.sandboxes;
        while !stop.is_cancelled() {
            self.retire_stale(sandboxes).await;
            let targets = self.demand.lock().expect("pool").targets(self.size);
            'years: for (year, target) in targets {
                let Some(sandbox) = sandboxes.of(&year) else {
                    continue;
                };
                while self.ready_of(&year) < target && !stop.is_cancelled() {
                    // Known as ours before it exists, so that no orphan sweep can take it.
                    let label = format!("{POOL_LABEL_PREFIX}{}", Uuid::new_v4());
                    self.labels.lock().expect("pool").insert(label.clone());
                    match sandbox.warm(&label).await {
                        Ok(warm) => self
                            .ready
                            .lock()
                            .expect("pool")
                            .entry(year.clone())
                            .or_default()
                            .push_back(warm),
                        Err(error) => {
                            tracing::warn!(%error, "could not warm a sandbox container");
                            self.forget(&label);
                            break 'years;
                        }
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

    fn ready_of(&self, year: &str) -> usize {
        self.ready
            .lock()
            .expect("pool")
            .get(year)
            .map_or(0, VecDeque::len)
    }

    /// Replaces containers that are too old or no longer running, and removes the oldest of a
    /// year beyond its share. The ready lists stay usable meanwhile: only the stale ones are
    /// taken out of them, after they were checked.
    pub async fn retire_stale(&self, sandboxes: &Sandboxes) {
        let targets = self.demand.lock().expect("pool").targets(self.size);
        let snapshot: Vec<(String, String, bool)> = {
            let ready = self.ready.lock().expect("pool");
            ready
                .iter()
                .flat_map(|(year, of_year)| {
                    let surplus = of_year
                        .len()
                        .saturating_sub(targets.get(year).copied().unwrap_or(0));
                    of_year.iter().enumerate().map(move |(place, warm)| {
                        let unwanted = place < surplus || warm.created.elapsed() >= self.max_age;
                        (warm.id.clone(), warm.label.clone(), unwanted)
                    })
                })
                .collect()
        };
        let engine = sandboxes.engine();
        for (id, label, unwanted) in snapshot {
            if !unwanted && engine.is_running(&id).await {
                continue;
            }
            let removed = {
                let mut ready = self.ready.lock().expect("pool");
                ready.values_mut().find_map(|of_year| {
                    let position = of_year.iter().position(|warm| warm.label == label)?;
                    of_year.remove(position)
                })
            };
            if removed.is_some() {
                tracing::info!(container = id, "replacing a stale warm container");
                engine.discard(&id).await;
                self.forget(&label);
            }
        }
    }

    /// Removes every ready container (at shutdown, once [`WarmPool::maintain`] has ended).
    pub async fn drain(&self, sandboxes: &Sandboxes) {
        let ready = std::mem::take(&mut *self.ready.lock().expect("pool"));
        for warm in ready.into_values().flatten() {
            sandboxes.engine().discard(&warm.id).await;
            self.forget(&warm.label);
        }
    }
}
