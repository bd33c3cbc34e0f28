//! The protocol between the scheduler and the supervisor inside a sandbox container.
//!
//! The scheduler attaches to the container and writes one [`JobSpec`] as JSON on one line to
//! its stdin, followed by the raw bytes of a preamble format when the spec says so
//! ([`job_input`], [`read_job`]), then by the raw bytes of each [`Streamed`] file, then closes
//! stdin. The supervisor compiles and writes a tar archive to stdout: first
//! [`REPORT_FILE`] (a [`Report`] as JSON, carrying the job's nonce), then, when they exist,
//! [`PDF_FILE`], [`LOG_FILE`], [`SYNCTEX_FILE`] and, when the spec asks for one,
//! [`THUMBNAIL_FILE`], each once.
//!
//! Everything flows through the attach stream, not through the filesystem, because the work
//! directory is a tmpfs that Docker's archive API cannot see, and because the Docker host may
//! be remote. The scheduler trusts nothing it reads back: it re-checks order, names, types,
//! sizes, the nonce and every value of the report.

mod driver_state;
pub mod execution;
mod handed_on;
mod preamble_rules;
pub mod shell_escape;

pub use driver_state::{
    CompileState, DriverState, Dump, Finding, WordCount, MAX_FINDINGS, MAX_FINDING_CHARS,
};
pub use handed_on::{is_handed_on, is_plain_relative};
pub use preamble_rules::{preamble_end, why_not_keyable, BEGIN_DOCUMENT, STATE_A_FORMAT_DROPS};
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Read};

pub const REPORT_FILE: &str = "report.json";
pub const PDF_FILE: &str = "output.pdf";
pub const LOG_FILE: &str = "output.log";
pub const SYNCTEX_FILE: &str = "output.synctex.gz";
/// The first page as a PNG, [`JobSpec::thumbnail_width`] pixels wide (or the page a preview
/// asks for, [`JobSpec::preview_page`]).
pub const THUMBNAIL_FILE: &str = "output.thumbnail.png";
/// The widths a thumbnail may have, in pixels.
pub const THUMBNAIL_WIDTHS: std::ops::RangeInclusive<u32> = 16..=1200;
/// A thumbnail is at most this many times as high as it is wide: a taller page is fitted in.
pub const THUMBNAIL_MAX_ASPECT: u32 = 4;
/// The largest thumbnail taken. Ghostscript's PNG of the largest thumbnail, 1200 by 4800
/// pixels of noise, is 17.3 MB: one it wrote is never cut short (which would fail the compile).
pub const MAX_THUMBNAIL_BYTES: u64 = 24 * 1024 * 1024;
/// The preamble's format, dumped by a job asked to ([`Preamble::Dump`]), in the main folder.
pub const FORMAT_FILE: &str = "output.fmt";
/// What the compile driver leaves for the scheduler: a [`DriverState`] as JSON.
pub const DRIVER_STATE_FILE: &str = "driver-state.json";
/// The largest format the scheduler keeps; a larger one is dropped, not truncated.
pub const MAX_FORMAT_BYTES: u64 = 64 * 1024 * 1024;
/// The largest [`DRIVER_STATE_FILE`]; auxiliary files that do not fit are not kept.
pub const MAX_STATE_BYTES: u64 = 8 * 1024 * 1024;
/// The most auxiliary files a compile hands on ([`CompileState::bounded`]).
pub const MAX_STATE_FILES: usize = 200;
/// The job name of every engine run, so that outputs are `output.pdf`, `output.log`, ...
pub const JOB_NAME: &str = "output";
/// The work directory: the job's tmpfs.
pub const WORK_DIR: &str = "/work";

/// The supervisor runs as this uid (and gid): not root, and not the compile's, so that nothing
/// the compile runs can signal it, trace it, lower its limits or reach its file descriptors.
/// Both uids are in Debian's reserved range (65000-65533), so they name no account on a host,
/// and below 65536, so that a userns-remap range maps them.
pub const SUPERVISOR_UID: u32 = 65100;
/// Every process of the compile runs as this uid (and gid), without capabilities.
pub const COMPILE_UID: u32 = 65101;

/// The TeX engines, by the names the API and the job spec give them.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Engine {
    #[default]
    Pdflatex,
    Xelatex,
    Lualatex,
}

