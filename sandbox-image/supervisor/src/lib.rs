//! The protocol between the scheduler and the supervisor inside a sandbox container.
//!
//! The scheduler attaches to the container and writes one [`JobSpec`] as JSON to its stdin,
//! then closes stdin. The supervisor compiles and writes a tar archive to stdout holding
//! [`REPORT_FILE`] (a [`Report`] as JSON) and, when they exist, [`PDF_FILE`] and [`LOG_FILE`].
//!
//! Everything flows through the attach stream, not through the filesystem, because the work
//! directory is a tmpfs that Docker's archive API cannot see, and because the Docker host may
//! be remote. The scheduler trusts nothing it reads back: it re-checks names, types and sizes.

use serde::{Deserialize, Serialize};

pub const REPORT_FILE: &str = "report.json";
pub const PDF_FILE: &str = "output.pdf";
pub const LOG_FILE: &str = "output.log";
/// The job name given to latexmk, so that outputs are `output.pdf` and `output.log`.
pub const JOB_NAME: &str = "output";
pub const MAIN_FILE: &str = "main.tex";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobSpec {
    /// `pdflatex`, `xelatex` or `lualatex`.
    pub engine: String,
    pub halt_on_error: bool,
    pub timeout_seconds: u32,
    pub max_pdf_bytes: u64,
    pub max_log_bytes: u64,
    pub files: Vec<FileSpec>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileSpec {
    pub path: String,
    pub content_base64: String,
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
    /// latexmk's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended latexmk, when one did.
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
    pub uid: u32,
    pub memory_bytes: i64,
    pub pids_limit: i64,
    pub cpus: f64,
    pub work_tmpfs_bytes: i64,
}

/// One property of the sandbox as observed from inside it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}
