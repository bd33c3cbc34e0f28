//! texfleet's HTTP API (docs/API.md). It only reads and writes Postgres and reads S3: accepting
//! a job is one insert, so `POST /compile` answers at once and survives any scheduler outage.
//!
//! - [`submit`]: `POST /compile`; [`routes`]: the other handlers of jobs; [`downloads`]: the
//!   PDF and the log, with their `ETag`s; [`info`]: the TeX installation and the limits;
//! - [`request`]: checking the body of `POST /compile`, JSON or multipart;
//! - [`webhooks`]: a project's webhook endpoints and their deliveries;
//! - [`auth`]: Bearer tokens;
//! - [`receiving`] and [`sending`]: the memory that request bodies and answers hold;
//! - [`events`]: waiting for jobs to finish (`Prefer: wait`) and page previews to be rendered;
//!   [`page_previews`]: pages of a PDF as images; [`play`]: the reference editor at `/play`;
//! - [`problem`]: errors as `application/problem+json` (their codes in [`problem_code`]), and
//!   request ids.

mod auth;
mod client_address;
mod connections;
mod cors;
mod downloads;
mod events;
mod info;
mod live_tokens;
mod memory;
mod metrics;
mod page_previews;
mod play;
mod problem;
mod problem_code;
mod project_database;
mod project_files;
mod read_pacing;
mod receiving;
mod request;
mod routes;
mod sending;
mod serve;
mod submit;
mod sync;
mod texlive_years;
mod token_lookups;
mod webhooks;

pub use serve::bind;

use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::routing::get;
use axum::Router;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use texfleet_core::db::{self, Pool};
use texfleet_core::project_slots::ProjectSlots;
use texfleet_core::storage::Storage;
use texfleet_core::webhook::secret::SecretBox;
use texfleet_core::webhook::target;
use texfleet_core::Config;
use tokio::net::TcpListener;
use tower_http::set_header::SetResponseHeaderLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

#[derive(Clone)]
struct AppState {
    /// For what is not one project's: tokens, health, the image.
    pool: Pool,
    /// For what is: a project holds a share of the pool at most.
    database: project_database::ProjectDatabase,
    storage: Storage,
    config: Arc<Config>,
    events: events::JobEvents,
    token_lookups: Arc<token_lookups::TokenLookups>,
    /// When `/readyz` last reached Postgres.
    last_ready: Arc<tokio::sync::Mutex<Option<std::time::Instant>>>,
    rate_limiter: auth::RateLimiter,
    /// Downloads in flight, per project: each holds a connection to the object store while
    /// its client reads.
    downloads: ProjectSlots,
    /// The SyncTeX files parsed for the last queries.
    sync_cache: Arc<sync::SyncCache>,
    receiving: receiving::ReceivingBudget,
    sending: sending::SendingBudget,
    /// None when webhooks are not configured.
    webhooks: Option<webhooks::WebhookSettings>,
}

/// Runs `tidy` on `owner` every `period` for as long as anything else holds it: the limiters'
/// and lookups' forgetting of clients gone quiet.
fn tidy_while_held<T, F, Fut>(owner: &Arc<T>, period: std::time::Duration, tidy: F)
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let weak = Arc::downgrade(owner);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(period);
        loop {
            every.tick().await;
            let Some(owner) = weak.upgrade() else {
                return;
            };
            tidy(owner).await;
        }
    });
}

/// The OpenAPI document's frame; the paths and schemas come from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(title = "texfleet", description = "A sandboxed LaTeX compile service. The project's docs/API.md describes every route, field, status and error code, with examples."),
    servers((url = "/", description = "This API (the document is served at /openapi.json of the server it describes)")),
    modifiers(&BearerAuth),
    components(schemas(problem::ProblemBody, problem::FieldError, webhooks::WebhookEvent))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let scheme = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build();
        components.add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

