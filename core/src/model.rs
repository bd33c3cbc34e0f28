//! The job model: what a compile job is, the states it moves through and how it is shown to
//! clients. The JSON shape of [`Job`] is the contract's (`shared/CONTRACT.md`), field for field.

use serde::{Deserialize, Serialize};
use std::fmt;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

/// Name of the root document inside the sandbox; `input_latex` is written here.
pub const MAIN_FILE: &str = "main.tex";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Cancelled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::TimedOut,
        JobStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "Queued",
            JobStatus::Running => "Running",
            JobStatus::Succeeded => "Succeeded",
            JobStatus::Failed => "Failed",
            JobStatus::TimedOut => "TimedOut",
            JobStatus::Cancelled => "Cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobStatus> {
        JobStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, JobStatus::Queued | JobStatus::Running)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    #[default]
    Pdflatex,
    Xelatex,
    Lualatex,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Pdflatex, Engine::Xelatex, Engine::Lualatex];

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Pdflatex => "pdflatex",
            Engine::Xelatex => "xelatex",
            Engine::Lualatex => "lualatex",
        }
    }

    pub fn parse(s: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|engine| engine.as_str() == s)
    }
}

/// The contract's `error.code` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    CompileError,
    Timeout,
    MemoryLimit,
    OutputLimit,
    InvalidInput,
    SandboxError,
    StorageError,
    Cancelled,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::CompileError,
        ErrorCode::Timeout,
        ErrorCode::MemoryLimit,
        ErrorCode::OutputLimit,
        ErrorCode::InvalidInput,
        ErrorCode::SandboxError,
        ErrorCode::StorageError,
        ErrorCode::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::CompileError => "compile_error",
            ErrorCode::Timeout => "timeout",
            ErrorCode::MemoryLimit => "memory_limit",
            ErrorCode::OutputLimit => "output_limit",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::SandboxError => "sandbox_error",
            ErrorCode::StorageError => "storage_error",
            ErrorCode::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|code| code.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobError {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One error or warning parsed from the compile log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub message: String,
}

/// A job as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: Uuid,
    pub project_id: Uuid,
    pub status: JobStatus,
    pub engine: Engine,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
    pub duration_ms: Option<i64>,
    pub pdf_storage_key: Option<String>,
    pub log_storage_key: Option<String>,
    pub error: Option<JobError>,
    pub diagnostics: Vec<Diagnostic>,
}

/// A source file of a job; the main document is the file named [`MAIN_FILE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: String,
    pub content: Vec<u8>,
}

/// What the API asks the queue to compile, already validated.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub project_id: Uuid,
    pub engine: Engine,
    pub halt_on_error: bool,
    pub timeout_seconds: u32,
    pub files: Vec<SourceFile>,
}

/// A job a scheduler has claimed, with everything needed to compile it.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: Uuid,
    pub project_id: Uuid,
    pub engine: Engine,
    pub halt_on_error: bool,
    pub timeout_seconds: u32,
    pub attempt: i32,
    /// How long the job waited in the queue before this claim.
    pub waited_seconds: f64,
    pub files: Vec<SourceFile>,
}

/// `<short_job_id>` of the contract: the part of the id before the first `-`.
pub fn short_job_id(id: Uuid) -> String {
    let id = id.to_string();
    id.split('-').next().unwrap_or(&id).to_string()
}

pub fn pdf_storage_key(id: Uuid) -> String {
    format!("compiles/{}/output.pdf", short_job_id(id))
}

pub fn log_storage_key(id: Uuid) -> String {
    format!("compiles/{}/output.log", short_job_id(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keys_use_the_first_segment_of_the_id() {
        let id = Uuid::parse_str("0b9f3c2a-1d4e-4f5a-9b6c-7d8e9f0a1b2c").unwrap();
        assert_eq!(pdf_storage_key(id), "compiles/0b9f3c2a/output.pdf");
        assert_eq!(log_storage_key(id), "compiles/0b9f3c2a/output.log");
    }

    #[test]
    fn names_round_trip() {
        for status in JobStatus::ALL {
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert_eq!(serde_json::to_string(&code).unwrap(), format!("\"{code}\""));
        }
        for engine in Engine::ALL {
            assert_eq!(Engine::parse(engine.as_str()), Some(engine));
        }
    }
}
