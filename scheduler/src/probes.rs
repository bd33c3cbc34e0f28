//! What operators and orchestrators ask the scheduler over HTTP, on `scheduler_metrics_addr`:
//! its metrics, whether the process answers, and whether its Docker engine does (so that it
//! claims jobs).

use crate::engine_health::EngineHealth;
use crate::metrics::REGISTRY;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tower::ServiceExt;

/// Connections served at once, and per client network (an IPv4 /24, an IPv6 /64): probes and
/// scrapes are few, so that connections opened by anyone who reaches the port cannot take the
/// process's files.
const MAX_CONNECTIONS: usize = 256;
const MAX_PER_NETWORK: usize = 8;
/// How long a connection has to send a request's headers, and how long it may live at all: a
/// probe or a scrape takes a moment.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
const LIFETIME: Duration = Duration::from_secs(10);

/// Serves `/metrics`, `/healthz` (the process answers) and `/readyz` (its Docker engine
/// answers, so it claims jobs) on `listener` until the task is aborted. When the port is full,
/// or a network holds its share, a new connection takes the place of the oldest one that has
/// sent no request, of its network first, as a probe sends its request at once and a
/// connection held silent does not; with no such place it is closed at once.
pub async fn serve(listener: TcpListener, engine: Arc<EngineHealth>) {
    let router = Router::new()
        .route(
            "/metrics",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, texfleet_core::metrics::CONTENT_TYPE)],
                    texfleet_core::metrics::encode(&REGISTRY),
                )
                    .into_response()
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                if engine.is_up() {
                    (StatusCode::OK, "ready")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the Docker engine does not answer",
                    )
                }
            }),
        );
    let open = Arc::new(Mutex::new(Open::default()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "probe connection not accepted");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(held) = Held::take(&open, network_of(peer.ip())) else {
            continue;
        };
        let requested = held.requested.clone();
        let router = router.clone();
        let service = hyper::service::service_fn(move |request| {
            requested.store(true, Ordering::Relaxed);
            router.clone().oneshot(request)
        });
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = tokio::time::timeout(LIFETIME, connection) => {}
                _ = held.closing.notified() => {}
            }
            drop(held);
        });
    }
}

/// The connections being served.
#[derive(Default)]
struct Open {
    connections: HashMap<u64, Connection>,
    next_id: u64,
}

struct Connection {
    network: IpAddr,
    accepted: Instant,
    requested: Arc<AtomicBool>,
    closing: Arc<Notify>,
}

/// A connection counted against the limits until dropped.
struct Held {
    open: Arc<Mutex<Open>>,
    id: u64,
    requested: Arc<AtomicBool>,
    closing: Arc<Notify>,
}

impl Held {
    fn take(open: &Arc<Mutex<Open>>, network: IpAddr) -> Option<Held> {
        let mut state = open.lock().expect("never poisoned");
        let of_network = state
            .connections
            .values()
            .filter(|connection| connection.network == network)
            .count();
        if of_network >= MAX_PER_NETWORK {
            state.close_oldest_silent(Some(network))?;
        } else if state.connections.len() >= MAX_CONNECTIONS {
            state
                .close_oldest_silent(Some(network))
                .or_else(|| state.close_oldest_silent(None))?;
        }
        let id = state.next_id;
        state.next_id += 1;
        let requested = Arc::new(AtomicBool::new(false));
        let closing = Arc::new(Notify::new());
        state.connections.insert(
            id,
            Connection {
                network,
                accepted: Instant::now(),
                requested: requested.clone(),
                closing: closing.clone(),
            },
        );
        Some(Held {
            open: open.clone(),
            id,
            requested,
            closing,
        })
    }
}

impl Open {
    /// Closes the oldest connection (of `network`, when given) that has sent no request, and
    /// forgets it at once so that its place is free.
    fn close_oldest_silent(&mut self, network: Option<IpAddr>) -> Option<()> {
        let (&id, _) = self
            .connections
            .iter()
            .filter(|(_, connection)| network.is_none_or(|network| connection.network == network))
            .filter(|(_, connection)| !connection.requested.load(Ordering::Relaxed))
            .min_by_key(|(_, connection)| connection.accepted)?;
        let connection = self.connections.remove(&id)?;
        connection.closing.notify_one();
        Some(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.open
            .lock()
            .expect("never poisoned")
            .connections
            .remove(&self.id);
    }
}

/// The network a client's connections count under: its IPv4 /24 or IPv6 /64.
fn network_of(address: IpAddr) -> IpAddr {
    texfleet_core::network::of(address, 24, 64)
}
