//! The scheduler's metrics, served on `scheduler_metrics_addr` at `/metrics`. They answer the
//! on-call questions: is the queue backing up (depth, oldest job), how long do users wait
//! (queue wait, compile, upload, end to end), which limits do jobs hit, are slots free, is
//! infrastructure failing (retries, lease rescues). Labels are bounded: no job or project ids.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus::{
    register_gauge, register_histogram, register_histogram_vec, register_int_counter,
    register_int_counter_vec, register_int_gauge, register_int_gauge_vec, Gauge, Histogram,
    HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
};
use std::sync::LazyLock;
use texfleet_core::metrics;

const SECONDS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

pub static JOBS_FINISHED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "texfleet_jobs_finished_total",
        "Jobs this scheduler brought to a final state, by status, engine and error code (none when Succeeded).",
        &["status", "engine", "error_code"]
    )
    .expect("metric registers once")
});

pub static QUEUE_WAIT: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "texfleet_job_queue_wait_seconds",
        "Time from submission to claim.",
        SECONDS.to_vec()
    )
    .expect("metric registers once")
});

pub static COMPILE_TIME: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "texfleet_job_compile_seconds",
        "Compile time in the sandbox, by engine.",
        &["engine"],
        SECONDS.to_vec()
    )
    .expect("metric registers once")
});

pub static UPLOAD_TIME: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "texfleet_job_upload_seconds",
        "Time to upload a job's PDF and log, retries included.",
        vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]
    )
    .expect("metric registers once")
});

pub static END_TO_END: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "texfleet_job_end_to_end_seconds",
        "Time from submission to a final state, as the client waits it, by engine.",
        &["engine"],
        SECONDS.to_vec()
    )
    .expect("metric registers once")
});

pub static QUEUE_JOBS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "texfleet_queue_jobs",
        "Jobs waiting or running, across all schedulers, by status.",
        &["status"]
    )
    .expect("metric registers once")
});

pub static OLDEST_QUEUED: LazyLock<Gauge> = LazyLock::new(|| {
    register_gauge!(
        "texfleet_queue_oldest_job_age_seconds",
        "Age of the oldest queued job (0 when none waits)."
    )
    .expect("metric registers once")
});

pub static SLOTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "texfleet_scheduler_slots",
        "This scheduler's compile slots, by state (busy, free).",
        &["state"]
    )
    .expect("metric registers once")
});

pub static CONTAINERS: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!(
        "texfleet_sandbox_containers_running",
        "Sandbox containers this scheduler has created and not yet removed."
    )
    .expect("metric registers once")
});

pub static RETRIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "texfleet_job_retries_total",
        "Infrastructure failures that sent a job back to the queue, by error code.",
        &["error_code"]
    )
    .expect("metric registers once")
});

pub static RESCUES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "texfleet_lease_rescues_total",
        "Running jobs returned to the queue (or failed) because their lease expired."
    )
    .expect("metric registers once")
});

pub static LIMITS_HIT: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "texfleet_sandbox_limits_hit_total",
        "Jobs ended by a sandbox limit, by limit (timeout, memory, output).",
        &["limit"]
    )
    .expect("metric registers once")
});

/// Sets both slot gauges.
pub fn set_slots(busy: usize, free: usize) {
    SLOTS.with_label_values(&["busy"]).set(busy as i64);
    SLOTS.with_label_values(&["free"]).set(free as i64);
}

/// Serves `/metrics` (and `/healthz`) on `listener` until the task is aborted.
pub async fn serve(listener: tokio::net::TcpListener) {
    metrics::register_build_info("scheduler");
    let router = Router::new()
        .route(
            "/metrics",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
                    metrics::encode(),
                )
                    .into_response()
            }),
        )
        .route("/healthz", get(|| async { "ok" }));
    if let Err(error) = axum::serve(listener, router).await {
        tracing::error!(%error, "metrics server stopped");
    }
}