/// The routes with their handlers and the OpenAPI document generated from the same handlers,
/// so that the document cannot drift from what the API does.
fn router(state: AppState, address_limiter: Arc<client_address::AddressLimiter>) -> Router {
    let (router, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(routes::healthz))
        .routes(routes!(routes::readyz))
        .routes(routes!(submit::submit))
        .routes(routes!(routes::get_job, routes::cancel))
        .routes(routes!(downloads::get_pdf))
        .routes(routes!(downloads::get_log))
        .routes(routes!(downloads::get_synctex))
        .routes(routes!(downloads::get_thumbnail))
        .routes(routes!(page_previews::get_page))
        .routes(routes!(project_files::put_file, project_files::head_file))
        .routes(routes!(project_files::missing))
        .routes(routes!(sync::code_to_pdf))
        .routes(routes!(sync::pdf_to_code))
        .routes(routes!(routes::list))
        .routes(routes!(info::info))
        .routes(routes!(info::package))
        .routes(routes!(webhooks::register, webhooks::list))
        .routes(routes!(webhooks::delete))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(metrics::serve))
        .split_for_parts();
    let mut document = serde_json::to_value(&openapi).expect("the OpenAPI document serialises");
    webhooks::document_events(&mut document);
    // Serialised once: every answer shares these bytes, so a slow reader holds no copy.
    let openapi = Bytes::from(serde_json::to_vec(&document).expect("the document serialises"));
    router
        .route(
            "/openapi.json",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    openapi.clone(),
                )
            }),
        )
        .merge(play::routes())
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.sending.clone(),
            sending::charge_answers,
        ))
        .layer(axum::middleware::from_fn_with_state(
            address_limiter,
            client_address::limit_per_address,
        ))
        .layer(axum::middleware::from_fn(metrics::track))
        .layer(axum::middleware::from_fn(problem::request_id))
        // A PDF or log is whatever bytes the document made: a browser must take them for
        // what the Content-Type says, never sniff them into HTML.
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` resolves, then drains in-flight requests.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if let Some(problem) = config.texlive_years_problem() {
        anyhow::bail!("{problem}");
    }
    let sealer = SecretBox::from_setting(&config.webhook_secret_key)?;
    let allowed = target::allowed_ranges(&config.webhook_allowed_cidrs)?;
    let proxies = client_address::TrustedProxies::parse(
        &config.trusted_proxies,
        &config.client_address_header,
    )?;
    let address_limiter = client_address::AddressLimiter::new(&config, proxies.clone());
    let pool = db::api_pool(&config)?;
    let token_lookups = token_lookups::TokenLookups::new(&pool, pool.status().max_size);
    let state = AppState {
        webhooks: sealer.map(|sealer| webhooks::WebhookSettings { sealer, allowed }),
        pool: pool.clone(),
        database: project_database::ProjectDatabase::new(pool),
        storage: Storage::new(&config),
        events: events::JobEvents::listen(
            config.api_database_url().to_string(),
            config.max_connections / 4,
        ),
        token_lookups,
        last_ready: Arc::default(),
        rate_limiter: auth::RateLimiter::new(&config),
        downloads: ProjectSlots::new(downloads::MAX_PER_PROJECT),
        sync_cache: Arc::new(sync::SyncCache::new()),
        receiving: receiving::ReceivingBudget::new(
            config.max_body_bytes,
            texfleet_core::storage::PART_BYTES,
        ),
        sending: sending::SendingBudget::new(config.max_sending_bytes),
        config: Arc::new(config),
    };
    metrics::init();
    memory::give_back_large_blocks();
    tracing::info!(addr = %listener.local_addr()?, "api listening");
    let header_timeout = Duration::from_secs(state.config.header_timeout_seconds);
    let connections = connections::Connections::new(connections::Limits {
        max_connections: state.config.max_connections,
        max_per_address: state.config.max_connections_per_address,
        header_timeout,
        idle_timeout: Duration::from_secs(state.config.idle_timeout_seconds),
        trusted_proxies: proxies,
    });
    let events = state.events.clone();
    let shutdown = async move {
        shutdown.await;
        // Requests waiting for jobs (Prefer: wait) answer now, with the job as it is.
        events.close();
    };
    let cors = cors::layer(&state.config.cors_allowed_origins)?;
    let router = router(state, address_limiter);
    // Outermost, so that a preflight is answered before anything else looks at it.
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    serve::serve(listener, router, connections, header_timeout, shutdown).await;
    Ok(())
}
