//! Incremental compiles: the auxiliary files (`.aux`, `.bbl`, `.toc`, ...) of the project's
//! last successful compile of the same document are written back before the first pass
//! ([`restore`]), so that an edit needs one pass instead of three, and this compile's are
//! handed on to the next one ([`next`]).
//!
//! They come from the same project's earlier compile at the same main path, which the document
//! controlled, and are only of the kinds LaTeX and its tools write for a next pass
//! ([`is_handed_on`]): a class or package a compile wrote is never loaded by a later one.
//! The driver reruns a pass when a restored file the pass read changed during it, exactly as
//! for files the compile wrote itself.

use super::clear;
use super::files;
use super::names::is_safe_path;
use super::recorder;
use super::steps::Steps;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use texfleet_sandbox::{
    is_handed_on, CompileState, FileSpec, MAX_STATE_BYTES, MAX_STATE_FILES, WORK_DIR,
};

/// The most auxiliary bytes kept: base64 in JSON must stay below [`MAX_STATE_BYTES`].
const MAX_KEPT_BYTES: u64 = MAX_STATE_BYTES / 2;

/// Writes the previous compile's auxiliary files into the current folder, never over a source,
/// and hands the tools their last input signatures. Returns the files written.
pub fn restore(steps: &mut Steps, previous: CompileState) -> Vec<PathBuf> {
    let previous = previous.bounded();
    let mut restored = Vec::new();
    for file in &previous.files {
        if !is_safe_path(&file.path) {
            continue;
        }
        if write_decoded(Path::new(&file.path), &file.content_base64).is_ok() {
            restored.push(PathBuf::from(&file.path));
        }
    }
    if !restored.is_empty() {
        steps.remember(&previous.tools);
        steps.trace.push(format!(
            "texfleet: restored {} auxiliary files of the project's last compile of this document",
            restored.len()
        ));
    }
    restored
}

/// Removes everything the compile left in the work directory (but its entry `kept`) and in
/// `/tmp`, and the tools' memory of their last inputs: the job's files written again then make
/// what a compile from nothing sees. Fails when anything is left.
pub fn forget(steps: &mut Steps, kept: &OsStr) -> io::Result<()> {
    clear::own_files_under(Path::new(WORK_DIR), Some(kept))?;
    clear::own_files_under(Path::new("/tmp"), None)?;
    steps.forget();
    Ok(())
}

/// A kept file, new, in its folder (made when missing).
fn write_decoded(path: &Path, content_base64: &str) -> io::Result<()> {
    let bytes = BASE64.decode(content_base64).map_err(io::Error::other)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    files::write_new(path, &bytes)
}

/// The auxiliary files the last pass read or wrote in `folder`, the current one (`sources`
/// are the job's own files there, which are not state), up to the size the scheduler keeps.
pub fn next(steps: &Steps, folder: &Path, sources: &[PathBuf]) -> CompileState {
    let recorded = recorder::read_recorder(Path::new(recorder::RECORDER_FILE), folder);
    let mut state = CompileState {
        files: Vec::new(),
        tools: steps.signatures(),
    };
    let mut kept_bytes = 0;
    let sources: HashSet<&PathBuf> = sources.iter().collect();
    let mut seen = HashSet::new();
    for path in recorded.outputs.iter().chain(&recorded.inputs) {
        if state.files.len() == MAX_STATE_FILES {
            break;
        }
        let name = path.to_string_lossy();
        let excluded = sources.contains(path)
            || !is_handed_on(path)
            || !is_safe_path(&name)
            || !seen.insert(path);
        if excluded {
            continue;
        }
        let Ok(metadata) = fs::symlink_metadata(path) else {
            continue;
        };
        if !metadata.is_file() || kept_bytes + metadata.len() > MAX_KEPT_BYTES {
            continue;
        }
        let Ok(bytes) = fs::read(path) else {
            continue;
        };
        kept_bytes += bytes.len() as u64;
        state.files.push(FileSpec {
            path: name.into_owned(),
            content_base64: BASE64.encode(bytes),
            streamed: None,
        });
    }
    state
}
