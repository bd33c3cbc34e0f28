//! What operators and orchestrators ask the scheduler over HTTP, on `scheduler_metrics_addr`:
//! its metrics, whether the process answers, and whether its Docker engine does (so that it
//! claims jobs).

use crate::docker_health::DockerHealth;
use crate::metrics::REGISTRY;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Connections served at once, and per client network (an IPv4 /24, an IPv6 /64): probes and
/// scrapes are few, so that connections opened by anyone who reaches the port cannot take the
/// process's files, nor keep another network's probe out.
const MAX_CONNECTIONS: usize = 256;
const MAX_PER_NETWORK: usize = 8;
/// How long a connection has to send a request's headers, and how long it may live at all: a
/// probe or a scrape takes a moment.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
const LIFETIME: Duration = Duration::from_secs(10);

/// Serves `/metrics`, `/healthz` (the process answers) and `/readyz` (its Docker engine
/// answers, so it claims jobs) on `listener` until the task is aborted: one request per
/// connection, so that a connection is held only while a request arrives or its answer is
/// read, and a new connection always gets a place ([`Held::take`]).
pub async fn serve(listener: TcpListener, engine: Arc<DockerHealth>) {
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
        let held = Held::take(&open, network_of(peer.ip()));
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
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
    closing: Arc<Notify>,
}

/// A connection counted against the limits until dropped.
struct Held {
    open: Arc<Mutex<Open>>,
    id: u64,
    closing: Arc<Notify>,
}

impl Held {
    /// A place for a connection of `network`: when its network holds its share, that
    /// network's oldest connection gives way; when the port is full, the oldest of the network
    /// holding the most does, so that many networks holding the port cannot keep out a probe
    /// of another.
    fn take(open: &Arc<Mutex<Open>>, network: IpAddr) -> Held {
        let mut state = open.lock().expect("never poisoned");
        if state.held_by(network) >= MAX_PER_NETWORK {
            state.close_oldest(network);
        } else if let Some(heaviest) = state
            .heaviest()
            .filter(|_| state.connections.len() >= MAX_CONNECTIONS)
        {
            state.close_oldest(heaviest);
        }
        let id = state.next_id;
        state.next_id += 1;
        let closing = Arc::new(Notify::new());
        state.connections.insert(
            id,
            Connection {
                network,
                accepted: Instant::now(),
                closing: closing.clone(),
            },
        );
        Held {
            open: open.clone(),
            id,
            closing,
        }
    }
}

impl Open {
    fn held_by(&self, network: IpAddr) -> usize {
        self.connections
            .values()
            .filter(|connection| connection.network == network)
            .count()
    }

    /// The network holding the most connections.
    fn heaviest(&self) -> Option<IpAddr> {
        let mut held = HashMap::<IpAddr, usize>::new();
        for connection in self.connections.values() {
            *held.entry(connection.network).or_default() += 1;
        }
        held.into_iter()
            .max_by_key(|&(_, count)| count)
            .map(|(network, _)| network)
    }

    /// Closes `network`'s oldest connection, and forgets it at once so that its place is free.
    fn close_oldest(&mut self, network: IpAddr) {
        let oldest = self
            .connections
            .iter()
            .filter(|(_, connection)| connection.network == network)
            .min_by_key(|(_, connection)| connection.accepted)
            .map(|(&id, _)| id);
        if let Some(connection) = oldest.and_then(|id| self.connections.remove(&id)) {
            connection.closing.notify_one();
        }
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
