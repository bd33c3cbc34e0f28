//! For the tests only (feature `test-support`): a job insertion with chosen ids, to force a
//! short-id collision.

use super::{insert_job_drawing_ids, Admission, DbResult, Idempotency, Submitted};
use crate::model::NewJob;
use deadpool_postgres::GenericClient;
use uuid::Uuid;

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
