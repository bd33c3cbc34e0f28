//! Project files by content, in one place: the API reserves an upload against the project's
//! quota, records its end, answers which hashes the project holds, and marks the ones a
//! submission names; the scheduler's upkeep collects what nothing keeps (V26).
//! The API's statements run in its project's transaction: row-level security shows each
//! project its own files only, so that no project can learn whether another holds a content.

use super::{DbResult, Pool};
use crate::model::ContentHash;
use deadpool_postgres::GenericClient;
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// How long an upload holds its reservation before another upload of the same content may
/// take it over (the client writes at least a byte a second, or the API closes it first).
pub const UPLOAD_DEADLINE_SECONDS: f64 = 3600.0;

/// The least a file counts against its project's quota, so that the quota bounds how many
/// files (rows, objects) a project holds, not only their bytes.
pub const MIN_FILE_CHARGE_BYTES: i64 = 64 * 1024;

/// What a request to upload a content found.
#[derive(Debug, PartialEq, Eq)]
pub enum Reservation {
    /// The project holds it already: nothing to upload.
    Stored,
    /// The caller may upload it; its bytes count against the quota from now.
    Reserved,
    /// Another upload of it is under way, or it is being collected: try again shortly.
    Busy,
    /// It would take the project past its quota: `used` bytes are held or being uploaded.
    OverQuota { used: i64 },
}

/// Reserves the upload of `sha256` (`size` bytes) for the transaction's project, under the
/// project's quota row lock, so that concurrent uploads cannot pass `quota` together.
pub async fn reserve_upload(
    transaction: &impl GenericClient,
    sha256: &ContentHash,
    size: i64,
    quota: i64,
) -> DbResult<Reservation> {
    // Inserted the first time, locked until the transaction ends every time.
    transaction
        .execute(
            "INSERT INTO project_file_quotas (project_id) VALUES (current_project())
             ON CONFLICT (project_id) DO UPDATE SET project_id = EXCLUDED.project_id",
            &[],
        )
        .await?;
    let existing = transaction
        .query_opt(
            "SELECT status, upload_expires_at > now() FROM project_files
             WHERE project_id = current_project() AND sha256 = $1 FOR UPDATE",
            &[&sha256.0.as_slice()],
        )
        .await?;
    match existing
        .as_ref()
        .map(|row| (row.get::<_, &str>(0), row.get::<_, Option<bool>>(1)))
    {
        Some(("Stored", _)) => {
            transaction
                .execute(
                    "UPDATE project_files SET last_uploaded_at = now()
                     WHERE project_id = current_project() AND sha256 = $1",
                    &[&sha256.0.as_slice()],
                )
                .await?;
            return Ok(Reservation::Stored);
        }
        Some(("Uploading", Some(false))) | None => {}
        Some(_) => return Ok(Reservation::Busy),
    }
    // Uploads whose deadline passed hold nothing: they died with their request.
    let used: i64 = transaction
        .query_one(
            "SELECT coalesce(sum(greatest(size, $2)), 0)::bigint FROM project_files
             WHERE project_id = current_project() AND sha256 <> $1
               AND NOT (status = 'Uploading' AND upload_expires_at <= now())",
            &[&sha256.0.as_slice(), &MIN_FILE_CHARGE_BYTES],
        )
        .await?
        .get(0);
    if used + size.max(MIN_FILE_CHARGE_BYTES) > quota {
        return Ok(Reservation::OverQuota { used });
    }
    transaction
        .execute(
            "INSERT INTO project_files (project_id, sha256, size, status, upload_expires_at)
             VALUES (current_project(), $1, $2, 'Uploading',
                     now() + make_interval(secs => $3))
             ON CONFLICT (project_id, sha256) DO UPDATE
             SET size = EXCLUDED.size, upload_expires_at = EXCLUDED.upload_expires_at,
                 last_uploaded_at = now()",
            &[&sha256.0.as_slice(), &size, &UPLOAD_DEADLINE_SECONDS],
        )
        .await?;
    Ok(Reservation::Reserved)
}

/// Records that the reserved upload of `sha256` is stored: submissions may name it now.
pub async fn finish_upload(client: &impl GenericClient, sha256: &ContentHash) -> DbResult<bool> {
    let updated = client
        .execute(
            "UPDATE project_files
             SET status = 'Stored', upload_expires_at = NULL, last_uploaded_at = now()
             WHERE project_id = current_project() AND sha256 = $1 AND status = 'Uploading'",
            &[&sha256.0.as_slice()],
        )
        .await?;
    Ok(updated == 1)
}

/// After an upload of `sha256` stored it and found its reservation gone (its project deleted
/// meanwhile, say): whether no upload holds the hash now, so that the object is no one's. The
/// project's quota row stays locked until the transaction ends: no upload reserves the hash
/// before the object is deleted.
pub async fn no_upload_holds(
    transaction: &impl GenericClient,
    sha256: &ContentHash,
) -> DbResult<bool> {
    transaction
        .execute(
            "SELECT 1 FROM project_file_quotas WHERE project_id = current_project() FOR UPDATE",
            &[],
        )
        .await?;
    let held = transaction
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM project_files
                            WHERE project_id = current_project() AND sha256 = $1)",
            &[&sha256.0.as_slice()],
        )
        .await?;
    Ok(!held.get::<_, bool>(0))
}

/// Gives back the reservation of an upload that failed (a wrong hash, a client gone).
pub async fn abandon_upload(client: &impl GenericClient, sha256: &ContentHash) -> DbResult<()> {
    client
        .execute(
            "DELETE FROM project_files
             WHERE project_id = current_project() AND sha256 = $1 AND status = 'Uploading'",
            &[&sha256.0.as_slice()],
        )
        .await?;
    Ok(())
}

