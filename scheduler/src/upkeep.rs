//! Work on timers, beside the claim loop: this scheduler's heartbeat, rescuing jobs whose lease
//! expired, removing sandbox containers that no live compile or warm pool owns, and deleting
//! jobs past retention and project files nothing keeps. Every scheduler runs it; each step is safe to run from several
//! schedulers at once.

use crate::inventory::SandboxContainer;
use crate::metrics;
use crate::stop::RunningJobs;
use crate::Context;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use texfleet_core::db;
use texfleet_core::model::{page_previews_prefix, project_file_key, storage_keys};
use uuid::Uuid;

/// How often the queue gauges are refreshed.
const QUEUE_STATS_INTERVAL: Duration = Duration::from_secs(5);
/// Jobs deleted per retention batch.
const RETENTION_BATCH: i64 = 100;

pub async fn run(context: Arc<Context>, running: Arc<RunningJobs>) {
    let config = &context.config;
    let lease = Duration::from_secs(config.lease_seconds);
    let mut heartbeat = tokio::time::interval(lease.div_f64(3.0));
    let mut rescue = tokio::time::interval(lease.div_f64(2.0));
    // Leftovers are looked for once a lease (also at start and after every rescue): a
    // scheduler that missed three heartbeats is dead, and the next sweep removes its containers.
    let mut sweep = tokio::time::interval(lease);
    let mut retention =
        tokio::time::interval(Duration::from_secs(config.retention_interval_seconds));
    let mut queue_stats = tokio::time::interval(QUEUE_STATS_INTERVAL);
    loop {
        tokio::select! {
            _ = heartbeat.tick() => {
                if let Err(error) = db::heartbeat(&context.db, &context.owner, &context.sandboxes.image_ids()).await {
                    tracing::warn!(%error, "could not record the heartbeat");
                }
            }
            _ = rescue.tick() => {
                match db::rescue_expired_leases(&context.db).await {
                    Ok(rescued) if !rescued.is_empty() => {
                        tracing::warn!(?rescued, "rescued jobs whose lease expired");
                        metrics::RESCUES.inc_by(rescued.len() as u64);
                        sweep_orphans(&context, &running).await;
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "lease rescue failed"),
                }
                match db::rescue_expired_previews(&context.db).await {
                    Ok(0) => {}
                    Ok(rescued) => tracing::warn!(rescued, "released page previews whose lease expired"),
                    Err(error) => tracing::warn!(%error, "page preview lease rescue failed"),
                }
            }
            _ = sweep.tick() => sweep_orphans(&context, &running).await,
            _ = queue_stats.tick() => match db::queue_stats(&context.db, config.lease_seconds).await {
                Ok(stats) => {
                    metrics::QUEUE_JOBS.with_label_values(&["Queued"]).set(stats.queued);
                    metrics::QUEUE_JOBS.with_label_values(&["Running"]).set(stats.running);
                    metrics::OLDEST_QUEUED.set(stats.oldest_queued_seconds);
                    metrics::UNSERVED.set(stats.unserved);
                }
                Err(error) => tracing::warn!(%error, "could not read the queue's depth"),
            },
            _ = retention.tick() => {
                if config.retention_days > 0 {
                    delete_expired_jobs(&context).await;
                }
                collect_unused_files(&context).await;
                forget_cached_files_gone(&context).await;
            }
        }
    }
}

pub async fn sweep_orphans(context: &Context, running: &RunningJobs) {
    let containers = match context.sandboxes.engine().list_sandboxes().await {
        Ok(containers) => containers,
        Err(error) => return tracing::warn!(%error, "could not list sandbox containers"),
    };
    let job_ids: Vec<Uuid> = containers
        .iter()
        .filter_map(|c| Uuid::parse_str(&c.job).ok())
        .collect();
    let owners = match db::running_lease_owners(&context.db, &job_ids).await {
        Ok(owners) => owners,
        Err(error) => return tracing::warn!(%error, "could not read leases for the sweep"),
    };
    let live = match db::live_schedulers(&context.db, context.config.lease_seconds).await {
        Ok(live) => live,
        Err(error) => return tracing::warn!(%error, "could not read heartbeats for the sweep"),
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
        if is_orphan(&container, &owners, &live, &context.owner, &ours, max_age) {
            tracing::warn!(
                container = container.id,
                job = container.job,
                "removing orphaned sandbox container"
            );
            if let Err(error) = context.sandboxes.engine().remove(&container.id).await {
                tracing::warn!(%error, container = container.id, "could not remove an orphaned container");
            }
        }
    }
}

