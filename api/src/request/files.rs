//! The files of a submission, from either transport: the `files[]` array of a JSON body or the
//! file parts of a multipart body. Both become the same list, each file named by the field a
//! client would look for (`files[2].path`, the index counting file parts in order for
//! multipart), and go through the same checks of how the files sit beside the main document.
//! A `files[]` entry may name a project file by its `sha256` instead of carrying its bytes
//! (in a multipart body, only so: its contents travel as parts).

use crate::problem::FieldError;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::Value;
use texfleet_core::model::{ContentHash, SourceFile, StoredFile, MAIN_FILE};
use texfleet_core::validate::{check_path, folder_conflicts, reserved_beside_main, MAX_FILES};

pub(super) const FILE_FIELDS: &[&str] = &["path", "content_base64", "content", "sha256"];

/// A job's files, sent and named by hash, with the field each came from, to name it in an
/// error.
#[derive(Default)]
pub(super) struct Listed {
    pub files: Vec<SourceFile>,
    pub stored: Vec<StoredFile>,
    /// Every path listed and its field, in the order listed.
    paths: Vec<(String, String)>,
}

/// One entry of `files[]`: its bytes, or the hash of a project file.
enum Entry {
    Sent(SourceFile),
    Named(StoredFile),
}

impl Listed {
    /// Adds `entry` unless its path is already taken (an error on `field`).
    fn push(&mut self, entry: Entry, field: String, errors: &mut Vec<FieldError>) {
        let path = match &entry {
            Entry::Sent(file) => &file.path,
            Entry::Named(file) => &file.path,
        };
        if self.paths.iter().any(|(listed, _)| listed == path) {
            errors.push(FieldError::new(field, "appears twice"));
            return;
        }
        self.paths.push((path.clone(), field));
        match entry {
            Entry::Sent(file) => self.files.push(file),
            Entry::Named(file) => self.stored.push(file),
        }
    }
}

/// The main document sent inline (`input_latex`), as the job's `main.tex`.
pub(super) fn inline_main(content: String) -> Listed {
    Listed {
        files: vec![SourceFile {
            path: MAIN_FILE.to_string(),
            content: content.into_bytes(),
        }],
        stored: Vec::new(),
        paths: vec![(MAIN_FILE.to_string(), "input_latex".to_string())],
    }
}

/// Adds the `files` member of a JSON body, moving each content out of it rather than copying:
/// a body's files are most of its size. In a multipart body's `metadata`, where file contents
/// travel as parts, entries may only name project files (`only_named`).
pub(super) fn add_json(
    listed: &mut Listed,
    files: Option<Value>,
    only_named: bool,
    errors: &mut Vec<FieldError>,
) {
    match files {
        None | Some(Value::Null) => {}
        Some(Value::Array(entries)) if entries.len() > MAX_FILES => {
            errors.push(FieldError::new(
                "files",
                format!("at most {MAX_FILES} files"),
            ));
        }
        Some(Value::Array(entries)) => {
            for (index, entry) in entries.into_iter().enumerate() {
                let field = format!("files[{index}]");
                if let Some(entry) = parse_entry(entry, &field, only_named, errors) {
                    listed.push(entry, format!("{field}.path"), errors);
                }
            }
        }
        Some(_) => errors.push(FieldError::new("files", "must be an array")),
    }
}

/// Adds the file parts of a multipart body, whose names the client gave as `filename`s.
pub(super) fn add_uploads(
    listed: &mut Listed,
    uploads: Vec<SourceFile>,
    errors: &mut Vec<FieldError>,
) {
    if uploads.len() > MAX_FILES {
        errors.push(FieldError::new(
            "files",
            format!("at most {MAX_FILES} file parts"),
        ));
        return;
    }
    for (index, file) in uploads.into_iter().enumerate() {
        let field = format!("files[{index}].path");
        match check_path(&file.path) {
            Ok(()) => listed.push(Entry::Sent(file), field, errors),
            Err(message) => errors.push(FieldError::new(field, message)),
        }
    }
}

/// Where the main document of a submission is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum MainDocument {
    /// Sent as `input_latex` (or `latex`): the first listed file.
    Inline,
    /// Named by `main` (or `main.tex` by default in a multipart body) among the files.
    Named,
    /// Not given at all (already an error).
    Missing,
}

