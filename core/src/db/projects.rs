//! Deleting a project's data, as the operator's `texfleet project delete` does it (owner
//! role): its tokens are revoked and its unfinished jobs cancelled first, so that nothing new
//! arrives while its objects are deleted; the rows go last, in one statement (every table
//! that names a project cascades from `projects`), so that a deletion cut short can be run
//! again and finds what is left.

use super::DbResult;
use tokio_postgres::GenericClient;
use uuid::Uuid;

/// Revokes the project's tokens and cancels its queued and running jobs (their schedulers
/// stop them, as for a client's cancel); returns the ids of all its jobs, whose objects the
/// caller deletes before [`delete_project`].
pub async fn close_project(client: &impl GenericClient, project: Uuid) -> DbResult<Vec<Uuid>> {
    client
        .execute(
            "UPDATE api_tokens SET revoked_at = now()
             WHERE project_id = $1 AND revoked_at IS NULL",
            &[&project],
        )
        .await?;
    client
        .execute(
            "UPDATE jobs SET status = 'Cancelled', finished_at = now(), lease_owner = NULL,
                             lease_expires_at = NULL, error_code = 'cancelled',
                             error_message = 'the project was deleted'
             WHERE project_id = $1 AND status IN ('Queued', 'Running')",
            &[&project],
        )
        .await?;
    let rows = client
        .query("SELECT id FROM jobs WHERE project_id = $1", &[&project])
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Deletes the project and, by cascade, every row that names it, with its queue counts (which
/// have no key to cascade from); false when there was none.
pub async fn delete_project(client: &impl GenericClient, project: Uuid) -> DbResult<bool> {
    Ok(client
        .execute(
            "WITH counts AS (DELETE FROM queue_depth WHERE project_id = $1)
             DELETE FROM projects WHERE id = $1",
            &[&project],
        )
        .await?
        == 1)
}
