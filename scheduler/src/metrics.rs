//! The scheduler's metrics, served at `/metrics` by [`crate::probes`]. They answer the on-call
//! questions: is the queue backing up (depth, oldest job), how long do users wait (queue wait,
//! compile, upload, end to end), which limits do jobs hit, are slots free, is infrastructure
//! failing (retries, lease rescues, the Docker engine), do webhooks reach their endpoints.
//! Labels are bounded: no job or project ids.

use prometheus::{
    register_gauge_with_registry, register_histogram_vec_with_registry,
    register_histogram_with_registry, register_int_counter_vec_with_registry,
    register_int_counter_with_registry, register_int_gauge_vec_with_registry,
    register_int_gauge_with_registry, Gauge, Histogram, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Registry,
};
use std::sync::LazyLock;
use strum::VariantArray;
use texfleet_core::metrics;
use texfleet_core::model::{Engine, ErrorCode, JobStatus};

/// The scheduler's own registry: a process that runs the API and a scheduler (a test) exports
/// each role's series once, from that role's endpoint.
pub static REGISTRY: LazyLock<Registry> = LazyLock::new(|| metrics::registry("scheduler"));

const SECONDS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

pub static JOBS_FINISHED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_jobs_finished_total",
        "Jobs this scheduler brought to a final state, by status, engine and error code (none when Succeeded).",
        &["status", "engine", "error_code"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static QUEUE_WAIT: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram_with_registry!(
        "texfleet_job_queue_wait_seconds",
        "Time from submission to claim.",
        SECONDS.to_vec(),
        REGISTRY
    )
    .expect("metric registers once")
});

pub static COMPILE_TIME: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec_with_registry!(
        "texfleet_job_compile_seconds",
        "Compile time in the sandbox, by engine.",
        &["engine"],
        SECONDS.to_vec(),
        REGISTRY
    )
    .expect("metric registers once")
});

pub static UPLOAD_TIME: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram_with_registry!(
        "texfleet_job_upload_seconds",
        "Time to upload a job's PDF and log, retries included.",
        vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static END_TO_END: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec_with_registry!(
        "texfleet_job_end_to_end_seconds",
        "Time from submission to a final state, as the client waits it, by engine.",
        &["engine"],
        SECONDS.to_vec(),
        REGISTRY
    )
    .expect("metric registers once")
});

