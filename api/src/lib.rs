//! texfleet's HTTP API (CONTRACT.md). It only reads and writes Postgres and reads S3: accepting
//! a job is one insert, so `POST /compile` answers at once and survives any scheduler outage.
//!
//! - [`routes`]: the handlers;
//! - [`request`]: checking the body of `POST /compile`;
//! - [`auth`]: Bearer tokens;
//! - [`events`]: waiting for jobs to finish (`Prefer: wait`);
//! - [`problem`]: errors as `application/problem+json`, and request ids.

pub mod auth;
pub mod events;
pub mod problem;
pub mod request;
pub mod routes;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use std::future::Future;
use std::sync::Arc;
use texfleet_core::db::{self, Pool};
use texfleet_core::storage::Storage;
use texfleet_core::Config;
use tokio::net::TcpListener;

#[derive(Clone)]
pub struct AppState {
    pub pool: Pool,
    pub storage: Storage,
    pub config: Arc<Config>,
    pub events: events::JobEvents,
}

pub fn router(state: AppState) -> Router {
    let body_limit = state.config.max_body_bytes;
    Router::new()
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route("/compile", post(routes::submit))
        .route("/compile/{id}", get(routes::get_job).delete(routes::cancel))
        .route("/compile/{id}/pdf", get(routes::get_pdf))
        .route("/compile/{id}/log", get(routes::get_log))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn(problem::request_id))
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` resolves, then drains in-flight requests.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = AppState {
        pool: db::pool(&config)?,
        storage: Storage::new(&config),
        events: events::JobEvents::listen(config.database_url.clone()),
        config: Arc::new(config),
    };
    tracing::info!(addr = %listener.local_addr()?, "api listening");
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
