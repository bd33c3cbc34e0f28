//! The schedulers of a deployment, as their heartbeats show them: a scheduler renews its row
//! while it runs and deletes it when it stops, so that any scheduler can tell a dead one's
//! leftovers (migration V5).

use super::{DbResult, Pool, PooledClient};
use std::collections::{BTreeMap, HashSet};

/// Records that scheduler `id` is alive now, running the sandbox image `images[year]` for each
/// TeX Live year it serves (which claims and the result cache match against, migration V20).
pub async fn heartbeat(pool: &Pool, id: &str, images: &BTreeMap<String, String>) -> DbResult<()> {
    let images = serde_json::to_value(images).expect("a map of strings is JSON");
    pool.get()
        .await?
        .execute(
            "INSERT INTO schedulers (id, images) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), images = $2",
            &[&id, &images],
        )
        .await?;
    Ok(())
}

/// The sandbox image that every scheduler serving TeX Live `year` with a heartbeat at most
/// `live_seconds` old runs for it, or None when none serves it or they disagree (migration
/// V20's `fleet_sandbox_image`).
pub async fn sandbox_image(
    client: &PooledClient,
    live_seconds: u64,
    year: &str,
) -> DbResult<Option<String>> {
    let statement = client
        .prepare_cached("SELECT fleet_sandbox_image($1, $2)")
        .await?;
    let row = client
        .query_one(&statement, &[&(live_seconds as f64), &year])
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
