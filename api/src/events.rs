//! Waiting for jobs to start or finish, for `Prefer: wait`, and for page previews to be
//! rendered. One LISTEN connection per API process receives every "job started", "job
//! finished" and "preview finished" notification (each names a job) and fans it out to the
//! waiting requests, so a waiting request holds no database connection and nobody polls.
//!
//! Waits are bounded: at most a quarter of `max_connections` at once, and
//! [`MAX_WAITS_PER_PROJECT`] per project. A request past either is answered at once with the
//! job as it is, as RFC 7240 lets a server ignore `Prefer`: waiting requests cannot take every
//! connection, and a job's notification wakes at most that many re-reads.

use crate::problem::Problem;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use texfleet_core::db::{self, Notification};
use texfleet_core::project_slots::{ProjectSlot, ProjectSlots};
use tokio::sync::{broadcast, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Requests of one project that may wait at once.
pub const MAX_WAITS_PER_PROJECT: usize = 16;

#[derive(Clone)]
pub struct JobEvents {
    /// The id of every job that started or finished, or whose page preview did.
    changed: broadcast::Sender<Uuid>,
    /// Cancelled when the API shuts down: every wait ends at once.
    closing: CancellationToken,
    waits: Arc<Semaphore>,
    waits_per_project: ProjectSlots,
}

/// A wait's place; dropping it frees the place.
struct Waiting {
    _permit: OwnedSemaphorePermit,
    _project: ProjectSlot,
}

impl JobEvents {
    /// Starts listening on `database_url`; notifications missed during a reconnect are
    /// announced as the nil id, on which every waiter looks again.
    pub fn listen(database_url: String, max_waits: usize) -> JobEvents {
        let (changed, _) = broadcast::channel(1024);
        let sender = changed.clone();
        tokio::spawn(db::listen(
            database_url,
            &[
                db::JOBS_STARTED_CHANNEL,
                db::JOBS_FINISHED_CHANNEL,
                db::PREVIEWS_FINISHED_CHANNEL,
            ],
            move |n: Notification| {
                let id = Uuid::parse_str(&n.payload).unwrap_or(Uuid::nil());
                let _ = sender.send(id);
            },
        ));
        JobEvents {
            changed,
            closing: CancellationToken::new(),
            waits: Arc::new(Semaphore::new(max_waits.max(1))),
            waits_per_project: ProjectSlots::new(MAX_WAITS_PER_PROJECT),
        }
    }

    /// Ends every wait at once: the API is shutting down.
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// A place to wait for a job of `project`, if one is free.
    fn place(&self, project: Uuid) -> Option<Waiting> {
        let project = self.waits_per_project.take(project)?;
        let permit = self.waits.clone().try_acquire_owned().ok()?;
        Some(Waiting {
            _permit: permit,
            _project: project,
        })
    }

    /// Returns `value` (a job of `project`, or what belongs to the job `id`) once `reached`
    /// holds for it or `limit` has passed, re-reading it with `fetch` whenever a notification
    /// may concern it; at once when no place to wait is free. The flag says whether the wait
    /// was honoured (it was not when no place was free).
    pub async fn wait_until<T, F, Fut>(
        &self,
        (project, id): (Uuid, Uuid),
        value: T,
        reached: impl Fn(&T) -> bool,
        limit: Duration,
        fetch: F,
    ) -> Result<(T, bool), Problem>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, Problem>>,
    {
        if reached(&value) {
            return Ok((value, true));
        }
        let Some(_place) = self.place(project) else {
            return Ok((value, false));
        };
        let deadline = Instant::now() + limit;
        // Subscribe before the first re-read, so that no notification falls between the two.
        let mut changed = self.changed.subscribe();
        let mut value = fetch().await?;
        while !reached(&value) && !self.closing.is_cancelled() {
            let notified = tokio::select! {
                notified = tokio::time::timeout_at(deadline, changed.recv()) => notified,
                () = self.closing.cancelled() => break,
            };
            match notified {
                Err(_wait_over) => break,
                Ok(Ok(other)) if other != id && !other.is_nil() => continue,
                // Ours, a reconnect, or notifications lost to lag: look again.
                Ok(_) => value = fetch().await?,
            }
        }
        Ok((value, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_are_capped_per_project_and_in_all() {
        let events = JobEvents::listen("host=/nonexistent".into(), 20);
        let (one, other) = (Uuid::new_v4(), Uuid::new_v4());
        let held: Vec<Waiting> = (0..MAX_WAITS_PER_PROJECT)
            .map(|_| events.place(one).unwrap())
            .collect();
        assert!(events.place(one).is_none());
        let others: Vec<Waiting> = (0..4).map(|_| events.place(other).unwrap()).collect();
        assert!(events.place(other).is_none(), "20 in all");
        drop(held);
        assert!(events.place(one).is_some());
        drop(others);
    }
}
