//! The body of `POST /compile` as the OpenAPI document shows it, in a shape code generators
//! turn into types: one of three bodies by how the main document is given, each a file one of
//! two by how its content is encoded; and the multipart form. [`super::body::parse`] is what
//! checks a body, and a unit test keeps the two in step. Read by the OpenAPI derive only.
#![allow(dead_code)]

use texfleet_core::model::{CheckMode, Engine};
use utoipa::ToSchema;
use uuid::Uuid;

/// The body of `POST /compile` as JSON: the main document inline (`input_latex`, or its alias
/// `latex`), or named among the files (`main`).
#[derive(ToSchema)]
#[serde(untagged)]
#[schema(example = json!({
    "project_id": "6f1c2a4e-0000-4000-8000-000000000001",
    "input_latex": "\\documentclass{article}\\begin{document}Hello \\input{part}\\end{document}",
    "engine": "pdflatex",
    "files": [{ "path": "part.tex", "content": "world" }]
}))]
pub enum CompileBody {
    Inline(InlineDocument),
    Alias(AliasDocument),
    Named(NamedDocument),
}

/// The main document sent as `input_latex` (compiled as `main.tex`).
#[derive(ToSchema)]
pub struct InlineDocument {
    /// The main document's LaTeX source.
    input_latex: String,
    #[serde(flatten)]
    options: CompileOptions,
    /// Extra files beside the main document; `main.tex` and `output.*` are taken.
    files: Option<Vec<FileBody>>,
}

/// The main document sent as `latex`, the alias of `input_latex` the original interface uses.
#[derive(ToSchema)]
pub struct AliasDocument {
    /// The main document's LaTeX source.
    latex: String,
    #[serde(flatten)]
    options: CompileOptions,
    /// Extra files beside the main document; `main.tex` and `output.*` are taken.
    files: Option<Vec<FileBody>>,
}

/// The main document named among the files: the compile runs in its folder, with the top
/// level searched as well.
#[derive(ToSchema)]
pub struct NamedDocument {
    /// The path of the main document among `files` (`paper/main.tex`).
    #[schema(example = "paper/main.tex")]
    main: String,
    #[serde(flatten)]
    options: CompileOptions,
    /// The project's files, the main document among them; `output.*` beside it is taken.
    files: Vec<FileBody>,
}

/// What every submission may say beside its files.
#[derive(ToSchema)]
pub struct CompileOptions {
    project_id: Uuid,
    engine: Option<Engine>,
    /// The TeX Live year to compile with, one of those `GET /info` lists (`"2024"`). Default:
    /// the server's default year.
    texlive: Option<String>,
    /// Fail the job on the first LaTeX error. Default false.
    halt_on_error: Option<bool>,
    /// A fast preview: every graphic drawn as a box with its file name (graphicx's draft
    /// mode). Neither loads nor keeps a preamble format. Default false.
    draft: Option<bool>,
    /// Count the sources' words with TeX Live's texcount after the compile: the job's
    /// `word_count`. Default false.
    wordcount: Option<bool>,
    /// Check the sources with chktex before the compile: its findings join the job's
    /// `diagnostics` with `"source": "chktex"`. `"error"`: any finding fails the job
    /// (`compile_error`) without compiling it. Default: no check.
    check: Option<CheckMode>,
    /// Render the first page as a PNG this many pixels wide after the compile (its height
    /// follows the page, at most four times the width): `links.thumbnail` of the job, served
    /// by `GET /compile/{id}/thumbnail`. Default: none.
    #[schema(minimum = 16, maximum = 1200)]
    thumbnail_width: Option<u32>,
    /// 1 to the operator's maximum (300 by default; `GET /info` tells).
    #[schema(minimum = 1)]
    timeout_seconds: Option<u32>,
    /// Reuse the result of an identical earlier job of the project, if one is retained, and
    /// start from the preamble format and auxiliary files of the document's last compile.
    /// `false`: a compile from nothing.
    /// Default true.
    cache: Option<bool>,
}

/// A file of the project, its content as UTF-8 text or base64, or named by the SHA-256 of a
/// project file (`PUT /projects/{id}/files/{sha256}`).
#[derive(ToSchema)]
#[serde(untagged)]
pub enum FileBody {
    Text(TextFile),
    Base64(Base64File),
    Named(NamedFile),
}

