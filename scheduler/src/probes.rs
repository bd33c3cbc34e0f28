//! What operators and orchestrators ask the scheduler over HTTP, on `scheduler_metrics_addr`:
//! its metrics, whether the process answers, and whether its Docker engine does (so that it
//! claims jobs).

use crate::engine_health::EngineHealth;
use crate::metrics::REGISTRY;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// Serves `/metrics`, `/healthz` (the process answers) and `/readyz` (its Docker engine
/// answers, so it claims jobs) on `listener` until the task is aborted.
pub async fn serve(listener: tokio::net::TcpListener, engine: Arc<EngineHealth>) {
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
    if let Err(error) = axum::serve(listener, router).await {
        tracing::error!(%error, "metrics server stopped");
    }
}
