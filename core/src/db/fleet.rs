//! The schedulers of a deployment, as their heartbeats show them: a scheduler renews its row
//! while it runs and deletes it when it stops, so that any scheduler can tell a dead one's
//! leftovers (migration V5).

use super::{DbResult, Pool, PooledClient};
use std::collections::HashSet;

/// Records that scheduler `id` is alive now, running the sandbox image `image_id` (which
/// the result cache matches against, migration V6).
pub async fn heartbeat(pool: &Pool, id: &str, image_id: &str) -> DbResult<()> {
    pool.get()
        .await?
        .execute(
            "INSERT INTO schedulers (id, image_id) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), image_id = $2",
            &[&id, &image_id],
        )
        .await?;
    Ok(())
}

/// The sandbox image every scheduler with a heartbeat at most `live_seconds` old runs, or None
/// when none runs or they disagree (migration V6's `fleet_sandbox_image`).
pub async fn sandbox_image(client: &PooledClient, live_seconds: u64) -> DbResult<Option<String>> {
    let row = client
        .query_one("SELECT fleet_sandbox_image($1)", &[&(live_seconds as f64)])
        .await?;
    Ok(row.get(0))
}

/// Scheduler `id` stopped cleanly.
pub async fn forget_scheduler(pool: &Pool, id: &str) -> DbResult<()> {
    pool.get()
        .await?
        .execute("DELETE FROM schedulers WHERE id = $1", &[&id])
        .await?;
    Ok(())
}

/// The schedulers whose last heartbeat is at most `max_age_seconds` old.
pub async fn live_schedulers(pool: &Pool, max_age_seconds: u64) -> DbResult<HashSet<String>> {
    let rows = pool
        .get()
        .await?
        .query(
            "SELECT id FROM schedulers
             WHERE heartbeat_at > now() - make_interval(secs => $1)",
            &[&(max_age_seconds as f64)],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}
