//! The files of a submission, from either transport: the `files[]` array of a JSON body or the
//! file parts of a multipart body. Both become the same list, each file named by the field a
//! client would look for (`files[2].path`, the index counting file parts in order for
//! multipart), and go through the same checks of how the files sit beside the main document.

use crate::problem::FieldError;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::Value;
use texfleet_core::model::{SourceFile, MAIN_FILE};
use texfleet_core::validate::{check_path, folder_conflicts, reserved_beside_main, MAX_FILES};

pub(super) const FILE_FIELDS: &[&str] = &["path", "content_base64", "content"];

/// A job's files with the field each came from, to name it in an error.
#[derive(Default)]
pub(super) struct Listed {
    pub files: Vec<SourceFile>,
    pub fields: Vec<String>,
}

impl Listed {
    /// Adds `file` unless its path is already taken (an error on `field`).
    fn push(&mut self, file: SourceFile, field: String, errors: &mut Vec<FieldError>) {
        if self.files.iter().any(|f| f.path == file.path) {
            errors.push(FieldError::new(field, "appears twice"));
        } else {
            self.files.push(file);
            self.fields.push(field);
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
        fields: vec!["input_latex".to_string()],
    }
}

/// Adds the `files` member of a JSON body, moving each content out of it rather than copying:
/// a body's files are most of its size.
pub(super) fn add_json(listed: &mut Listed, files: Option<Value>, errors: &mut Vec<FieldError>) {
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
                if let Some(file) = parse_entry(entry, &field, errors) {
                    listed.push(file, format!("{field}.path"), errors);
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
            Ok(()) => listed.push(file, field, errors),
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
/// name, and no file stands where another needs a folder.
pub(super) fn check_layout(
    listed: &Listed,
    main: &str,
    document: MainDocument,
    errors: &mut Vec<FieldError>,
) {
    match document {
        MainDocument::Inline => {
            if let Some(index) = listed
                .files
                .iter()
                .skip(1)
                .position(|f| f.path == MAIN_FILE)
            {
                errors.push(FieldError::new(
                    listed.fields[index + 1].clone(),
                    format!(
                        "{MAIN_FILE} is the main document; send it as input_latex or name it with main"
                    ),
                ));
            }
        }
        MainDocument::Named if !main.is_empty() && !listed.files.iter().any(|f| f.path == main) => {
            errors.push(FieldError::new(
                "main",
                format!("must name one of the files (no file {main:?})"),
            ));
        }
        MainDocument::Named | MainDocument::Missing => {}
    }
    for (file, field) in listed.files.iter().zip(&listed.fields) {
        if let Some(message) = reserved_beside_main(&file.path, main) {
            errors.push(FieldError::new(field.clone(), message));
        }
    }
    let paths: Vec<&str> = listed.files.iter().map(|f| f.path.as_str()).collect();
    for (index, message) in folder_conflicts(&paths) {
        errors.push(FieldError::new(listed.fields[index].clone(), message));
    }
}

/// One entry of `files[]`: `{ "path", "content" | "content_base64" }`.
fn parse_entry(entry: Value, field: &str, errors: &mut Vec<FieldError>) -> Option<SourceFile> {
    let Value::Object(mut object) = entry else {
        errors.push(FieldError::new(
            field,
            "must be an object with path and content or content_base64",
        ));
        return None;
    };
    let before = errors.len();
    super::unknown_fields(&object, FILE_FIELDS, &format!("{field}."), errors);
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
    let content = match (object.remove("content"), object.remove("content_base64")) {
        (Some(Value::String(text)), None) => Some(text.into_bytes()),
        (None, Some(Value::String(encoded))) => match BASE64.decode(encoded) {
            Ok(bytes) => Some(bytes),
            Err(_) => {
                errors.push(FieldError::new(
                    format!("{field}.content_base64"),
                    "is not valid base64",
                ));
                None
            }
        },
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                format!("{field}.content"),
                "give content or content_base64, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                format!("{field}.content"),
                "content or content_base64 is required",
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
        (Some(path), Some(content)) if errors.len() == before => Some(SourceFile { path, content }),
        _ => None,
    }
}