/// A container is an orphan when no compile or pool can be using it: it outlived every limit;
/// it is ours but we run no such job or pool container (a crash of a process with our id); its
/// scheduler is dead (no heartbeat for a lease); or its job is no longer running under the
/// lease of the scheduler that started it (that scheduler lost it). A live scheduler's warm
/// container (a label that is no job id) is that scheduler's to replace.
fn is_orphan(
    container: &SandboxContainer,
    lease_owners: &HashMap<Uuid, String>,
    live: &HashSet<String>,
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
    if !live.contains(&container.scheduler) {
        return true;
    }
    let job = Uuid::parse_str(&container.job).ok();
    job.is_some_and(|job| lease_owners.get(&job) != Some(&container.scheduler))
}

async fn delete_expired_jobs(context: &Context) {
    loop {
        let expired =
            match db::expired_jobs(&context.db, context.config.retention_days, RETENTION_BATCH)
                .await
            {
                Ok(expired) => expired,
                Err(error) => {
                    return tracing::warn!(%error, "could not look for jobs past retention")
                }
            };
        let mut deletable = Vec::new();
        'jobs: for &id in &expired {
            let previews = match context.storage.list(&page_previews_prefix(id)).await {
                Ok(previews) => previews,
                Err(error) => {
                    tracing::warn!(%error, "could not list a job's page previews past retention; keeping its job");
                    metrics::RETENTION.with_label_values(&["kept"]).inc();
                    continue;
                }
            };
            for key in storage_keys(id).into_iter().chain(previews) {
                if let Err(error) = context.storage.delete(&key).await {
                    tracing::warn!(%error, key, "could not delete an object past retention; keeping its job");
                    metrics::RETENTION.with_label_values(&["kept"]).inc();
                    continue 'jobs;
                }
            }
            deletable.push(id);
        }
        match db::delete_finished_jobs(&context.db, &deletable).await {
            Ok(deleted) => {
                metrics::RETENTION
                    .with_label_values(&["deleted"])
                    .inc_by(deleted);
                tracing::info!(deleted, "deleted jobs past retention")
            }
            Err(error) => return tracing::warn!(%error, "could not delete jobs past retention"),
        }
        if (expired.len() as i64) < RETENTION_BATCH || deletable.is_empty() {
            return;
        }
    }
}

/// Deletes the project files nothing keeps (`db::files_to_collect`): each object first, then
/// its row, so that a file is never named while its object is gone.
async fn collect_unused_files(context: &Context) {
    let config = &context.config;
    loop {
        let marked = match db::files_to_collect(
            &context.db,
            config.project_files_grace_hours,
            config.retention_days,
            RETENTION_BATCH,
        )
        .await
        {
            Ok(marked) => marked,
            Err(error) => return tracing::warn!(%error, "could not look for unused project files"),
        };
        let mut gone = Vec::new();
        for (project, sha256) in &marked {
            match context
                .storage
                .delete(&project_file_key(*project, sha256))
                .await
            {
                Ok(()) => gone.push((*project, *sha256)),
                Err(error) => tracing::warn!(%error, "could not delete an unused project file"),
            }
        }
        match db::forget_files(&context.db, &gone).await {
            Ok(forgotten) => metrics::PROJECT_FILES_COLLECTED.inc_by(forgotten),
            Err(error) => return tracing::warn!(%error, "could not forget deleted project files"),
        }
        if (marked.len() as i64) < RETENTION_BATCH || gone.is_empty() {
            return;
        }
    }
}

/// Deletes from this scheduler's disk the project files no longer stored: collected, or of a
/// project deleted, whichever scheduler did it.
async fn forget_cached_files_gone(context: &Context) {
    let cached = context.file_cache.files();
    if cached.is_empty() {
        return;
    }
    let stored = match db::still_stored(&context.db, &cached).await {
        Ok(stored) => stored,
        Err(error) => return tracing::warn!(%error, "could not check the cached project files"),
    };
    let gone: Vec<_> = cached
        .into_iter()
        .filter(|file| !stored.contains(file))
        .collect();
    context.file_cache.forget(&gone);
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
        let live = HashSet::from(["other".to_string(), "someone-else".to_string()]);
        let orphan = |c: &SandboxContainer| is_orphan(c, &owners, &live, "me", &ours, 600);

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
            orphan(&container(&Uuid::new_v4().to_string(), "other", 10)),
            "a live scheduler's job no longer running"
        );
        assert!(
            orphan(&container("pool-7", "dead", 10)),
            "a dead scheduler's warm container"
        );
        assert!(
            !orphan(&container("pool-7", "other", 10)),
            "a live scheduler's warm container"
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