/// The sizes of those of `hashes` the transaction's project holds.
pub async fn stored_files(
    client: &impl GenericClient,
    hashes: &[ContentHash],
) -> DbResult<HashMap<ContentHash, i64>> {
    let hashes: Vec<&[u8]> = hashes.iter().map(|hash| hash.0.as_slice()).collect();
    let rows = client
        .query(
            "SELECT sha256, size FROM project_files
             WHERE project_id = current_project() AND status = 'Stored' AND sha256 = ANY($1)",
            &[&hashes],
        )
        .await?;
    Ok(rows.iter().filter_map(hash_and_size).collect())
}

/// Marks those of `hashes` the project holds as named by a job submitted now (which keeps them
/// while that job is retained), and returns their sizes; a hash missing from the answer is one
/// the project does not hold. The row locks keep the collector off them until the transaction
/// ends.
pub async fn name_stored_files(
    transaction: &impl GenericClient,
    hashes: &[ContentHash],
) -> DbResult<HashMap<ContentHash, i64>> {
    if hashes.is_empty() {
        return Ok(HashMap::new());
    }
    let hashes: Vec<&[u8]> = hashes.iter().map(|hash| hash.0.as_slice()).collect();
    let rows = transaction
        .query(
            "UPDATE project_files SET last_named_at = now()
             WHERE project_id = current_project() AND status = 'Stored' AND sha256 = ANY($1)
             RETURNING sha256, size",
            &[&hashes],
        )
        .await?;
    Ok(rows.iter().filter_map(hash_and_size).collect())
}

/// The files the transaction's project holds: how many, and what they count against the quota
/// with the uploads under way (each at least [`MIN_FILE_CHARGE_BYTES`]).
pub async fn project_files_usage(client: &impl GenericClient) -> DbResult<(i64, i64)> {
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'Stored'),
                    coalesce(sum(greatest(size, $1)), 0)::bigint
             FROM project_files
             WHERE project_id = current_project()
               AND NOT (status = 'Uploading' AND upload_expires_at <= now())",
            &[&MIN_FILE_CHARGE_BYTES],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// Marks for deletion up to `limit` files nothing keeps: stored files uploaded more than
/// `grace_hours` ago that no job named within `retention_days` (0: a named file is kept for
/// ever) and no unfinished job names, uploads that died, and files marked before whose
/// deletion did not finish. The caller deletes their objects, then [`forget_files`].
pub async fn files_to_collect(
    pool: &Pool,
    grace_hours: u32,
    retention_days: u32,
    limit: i64,
) -> DbResult<Vec<(Uuid, ContentHash)>> {
    let rows = pool
        .get()
        .await?
        .query(
            "UPDATE project_files SET status = 'Deleting'
             WHERE (project_id, sha256) IN (
                 SELECT project_id, sha256 FROM project_files AS file
                 WHERE status = 'Deleting'
                    OR (status = 'Uploading' AND upload_expires_at <= now())
                    OR (status = 'Stored'
                        AND last_uploaded_at < now() - make_interval(hours => $1)
                        AND (last_named_at IS NULL
                             OR ($2 > 0 AND last_named_at < now() - make_interval(days => $2)))
                        AND NOT EXISTS (
                            SELECT 1 FROM job_files JOIN jobs ON jobs.id = job_files.job_id
                            WHERE job_files.sha256 = file.sha256
                              AND jobs.project_id = file.project_id))
                 LIMIT $3 FOR UPDATE SKIP LOCKED)
             RETURNING project_id, sha256",
            &[&(grace_hours as i32), &(retention_days as i32), &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            Some((
                row.get(0),
                ContentHash(row.get::<_, &[u8]>(1).try_into().ok()?),
            ))
        })
        .collect())
}

/// Deletes the rows of collected files whose objects are gone.
pub async fn forget_files(pool: &Pool, files: &[(Uuid, ContentHash)]) -> DbResult<u64> {
    let projects: Vec<Uuid> = files.iter().map(|(project, _)| *project).collect();
    let hashes: Vec<&[u8]> = files.iter().map(|(_, hash)| hash.0.as_slice()).collect();
    Ok(pool
        .get()
        .await?
        .execute(
            "DELETE FROM project_files USING unnest($1::uuid[], $2::bytea[]) AS gone (project_id, sha256)
             WHERE project_files.project_id = gone.project_id
               AND project_files.sha256 = gone.sha256 AND status = 'Deleting'",
            &[&projects, &hashes],
        )
        .await?)
}

/// Those of `files` (project, hash) that are still stored: the rest were collected or their
/// project deleted, and no copy of them may stay on a scheduler's disk.
pub async fn still_stored(
    pool: &Pool,
    files: &[(Uuid, ContentHash)],
) -> DbResult<HashSet<(Uuid, ContentHash)>> {
    let projects: Vec<Uuid> = files.iter().map(|(project, _)| *project).collect();
    let hashes: Vec<&[u8]> = files.iter().map(|(_, hash)| hash.0.as_slice()).collect();
    let rows = pool
        .get()
        .await?
        .query(
            "SELECT file.project_id, file.sha256
             FROM project_files AS file
             JOIN unnest($1::uuid[], $2::bytea[]) AS cached (project_id, sha256)
               ON file.project_id = cached.project_id AND file.sha256 = cached.sha256
             WHERE file.status = 'Stored'",
            &[&projects, &hashes],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            let hash: &[u8] = row.get(1);
            Some((row.get(0), ContentHash(hash.try_into().ok()?)))
        })
        .collect())
}

fn hash_and_size(row: &tokio_postgres::Row) -> Option<(ContentHash, i64)> {
    let hash: &[u8] = row.get(0);
    Some((ContentHash(hash.try_into().ok()?), row.get(1)))
}