pub static QUEUE_JOBS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec_with_registry!(
        "texfleet_queue_jobs",
        "Jobs waiting or running, across all schedulers, by status.",
        &["status"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static OLDEST_QUEUED: LazyLock<Gauge> = LazyLock::new(|| {
    register_gauge_with_registry!(
        "texfleet_queue_oldest_job_age_seconds",
        "Age of the oldest queued job (0 when none waits).",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static UNSERVED: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge_with_registry!(
        "texfleet_queue_unserved_jobs",
        "Queued jobs of a TeX Live year that no live scheduler serves: they wait until a scheduler with an image of that year starts.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static SLOTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec_with_registry!(
        "texfleet_scheduler_slots",
        "This scheduler's compile slots, by state (busy, free).",
        &["state"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static DOCKER_ENGINE_UP: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge_with_registry!(
        "texfleet_docker_engine_up",
        "1 while this scheduler's Docker engine answers its pings; 0 while it does not (no claims).",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static CONTAINERS: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge_with_registry!(
        "texfleet_sandbox_containers_running",
        "Sandbox containers this scheduler has created and not yet removed.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static RETRIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_job_retries_total",
        "Infrastructure failures that sent a job back to the queue, by error code.",
        &["error_code"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static PAGE_PREVIEWS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_page_previews_total",
        "Page previews this scheduler rendered, by outcome: stored, past_the_end (no such page), \
         failed (no image came out) or released (queued again after a failure of ours).",
        &["outcome"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static PAGE_PREVIEW_TIME: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram_with_registry!(
        "texfleet_page_preview_seconds",
        "From the claim of a page preview to its image stored.",
        SECONDS.to_vec(),
        REGISTRY
    )
    .expect("metric registers once")
});

pub static UPLOAD_RETRIES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter_with_registry!(
        "texfleet_upload_retries_total",
        "PUTs to the object store that failed and were tried again.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static RETENTION: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_retention_jobs_total",
        "Jobs past retention: deleted with their objects, or kept for the next run because an \
         object could not be deleted.",
        &["result"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static RESCUES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter_with_registry!(
        "texfleet_lease_rescues_total",
        "Running jobs returned to the queue (or failed) because their lease expired.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static LIMITS_HIT: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_sandbox_limits_hit_total",
        "Jobs ended by a sandbox limit, by limit (timeout, memory, output).",
        &["limit"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static PREAMBLE_CACHE: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_preamble_cache_total",
        "Compiles by what the preamble format cache gave them: hit (the project's format of \
         this preamble loaded), miss (compiled without one, preamble dumped for the next), \
         unavailable (this preamble or engine cannot be kept as a format).",
        &["result"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static INCREMENTAL: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_incremental_compiles_total",
        "Compiles by whether they started from the auxiliary files of the project's last \
         successful compile of the same document (restored) or from none (cold).",
        &["start"],
        REGISTRY
    )
    .expect("metric registers once")
});

/// Registers every metric, each labelled series a dashboard or alert reads at zero, so that
/// a scrape shows every name from the start (a series that appears only with its first event
/// hides that it never happened, and breaks rates).
pub static PROJECT_FILE_CACHE: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_project_file_cache_total",
        "Project files a job named, by where they came from: hit (this scheduler's disk) or miss (S3).",
        &["result"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static PROJECT_FILE_CACHE_BYTES: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge_with_registry!(
        "texfleet_project_file_cache_bytes",
        "Bytes of project files this scheduler keeps on its disk.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static PROJECT_FILES_COLLECTED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter_with_registry!(
        "texfleet_project_files_collected_total",
        "Project files deleted because nothing kept them (no recent upload, no retained job).",
        REGISTRY
    )
    .expect("metric registers once")
});

pub fn init() {
    for result in ["hit", "miss"] {
        PROJECT_FILE_CACHE.with_label_values(&[result]);
    }
    LazyLock::force(&PROJECT_FILE_CACHE_BYTES);
    LazyLock::force(&PROJECT_FILES_COLLECTED);
    for engine in Engine::VARIANTS {
        let engine = engine.as_str();
        for (status, code) in [
            (JobStatus::Succeeded, None),
            (JobStatus::Failed, Some(ErrorCode::CompileError)),
            (JobStatus::Failed, Some(ErrorCode::MemoryLimit)),
            (JobStatus::Failed, Some(ErrorCode::OutputLimit)),
            (JobStatus::Failed, Some(ErrorCode::SandboxError)),
            (JobStatus::Failed, Some(ErrorCode::StorageError)),
            (JobStatus::TimedOut, Some(ErrorCode::Timeout)),
        ] {
            let code = code.map_or("none", ErrorCode::as_str);
            JOBS_FINISHED.with_label_values(&[status.as_str(), engine, code]);
        }
        COMPILE_TIME.with_label_values(&[engine]);
        END_TO_END.with_label_values(&[engine]);
    }
    for code in [ErrorCode::SandboxError, ErrorCode::StorageError] {
        RETRIES.with_label_values(&[code.as_str()]);
    }
    for limit in ["timeout", "memory", "output"] {
        LIMITS_HIT.with_label_values(&[limit]);
    }
    for result in ["deleted", "kept"] {
        RETENTION.with_label_values(&[result]);
    }
    for result in ["hit", "miss", "unavailable"] {
        PREAMBLE_CACHE.with_label_values(&[result]);
    }
    for start in ["restored", "cold"] {
        INCREMENTAL.with_label_values(&[start]);
    }
    for status in [JobStatus::Queued, JobStatus::Running] {
        QUEUE_JOBS.with_label_values(&[status.as_str()]);
    }
    LazyLock::force(&QUEUE_WAIT);
    LazyLock::force(&UPLOAD_TIME);
    LazyLock::force(&OLDEST_QUEUED);
    LazyLock::force(&UNSERVED);
    LazyLock::force(&CONTAINERS);
    LazyLock::force(&DOCKER_ENGINE_UP);
    LazyLock::force(&RESCUES);
    LazyLock::force(&UPLOAD_RETRIES);
    for result in ["delivered", "retried", "failed"] {
        WEBHOOK_DELIVERIES.with_label_values(&[result]);
    }
    LazyLock::force(&WEBHOOK_OLDEST_PENDING);
    LazyLock::force(&WEBHOOK_MOST_OVERDUE);
    set_slots(0, 0);
}

pub static WEBHOOK_DELIVERIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_webhook_attempts_total",
        "Webhook delivery attempts this scheduler sent, by what came of them: delivered, retried (failed, to be sent again) or failed (the retry window is over).",
        &["result"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static WEBHOOK_OLDEST_PENDING: LazyLock<Gauge> = LazyLock::new(|| {
    register_gauge_with_registry!(
        "texfleet_webhook_oldest_pending_seconds",
        "Age of the oldest webhook delivery not yet delivered or failed (0 when none).",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static WEBHOOK_MOST_OVERDUE: LazyLock<Gauge> = LazyLock::new(|| {
    register_gauge_with_registry!(
        "texfleet_webhook_most_overdue_seconds",
        "How long the most overdue webhook attempt has been due and not sent (0 when none): the delivery workers' lag.",
        REGISTRY
    )
    .expect("metric registers once")
});

/// Sets both slot gauges.
pub fn set_slots(busy: usize, free: usize) {
    SLOTS.with_label_values(&["busy"]).set(busy as i64);
    SLOTS.with_label_values(&["free"]).set(free as i64);
}
