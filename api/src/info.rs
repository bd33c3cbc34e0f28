//! `GET /info`: what a client may send and what the sandbox can compile, so that a client learns
//! the limits before it meets them. The TeX installation is described by the very list the
//! sandbox image is built from (`sandbox-image/base/texlive-2024.txt`, compiled in), and the
//! image the schedulers run now is named by the id they report in their heartbeats.
//! `GET /info/packages/{name}`: whether that image has a LaTeX package or class, from the
//! index its build wrote (registered by the schedulers), never by running TeX.

use crate::auth::Authenticated;
use crate::problem::{AuthenticatedProblems, Problem};
use crate::AppState;
use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use strum::VariantArray as _;
use texfleet_core::db;
use texfleet_core::model::Engine;
use texfleet_core::validate::{MAX_DEPTH, MAX_FILES, MAX_PATH_BYTES};
use utoipa::ToSchema;

/// The Debian packages of the sandbox image, one per line, with comments saying why.
const PACKAGES: &str = include_str!("../../sandbox-image/base/texlive-2024.txt");
/// The distribution `sandbox-image/base/build.sh` builds the image from.
const TEXLIVE: &str = "TeX Live 2024, as packaged by Debian 13 (trixie)";

#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "texlive": "TeX Live 2024, as packaged by Debian 13 (trixie)",
    "engines": ["pdflatex", "xelatex", "lualatex"],
    "collections": ["texlive-latex-recommended", "texlive-pictures"],
    "language_packs": ["texlive-lang-german", "texlive-lang-french"],
    "other_packages": ["ghostscript", "fonts-font-awesome"],
    "sandbox_image": "sha256:4f0c9d2e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
    "limits": { "max_body_bytes": 52428800, "max_files": 500, "max_path_bytes": 255,
                "max_path_depth": 8, "default_timeout_seconds": 60, "max_timeout_seconds": 300,
                "max_queued_per_project": 1000, "max_queued_bytes_per_project": 1073741824,
                "max_pdf_bytes": 52428800,
                "max_log_bytes": 4194304, "memory_mb": 1024, "work_directory_mb": 256 }
}))]
pub struct Info {
    /// The TeX Live release of the sandbox image.
    texlive: &'static str,
    engines: Vec<Engine>,
    /// The TeX Live collections installed (Debian's `texlive-*` packages).
    collections: Vec<&'static str>,
    /// The TeX Live language packs installed (Debian's `texlive-lang-*` packages).
    language_packs: Vec<&'static str>,
    /// Fonts and tools installed beside TeX Live (Debian package names).
    other_packages: Vec<&'static str>,
    /// The id of the sandbox image the live schedulers run; null when none is running.
    sandbox_image: Option<String>,
    limits: Limits,
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

/// The package names of the image's list: its lines that are neither blank nor comments.
fn packages() -> impl Iterator<Item = &'static str> {
    PACKAGES
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
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
    let client = state.database.client(auth.project_id).await?;
    let sandbox_image = db::sandbox_image(&client, config.lease_seconds).await?;
    let (language_packs, rest): (Vec<_>, Vec<_>) =
        packages().partition(|name| name.starts_with("texlive-lang-"));
    let (collections, other_packages) = rest
        .into_iter()
        .partition(|name| name.starts_with("texlive-"));
    Ok(Json(Info {
        texlive: TEXLIVE,
        engines: Engine::VARIANTS.to_vec(),
        collections,
        language_packs,
        other_packages,
        sandbox_image,
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

/// Whether the sandbox image has a LaTeX package (`<name>.sty`) or class (`<name>.cls`), and
/// which version.
#[utoipa::path(get, path = "/info/packages/{name}", tag = "info", security(("bearer" = [])),
    params(("name" = String, Path, description = "A package or class name, as in `\\usepackage{siunitx}`")),
    responses(
        (status = 200, description = "Whether it is installed, and its version", body = PackageInfo),
        (status = 422, description = "Not a package name", body = crate::problem::ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "No scheduler has registered its sandbox image yet", body = crate::problem::ProblemBody, content_type = "application/problem+json"),
        AuthenticatedProblems,
    ))]
pub async fn package(
    State(state): State<AppState>,
    auth: Authenticated,
    Path(name): Path<String>,
) -> Result<Json<PackageInfo>, Problem> {
    let plain = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'+' | b'@'));
    if !plain {
        return Err(Problem::validation(vec![crate::problem::FieldError::new(
            "name",
            format!("must be 1 to {MAX_NAME_BYTES} letters, digits, '-', '_', '.', '+' or '@'"),
        )]));
    }
    let not_registered = || Problem::not_ready("no scheduler has registered its sandbox image yet");
    let client = state.database.client(auth.project_id).await?;
    let image = db::sandbox_image(&client, state.config.lease_seconds)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_list_names_packages_only() {
        let names: Vec<_> = packages().collect();
        assert!(names.contains(&"texlive-lang-german") && names.contains(&"ghostscript"));
        assert!(names
            .iter()
            .all(|name| !name.contains(' ') && !name.is_empty()));
    }
}
