//! Every SQL statement texfleet runs, in one folder (the model is River's queue SQL):
//!
//! - [`tokens`]: projects and API tokens (the operator's commands, and authentication);
//!   [`projects`]: deleting a project's data;
//! - [`submit`] and [`jobs`]: the API's writes and reads of jobs (submission with idempotency
//!   and the result cache; reading, cancelling, listing), always inside a transaction bound to
//!   one project, so that row-level security shows it that project's rows only;
//! - [`claim`], [`queue`] and [`finish`]: the scheduler's protocol: claim, lease, rescue,
//!   finish (committed in groups), retry, retention;
//! - [`previews`]: page previews' own small queue (the API's request, the scheduler's claim);
//! - [`project_files`]: files a project uploaded once and names by hash (the API's uploads
//!   under the quota, the collector's sweep);
//! - [`notify`]: LISTEN, which wakes schedulers and waiting requests;
//! - [`fleet`]: the schedulers' heartbeats; [`images`]: what each sandbox image holds;
//! - [`webhooks`]: a project's endpoints (the API's), and the outbox of deliveries (the
//!   delivery worker's claim and record).
//!
//! This file holds what they share: the connection pool, errors, migrations, and the one
//! parser of text columns into the model's enums.

mod claim;
mod finish;
mod fleet;
mod images;
mod jobs;
mod notify;
mod previews;
mod project_files;
mod projects;
mod queue;
mod scratch;
mod submit;
#[cfg(feature = "test-support")]
mod testing;
mod tokens;
mod webhooks;

pub use claim::*;
pub use finish::*;
pub use fleet::*;
pub use images::*;
pub use jobs::*;
pub use notify::*;
pub use previews::*;
pub use project_files::*;
pub use projects::*;
pub use queue::*;
pub use scratch::*;
pub use submit::*;
#[cfg(feature = "test-support")]
pub use testing::*;
pub use tokens::*;
pub use webhooks::*;

use crate::Config;
use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod, Runtime};
use std::str::FromStr;
use std::time::Duration;
use tokio_postgres::{NoTls, Row};
use uuid::Uuid;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

pub type Pool = deadpool_postgres::Pool;
/// A connection taken from a [`Pool`], given back when dropped.
pub type PooledClient = deadpool_postgres::Object;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Postgres could not be reached or dropped the connection: worth retrying later.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("database query failed: {0}")]
    Query(#[source] tokio_postgres::Error),
    #[error("unexpected data in the database: {0}")]
    Corrupt(String),
}

impl From<tokio_postgres::Error> for DbError {
    fn from(error: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        let unavailable_states = [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::CONNECTION_FAILURE,
            SqlState::CONNECTION_EXCEPTION,
            SqlState::TOO_MANY_CONNECTIONS,
        ];
        match error.code() {
            Some(code) if !unavailable_states.contains(code) => DbError::Query(error),
            _ => DbError::Unavailable(Box::new(error)),
        }
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        DbError::Unavailable(Box::new(error))
    }
}

pub type DbResult<T> = Result<T, DbError>;

/// A text column parsed into one of the model's enums (status, engine, error code): anything
/// else in the column means the database holds data this code never wrote.
fn parsed<T: FromStr>(row: &Row, column: &str) -> DbResult<T> {
    let text: &str = row.get(column);
    text.parse()
        .map_err(|_| DbError::Corrupt(format!("{column} {text:?}")))
}

/// [`parsed`] for a column that may be null.
fn parsed_opt<T: FromStr>(row: &Row, column: &str) -> DbResult<Option<T>> {
    let text: Option<&str> = row.get(column);
    text.map(|text| {
        text.parse()
            .map_err(|_| DbError::Corrupt(format!("{column} {text:?}")))
    })
    .transpose()
}

/// A pool for `database_url` (one of the three roles' URLs in [`Config`]) whose waits are
/// bounded, so that a request fails fast with `503` while Postgres is down instead of hanging,
/// and recovers by itself once it is back.
pub fn pool(config: &Config, database_url: &str) -> anyhow::Result<Pool> {
    pool_of(config, tokio_postgres::Config::from_str(database_url)?)
}

/// How long one statement of the API may run: with the indexes it is given, a request's query
/// takes milliseconds, and one that does not must not hold a connection of the pool that every
/// project's requests share.
const API_STATEMENT_TIMEOUT: &str = "10s";

/// The API's [`pool`], whose statements end after [`API_STATEMENT_TIMEOUT`].
pub fn api_pool(config: &Config) -> anyhow::Result<Pool> {
    let mut pg_config = tokio_postgres::Config::from_str(config.api_database_url())?;
    pg_config.options(format!("-c statement_timeout={API_STATEMENT_TIMEOUT}"));
    pool_of(config, pg_config)
}

fn pool_of(config: &Config, pg_config: tokio_postgres::Config) -> anyhow::Result<Pool> {
    let manager = Manager::from_config(
        pg_config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(manager)
        .max_size(config.database_pool_size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(5)))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()?)
}

/// One connection outside any pool (migrations, database administration).
async fn connect(database_url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(database_url, NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(%error, "postgres connection closed");
        }
    });
    Ok(client)
}

/// Applies the SQL files of `migrations/` that this database has not seen yet.
pub async fn migrate(database_url: &str) -> anyhow::Result<Vec<String>> {
    let mut client = connect(database_url).await?;
    let report = embedded::migrations::runner()
        .run_async(&mut client)
        .await?;
    Ok(report
        .applied_migrations()
        .iter()
        .map(|m| m.to_string())
        .collect())
}

/// This database's deployment id (see migrations/V3__deployment.sql).
pub async fn deployment_id(pool: &Pool) -> DbResult<Uuid> {
    Ok(pool
        .get()
        .await?
        .query_one("SELECT id FROM deployment", &[])
        .await?
        .get(0))
}

pub async fn ping(pool: &Pool) -> DbResult<()> {
    pool.get().await?.simple_query("SELECT 1").await?;
    Ok(())
}
