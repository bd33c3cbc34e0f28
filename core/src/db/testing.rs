//! Databases made and dropped beside the deployment's own, for the tests and the benchmark
//! (feature `test-support`): each test runs against a database of its own; and a job
//! insertion with chosen ids, to force a short-id collision.

use super::{connect, insert_job_drawing_ids, Admission, DbResult, Idempotency, Submitted};
use crate::model::NewJob;
use deadpool_postgres::GenericClient;
use uuid::Uuid;

/// Creates an empty database beside the one `admin_url` names and returns its URL;
/// `admin_url` must be URL-form and name a role that may create databases.
pub async fn create_database(admin_url: &str, name: &str) -> anyhow::Result<String> {
    let client = connect(admin_url).await?;
    client
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await?;
    let (prefix, _) = admin_url
        .rsplit_once('/')
        .ok_or_else(|| anyhow::anyhow!("a URL-form database URL"))?;
    Ok(format!("{prefix}/{name}"))
}

/// Drops a database made by [`create_database`], whoever is still connected to it.
pub async fn drop_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let client = connect(admin_url).await?;
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await?;
    Ok(())
}

/// Queues a job as the API does, with ids drawn from `ids` in order instead of at random.
pub async fn insert_job_with_ids(
    transaction: &impl GenericClient,
    job: &NewJob,
    idempotency: Option<Idempotency<'_>>,
    ids: Vec<Uuid>,
) -> DbResult<Submitted> {
    let mut ids = ids.into_iter();
    let draw_id = move || ids.next().expect("enough ids for every draw");
    let admission = Admission {
        max_attempts: 3,
        max_queued: i64::MAX,
        max_queued_bytes: i64::MAX,
        result_cache: false,
        retention_days: 0,
        scheduler_live_seconds: 0,
    };
    insert_job_drawing_ids(transaction, job, &[], &admission, idempotency, draw_id).await
}