/// How the files sit beside the main document `main`: `main.tex` is not uploaded beside an
/// inline main document, a named main document is among the files, nothing takes an output's
/// name, no file stands where another needs a folder, and there are not too many in all.
pub(super) fn check_layout(
    listed: &Listed,
    main: &str,
    document: MainDocument,
    errors: &mut Vec<FieldError>,
) {
    match document {
        MainDocument::Inline => {
            if let Some((_, field)) = listed.paths.iter().skip(1).find(|(p, _)| p == MAIN_FILE) {
                errors.push(FieldError::new(
                    field.clone(),
                    format!(
                        "{MAIN_FILE} is the main document; send it as input_latex or name it with main"
                    ),
                ));
            }
        }
        MainDocument::Named
            if !main.is_empty() && !listed.paths.iter().any(|(path, _)| path == main) =>
        {
            errors.push(FieldError::new(
                "main",
                format!("must name one of the files (no file {main:?})"),
            ));
        }
        MainDocument::Named | MainDocument::Missing => {}
    }
    for (path, field) in &listed.paths {
        if let Some(message) = reserved_beside_main(path, main) {
            errors.push(FieldError::new(field.clone(), message));
        }
    }
    if listed.paths.len() > MAX_FILES {
        errors.push(FieldError::new(
            "files",
            format!("at most {MAX_FILES} files, sent and named together"),
        ));
    }
    let paths: Vec<&str> = listed.paths.iter().map(|(path, _)| path.as_str()).collect();
    for (index, message) in folder_conflicts(&paths) {
        errors.push(FieldError::new(listed.paths[index].1.clone(), message));
    }
}

/// One entry of `files[]`: `{ "path", "content" | "content_base64" | "sha256" }` (only
/// `sha256` when `only_named`).
fn parse_entry(
    entry: Value,
    field: &str,
    only_named: bool,
    errors: &mut Vec<FieldError>,
) -> Option<Entry> {
    let Value::Object(mut object) = entry else {
        errors.push(FieldError::new(
            field,
            match only_named {
                true => "must be an object with path and sha256 (contents travel as file parts)",
                false => "must be an object with path and content, content_base64 or sha256",
            },
        ));
        return None;
    };
    let before = errors.len();
    let fields: &[&str] = match only_named {
        true => &["path", "sha256"],
        false => FILE_FIELDS,
    };
    super::unknown_fields(&object, fields, &format!("{field}."), errors);
    let path = match object.get("path").and_then(Value::as_str) {
        Some(path) => match check_path(path) {
            Ok(()) => Some(path.to_string()),
            Err(message) => {
                errors.push(FieldError::new(format!("{field}.path"), message));
                None
            }
        },
        None => {
            errors.push(FieldError::new(
                format!("{field}.path"),
                "is required and must be a string",
            ));
            None
        }
    };
    let content = match (
        object.remove("content"),
        object.remove("content_base64"),
        object.remove("sha256"),
    ) {
        (Some(Value::String(text)), None, None) => Some(Content::Sent(text.into_bytes())),
        (None, Some(Value::String(encoded)), None) => match BASE64.decode(encoded) {
            Ok(bytes) => Some(Content::Sent(bytes)),
            Err(_) => {
                errors.push(FieldError::new(
                    format!("{field}.content_base64"),
                    "is not valid base64",
                ));
                None
            }
        },
        (None, None, Some(Value::String(hash))) => match ContentHash::parse(&hash) {
            Some(hash) => Some(Content::Named(hash)),
            None => {
                errors.push(FieldError::new(
                    format!("{field}.sha256"),
                    "must be 64 hex digits",
                ));
                None
            }
        },
        (None, None, None) if only_named => {
            errors.push(FieldError::new(format!("{field}.sha256"), "is required"));
            None
        }
        (None, None, None) => {
            errors.push(FieldError::new(
                format!("{field}.content"),
                "content, content_base64 or sha256 is required",
            ));
            None
        }
        (content, base64, hash)
            if [&content, &base64, &hash]
                .iter()
                .filter(|v| v.is_some())
                .count()
                > 1 =>
        {
            errors.push(FieldError::new(
                format!("{field}.content"),
                "give one of content, content_base64 and sha256",
            ));
            None
        }
        (_, _, Some(_)) => {
            errors.push(FieldError::new(
                format!("{field}.sha256"),
                "must be a string",
            ));
            None
        }
        _ => {
            errors.push(FieldError::new(
                format!("{field}.content"),
                "must be a string",
            ));
            None
        }
    };
    match (path, content) {
        (Some(path), Some(Content::Sent(content))) if errors.len() == before => {
            Some(Entry::Sent(SourceFile { path, content }))
        }
        (Some(path), Some(Content::Named(sha256))) if errors.len() == before => {
            Some(Entry::Named(StoredFile { path, sha256 }))
        }
        _ => None,
    }
}

enum Content {
    Sent(Vec<u8>),
    Named(ContentHash),
}
