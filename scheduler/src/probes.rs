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
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

/// Connections served at once, and per client address: probes and scrapes are few, so that
/// connections opened by anyone who reaches the port cannot take the process's files.
const MAX_CONNECTIONS: usize = 256;
const MAX_PER_ADDRESS: usize = 8;
/// How long a connection has to send a request's headers, and how long it may live at all: a
/// probe or a scrape takes a moment.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
const LIFETIME: Duration = Duration::from_secs(10);

/// Serves `/metrics`, `/healthz` (the process answers) and `/readyz` (its Docker engine
/// answers, so it claims jobs) on `listener` until the task is aborted. A connection past
/// [`MAX_CONNECTIONS`], or past [`MAX_PER_ADDRESS`] of its address, is closed at once.
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
    let open = Arc::new(Mutex::new(HashMap::<IpAddr, usize>::new()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "probe connection not accepted");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(held) = Held::take(&open, peer.ip()) else {
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(LIFETIME, connection).await;
            drop(held);
        });
    }
}

/// A connection counted against the limits until dropped.
struct Held {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    address: IpAddr,
}

impl Held {
    fn take(open: &Arc<Mutex<HashMap<IpAddr, usize>>>, address: IpAddr) -> Option<Held> {
        let mut counts = open.lock().expect("never poisoned");
        let total: usize = counts.values().sum();
        if total >= MAX_CONNECTIONS || counts.get(&address) >= Some(&MAX_PER_ADDRESS) {
            return None;
        }
        *counts.entry(address).or_default() += 1;
        Some(Held {
            open: open.clone(),
            address,
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self.open.lock().expect("never poisoned");
        if let Some(count) = counts.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}
