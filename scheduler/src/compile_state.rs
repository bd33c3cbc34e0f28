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

use crate::metrics;
use crate::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use texfleet_core::model::{document_state_prefix, ClaimedJob, Engine};
use texfleet_core::storage::StorageError;
use texfleet_sandbox::{CompileState, DriverState, Dump, Preamble};

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

/// Everything a format's content depends on beyond TeX's trees (which the image fixes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FormatKey {
    image_id: String,
    source_date_epoch: i64,
    preamble_sha256: String,
    paths_sha256: String,
    /// The sources the dump read but the main file, each with the hex SHA-256 of its content.
    reads: Vec<(String, String)>,
}

impl FormatKey {
    /// The key of `job`'s preamble if its dump read `reads`; None when one of them is not a
    /// source of the job.
    fn of(job: &ClaimedJob, image_id: &str, reads: &[String]) -> Option<FormatKey> {
        let source = |path: &str| job.files.iter().find(|file| file.path == path);
        let main = &source(&job.main)?.content;
        let preamble = &main[..preamble_end(main)];
        let mut paths: Vec<&str> = job.files.iter().map(|file| file.path.as_str()).collect();
        paths.sort_unstable();
        // The dump read the main file only up to `\begin{document}`: the preamble's hash.
        let reads = reads
            .iter()
            .filter(|path| **path != job.main)
            .map(|path| Some((path.clone(), sha256_hex(&source(path)?.content))))
            .collect::<Option<Vec<_>>>()?;
        Some(FormatKey {
            image_id: image_id.to_string(),
            source_date_epoch: job.source_date_epoch,
            preamble_sha256: sha256_hex(preamble),
            paths_sha256: sha256_hex(paths.join("\0").as_bytes()),
            reads,
        })
    }
}

/// The preamble format cache's answer for a job, shown on the job and counted in metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreambleCache {
    /// Compiled with the project's format of this preamble.
    Hit,
    /// No format fit: compiled without one, and dumped the preamble for the next compile.
    Miss,
    /// This preamble cannot be kept as a format (it was tried before, or the engine cannot).
    Unavailable,
}

impl PreambleCache {
    pub fn as_str(self) -> &'static str {
        match self {
            PreambleCache::Hit => "hit",
            PreambleCache::Miss => "miss",
            PreambleCache::Unavailable => "unavailable",
        }
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
}

/// Reads what the document's last compile left and decides what this compile gets. A missing
/// or unreadable state is a cold start, never an error of the job.
pub async fn prepare(context: &Context, job: &ClaimedJob) -> Prepared {
    let config = &context.config;
    if !job.use_cache || (!config.preamble_cache && !config.incremental_compiles) {
        return Prepared::default();
    }
    let image_id = context.sandbox.image_id();
    let prefix = document_state_prefix(job.project_id, job.engine, &job.main);
    let stored = match context
        .storage
        .get_bytes(&format!("{prefix}{STATE_OBJECT}"))
        .await
    {
        Ok(bytes) => serde_json::from_slice::<Stored>(&bytes).ok(),
        Err(StorageError::NotFound(_)) => None,
        Err(error) => {
            tracing::warn!(%error, "could not read the document's compile state");
            None
        }
    }
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
    prepared
}

