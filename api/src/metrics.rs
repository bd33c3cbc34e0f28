//! The API's metrics: requests and latency by route template, method and status, jobs
//! submitted, and the result cache's hits and misses. Label values are bounded: routes are templates (`/compile/{id}`), never ids.

use axum::body::Bytes;
use axum::extract::{MatchedPath, Request};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus::{
    register_histogram_vec_with_registry, register_int_counter_vec_with_registry,
    register_int_counter_with_registry, register_int_gauge_with_registry, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, Registry,
};
use std::sync::{Arc, LazyLock, Weak};
use std::time::{Duration, Instant};
use strum::VariantArray;
use texfleet_core::metrics;
use texfleet_core::model::Engine;

/// The api's own registry: a process that runs the API and a scheduler (a test) exports
/// each role's series once, from that role's endpoint.
pub static REGISTRY: LazyLock<Registry> = LazyLock::new(|| metrics::registry("api"));

static HTTP_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_http_requests_total",
        "HTTP requests answered, by route template, method and status.",
        &["route", "method", "status"],
        REGISTRY
    )
    .expect("metric registers once")
});

static HTTP_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec_with_registry!(
        "texfleet_http_request_duration_seconds",
        "Time to answer an HTTP request (until the response head), by route template and method.",
        &["route", "method"],
        vec![
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            60.0
        ],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static JOBS_SUBMITTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_jobs_submitted_total",
        "Jobs queued through the API, by engine.",
        &["engine"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static RESULT_CACHE: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_result_cache_total",
        "Submissions that looked for an identical earlier result: hit (reused, no compile) or miss.",
        &["result"],
        REGISTRY
    )
    .expect("metric registers once")
});

/// Outcomes of `PUT /projects/{id}/files/{sha256}` uploads that got past the quota.
pub static PROJECT_FILE_UPLOADS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_project_file_uploads_total",
        "Project file uploads that reserved their bytes: started, then stored, mismatched (the body's SHA-256 was another) or failed.",
        &["outcome"],
        REGISTRY
    )
    .expect("metric registers once")
});

/// Bytes of project files received, whatever their uploads' outcome.
pub static PROJECT_FILE_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter_with_registry!(
        "texfleet_project_file_bytes_received_total",
        "Bytes of project files received by uploads.",
        REGISTRY
    )
    .expect("metric registers once")
});

static CONNECTIONS_OPEN: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge_with_registry!(
        "texfleet_http_connections_open",
        "Client connections the API holds open.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub fn set_open_connections(open: usize) {
    CONNECTIONS_OPEN.set(open as i64);
}

pub static CONNECTIONS_CLOSED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_http_connections_closed_total",
        "Connections the API closed before their client did: header_timeout (no complete request in time after the accept), idle_timeout (no new request in time after an answer), stalled (an answer the client took no frame of in time), evicted (its last progress was the oldest while the API was full and another client arrived).",
        &["reason"],
        REGISTRY
    )
    .expect("metric registers once")
});

static ANSWER_BYTES_HELD: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge_with_registry!(
        "texfleet_http_answer_bytes_held",
        "Bytes of the answer budget (max_sending_bytes) held: answers built in memory that clients have not taken yet, and the places of requests being served.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub fn set_answer_bytes_held(kib: usize) {
    ANSWER_BYTES_HELD.set((kib * 1024) as i64);
}

pub static CONNECTIONS_REFUSED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter_with_registry!(
        "texfleet_http_connections_refused_total",
        "Connections closed at once because their client address held max_connections_per_address already.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static RATE_LIMITED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_http_rate_limited_total",
        "Requests answered 429 rate_limited: by client address (before any token is looked up), by client network (tokens waiting for the set of live tokens) or by token.",
        &["by"],
        REGISTRY
    )
    .expect("metric registers once")
});

pub static READS_PACED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter_with_registry!(
        "texfleet_http_reads_paced_total",
        "Times a connection was not read for a while because its network (an IPv4 /24, an IPv6 /48) had sent more than 4 MiB besides requests, refilled at 64 KiB a second, or its /16 (/32) four times that: HTTP/2 control frames, requests answered 429.",
        REGISTRY
    )
    .expect("metric registers once")
});

pub static TOKENS_REFUSED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec_with_registry!(
        "texfleet_http_tokens_refused_total",
        "Requests answered 401 for their token: missing from the API's set of live tokens after its refresh (no lookup of their own), or looked up and found revoked or expired.",
        &["by"],
        REGISTRY
    )
    .expect("metric registers once")
});

