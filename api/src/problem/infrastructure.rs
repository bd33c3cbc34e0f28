//! What the API answers when its infrastructure fails: the database or the object store. The
//! client learns whether retrying may help, never the failure's own text.

use super::Problem;
use texfleet_core::db::DbError;
use texfleet_core::storage::StorageError;

/// Database failures: `503` while Postgres is unreachable; anything else is logged in full and
/// shown only as `500`, so that no SQL text reaches a client.
impl From<DbError> for Problem {
    fn from(error: DbError) -> Problem {
        match error {
            DbError::Unavailable(_) => {
                tracing::warn!(%error, "database unavailable");
                Problem::unavailable("the database is unavailable; retry shortly")
            }
            _ => {
                tracing::error!(%error, "database error");
                Problem::internal()
            }
        }
    }
}

/// A missing object is a `404` (retrying will not bring it back); any other storage failure
/// is a `503` worth retrying. Neither shows the store's own error text.
impl From<StorageError> for Problem {
    fn from(error: StorageError) -> Problem {
        match error {
            StorageError::NotFound(_) => {
                tracing::warn!(%error, "object missing from storage");
                Problem::not_found("the job's output is no longer stored")
            }
            StorageError::Failed { .. } => {
                tracing::error!(%error, "object storage error");
                Problem::unavailable("object storage is unavailable; retry shortly")
            }
        }
    }
}
