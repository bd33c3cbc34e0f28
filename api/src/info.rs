//! `GET /info`: what a client may send and what the sandbox can compile, so that a client learns
//! the limits before it meets them. Each TeX Live year is described by the very list its
//! sandbox image is built from ([`crate::texlive_years`]), and the image the schedulers run
//! for it now is named by the ids they report in their heartbeats.
//! `GET /info/packages/{name}`: whether a year's image has a LaTeX package or class, from the
//! index its build wrote (registered by the schedulers), never by running TeX.

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, FieldError, Problem};
use crate::texlive_years::Year;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use texfleet_core::db;
use texfleet_core::validate::{MAX_DEPTH, MAX_FILES, MAX_JOB_FILES_BYTES, MAX_PATH_BYTES};
use utoipa::{IntoParams, ToSchema};

#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "year": "2024",
    "texlive": "TeX Live 2024, as packaged by Debian 13 (trixie)",
    "sandbox_image": "sha256:4f0c9d2e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
    "engines": ["pdflatex", "xelatex", "lualatex"],
    "collections": ["texlive-latex-recommended", "texlive-pictures"],
    "language_packs": ["texlive-lang-german", "texlive-lang-french"],
    "other_packages": ["ghostscript", "fonts-font-awesome"],
    "texlive_years": [{
        "year": "2022",
        "texlive": "TeX Live 2022, as packaged by Debian 12 (bookworm)",
        "sandbox_image": "sha256:9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b",
        "engines": ["pdflatex", "xelatex", "lualatex"],
        "collections": ["texlive-latex-recommended", "texlive-publishers"],
        "language_packs": ["texlive-lang-german"],
        "other_packages": ["ghostscript"]
    }, { "year": "2024", "texlive": "TeX Live 2024, as packaged by Debian 13 (trixie)" }],
    "limits": { "max_body_bytes": 52428800, "max_files": 500, "max_path_bytes": 255,
                "max_path_depth": 8, "default_timeout_seconds": 60, "max_timeout_seconds": 300,
                "max_queued_per_project": 1000, "max_queued_bytes_per_project": 1073741824,
                "max_pdf_bytes": 52428800,
                "max_log_bytes": 4194304, "memory_mb": 1024, "work_directory_mb": 256 },
    "project_files": { "count": 12, "bytes": 48213077, "quota_bytes": 2_147_483_648_i64,
                       "max_file_bytes": 134217728, "max_job_files_bytes": 167772160 }
}))]
pub struct Info {
    /// The default year: what a request that names no `texlive` compiles with.
    #[serde(flatten)]
    default: Year,
    /// Every TeX Live year a request may name (`texlive`), oldest first, the default among them.
    texlive_years: Vec<Year>,
    limits: Limits,
    /// The project's files (uploaded once, named by hash) and their limits.
    project_files: ProjectFiles,
}

/// What the token's project holds of project files, and what it may.
#[derive(Serialize, ToSchema)]
pub struct ProjectFiles {
    /// Files stored.
    count: i64,
    /// Their bytes, with the uploads under way: what counts against the quota.
    bytes: i64,
    /// The most bytes the project may hold (`413` beyond).
    quota_bytes: i64,
    /// The largest file (`413` beyond).
    max_file_bytes: i64,
    /// The most bytes a job's files may take, sent and named together (`422` beyond).
    max_job_files_bytes: i64,
}

/// The limits in force: a request beyond them is refused, a compile beyond them fails.
#[derive(Serialize, ToSchema)]
pub struct Limits {
    /// Largest request body (base64 content in JSON counts a third more than the file;
    /// multipart carries files as they are).
    max_body_bytes: usize,
    max_files: usize,
    max_path_bytes: usize,
    /// Folders a file path may be nested in.
    max_path_depth: usize,
    default_timeout_seconds: u32,
    max_timeout_seconds: u32,
    /// Jobs of one project that may wait in the queue before `POST /compile` answers `429`.
    max_queued_per_project: i64,
    /// Bytes of sources (paths and contents) the queued jobs of one project may hold before
    /// `POST /compile` answers `429`.
    max_queued_bytes_per_project: i64,
    max_pdf_bytes: usize,
    max_log_bytes: usize,
    /// Memory of one compile, in MiB.
    memory_mb: i64,
    /// Size of the compile's work directory, in MiB.
    work_directory_mb: i64,
}

/// What the service compiles with and the limits of a request and a compile.
#[utoipa::path(get, path = "/info", tag = "info", security(("bearer" = [])),
    responses(
        (status = 200, description = "The TeX installation and the limits", body = Info),
        AuthenticatedProblems,
    ))]