impl Engine {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobSpec {
    /// A secret of this run that the report must carry back. The supervisor keeps it and the
    /// compile never sees it, so a report forged by the compile cannot carry it.
    pub nonce: String,
    pub engine: Engine,
    pub halt_on_error: bool,
    /// Graphics drawn as boxes with their file names (graphicx's `draft`), for a fast preview.
    #[serde(default)]
    pub draft: bool,
    /// texcount counts the sources' words after the compile ([`DriverState::word_count`]).
    #[serde(default)]
    pub wordcount: bool,
    /// chktex checks the sources before the compile ([`DriverState::findings`]).
    #[serde(default)]
    pub check: Option<CheckMode>,
    /// Ghostscript renders the first page as [`THUMBNAIL_FILE`] this wide, after the compile.
    #[serde(default)]
    pub thumbnail_width: Option<u32>,
    /// A page preview instead of a compile: `main` is a PDF, whose page of this number
    /// Ghostscript renders as [`THUMBNAIL_FILE`], [`JobSpec::thumbnail_width`] pixels wide
    /// ([`DriverState::page_count`] says how many pages it has).
    #[serde(default)]
    pub preview_page: Option<u32>,
    pub timeout_seconds: u32,
    pub max_pdf_bytes: u64,
    pub max_log_bytes: u64,
    pub max_synctex_bytes: u64,
    /// The main document's path among `files`; the compile runs in its folder.
    pub main: String,
    /// `SOURCE_DATE_EPOCH` of the compile: the dates it writes, `\today` included.
    pub source_date_epoch: i64,
    pub files: Vec<FileSpec>,
    /// What to do with the preamble format cache.
    #[serde(default)]
    pub preamble: Preamble,
    /// What the last successful compile of the same document in the same project left.
    #[serde(default)]
    pub previous: CompileState,
}

/// What a check of the sources with chktex does with its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckMode {
    /// They are reported beside the compile's diagnostics.
    Warn,
    /// Any finding stops the job before the compile.
    Error,
}

/// The preamble format cache's part in a compile (see ARCHITECTURE.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum Preamble {
    /// Compile as usual.
    #[default]
    Plain,
    /// Compile as usual, then dump the preamble into [`FORMAT_FILE`] for later compiles.
    Dump,
    /// Compile with the format that follows the spec on stdin, `format_bytes` long: the
    /// project's own, dumped from the same preamble and files. Raw, not in the JSON: it is
    /// megabytes, and base64 in JSON costs more to read than the pass it saves.
    Load { format_bytes: u64 },
}

/// The head of a job's stdin: the spec as one line of JSON (serde_json escapes every newline
/// inside it), then the format of [`Preamble::Load`]. The [`Streamed`] files follow it.
pub fn job_input(spec: &JobSpec, format: &[u8]) -> Vec<u8> {
    let mut input = serde_json::to_vec(spec).expect("a job spec serializes");
    input.push(b'\n');
    input.extend_from_slice(format);
    input
}

/// Reads what [`job_input`] wrote: the spec, at most `max_spec_bytes` of it, and the format
/// it announces (empty without one). The [`Streamed`] files are left in `input`, to be read in
/// the order of [`JobSpec::files`].
pub fn read_job(input: &mut impl BufRead, max_spec_bytes: u64) -> io::Result<(JobSpec, Vec<u8>)> {
    let mut line = Vec::new();
    input.take(max_spec_bytes).read_until(b'\n', &mut line)?;
    let spec: JobSpec = serde_json::from_slice(&line).map_err(io::Error::other)?;
    let mut format = Vec::new();
    if let Preamble::Load { format_bytes } = spec.preamble {
        if format_bytes > MAX_FORMAT_BYTES {
            return Err(io::Error::other("the format is larger than its cap"));
        }
        input.take(format_bytes).read_to_end(&mut format)?;
        if format.len() as u64 != format_bytes {
            return Err(io::Error::other("the format ended early"));
        }
    }
    if spec
        .streamed_bytes()
        .is_none_or(|bytes| bytes > MAX_STREAMED_BYTES)
    {
        return Err(io::Error::other(
            "the streamed files are larger than their cap",
        ));
    }
    Ok((spec, format))
}

/// The most bytes of [`Streamed`] files one job may have: more than the work directory holds.
const MAX_STREAMED_BYTES: u64 = 1024 * 1024 * 1024;

