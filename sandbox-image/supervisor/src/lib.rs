//! The protocol between the scheduler and the supervisor inside a sandbox container.
//!
//! The scheduler attaches to the container and writes one [`JobSpec`] as JSON to its stdin,
//! then closes stdin. The supervisor compiles and writes a tar archive to stdout: first
//! [`REPORT_FILE`] (a [`Report`] as JSON, carrying the job's nonce), then, when they exist,
//! [`PDF_FILE`], [`LOG_FILE`] and [`SYNCTEX_FILE`], each once.
//!
//! Everything flows through the attach stream, not through the filesystem, because the work
//! directory is a tmpfs that Docker's archive API cannot see, and because the Docker host may
//! be remote. The scheduler trusts nothing it reads back: it re-checks order, names, types,
//! sizes, the nonce and every value of the report.

use serde::{Deserialize, Serialize};

pub const REPORT_FILE: &str = "report.json";
pub const PDF_FILE: &str = "output.pdf";
pub const LOG_FILE: &str = "output.log";
pub const SYNCTEX_FILE: &str = "output.synctex.gz";
/// The job name of every engine run, so that outputs are `output.pdf`, `output.log`, ...
pub const JOB_NAME: &str = "output";
/// The main document when the request sends it as `input_latex`.
pub const MAIN_FILE: &str = "main.tex";
/// The work directory: the job's tmpfs.
pub const WORK_DIR: &str = "/work";

/// The supervisor runs as this uid (and gid): not root, and not the compile's, so that nothing
/// the compile runs can signal it, trace it, lower its limits or reach its file descriptors.
/// Both uids are in Debian's reserved range (65000-65533), so they name no account on a host,
/// and below 65536, so that a userns-remap range maps them.
pub const SUPERVISOR_UID: u32 = 65100;
/// Every process of the compile runs as this uid (and gid), without capabilities.
pub const COMPILE_UID: u32 = 65101;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobSpec {
    /// A secret of this run that the report must carry back. The supervisor keeps it and the
    /// compile never sees it, so a report forged by the compile cannot carry it.
    pub nonce: String,
    /// `pdflatex`, `xelatex` or `lualatex`.
    pub engine: String,
    pub halt_on_error: bool,
    pub timeout_seconds: u32,
    pub max_pdf_bytes: u64,
    pub max_log_bytes: u64,
    pub max_synctex_bytes: u64,
    /// The main document's path among `files`; the compile runs in its folder.
    pub main: String,
    /// `SOURCE_DATE_EPOCH` of the compile: the dates it writes, `\today` included.
    pub source_date_epoch: i64,
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