pub async fn info(
    State(state): State<AppState>,
    auth: Authenticated,
) -> Result<Json<Info>, Problem> {
    let config = &state.config;
    let mut client = state.database.client(auth.project_id).await?;
    let (count, bytes) = {
        let transaction = db::begin_project(&mut client, auth.project_id).await?;
        db::project_files_usage(&transaction).await?
    };
    let mut texlive_years = Vec::new();
    for year in config.texlive_years() {
        let image = db::sandbox_image(&client, config.lease_seconds, &year).await?;
        texlive_years.push(Year::describe(&year, image));
    }
    let default = &config.default_texlive;
    let image = db::sandbox_image(&client, config.lease_seconds, default).await?;
    Ok(Json(Info {
        default: Year::describe(default, image),
        texlive_years,
        limits: Limits {
            max_body_bytes: config.max_body_bytes,
            max_files: MAX_FILES,
            max_path_bytes: MAX_PATH_BYTES,
            max_path_depth: MAX_DEPTH,
            default_timeout_seconds: config.default_timeout_seconds,
            max_timeout_seconds: config.max_timeout_seconds,
            max_queued_per_project: config.max_queued_per_project,
            max_queued_bytes_per_project: config.max_queued_bytes_per_project,
            max_pdf_bytes: config.max_pdf_bytes,
            max_log_bytes: config.max_log_bytes,
            memory_mb: config.sandbox_memory_mb,
            work_directory_mb: config.sandbox_tmpfs_mb,
        },
        project_files: ProjectFiles {
            count,
            bytes,
            quota_bytes: config.project_files_quota_bytes,
            max_file_bytes: config.max_project_file_bytes,
            max_job_files_bytes: MAX_JOB_FILES_BYTES,
        },
    }))
}

/// A LaTeX package or class of the sandbox image.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "name": "siunitx", "installed": true, "texlive": "2024",
    "sandbox_image": "sha256:4f0c9d2e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
    "files": [{ "file": "siunitx.sty", "kind": "package",
                "version": "2024-11-20 v3.4.4 A comprehensive (SI) units package" }]
}))]
pub struct PackageInfo {
    name: String,
    /// Whether the image has `<name>.sty` or `<name>.cls`.
    installed: bool,
    /// The TeX Live year of the image.
    texlive: String,
    sandbox_image: String,
    files: Vec<PackageFile>,
}

#[derive(Serialize, ToSchema)]
pub struct PackageFile {
    file: String,
    /// `package` (`.sty`) or `class` (`.cls`).
    kind: &'static str,
    /// What the file says of itself (`\ProvidesPackage`): date, version, description; empty
    /// when it says nothing.
    version: String,
}

/// The most bytes of a package name.
const MAX_NAME_BYTES: usize = 100;

/// Which year's image a package is looked up in.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PackageQuery {
    /// A TeX Live year of `GET /info`; default: the default year.
    texlive: Option<String>,
}

/// Whether the sandbox image has a LaTeX package (`<name>.sty`) or class (`<name>.cls`), and
/// which version.
#[utoipa::path(get, path = "/info/packages/{name}", tag = "info", security(("bearer" = [])),
    params(("name" = String, Path, description = "A package or class name, as in `\\usepackage{siunitx}`"), PackageQuery),
    responses(
        (status = 200, description = "Whether it is installed, and its version", body = PackageInfo),
        (status = 422, description = "Not a package name, or not a year of this server", body = crate::problem::ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "No scheduler has registered that year's sandbox image yet", body = crate::problem::ProblemBody, content_type = "application/problem+json"),
        AuthenticatedProblems,
    ))]
pub async fn package(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(name): Path<String>,
    Query(query): Query<PackageQuery>,
) -> Result<Json<PackageInfo>, Problem> {
    let plain = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'+' | b'@'));
    let mut errors = Vec::new();
    if !plain {
        errors.push(FieldError::new(
            "name",
            format!("must be 1 to {MAX_NAME_BYTES} letters, digits, '-', '_', '.', '+' or '@'"),
        ));
    }
    let years = state.config.texlive_years();
    let year = query
        .texlive
        .unwrap_or_else(|| state.config.default_texlive.clone());
    if !years.contains(&year) {
        errors.push(FieldError::new(
            "texlive",
            format!(
                "must be one of this server's TeX Live years: {}",
                years.join(", ")
            ),
        ));
    }
    if !errors.is_empty() {
        return Err(Problem::validation(errors));
    }
    let not_registered = || {
        Problem::not_ready(format!(
            "no scheduler has registered its sandbox image of TeX Live {year} yet"
        ))
    };
    let client = state.database.client(auth.project_id).await?;
    let image = db::sandbox_image(&client, state.config.lease_seconds, &year)
        .await?
        .ok_or_else(not_registered)?;
    let (texlive, files) = db::image_files(&client, &image, &name)
        .await?
        .ok_or_else(not_registered)?;
    Ok(Json(PackageInfo {
        installed: !files.is_empty(),
        files: files
            .into_iter()
            .map(|file| PackageFile {
                kind: match file.file.ends_with(".cls") {
                    true => "class",
                    false => "package",
                },
                file: file.file,
                version: file.version,
            })
            .collect(),
        name,
        texlive,
        sandbox_image: image,
    }))
}
