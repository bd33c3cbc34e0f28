//! The scheduler daemon: claims queued jobs and compiles each in its own sandbox container.
//!
//! - [`docker`]: a sandbox container's life (create, attach, kill, remove); [`isolation`]: how
//!   every container is confined; [`inventory`]: listing them; [`image_catalogue`]: what the
//!   image holds, registered for the API. Every Docker call is in these;
//! - [`warm_pool`]: containers started ahead of demand;
//! - [`compile`]: one job from claim to uploaded outputs, renewing its lease, with the
//!   project files it names fetched first ([`project_files`], through a disk cache);
//!   [`page_preview`]: one page of a stored PDF rendered on demand, likewise;
//!   [`job_spec`]: what the sandbox reads on stdin; [`sandbox_run`]: one run of a sandbox; [`floor`]: the benchmark's floor;
//!   [`collect`]: reading results out of the sandbox without trusting them; [`diagnostics`]:
//!   errors and warnings from the TeX log; [`outcome`]: deciding the job's status;
//!   [`record`]: writing it under the lease; [`stop`]: taking a job away mid-compile;
//! - [`upkeep`]: lease rescue, leftover containers, retention and unused project files, on
//!   timers;
//!   [`docker_connect`]: reaching the engine, locally or over TLS; [`docker_health`]: no
//!   claims while it does not answer;
//! - [`metrics`]: what operators watch.
//!
//! The claim loop below keeps at most `slots` compiles running. It sleeps until a job is
//! queued (LISTEN/NOTIFY), a compile finishes, or the slow fallback poll fires; it never spins.
//! A notification that a job reached a final state (the client cancelled it) stops its compile.

mod collect;
mod compile;
mod compile_state;
mod deliveries;
mod diagnostics;
mod docker;
mod docker_connect;
mod docker_health;
mod floor;
mod format_key;
mod image_catalogue;
mod inventory;
mod isolation;
mod job_spec;
mod kept_documents;
mod metrics;
mod outcome;
mod page_preview;
mod probes;
mod project_files;
mod record;
mod sandbox_input;
mod sandbox_run;
mod sandboxes;
mod self_check;
mod stop;
mod synctex;
mod thumbnail;
mod upkeep;
mod upload;
mod warm_pool;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use stop::{RunningJobs, StopReason};
use texfleet_core::db::{self, Notification, Pool};
use texfleet_core::model::ClaimedJob;
use texfleet_core::storage::Storage;
use texfleet_core::Config;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;
use warm_pool::WarmPool;

pub use docker::{oom_event_reported, Sandbox, SandboxRun};
pub use floor::{handed_on, run_floor, start_floor};
pub use inventory::count_sandbox_containers;
pub use sandboxes::Sandboxes;
pub use self_check::check_sandbox;

/// Page previews of one project that render at once across the fleet: with two preview slots,
/// one project's renders (25 s at most each) always leave one to another project.
const PREVIEWS_PER_PROJECT: usize = 1;
/// Preview slots of each scheduler that a heavy project may not take (`db::claim_previews`),
/// when it has more than one: projects whose renders are heavy, however many, leave it to the
/// others.
const PREVIEW_SLOTS_FOR_LIGHT: usize = 1;

/// Runs `work` (a compile or a page preview) in its own task, holding `permit` (a slot) and its
/// place among the running, which it frees when it ends; then wakes the claim loop.
fn start<F, Fut>(
    running: &Arc<RunningJobs>,
    wake: &Arc<Notify>,
    permit: tokio::sync::OwnedSemaphorePermit,
    id: Uuid,
    work: F,
) where
    F: FnOnce(Arc<stop::JobStop>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let stop = running.start(id);
    let future = work(stop);
    let (running, wake) = (running.clone(), wake.clone());
    tokio::spawn(async move {
        future.await;
        running.finish(id);
        drop(permit);
        wake.notify_one();
    });
}

/// What every task of a scheduler shares.
pub struct Context {
    pub config: Config,
    /// The lease owner name this scheduler writes into the jobs it claims.
    pub owner: String,
    /// Postgres, as the scheduler's role.
    pub db: Pool,
    /// Records the outcomes of this scheduler's jobs, committed in groups.
    pub finisher: db::Finisher,
    pub storage: Storage,
    /// The image of each TeX Live year this scheduler serves.
    pub sandboxes: Sandboxes,
    /// Containers started ahead of demand; None when the warm pool is off.
    pub warm_pool: Option<Arc<WarmPool>>,
    /// Whether the Docker engine answers; claims wait while it does not.
    pub engine: Arc<docker_health::DockerHealth>,
    /// Project files recent jobs named, on this scheduler's disk.
    pub file_cache: project_files::FileCache,
}

