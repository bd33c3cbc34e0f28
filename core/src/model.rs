//! The job model: what a compile job is, the states it moves through and how it is shown to
//! clients. The JSON shape of [`Job`] is the one docs/API.md describes, field for field.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

/// Name of the root document inside the sandbox; `input_latex` is written here.
pub const MAIN_FILE: &str = "main.tex";

/// An enum of the model with one text form, used alike in JSON (serde), the OpenAPI document
/// (utoipa), the database and metrics labels (strum, from the same names), with `as_str`.
macro_rules! text_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident,)* }) => {
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema,
            strum::EnumString, strum::IntoStaticStr, strum::Display, strum::VariantArray,
        )]
        $(#[$meta])*
        pub enum $name {
            $($(#[$variant_meta])* $variant,)*
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    };
}

// After the macro, which it uses.
mod document_report;
mod page_preview;
mod project_file;
mod storage_keys;

pub use document_report::{CheckMode, Diagnostic, DiagnosticSource, Severity, WordCount};
pub use page_preview::{
    page_preview_key, page_previews_prefix, ClaimedPreview, PagePreview, PreviewStatus, Rendered,
    PAGE_SIDES, PREVIEW_PAGES,
};
pub use project_file::{project_file_key, ContentHash, StoredFile};
pub use storage_keys::{
    document_prefix, document_state_prefix, log_storage_key, pdf_storage_key,
    project_documents_prefix, project_prefix, short_job_id, storage_keys, synctex_storage_key,
    thumbnail_storage_key,
};

text_enum! {
    /// The states of a job, named as the contract names them.
    pub enum JobStatus {
        Queued,
        Running,
        Succeeded,
        Failed,
        TimedOut,
        Cancelled,
    }
}

impl JobStatus {
    pub fn is_terminal(self) -> bool {
        !matches!(self, JobStatus::Queued | JobStatus::Running)
    }
}

text_enum! {
    #[derive(Default)]
    #[serde(rename_all = "lowercase")]
    #[strum(serialize_all = "lowercase")]
    pub enum Engine {
        #[default]
        Pdflatex,
        Xelatex,
        Lualatex,
    }
}

text_enum! {
    /// The contract's `error.code` values.
    #[serde(rename_all = "snake_case")]
    #[strum(serialize_all = "snake_case")]
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
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobError {
    pub code: ErrorCode,
    pub message: String,
}

/// A job as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "id": "3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e",
    "project_id": "6f1c2a4e-0000-4000-8000-000000000001",
    "status": "Succeeded",
    "engine": "pdflatex",
    "texlive": "2024",
    "sandbox_image": "sha256:4f0c9d2e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
    "created_at": "2026-11-23T17:41:33Z",
    "started_at": "2026-11-23T17:41:33.120Z",
    "finished_at": "2026-11-23T17:41:33.480Z",
    "duration_ms": 310,
    "pdf_storage_key": "compiles/3f2b8c1e/output.pdf",
    "log_storage_key": "compiles/3f2b8c1e/output.log",
    "synctex_storage_key": "compiles/3f2b8c1e/output.synctex.gz",
    "thumbnail_storage_key": null,
    "error": null,
    "diagnostics": [{ "severity": "warning", "file": null, "line": 7,
                      "message": "Reference `sec:x' on page 1 undefined on input line 7.",
                      "context": null, "source": "tex" }],
    "reused_from": null,
    "preamble_cache": "hit",
    "incremental": true,
    "word_count": null,
    "links": { "self": "/compile/3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e",
               "pdf": "/compile/3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e/pdf",
               "log": "/compile/3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e/log",
               "synctex": "/compile/3f2b8c1e-5d6a-4b7c-8d9e-0f1a2b3c4d5e/synctex",
               "thumbnail": null }
}))]
pub struct Job {
    pub id: Uuid,
    pub project_id: Uuid,
    pub status: JobStatus,
    pub engine: Engine,
    /// The TeX Live year the job compiles with.
    #[serde(default)]
    pub texlive: String,
    /// The id of the sandbox image that compiled it (`sha256:...`), or compiled the job whose
    /// result it reused; null until it has run.
    #[serde(default)]
    pub sandbox_image: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
    pub duration_ms: Option<i64>,
    pub pdf_storage_key: Option<String>,
    pub log_storage_key: Option<String>,
    /// `compiles/<short_job_id>/output.synctex.gz` when a Succeeded job's engine wrote one.
    #[serde(default)]
    pub synctex_storage_key: Option<String>,
    /// `compiles/<short_job_id>/thumbnail.png`: the first page, as wide as the job asked in
    /// `thumbnail_width`, when a Succeeded job asked for it and Ghostscript rendered it.
    #[serde(default)]
    pub thumbnail_storage_key: Option<String>,
    pub error: Option<JobError>,
    pub diagnostics: Vec<Diagnostic>,
    /// The earlier job of the project whose result this one reused (the result cache): its
    /// outputs are served for this job, and it ran no compile of its own.
    #[serde(default)]
    pub reused_from: Option<Uuid>,
    /// What the preamble format cache gave this compile: `hit` (the project's format of this
    /// preamble was loaded), `miss` (compiled without one; the preamble was dumped for the
    /// next compile), `unavailable` (this preamble or engine cannot be kept as a format), or
    /// null (the cache is off, or the job ran no compile of its own).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub preamble_cache: Option<String>,
    /// Whether the compile started from the auxiliary files (`.aux`, `.bbl`, `.toc`, ...) of
    /// the project's last successful compile of the same document.
    #[serde(default)]
    pub incremental: bool,
    /// texcount's count of the sources, for a job submitted with `"wordcount": true`; null
    /// otherwise, or when texcount gave none (the log says why).
    #[serde(default)]
    pub word_count: Option<WordCount>,
    /// Where the job and its outputs are on this API.
    #[serde(default)]
    pub links: JobLinks,
    /// Hex SHA-256 of the stored PDF and log, the strong `ETag`s of their downloads.
    #[serde(skip)]
    pub pdf_sha256: Option<String>,
    #[serde(skip)]
    pub log_sha256: Option<String>,
    #[serde(skip)]
    pub synctex_sha256: Option<String>,
    #[serde(skip)]
    pub thumbnail_sha256: Option<String>,
}

