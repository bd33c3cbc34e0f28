//! Work on timers, beside the claim loop: rescuing jobs whose lease expired, removing sandbox
//! containers that no compile owns, and deleting jobs past retention. Every scheduler runs
//! it; each step is safe to run from several schedulers at once.

use crate::compile::Context;
use crate::docker::SandboxContainer;
use crate::metrics;
use crate::RunningJobs;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use texfleet_core::db;
use uuid::Uuid;

/// How often the queue gauges are refreshed.
const QUEUE_STATS_INTERVAL: Duration = Duration::from_secs(5);
/// How often leftover containers are looked for (also at start and after every rescue).
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// Jobs deleted per retention batch.
const RETENTION_BATCH: i64 = 100;

pub async fn run(context: Arc<Context>, running: Arc<RunningJobs>) {
    let config = &context.config;
    let mut rescue = tokio::time::interval(Duration::from_secs(config.lease_seconds).div_f64(2.0));
    let mut sweep = tokio::time::interval(SWEEP_INTERVAL);
    let mut retention =
        tokio::time::interval(Duration::from_secs(config.retention_interval_seconds));
    let mut queue_stats = tokio::time::interval(QUEUE_STATS_INTERVAL);
    loop {
        tokio::select! {
            _ = rescue.tick() => {
                match db::rescue_expired_leases(&context.pool).await {
                    Ok(rescued) if !rescued.is_empty() => {
                        tracing::warn!(?rescued, "rescued jobs whose lease expired");
                        metrics::RESCUES.inc_by(rescued.len() as u64);
                        sweep_orphans(&context, &running).await;
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "lease rescue failed"),
                }
            }
            _ = sweep.tick() => sweep_orphans(&context, &running).await,
            _ = queue_stats.tick() => match db::queue_stats(&context.pool).await {
                Ok((queued, running_jobs, oldest)) => {
                    metrics::QUEUE_JOBS.with_label_values(&["Queued"]).set(queued);
                    metrics::QUEUE_JOBS.with_label_values(&["Running"]).set(running_jobs);
                    metrics::OLDEST_QUEUED.set(oldest);
                }
                Err(error) => tracing::warn!(%error, "could not read the queue's depth"),
            },
            _ = retention.tick() => {
                if config.retention_days > 0 {
                    delete_expired_jobs(&context).await;
                }
            }
        }
    }
}

async fn sweep_orphans(context: &Context, running: &RunningJobs) {
    let containers = match context.sandbox.list_sandboxes().await {
        Ok(containers) => containers,
        Err(error) => return tracing::warn!(%error, "could not list sandbox containers"),
    };
    let job_ids: Vec<Uuid> = containers
        .iter()
        .filter_map(|c| Uuid::parse_str(&c.job).ok())
        .collect();
    let owners = match db::running_lease_owners(&context.pool, &job_ids).await {
        Ok(owners) => owners,
        Err(error) => return tracing::warn!(%error, "could not read leases for the sweep"),
    };
    // Our job containers carry their job id; warm-pool containers their pool label.
    let mut ours: HashSet<String> = running.ids().iter().map(Uuid::to_string).collect();
    if let Some(pool) = &context.warm_pool {
        ours.extend(pool.labels());
    }
    let config = &context.config;
    // No compile outlives this: its timeout and grace after waiting in the pool, with a margin.
    let max_age = i64::from(config.max_timeout_seconds + config.kill_grace_seconds)
        + config.warm_pool_max_age_seconds as i64
        + 120;
    for container in containers {
        if is_orphan(&container, &owners, &context.owner, &ours, max_age) {
            tracing::warn!(
                container = container.id,
                job = container.job,
                "removing orphaned sandbox container"
            );
            if let Err(error) = context.sandbox.remove(&container.id).await {
                tracing::warn!(%error, container = container.id, "could not remove an orphaned container");
            }
        }
    }
}

/// A container is an orphan when no compile can be using it: it outlived every limit, it is
/// ours but we run no such job (a crash of a process with our id), or its job is no longer
/// running under the lease of the scheduler that started it (that scheduler died or lost it).
fn is_orphan(
    container: &SandboxContainer,
    lease_owners: &HashMap<Uuid, String>,
    me: &str,
    ours: &HashSet<String>,
    max_age_seconds: i64,
) -> bool {
    if container.age_seconds > max_age_seconds {
        return true;
    }
    if container.scheduler == me {
        return !ours.contains(&container.job);
    }
    let job = Uuid::parse_str(&container.job).ok();
    // Another scheduler's: an orphan once its job is no longer running under that scheduler's
    // lease. A label that is no job id is left to the age limit.
    job.is_some_and(|job| lease_owners.get(&job) != Some(&container.scheduler))
}

async fn delete_expired_jobs(context: &Context) {
    loop {
        let expired = match db::expired_jobs(
            &context.pool,
            context.config.retention_days,
            RETENTION_BATCH,
        )
        .await
        {
            Ok(expired) => expired,
            Err(error) => return tracing::warn!(%error, "could not look for jobs past retention"),
        };
        let mut deletable = Vec::new();
        'jobs: for job in &expired {
            for key in &job.storage_keys {
                if let Err(error) = context.storage.delete(key).await {
                    tracing::warn!(%error, key, "could not delete an object past retention; keeping its job");
                    continue 'jobs;
                }
            }
            deletable.push(job.id);
        }
        match db::delete_finished_jobs(&context.pool, &deletable).await {
            Ok(deleted) => tracing::info!(deleted, "deleted jobs past retention"),
            Err(error) => return tracing::warn!(%error, "could not delete jobs past retention"),
        }
        if (expired.len() as i64) < RETENTION_BATCH || deletable.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(job: &str, scheduler: &str, age_seconds: i64) -> SandboxContainer {
        SandboxContainer {
            id: "c".into(),
            job: job.into(),
            scheduler: scheduler.into(),
            age_seconds,
        }
    }

    #[test]
    fn orphans_are_containers_no_live_lease_explains() {
        let (mine, theirs, lost) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let owners = HashMap::from([
            (theirs, "other".to_string()),
            (lost, "someone-else".to_string()),
        ]);
        let ours = HashSet::from([mine.to_string(), "pool-1".to_string()]);
        let orphan = |c: &SandboxContainer| is_orphan(c, &owners, "me", &ours, 600);

        assert!(
            !orphan(&container(&mine.to_string(), "me", 10)),
            "our running compile"
        );
        assert!(
            orphan(&container(&Uuid::new_v4().to_string(), "me", 10)),
            "ours, no such compile"
        );
        assert!(
            orphan(&container("not-a-job", "me", 10)),
            "ours, not a job at all"
        );
        assert!(
            !orphan(&container(&theirs.to_string(), "other", 10)),
            "another scheduler's live job"
        );
        assert!(
            orphan(&container(&lost.to_string(), "other", 10)),
            "rescued and claimed elsewhere"
        );
        assert!(
            orphan(&container(&Uuid::new_v4().to_string(), "dead", 10)),
            "job no longer running"
        );
        assert!(
            orphan(&container(&theirs.to_string(), "other", 601)),
            "older than any compile"
        );
        assert!(
            !orphan(&container("check-1", "other", 10)),
            "a fresh self-check"
        );
        assert!(
            orphan(&container("check-1", "other", 601)),
            "a stale self-check"
        );
    }
}