async fn preamble_for(
    context: &Context,
    job: &ClaimedJob,
    prefix: &str,
    format: Option<&StoredFormat>,
) -> (Preamble, Vec<u8>, PreambleCache) {
    if job.engine == Engine::Lualatex {
        return (Preamble::Plain, Vec::new(), PreambleCache::Unavailable);
    }
    let image_id = context.sandbox.image_id();
    let Some(format) = format.filter(|format| {
        let reads: Vec<String> = format
            .key
            .reads
            .iter()
            .map(|(path, _)| path.clone())
            .collect();
        FormatKey::of(job, image_id, &reads).as_ref() == Some(&format.key)
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

/// The preamble format cache's answer for the job, counted: a hit whose format failed a pass
/// that succeeded without it compiled without the cache, a miss.
pub fn answer(prepared: &Prepared, state: Option<&DriverState>) -> Option<PreambleCache> {
    let cache = match prepared.cache {
        Some(PreambleCache::Hit) if state.is_some_and(|state| state.format_refused) => {
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
    // A compile from nothing leaves the document's state as it was.
    if !job.use_cache || (!config.preamble_cache && !config.incremental_compiles) {
        return;
    }
    let image_id = context.sandbox.image_id();
    let prefix = document_state_prefix(job.project_id, job.engine, &job.main);
    let state = state.unwrap_or_default();
    let new_document = prepared.stored.is_none();
    let earlier = prepared.stored.and_then(|stored| stored.format);
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
        (Preamble::Load { .. }, _, _) if state.format_refused => None,
        _ => earlier,
    };
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
    } else if new_document {
        crate::kept_documents::trim(context, job.project_id).await;
    }
}

/// Where the dump stopped reading the main file: at the first `\begin{document}` outside a
/// comment, as TeX reads it (a review made a commented-out one end the key early, and the
/// definitions after it went stale in the format). The whole file without one.
fn preamble_end(main: &[u8]) -> usize {
    const BEGIN: &[u8] = b"\\begin{document}";
    let mut start = 0;
    for line in main.split_inclusive(|&byte| byte == b'\n') {
        let code = &line[..comment_start(line)];
        if let Some(at) = code.windows(BEGIN.len()).position(|window| window == BEGIN) {
            return start + at;
        }
        start += line.len();
    }
    main.len()
}

/// Where the comment of a line starts: its first `%` not escaped by an odd run of backslashes.
fn comment_start(line: &[u8]) -> usize {
    let mut backslashes = 0;
    for (at, &byte) in line.iter().enumerate() {
        match byte {
            b'%' if backslashes % 2 == 0 => return at,
            b'\\' => backslashes += 1,
            _ => backslashes = 0,
        }
    }
    line.len()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use texfleet_core::model::SourceFile;
    use uuid::Uuid;

    fn job(main: &str, style: &str) -> ClaimedJob {
        ClaimedJob {
            id: Uuid::nil(),
            project_id: Uuid::nil(),
            engine: Engine::Pdflatex,
            halt_on_error: false,
            timeout_seconds: 60,
            attempt: 1,
            main: "main.tex".into(),
            use_cache: true,
            waited_seconds: 0.0,
            source_date_epoch: 0,
            files: vec![
                SourceFile {
                    path: "main.tex".into(),
                    content: main.into(),
                },
                SourceFile {
                    path: "style.sty".into(),
                    content: style.into(),
                },
            ],
        }
    }

    #[test]
    fn the_preamble_ends_where_tex_reads_begin_document_not_in_a_comment() {
        let keyed = |secret: &str| {
            let main = format!(
                "\\documentclass{{article}}\n% \\begin{{document}}\n\\def\\s{{{secret}}}\n\\begin{{document}}\\s\\end{{document}}"
            );
            FormatKey::of(&job(&main, "x"), "image", &["main.tex".into()])
        };
        assert_ne!(keyed("AAAA"), keyed("BBBB"));
        // An escaped percent sign starts no comment; an escaped backslash before one does not
        // escape it.
        assert_eq!(preamble_end(b"100\\%\\begin{document}"), 5);
        assert_eq!(
            preamble_end(b"\\\\%\\begin{document}\n\\begin{document}"),
            20
        );
        assert_eq!(preamble_end(b"no document"), 11);
    }

    #[test]
    fn a_format_fits_while_the_preamble_and_what_it_read_are_unchanged() {
        let reads = ["main.tex".to_string(), "style.sty".to_string()];
        let first = job("\\usepackage{style}\\begin{document}A\\end{document}", "x");
        let key = FormatKey::of(&first, "image", &reads).unwrap();
        let body_edited = job("\\usepackage{style}\\begin{document}B\\end{document}", "x");
        assert_eq!(
            FormatKey::of(&body_edited, "image", &reads),
            Some(key.clone())
        );
        let preamble_edited = job(
            "\\usepackage{style}%\n\\begin{document}A\\end{document}",
            "x",
        );
        assert_ne!(
            FormatKey::of(&preamble_edited, "image", &reads),
            Some(key.clone())
        );
        let style_edited = job("\\usepackage{style}\\begin{document}A\\end{document}", "y");
        assert_ne!(
            FormatKey::of(&style_edited, "image", &reads),
            Some(key.clone())
        );
        assert_ne!(
            FormatKey::of(&first, "other image", &reads),
            Some(key.clone())
        );
        let mut file_added = first.clone();
        file_added.files.push(SourceFile {
            path: "extra.tex".into(),
            content: vec![],
        });
        assert_ne!(FormatKey::of(&file_added, "image", &reads), Some(key));
        assert_eq!(
            FormatKey::of(&first, "image", &["gone.tex".to_string()]),
            None
        );
    }
}