/// Registers every metric, submissions per engine at zero, so that a scrape shows every name.
pub fn init() {
    LazyLock::force(&HTTP_REQUESTS);
    LazyLock::force(&HTTP_DURATION);
    LazyLock::force(&CONNECTIONS_OPEN);
    LazyLock::force(&CONNECTIONS_REFUSED);
    LazyLock::force(&READS_PACED);
    LazyLock::force(&ANSWER_BYTES_HELD);
    for reason in ["header_timeout", "idle_timeout", "stalled", "evicted"] {
        CONNECTIONS_CLOSED.with_label_values(&[reason]);
    }
    for by in ["address", "network", "token"] {
        RATE_LIMITED.with_label_values(&[by]);
    }
    for by in ["set", "lookup"] {
        TOKENS_REFUSED.with_label_values(&[by]);
    }
    for result in ["hit", "miss"] {
        RESULT_CACHE.with_label_values(&[result]);
    }
    for outcome in ["started", "stored", "mismatched", "failed"] {
        PROJECT_FILE_UPLOADS.with_label_values(&[outcome]);
    }
    LazyLock::force(&PROJECT_FILE_BYTES);
    for engine in Engine::VARIANTS {
        JOBS_SUBMITTED.with_label_values(&[engine.as_str()]);
    }
}

/// Middleware: counts and times every request.
pub async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_string();
    let method = match *request.method() {
        Method::GET
        | Method::POST
        | Method::DELETE
        | Method::PUT
        | Method::PATCH
        | Method::HEAD
        | Method::OPTIONS => request.method().as_str().to_string(),
        _ => "other".to_string(),
    };
    let started = Instant::now();
    let response = next.run(request).await;
    HTTP_DURATION
        .with_label_values(&[&route, &method])
        .observe(started.elapsed().as_secs_f64());
    HTTP_REQUESTS
        .with_label_values(&[&route, &method, response.status().as_str()])
        .inc();
    response
}

/// How long one encoding of the metrics answers scrapes. Answers to no project are outside the
/// answer budget, and the metrics run to a quarter of a megabyte: slow readers of `/metrics`
/// then share a few copies instead of holding one each, and a burst of scrapes encodes once.
const FRESH_FOR: Duration = Duration::from_millis(250);

/// Encodings still being sent past which a new one is made only every [`FRESH_WHILE_HELD`],
/// so that readers pacing themselves to get a copy each hold a few megabytes at most.
const MOST_HELD: usize = 8;
const FRESH_WHILE_HELD: Duration = Duration::from_secs(10);

static ENCODED: LazyLock<Encodings> = LazyLock::new(Default::default);

/// The encodings made and not yet sent whole, the newest last; locked while one is made, so
/// that scrapes arriving meanwhile wait for it rather than make their own.
#[derive(Default)]
struct Encodings(tokio::sync::Mutex<Vec<(tokio::time::Instant, Weak<Vec<u8>>)>>);

/// An encoding's bytes, shared by the answers sending it.
struct Encoding(Arc<Vec<u8>>);

impl AsRef<[u8]> for Encoding {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Prometheus metrics of this process.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String)))]
pub async fn serve() -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        ENCODED.latest().await,
    )
        .into_response()
}

impl Encodings {
    /// An encoding of the metrics, made now or shared with other scrapes.
    async fn latest(&self) -> Bytes {
        let mut encodings = self.0.lock().await;
        encodings.retain(|(_, encoding)| encoding.strong_count() > 0);
        let fresh_for = match encodings.len() < MOST_HELD {
            true => FRESH_FOR,
            false => FRESH_WHILE_HELD,
        };
        if let Some((made, encoding)) = encodings.last() {
            if let Some(encoding) = encoding.upgrade().filter(|_| made.elapsed() < fresh_for) {
                return Bytes::from_owner(Encoding(encoding));
            }
        }
        let encoding = Arc::new(metrics::encode(&REGISTRY).into_bytes());
        encodings.push((tokio::time::Instant::now(), Arc::downgrade(&encoding)));
        Bytes::from_owner(Encoding(encoding))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scrapes_close_together_share_one_encoding() {
        init();
        let encodings = Encodings::default();
        let (first, second) = (encodings.latest().await, encodings.latest().await);
        assert_eq!(first.as_ptr(), second.as_ptr());
        assert!(first.len() > 1000, "{first:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn encodings_held_by_slow_readers_are_few() {
        init();
        let encodings = Encodings::default();
        let mut held = Vec::new();
        for _ in 0..40 {
            held.push(encodings.latest().await);
            tokio::time::advance(FRESH_FOR).await;
        }
        held.sort_by_key(|bytes| bytes.as_ptr());
        held.dedup_by_key(|bytes| bytes.as_ptr());
        assert_eq!(held.len(), MOST_HELD);
        drop(held);
        let first = encodings.latest().await;
        tokio::time::advance(FRESH_FOR).await;
        let later = encodings.latest().await;
        assert_ne!(
            first.as_ptr(),
            later.as_ptr(),
            "sent encodings are forgotten"
        );
    }
}