impl Context {
    /// The id of the image that compiles `job`: its year's (claims take only jobs of years
    /// this scheduler serves).
    pub fn image_id(&self, job: &ClaimedJob) -> &str {
        self.sandboxes
            .of(&job.texlive)
            .map_or("", |sandbox| sandbox.image_id())
    }
}

/// Runs the scheduler until `shutdown` resolves. Then it stops claiming, lets running compiles
/// finish for `shutdown_grace_seconds`, and hands the rest back to the queue.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let owner = config.scheduler_id();
    let slots = config.scheduler_slots();
    self_check::refuse_unsafe_sandbox(&config).await?;
    metrics::init();
    let database = db::pool(&config, config.scheduler_database_url())?;
    let deployment = db::deployment_id(&database).await?.to_string();
    let years: Vec<String> = config.sandbox_images.keys().cloned().collect();
    // The pool's first share goes to the deployment's default year, or to this scheduler's
    // oldest when it does not serve the default.
    let first = match years.contains(&config.default_texlive) {
        true => config.default_texlive.as_str(),
        false => years.first().map_or("", String::as_str),
    };
    let warm_pool = match config.warm_pool_size.unwrap_or(slots) {
        0 => None,
        size => Some(Arc::new(WarmPool::new(
            size,
            Duration::from_secs(config.warm_pool_max_age_seconds),
            &years,
            first,
        ))),
    };
    let context = Arc::new(Context {
        warm_pool: warm_pool.clone(),
        sandboxes: Sandboxes::connect(&config, &owner, &deployment).await?,
        finisher: db::Finisher::start(database.clone(), owner.clone()),
        db: database,
        storage: Storage::new(&config),
        owner: owner.clone(),
        config: config.clone(),
        engine: Arc::new(docker_health::DockerHealth::default()),
        file_cache: project_files::FileCache::new(
            project_files::FileCache::folder_of(&owner),
            config.project_files_cache_bytes,
        )?,
    });
    tracing::info!(
        owner,
        slots,
        images = ?config.sandbox_images,
        "scheduler started"
    );

    let wake = Arc::new(Notify::new());
    let wake_deliveries = Arc::new(Notify::new());
    let running = Arc::new(RunningJobs::default());
    let listener = tokio::spawn(db::listen(
        config.scheduler_database_url().to_string(),
        &[
            db::JOBS_QUEUED_CHANNEL,
            db::JOBS_FINISHED_CHANNEL,
            db::WEBHOOKS_CHANNEL,
        ],
        {
            let (wake, running, wake_deliveries) =
                (wake.clone(), running.clone(), wake_deliveries.clone());
            move |notification: Notification| match notification.channel.as_str() {
                db::JOBS_QUEUED_CHANNEL => wake.notify_one(),
                db::WEBHOOKS_CHANNEL => wake_deliveries.notify_one(),
                _ => {
                    if let Ok(id) = Uuid::parse_str(&notification.payload) {
                        running.stop(id, StopReason::Cancelled);
                    }
                }
            }
        },
    ));
    // Alive before anything of ours exists, so that no other scheduler's sweep takes it.
    db::heartbeat(&context.db, &owner, &context.sandboxes.image_ids()).await?;
    // What the images hold is the API's to tell; a scheduler compiles without it.
    for sandbox in context.sandboxes.iter() {
        if let Err(error) = image_catalogue::register(&context, sandbox).await {
            tracing::warn!(error = %format!("{error:#}"), texlive = sandbox.texlive(), "could not register the sandbox image's packages");
        }
    }
    let upkeep = tokio::spawn(upkeep::run(context.clone(), running.clone()));
    let engine = context.engine.clone();
    let engine_watch = tokio::spawn(docker_health::watch(context.clone(), running.clone()));
    let deliverer = deliveries::Deliverer::new(&config, context.db.clone())?
        .map(|deliverer| tokio::spawn(Arc::new(deliverer).run(wake_deliveries.clone())));
    let stop_pool = CancellationToken::new();
    let pool_keeper = warm_pool
        .clone()
        .map(|pool| tokio::spawn(pool.maintain(context.clone(), stop_pool.clone())));
    let metrics_server = match config.scheduler_metrics_addr.as_str() {
        "" => None,
        addr => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            tracing::info!(addr, "metrics on /metrics");
            Some(tokio::spawn(probes::serve(listener, engine.clone())))
        }
    };
    let free_slots = Arc::new(Semaphore::new(slots));
    let preview_slots = config.preview_slots;
    let free_preview_slots = Arc::new(Semaphore::new(preview_slots));
    let poll_interval = Duration::from_secs(config.poll_interval_seconds);
    tokio::pin!(shutdown);

    // Slots kept for projects with nothing running: a project may use idle capacity, but
    // another must always find a slot soon (a scheduler of one slot keeps none).
    let reserved = config.idle_project_slots.min(slots.saturating_sub(1));
    loop {
        if !engine.is_up() {
            tokio::select! {
                _ = engine.wait_until_up() => continue,
                _ = &mut shutdown => break,
            }
        }
        // Previews have slots of their own: a render takes seconds, an editor waits for it,
        // and compiles (minutes) must not hold every slot it could run in.
        let preview_limit = free_preview_slots.available_permits();
        let previews = match preview_limit {
            0 => Ok(Vec::new()),
            limit => {
                let lease = config.lease_seconds;
                let kept = match preview_slots > 1 {
                    true => PREVIEW_SLOTS_FOR_LIGHT,
                    false => 0,
                };
                let limits = (limit, kept);
                db::claim_previews(&context.db, &owner, lease, limits, PREVIEWS_PER_PROJECT).await
            }
        };
        let claimed_previews = previews.as_ref().map_or(0, Vec::len);
        match previews {
            Ok(previews) => {
                for preview in previews {
                    let permit = free_preview_slots.clone().try_acquire_owned()?;
                    let context = context.clone();
                    start(&running, &wake, permit, preview.id, |stop| async move {
                        page_preview::process(&context, preview, &stop).await
                    });
                }
            }
            Err(error) => tracing::warn!(%error, "claim of page previews failed"),
        }
        let free = free_slots.available_permits();
        let mut claimed = 0;
        let open = free.saturating_sub(reserved);
        for (limit, per_project) in [
            (open, config.max_running_per_project),
            // A cap of one running job: only projects with none running offer a job.
            (reserved.min(free), 1),
        ] {
            let limit = limit.min(free - claimed);
            if limit == 0 {
                continue;
            }
            match db::claim_jobs(
                &context.db,
                &owner,
                config.lease_seconds,
                limit,
                per_project,
                &years,
            )
            .await
            {
                Ok(jobs) => {
                    claimed += jobs.len();
                    for job in jobs {
                        metrics::QUEUE_WAIT.observe(job.waited_seconds);
                        let permit = free_slots.clone().try_acquire_owned()?;
                        let context = context.clone();
                        start(&running, &wake, permit, job.id, |stop| async move {
                            compile::process(&context, job, &stop).await
                        });
                    }
                }
                Err(error) => tracing::warn!(%error, "claim failed"),
            }
        }
        let free_now = free_slots.available_permits();
        metrics::set_slots(slots - free_now, free_now);
        // A full batch means there may be more work: claim again before sleeping.
        let full_previews = claimed_previews > 0 && claimed_previews == preview_limit;
        if (claimed > 0 && claimed == free) || full_previews {
            continue;
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(poll_interval) => {}
            _ = &mut shutdown => break,
        }
    }

    upkeep.abort();
    engine_watch.abort();
    if let Some(deliverer) = deliverer {
        deliverer.abort();
    }
    if let (Some(keeper), Some(pool)) = (pool_keeper, &warm_pool) {
        stop_pool.cancel();
        let _ = keeper.await;
        pool.drain(&context.sandboxes).await;
    }
    let grace = Duration::from_secs(config.shutdown_grace_seconds);
    tracing::info!(
        ?grace,
        running = running.ids().len(),
        "scheduler stopping; no new claims"
    );
    // Every slot back: every compile and every render has ended.
    let all_ended = || async {
        let compiles = free_slots.acquire_many(slots as u32).await?;
        let previews = free_preview_slots
            .acquire_many(preview_slots as u32)
            .await?;
        anyhow::Ok((compiles, previews))
    };
    if tokio::time::timeout(grace, all_ended()).await.is_err() {
        tracing::warn!("grace period over; handing running jobs back to the queue");
        running.stop_all(StopReason::Shutdown);
        let _all = all_ended().await?;
    }
    context.sandboxes.settle().await;
    if let Err(error) = db::forget_scheduler(&context.db, &owner).await {
        tracing::warn!(%error, "could not remove this scheduler's heartbeat");
    }
    listener.abort();
    if let Some(server) = metrics_server {
        server.abort();
    }
    Ok(())
}