impl JobSpec {
    /// How many bytes of [`Streamed`] files follow the head of the job's stdin (None when the
    /// sum overflows).
    pub fn streamed_bytes(&self) -> Option<u64> {
        self.files
            .iter()
            .filter_map(|file| file.streamed.as_ref())
            .try_fold(0u64, |sum, streamed| sum.checked_add(streamed.bytes))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSpec {
    pub path: String,
    /// The content, unless it is streamed.
    #[serde(default)]
    pub content_base64: String,
    /// The content follows on stdin instead, raw: a project file of megabytes costs no base64
    /// and no copy in memory on its way in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed: Option<Streamed>,
}

/// A file whose bytes follow the head of the job's stdin ([`job_input`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Streamed {
    pub bytes: u64,
    /// The hex SHA-256 of the content: whether a pass rewrote the file is told by it.
    pub sha256: String,
}

/// Which limit ended or spoiled a compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Timeout,
    CpuTime,
    Memory,
    Output,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// The nonce of the [`JobSpec`].
    pub nonce: String,
    /// The compile driver's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the compile driver, when one did.
    pub signal: Option<i32>,
    pub limit: Option<Limit>,
    /// Wall-clock time of the compile.
    pub duration_ms: u64,
    pub cpu_ms: u64,
    pub max_rss_kb: u64,
    /// Outputs that were passed over and why (a symlink, too large, ...).
    pub notes: Vec<String>,
}

/// Argument that makes the supervisor check its own sandbox instead of compiling.
pub const CHECK_ARG: &str = "check";

/// What the sandbox is expected to look like from inside, sent on stdin in check mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckSpec {
    pub memory_bytes: i64,
    pub pids_limit: i64,
    pub cpus: f64,
    pub work_tmpfs_bytes: i64,
    /// The sandbox runs under gVisor, whose own kernel stands between the compile and the
    /// host's: the cgroup limits are enforced outside it and cannot be seen from inside, it
    /// has no Landlock, and it implements terminals and tmpfs itself. The checks that do not
    /// apply there are left out or read differently (SECURITY.md lists which).
    pub gvisor: bool,
}

/// One property of the sandbox as observed from inside it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_are_named_as_the_api_names_them() {
        for (name, engine) in [
            ("pdflatex", Engine::Pdflatex),
            ("xelatex", Engine::Xelatex),
            ("lualatex", Engine::Lualatex),
        ] {
            let quoted = format!("\"{name}\"");
            assert_eq!(serde_json::from_str::<Engine>(&quoted).unwrap(), engine);
            assert_eq!(serde_json::to_string(&engine).unwrap(), quoted);
            assert_eq!(engine.name(), name);
        }
        assert!(serde_json::from_str::<Engine>("\"PdfLaTeX\"").is_err());
        assert!(serde_json::from_str::<Engine>("\"tex\"").is_err());
    }

    /// A spec of `files` and `preamble`, the rest of no matter.
    fn spec(files: Vec<FileSpec>, preamble: Preamble) -> JobSpec {
        let mut spec: JobSpec = serde_json::from_value(serde_json::json!({
            "nonce": "n", "engine": "pdflatex", "halt_on_error": false, "timeout_seconds": 1,
            "max_pdf_bytes": 1, "max_log_bytes": 1, "max_synctex_bytes": 1,
            "main": "main.tex", "source_date_epoch": 0, "files": [],
        }))
        .unwrap();
        spec.files = files;
        spec.preamble = preamble;
        spec
    }

    fn streamed(path: &str, bytes: u64) -> FileSpec {
        FileSpec {
            path: path.into(),
            content_base64: String::new(),
            streamed: Some(Streamed {
                bytes,
                sha256: String::new(),
            }),
        }
    }

    #[test]
    fn a_job_input_carries_the_spec_then_the_raw_format() {
        let sent = FileSpec {
            path: "a\nb".into(),
            content_base64: String::new(),
            streamed: None,
        };
        let spec = spec(
            vec![sent, streamed("c.png", 3)],
            Preamble::Load { format_bytes: 4 },
        );
        let mut input = job_input(&spec, b"\n\0fm");
        input.extend_from_slice(b"PNG");
        let mut reader = input.as_slice();
        let (read, format) = read_job(&mut reader, 1 << 20).unwrap();
        assert_eq!(read.files, spec.files);
        assert_eq!(format, b"\n\0fm");
        assert_eq!(reader, b"PNG", "the streamed files are left to read");
        assert_eq!(read.streamed_bytes(), Some(3));
        assert!(read_job(&mut &input[..input.len() - 4], 1 << 20).is_err());
    }

    #[test]
    fn streamed_files_past_their_cap_are_refused() {
        for files in [
            vec![streamed("a.png", MAX_STREAMED_BYTES + 1)],
            vec![streamed("a.png", u64::MAX), streamed("b.png", 2)],
        ] {
            let input = job_input(&spec(files, Preamble::Plain), b"");
            assert!(read_job(&mut input.as_slice(), 1 << 20).is_err());
        }
        let at_the_cap = spec(vec![streamed("a.png", MAX_STREAMED_BYTES)], Preamble::Plain);
        let input = job_input(&at_the_cap, b"");
        assert!(read_job(&mut input.as_slice(), 1 << 20).is_ok());
    }
}
