//! An upload's bytes on their way to S3, hashed as they pass: a body whose SHA-256 is not the
//! one it is named by stores nothing (a small file is written only once checked; a large one
//! goes in parts that are completed only once checked, and dropped otherwise). At most one
//! part is in memory, counted in the receiving budget; each part must arrive within the body
//! timeout. The upload runs as its own task, so that a client that goes away leaves no
//! reservation and no parts behind.

use crate::problem::Problem;
use crate::receiving::{hold_bytes, BodyError};
use crate::AppState;
use axum::body::Body;
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use std::time::Duration;
use texfleet_core::db;
use texfleet_core::model::{project_file_key, ContentHash};
use texfleet_core::storage::{PartUpload, PART_BYTES};
use tokio::time::Instant;
use uuid::Uuid;

const CONTENT_TYPE: &str = "application/octet-stream";
const ORIGIN: &str = "api";

/// Stores the reserved upload of `sha256` (`size` bytes, declared) from `body`, then records
/// it stored, or gives its reservation back.
pub(super) async fn receive(
    state: AppState,
    project: Uuid,
    sha256: ContentHash,
    size: i64,
    body: Body,
) -> Result<(), Problem> {
    let task = tokio::spawn(async move {
        let stored = store(&state, project, &sha256, size, body).await;
        let outcome = match &stored {
            Ok(()) => "stored",
            Err(Failure::Mismatch(_)) => "mismatched",
            Err(_) => "failed",
        };
        crate::metrics::PROJECT_FILE_UPLOADS
            .with_label_values(&[outcome])
            .inc();
        let recorded = record(&state, project, &sha256, stored.is_ok()).await;
        match (stored, recorded) {
            (Ok(()), Ok(true)) => Ok(()),
            (Ok(()), Ok(false)) => Err(Problem::unavailable(
                "the upload outlived its reservation; send it again",
            )),
            (Err(failure), _) => Err(failure.into_problem(&state)),
            (_, Err(problem)) => Err(problem),
        }
    });
    task.await
        .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
}

/// Why an upload stored nothing.
enum Failure {
    Body(BodyError),
    /// The body's own SHA-256.
    Mismatch(ContentHash),
    /// The body was not as long as its `Content-Length`.
    Length(i64),
    Storage(texfleet_core::storage::StorageError),
}

impl Failure {
    fn into_problem(self, state: &AppState) -> Problem {
        let config = &state.config;
        match self {
            Failure::Body(error) => Problem::unreadable_body(
                error,
                config.max_project_file_bytes as usize,
                config.body_timeout_seconds,
            ),
            Failure::Mismatch(actual) => Problem::hash_mismatch(&actual),
            Failure::Length(received) => Problem::length_mismatch(received),
            Failure::Storage(error) => error.into(),
        }
    }
}

/// Reads `body` into S3 at the project file's key, checking its length and hash.
async fn store(
    state: &AppState,
    project: Uuid,
    sha256: &ContentHash,
    size: i64,
    mut body: Body,
) -> Result<(), Failure> {
    let part_bytes = (size as usize).min(PART_BYTES);
    let _place = hold_bytes(&state.receiving, project, part_bytes).map_err(Failure::Body)?;
    let key = project_file_key(project, sha256);
    let per_part = Duration::from_secs(state.config.body_timeout_seconds);
    let mut deadline = Instant::now() + per_part;
    let mut hasher = Sha256::new();
    let mut buffer = Vec::with_capacity(part_bytes);
    let mut parts: Option<PartUpload> = None;
    let mut received = 0i64;
    let read = loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => break Err(Failure::Body(BodyError::TimedOut)),
            Ok(None) => break Ok(()),
            Ok(Some(Err(_))) => break Err(Failure::Body(BodyError::Broken)),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        received += data.len() as i64;
        crate::metrics::PROJECT_FILE_BYTES.inc_by(data.len() as u64);
        if received > size {
            break Err(Failure::Length(received));
        }
        hasher.update(&data);
        buffer.extend_from_slice(&data);
        if buffer.len() >= PART_BYTES {
            let rest = buffer.split_off(PART_BYTES);
            let part = std::mem::replace(&mut buffer, rest);
            if let Err(error) = put_part(state, &mut parts, &key, part).await {
                break Err(Failure::Storage(error));
            }
            deadline = Instant::now() + per_part;
        }
    };
    let checked = read.and_then(|()| {
        let actual = ContentHash(hasher.finalize().into());
        match (received == size, actual == *sha256) {
            (false, _) => Err(Failure::Length(received)),
            (true, false) => Err(Failure::Mismatch(actual)),
            (true, true) => Ok(()),
        }
    });
    match (checked, parts) {
        (Ok(()), None) => state
            .storage
            .put(&key, buffer, CONTENT_TYPE, ORIGIN)
            .await
            .map_err(Failure::Storage),
        (Ok(()), Some(mut parts)) => {
            let last = match buffer.is_empty() {
                true => Ok(()),
                false => parts.put(buffer).await,
            };
            match last {
                Ok(()) => parts.complete().await.map_err(Failure::Storage),
                Err(error) => {
                    abort(parts).await;
                    Err(Failure::Storage(error))
                }
            }
        }
        (Err(failure), None) => Err(failure),
        (Err(failure), Some(parts)) => {
            abort(parts).await;
            Err(failure)
        }
    }
}

/// Writes `part`, starting the multipart upload with the first.
async fn put_part(
    state: &AppState,
    parts: &mut Option<PartUpload>,
    key: &str,
    part: Vec<u8>,
) -> Result<(), texfleet_core::storage::StorageError> {
    if parts.is_none() {
        *parts = Some(state.storage.start_parts(key, CONTENT_TYPE, ORIGIN).await?);
    }
    parts.as_mut().expect("started above").put(part).await
}

async fn abort(parts: PartUpload) {
    if let Err(error) = parts.abort().await {
        tracing::warn!(%error, "could not drop the parts of a failed upload");
    }
}

/// Records the upload stored (true when its reservation was still there) or gives its
/// reservation back. What an upload stored past its reservation is deleted unless another
/// upload of the hash holds it: nothing stays in the store that no row records.
async fn record(
    state: &AppState,
    project: Uuid,
    sha256: &ContentHash,
    stored: bool,
) -> Result<bool, Problem> {
    let mut client = state.database.client(project).await?;
    let transaction = db::begin_project(&mut client, project).await?;
    let recorded = match stored {
        true => db::finish_upload(&transaction, sha256).await?,
        false => {
            db::abandon_upload(&transaction, sha256).await?;
            false
        }
    };
    if stored && !recorded && db::no_upload_holds(&transaction, sha256).await? {
        let key = project_file_key(project, sha256);
        if let Err(error) = state.storage.delete(&key).await {
            tracing::warn!(%error, key, "could not delete an upload no row records");
        }
    }
    transaction.commit().await.map_err(db::DbError::from)?;
    Ok(recorded)
}
