//! Taking a running job away from its compile. A job can be taken at any moment: cancelled by
//! its client, its lease lost, or the scheduler shutting down. [`JobStop`] carries that
//! decision to the sandbox (which kills the container at once) and to the recording step,
//! which then writes nothing (or, on shutdown, hands the job back). [`RunningJobs`] finds a
//! job's stop signal by its id, for the notification that the client cancelled it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Why a job was taken from this scheduler while it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The client cancelled it (the API already wrote `Cancelled`).
    Cancelled,
    /// Our lease is gone: another scheduler may already run the job.
    LeaseLost,
    /// This scheduler is shutting down and its grace period is over.
    Shutdown,
}

/// The stop signal of one running job: the first reason given wins.
#[derive(Default)]
pub struct JobStop {
    pub token: CancellationToken,
    reason: OnceLock<StopReason>,
}

impl JobStop {
    pub fn stop(&self, reason: StopReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    pub fn reason(&self) -> Option<StopReason> {
        self.reason.get().copied()
    }
}

/// The compiles this scheduler is running, each with its stop signal.
#[derive(Default)]
pub struct RunningJobs {
    jobs: Mutex<HashMap<Uuid, Arc<JobStop>>>,
}

impl RunningJobs {
    pub fn start(&self, id: Uuid) -> Arc<JobStop> {
        let stop = Arc::new(JobStop::default());
        self.jobs
            .lock()
            .expect("running jobs")
            .insert(id, stop.clone());
        stop
    }

    pub fn finish(&self, id: Uuid) {
        self.jobs.lock().expect("running jobs").remove(&id);
    }

    pub fn stop(&self, id: Uuid, reason: StopReason) {
        if let Some(stop) = self.jobs.lock().expect("running jobs").get(&id) {
            stop.stop(reason);
        }
    }

    pub fn stop_all(&self, reason: StopReason) {
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
