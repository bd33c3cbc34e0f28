//! Waiting for jobs to start or finish, for `Prefer: wait`. One LISTEN connection per API
//! process receives every "job started" and "job finished" notification and fans it out to the
//! waiting requests, so a waiting request holds no database connection and nobody polls.

use crate::problem::Problem;
use std::future::Future;
use std::time::Duration;
use texfleet_core::db::{self, Notification};
use texfleet_core::model::Job;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[derive(Clone)]
pub struct JobEvents {
    /// The id of every job that started or finished.
    changed: broadcast::Sender<Uuid>,
    /// Cancelled when the API shuts down: every wait ends at once.
    closing: CancellationToken,
}

impl JobEvents {
    /// Starts listening on `database_url`; notifications missed during a reconnect are
    /// announced as the nil id, on which every waiter looks again.
    pub fn listen(database_url: String) -> JobEvents {
        let (changed, _) = broadcast::channel(1024);
        let sender = changed.clone();
        tokio::spawn(db::listen(
            database_url,
            &[db::JOBS_STARTED_CHANNEL, db::JOBS_FINISHED_CHANNEL],
            move |n: Notification| {
                let id = Uuid::parse_str(&n.payload).unwrap_or(Uuid::nil());
                let _ = sender.send(id);
            },
        ));
        JobEvents {
            changed,
            closing: CancellationToken::new(),
        }
    }

    /// Ends every wait now (the API is shutting down); waiting requests answer at once.
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// Returns `job` once `reached` holds for it or `limit` has passed, re-reading it with
    /// `fetch` whenever a notification may concern it.
    pub async fn wait_until<F, Fut>(
        &self,
        job: Job,
        reached: impl Fn(&Job) -> bool,
        limit: Duration,
        fetch: F,
    ) -> Result<Job, Problem>
    where
        F: Fn(Uuid) -> Fut,
        Fut: Future<Output = Result<Job, Problem>>,
    {
        let deadline = Instant::now() + limit;
        // Subscribe before the first re-read, so that no notification falls between the two.
        let mut changed = self.changed.subscribe();
        let id = job.id;
        let mut job = if reached(&job) { job } else { fetch(id).await? };
        while !reached(&job) && !self.closing.is_cancelled() {
            let notified = tokio::select! {
                notified = tokio::time::timeout_at(deadline, changed.recv()) => notified,
                () = self.closing.cancelled() => break,
            };
            match notified {
                Err(_wait_over) => break,
                Ok(Ok(other)) if other != id && !other.is_nil() => continue,
                // Ours, a reconnect, or notifications lost to lag: look again.
                Ok(_) => job = fetch(id).await?,
            }
        }
        Ok(job)
    }
}