/// A text file (UTF-8).
#[derive(ToSchema)]
#[schema(example = json!({ "path": "chapters/intro.tex", "content": "Once upon a time." }))]
pub struct TextFile {
    /// Relative path of components `[A-Za-z0-9._+-]` and inner spaces, not starting with `.`
    /// or `-`.
    path: String,
    content: String,
}

/// Any file, its bytes in base64.
#[derive(ToSchema)]
#[schema(example = json!({ "path": "img/logo.png", "content_base64": "iVBORw0KGgo=" }))]
pub struct Base64File {
    /// Relative path of components `[A-Za-z0-9._+-]` and inner spaces, not starting with `.`
    /// or `-`.
    path: String,
    content_base64: String,
}

/// A project file uploaded before, named by its hash: the project must hold it, or the
/// submission is a `422` listing every missing hash in `missing_sha256`.
#[derive(ToSchema)]
#[schema(example = json!({ "path": "figures/plot.pdf", "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" }))]
pub struct NamedFile {
    /// Relative path of components `[A-Za-z0-9._+-]` and inner spaces, not starting with `.`
    /// or `-`.
    path: String,
    /// 64 hex digits.
    sha256: String,
}

/// The body of `POST /compile` as `multipart/form-data`: files travel as they are, with no
/// base64 overhead.
#[derive(ToSchema)]
pub struct MultipartBody {
    metadata: CompileMetadata,
    /// One part per file (any part name), its `filename` the file's path in the project.
    #[schema(value_type = Vec<String>, format = Binary)]
    file: Vec<Vec<u8>>,
}

/// The `metadata` part: the JSON body without file contents.
#[derive(ToSchema)]
#[schema(example = json!({
    "project_id": "6f1c2a4e-0000-4000-8000-000000000001", "main": "paper/main.tex", "engine": "lualatex"
}))]
pub struct CompileMetadata {
    /// The path of the main document among the file parts. Default `main.tex`.
    main: Option<String>,
    /// Project files named by hash, beside the file parts.
    files: Option<Vec<NamedFile>>,
    #[serde(flatten)]
    options: CompileOptions,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::body::{FIELDS, METADATA_FIELDS};
    use crate::request::files::FILE_FIELDS;
    use std::collections::BTreeSet;
    use utoipa::openapi::{RefOr, Schema};
    use utoipa::PartialSchema;

    /// The properties a schema documents, through `allOf` (flatten) and `oneOf` (the
    /// variants), resolving references to the schemas of this file.
    fn properties(schema: RefOr<Schema>) -> BTreeSet<String> {
        let value = serde_json::to_value(schema).unwrap();
        let mut found = BTreeSet::new();
        collect(&value, &mut found);
        found
    }

    fn collect(value: &serde_json::Value, found: &mut BTreeSet<String>) {
        if let Some(reference) = value["$ref"].as_str() {
            let schema = match reference.rsplit('/').next().unwrap() {
                "InlineDocument" => InlineDocument::schema(),
                "AliasDocument" => AliasDocument::schema(),
                "NamedDocument" => NamedDocument::schema(),
                "CompileOptions" => CompileOptions::schema(),
                "TextFile" => TextFile::schema(),
                "Base64File" => Base64File::schema(),
                "NamedFile" => NamedFile::schema(),
                // Schemas of the model (Engine, FileBody) add no fields of the body.
                _ => return,
            };
            return collect(&serde_json::to_value(schema).unwrap(), found);
        }
        if let Some(object) = value["properties"].as_object() {
            found.extend(object.keys().cloned());
        }
        for combinator in ["allOf", "oneOf"] {
            for part in value[combinator].as_array().into_iter().flatten() {
                collect(part, found);
            }
        }
    }

    fn set(fields: &[&str]) -> BTreeSet<String> {
        fields.iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn the_documented_bodies_have_exactly_the_fields_parse_accepts() {
        assert_eq!(properties(CompileBody::schema()), set(FIELDS));
        let mut file_fields = properties(TextFile::schema());
        file_fields.extend(properties(Base64File::schema()));
        file_fields.extend(properties(NamedFile::schema()));
        assert_eq!(file_fields, set(FILE_FIELDS));
        assert_eq!(properties(CompileMetadata::schema()), set(METADATA_FIELDS));
    }
}