/// The paths of a job and of its outputs on this API, so that clients need not build URLs;
/// an output's link is `null` while the job has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobLinks {
    #[serde(rename = "self")]
    pub job: String,
    pub pdf: Option<String>,
    pub log: Option<String>,
    pub synctex: Option<String>,
    #[serde(default)]
    pub thumbnail: Option<String>,
}

/// Which outputs a job has, for its [`JobLinks`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Stored {
    pub pdf: bool,
    pub log: bool,
    pub synctex: bool,
    pub thumbnail: bool,
}

impl JobLinks {
    pub fn of(id: Uuid, stored: Stored) -> JobLinks {
        let job = format!("/compile/{id}");
        let link = |has: bool, output: &str| has.then(|| format!("{job}/{output}"));
        JobLinks {
            pdf: link(stored.pdf, "pdf"),
            log: link(stored.log, "log"),
            synctex: link(stored.synctex, "synctex"),
            thumbnail: link(stored.thumbnail, "thumbnail"),
            job,
        }
    }
}

/// A source file of a job; the main document is the file named [`MAIN_FILE`] unless the request
/// named another.
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
    /// The TeX Live year, one of the deployment's.
    pub texlive: String,
    pub halt_on_error: bool,
    /// Graphics drawn as boxes, for a fast preview.
    pub draft: bool,
    /// texcount counts the sources' words after the compile.
    pub wordcount: bool,
    /// chktex checks the sources before the compile.
    pub check: Option<CheckMode>,
    /// The first page is rendered as a PNG this many pixels wide after the compile.
    pub thumbnail_width: Option<u32>,
    pub timeout_seconds: u32,
    /// The main document's path among `files` and `stored_files`.
    pub main: String,
    /// The files sent with the request.
    pub files: Vec<SourceFile>,
    /// The files named by the hash of a project file.
    pub stored_files: Vec<StoredFile>,
    /// Whether an identical earlier job's result may stand for this one.
    pub use_cache: bool,
}

impl NewJob {
    /// The bytes its sources take in the database: each file's path and content (a project
    /// file's content is in S3, counted against the project's file quota).
    pub fn source_bytes(&self) -> i64 {
        let sent: usize = self
            .files
            .iter()
            .map(|file| file.path.len() + file.content.len())
            .sum();
        let named: usize = self
            .stored_files
            .iter()
            .map(|file| file.path.len() + 32)
            .sum();
        (sent + named) as i64
    }
}

/// A job a scheduler has claimed, with everything needed to compile it.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: Uuid,
    pub project_id: Uuid,
    pub engine: Engine,
    /// The TeX Live year, whose image compiles it.
    pub texlive: String,
    pub halt_on_error: bool,
    /// Graphics drawn as boxes, for a fast preview.
    pub draft: bool,
    /// texcount counts the sources' words after the compile.
    pub wordcount: bool,
    /// chktex checks the sources before the compile.
    pub check: Option<CheckMode>,
    /// The first page is rendered as a PNG this many pixels wide after the compile.
    pub thumbnail_width: Option<u32>,
    pub timeout_seconds: u32,
    pub attempt: i32,
    /// How long the job waited in the queue before this claim.
    pub waited_seconds: f64,
    /// The dates the compile writes, `\today` included: the start of the UTC day the job was
    /// submitted, so that the same request gives the same PDF all that day.
    pub source_date_epoch: i64,
    /// The main document's path among `files`.
    pub main: String,
    /// False when the request asked for a compile from nothing (`"cache": false`).
    pub use_cache: bool,
    pub files: Vec<SourceFile>,
    /// Project files the scheduler fetches before the compile.
    pub stored_files: Vec<StoredFile>,
}

/// The widths a job may ask its first page's thumbnail to have, in pixels (the sandbox's
/// protocol bounds them alike).
pub const THUMBNAIL_WIDTHS: std::ops::RangeInclusive<u32> = 16..=1200;

#[cfg(test)]
mod tests {
    use super::*;

    /// The text form strum derives is the one serde writes to JSON, for every variant.
    #[test]
    fn text_and_json_names_agree() {
        fn agree<T>(variants: &[T])
        where
            T: Copy
                + PartialEq
                + std::fmt::Debug
                + Serialize
                + std::str::FromStr
                + Into<&'static str>,
        {
            for &variant in variants {
                let text: &'static str = variant.into();
                assert_eq!(
                    serde_json::to_string(&variant).unwrap(),
                    format!("\"{text}\"")
                );
                assert!(text.parse::<T>().is_ok_and(|parsed| parsed == variant));
            }
        }
        use strum::VariantArray;
        agree(JobStatus::VARIANTS);
        agree(Engine::VARIANTS);
        agree(ErrorCode::VARIANTS);
        assert_eq!(ErrorCode::OutputLimit.as_str(), "output_limit");
        assert_eq!(Engine::Lualatex.as_str(), "lualatex");
    }
}
