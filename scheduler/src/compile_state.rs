//! What one compile of a document hands on to the next compile of the same document in the
//! same project: its auxiliary files (incremental compiles) and its preamble as a format (the
//! preamble format cache). Both live in S3 below the document's prefix
//! ([`document_state_prefix`]), which names the project the job row (not the sandbox) says
//! the job belongs to: project B never reads what project A's compiles left.
//!
//! The sandbox's word is trusted for nothing but its own project's speed. Whether a format
//! fits the job is decided here, from the job's own files: the engine, the image, the day
//! (`SOURCE_DATE_EPOCH`), the main file's text up to `\begin{document}`, the set of source
//! paths (a file the preamble looks for may appear later) and the content of every source the
//! dump read. Anything else is a miss, and a miss compiles without the cache and dumps anew.

use crate::format_key::FormatKey;
use crate::metrics;
use crate::Context;
use serde::{Deserialize, Serialize};
use texfleet_core::db;
use texfleet_core::digest::sha256_hex;
use texfleet_core::model::{document_prefix, document_state_prefix, ClaimedJob, Engine};
use texfleet_core::storage::StorageError;
use texfleet_sandbox::{why_not_keyable, CompileState, DriverState, Dump, Preamble};

const STATE_OBJECT: &str = "state.json";
const FORMAT_OBJECT: &str = "preamble.fmt";

/// What the scheduler keeps for a document, as JSON in [`STATE_OBJECT`].
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    image_id: String,
    previous: CompileState,
    format: Option<StoredFormat>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredFormat {
    key: FormatKey,
    /// Hex SHA-256 of [`FORMAT_OBJECT`]; None when a preamble of this key cannot be dumped.
    sha256: Option<String>,
}

/// The preamble format cache's answer for a job, shown on the job and counted in metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum PreambleCache {
    /// Compiled with the project's format of this preamble.
    Hit,
    /// No format fit: compiled without one, and dumped the preamble for the next compile.
    Miss,
    /// This preamble cannot be kept as a format (it was tried before, or the engine cannot),
    /// or the job is a draft.
    Unavailable,
}

impl PreambleCache {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What [`prepare`] found for a job: what the sandbox gets, and what [`keep`] needs.
#[derive(Default)]
pub struct Prepared {
    pub preamble: Preamble,
    /// The format of [`Preamble::Load`], which goes to the sandbox after the spec.
    pub format: Vec<u8>,
    pub previous: CompileState,
    /// None when the cache is off.
    pub cache: Option<PreambleCache>,
    stored: Option<Stored>,
    /// The SHA-256 of what [`STATE_OBJECT`] held when the compile began.
    state_version: Option<String>,
    /// The compile starts from kept files or a kept format.
    from_state: bool,
}

impl Prepared {
    /// The compile starts from kept files or a kept format.
    pub fn starts_from_state(&self) -> bool {
        self.from_state
    }
}

/// Reads what the document's last compile left and decides what this compile gets. A missing
/// or unreadable state is a cold start, never an error of the job. A compile from nothing
/// (`"cache": false`) first deletes what the document's earlier compiles left, in every
/// engine, and records when: the way to be rid of a state that anyone who can compile in the
/// project may have planted, and of every result made from it (`db::record_state_cleared`).
pub async fn prepare(context: &Context, job: &ClaimedJob) -> Prepared {
    let config = &context.config;
    if !config.preamble_cache && !config.incremental_compiles {
        return Prepared::default();
    }
    if !job.use_cache {
        clear_document(context, job).await;
        return Prepared::default();
    }
    let prefix = document_state_prefix(job.project_id, job.engine, &job.main);
    let image_id = context.image_id(job);
    let bytes = read_state(context, &prefix).await.unwrap_or_else(|error| {
        tracing::warn!(%error, "could not read the document's compile state");
        None
    });
    let state_version = bytes.as_deref().map(sha256_hex);
    let stored = bytes
        .and_then(|bytes| serde_json::from_slice::<Stored>(&bytes).ok())
        .filter(|stored| stored.image_id == image_id);
    let mut prepared = Prepared {
        previous: match (&stored, config.incremental_compiles) {
            (Some(stored), true) => stored.previous.clone(),
            _ => CompileState::default(),
        },
        ..Prepared::default()
    };
    if config.incremental_compiles {
        let start = match prepared.previous.files.is_empty() {
            true => "cold",
            false => "restored",
        };
        metrics::INCREMENTAL.with_label_values(&[start]).inc();
    }
    if config.preamble_cache {
        let format = stored.as_ref().and_then(|stored| stored.format.as_ref());
        let (preamble, format, cache) = preamble_for(context, job, &prefix, format).await;
        prepared.preamble = preamble;
        prepared.format = format;
        prepared.cache = Some(cache);
    }
    prepared.stored = stored;
    prepared.state_version = state_version;
    prepared.from_state =
        !prepared.previous.files.is_empty() || matches!(prepared.preamble, Preamble::Load { .. });
    prepared
}

/// After a compile that started from the document's kept state and did not succeed: the
/// state goes, so that the next compile starts from nothing instead of meeting it again. A
/// compile from kept files that fails is run again from nothing inside the sandbox, but one
/// that runs out of its time is not (a planted `.aux` that makes LuaTeX sleep would time out
/// every later compile of the document).
pub async fn forget_after_failure(context: &Context, job: &ClaimedJob, prepared: &Prepared) {
    if prepared.from_state {
        let prefix = document_state_prefix(job.project_id, job.engine, &job.main);
        delete_state(context, &prefix).await;
    }
}

/// Deletes what every engine's compiles of the job's document left (one listing of the
/// document's folder, then what it holds: a document compiled once has nothing there), then
/// records it; a listing or deletion that fails is not recorded, so no result of the
/// document is reused meanwhile.
async fn clear_document(context: &Context, job: &ClaimedJob) {
    let storage = &context.storage;
    let cleared = match storage
        .list(&document_prefix(job.project_id, &job.main))
        .await
    {
        Ok(keys) => {
            let deletions = keys.iter().map(|key| storage.delete(key));
            futures::future::join_all(deletions)
                .await
                .into_iter()
                .collect()
        }
        Err(error) => Err(error),
    };
    match cleared {
        Ok(()) => {
            if let Err(error) = db::record_state_cleared(&context.db, job.id, &context.owner).await
            {
                tracing::warn!(%error, "could not record that the document's state was cleared");
            }
        }
        Err(error) => tracing::warn!(%error, "could not delete the document's compile state"),
    }
}

/// Deletes the document's [`STATE_OBJECT`] and [`FORMAT_OBJECT`] at once; false when either
/// deletion failed.
async fn delete_state(context: &Context, prefix: &str) -> bool {
    let [state, format] = [STATE_OBJECT, FORMAT_OBJECT].map(|object| format!("{prefix}{object}"));
    let storage = &context.storage;
    let deleted = futures::join!(storage.delete(&state), storage.delete(&format));
    match deleted.0.and(deleted.1) {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, "could not delete the document's compile state");
            false
        }
    }
}

/// The document's [`STATE_OBJECT`], None when there is none.
async fn read_state(context: &Context, prefix: &str) -> Result<Option<Vec<u8>>, StorageError> {
    match context
        .storage
        .get_bytes(&format!("{prefix}{STATE_OBJECT}"))
        .await
    {
        Ok(bytes) => Ok(Some(bytes)),
        Err(StorageError::NotFound(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

async fn preamble_for(
    context: &Context,
    job: &ClaimedJob,
    prefix: &str,
    format: Option<&StoredFormat>,
) -> (Preamble, Vec<u8>, PreambleCache) {
    // A draft's hook comes before the main file, where a format's preamble scan would
    // swallow it; and the document's format stays the final compile's.
    if job.engine == Engine::Lualatex || job.draft {
        return (Preamble::Plain, Vec::new(), PreambleCache::Unavailable);
    }
    let Some(main) = job.files.iter().find(|file| file.path == job.main) else {
        tracing::info!("preamble not kept as a format: the main file is streamed");
        return (Preamble::Plain, Vec::new(), PreambleCache::Unavailable);
    };
    if let Some(why) = why_not_keyable(&main.content) {
        tracing::info!(why, "preamble not kept as a format");
        return (Preamble::Plain, Vec::new(), PreambleCache::Unavailable);
    }
    let image_id = context.image_id(job);
    let Some(format) = format.filter(|format| {
        FormatKey::of(job, image_id, &format.key.read_paths()).as_ref() == Some(&format.key)
    }) else {
        return (Preamble::Dump, Vec::new(), PreambleCache::Miss);
    };
    let Some(sha256) = &format.sha256 else {
        return (Preamble::Plain, Vec::new(), PreambleCache::Unavailable);
    };
    match context
        .storage
        .get_bytes(&format!("{prefix}{FORMAT_OBJECT}"))
        .await
    {
        Ok(bytes) if sha256_hex(&bytes) == *sha256 => (
            Preamble::Load {
                format_bytes: bytes.len() as u64,
            },
            bytes,
            PreambleCache::Hit,
        ),
        // Replaced by a concurrent compile of the same document with another preamble.
        Ok(_) => (Preamble::Dump, Vec::new(), PreambleCache::Miss),
        Err(error) => {
            tracing::warn!(%error, "could not read the document's preamble format");
            (Preamble::Dump, Vec::new(), PreambleCache::Miss)
        }
    }
}

/// The preamble format cache's answer for the job, counted: a hit whose format failed a pass,
/// or whose compile ran again from nothing (without it), is a miss.
pub fn answer(prepared: &Prepared, state: Option<&DriverState>) -> Option<PreambleCache> {
    let cache = match prepared.cache {
        Some(PreambleCache::Hit)
            if state.is_some_and(|state| state.format_refused || state.restarted) =>
        {
            Some(PreambleCache::Miss)
        }
        cache => cache,
    };
    if let Some(cache) = cache {
        metrics::PREAMBLE_CACHE
            .with_label_values(&[cache.as_str()])
            .inc();
    }
    cache
}

/// After a `Succeeded` compile: keeps its auxiliary files, and the format it dumped, for the
/// document's next compile. Failures are logged: the next compile then starts cold.
pub async fn keep(
    context: &Context,
    job: &ClaimedJob,
    prepared: Prepared,
    state: Option<DriverState>,
    format: Option<Vec<u8>>,
) {
    let config = &context.config;
    if !config.preamble_cache && !config.incremental_compiles {
        return;
    }
    let prefix = document_state_prefix(job.project_id, job.engine, &job.main);
    // Another compile of the document changed its state meanwhile: a compile from nothing
    // that deleted it (this compile may have started from what it deleted, and would hand
    // that on again), or one that ended first. Theirs stands. (A change in the moment between
    // this check and the write below still goes through.)
    let now = read_state(context, &prefix).await;
    match now.map(|bytes| bytes.as_deref().map(sha256_hex)) {
        Ok(version) if version == prepared.state_version => {}
        Ok(_) => {
            tracing::info!(
                "the document's compile state changed during the compile; left as it is"
            );
            return;
        }
        Err(error) => {
            tracing::warn!(%error, "could not read the document's compile state");
            return;
        }
    }
    let image_id = context.image_id(job);
    let state = state.unwrap_or_default();
    let new_document = prepared.stored.is_none();
    let earlier = prepared.stored.and_then(|stored| stored.format);
    let earlier_sha256 = earlier.as_ref().and_then(|format| format.sha256.clone());
    let format = match (&prepared.preamble, state.dump, format) {
        (Preamble::Dump, Some(Dump::Built { reads }), Some(bytes)) => {
            match FormatKey::of(job, image_id, &reads) {
                Some(key) => {
                    let sha256 = sha256_hex(&bytes);
                    let stored = context
                        .storage
                        .put(
                            &format!("{prefix}{FORMAT_OBJECT}"),
                            bytes,
                            "application/octet-stream",
                            &context.owner,
                        )
                        .await;
                    match stored {
                        Ok(()) => Some(StoredFormat {
                            key,
                            sha256: Some(sha256),
                        }),
                        Err(error) => {
                            tracing::warn!(%error, "could not store the preamble format");
                            None
                        }
                    }
                }
                None => None,
            }
        }
        (Preamble::Dump, Some(Dump::Refused { why }), _) => {
            tracing::info!(why, "preamble not kept as a format");
            FormatKey::of(job, image_id, &[]).map(|key| StoredFormat { key, sha256: None })
        }
        // It failed or slowed a pass: not dumped again while the preamble and what it read
        // are unchanged (the dump would pass its check, which the preamble can tell from a
        // later compile, and the next load fail again).
        (Preamble::Load { .. }, _, _) if state.format_refused => {
            earlier.map(|format| StoredFormat {
                key: format.key,
                sha256: None,
            })
        }
        // The compile ran again from nothing: the format may be what failed.
        (Preamble::Load { .. }, _, _) if state.restarted => None,
        _ => earlier,
    };
    let kept_format_sha256 = format.as_ref().and_then(|format| format.sha256.clone());
    let stored = Stored {
        image_id: image_id.to_string(),
        previous: match config.incremental_compiles {
            true => state.next,
            false => CompileState::default(),
        },
        format,
    };
    let bytes = serde_json::to_vec(&stored).expect("the compile state serializes");
    if let Err(error) = context
        .storage
        .put(
            &format!("{prefix}{STATE_OBJECT}"),
            bytes,
            "application/json",
            &context.owner,
        )
        .await
    {
        tracing::warn!(%error, "could not store the document's compile state");
    } else if new_document || kept_format_sha256 != earlier_sha256 {
        // One document more, or a new format: the project may be past a cap.
        crate::kept_documents::trim(context, job.project_id).await;
    }
}
