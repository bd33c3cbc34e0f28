//! The body of `POST /compile`, checked field by field so that a client learns every problem at
//! once, each named by its field (`files[2].path`), as the contract asks.

use crate::problem::FieldError;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{Map, Value};
use std::collections::HashSet;
use texfleet_core::model::{Engine, NewJob, SourceFile, MAIN_FILE};
use texfleet_core::validate::{check_path, folder_conflicts, reserved_beside_main, MAX_FILES};
use uuid::Uuid;

pub(super) const FIELDS: &[&str] = &[
    "project_id",
    "input_latex",
    "latex",
    "main",
    "engine",
    "files",
    "halt_on_error",
    "timeout_seconds",
    "cache",
];
pub(super) const FILE_FIELDS: &[&str] = &["path", "content_base64", "content"];

pub struct Limits {
    pub default_timeout_seconds: u32,
    pub max_timeout_seconds: u32,
}

/// Checks a parsed body and makes the job it asks for: the main document first, as
/// `main.tex`, then the extra files; or only the files, one of which `main` names as the main
/// document. `Err` lists every field that is wrong.
pub fn parse(body: &Value, limits: &Limits) -> Result<NewJob, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(object) = body.as_object() else {
        return Err(vec![FieldError::new("", "the body must be a JSON object")]);
    };
    unknown_fields(object, FIELDS, "", &mut errors);

    let project_id = match object.get("project_id") {
        None => {
            errors.push(FieldError::new("project_id", "is required"));
            None
        }
        Some(value) => {
            let parsed = value.as_str().and_then(|s| Uuid::parse_str(s).ok());
            if parsed.is_none() {
                errors.push(FieldError::new("project_id", "must be a UUID string"));
            }
            parsed
        }
    };

    let given: Vec<&str> = ["input_latex", "latex", "main"]
        .into_iter()
        .filter(|field| object.contains_key(*field))
        .collect();
    let (main_document, main) = match given[..] {
        [] => {
            errors.push(FieldError::new(
                "input_latex",
                "is required (or its alias latex, or main naming one of the files)",
            ));
            (None, MAIN_FILE.to_string())
        }
        ["main"] => {
            let main = string_field(&object["main"], "main", &mut errors);
            match main.as_deref().map(check_path) {
                Some(Err(message)) => errors.push(FieldError::new("main", message)),
                // The compile driver names the main document on the engine's command line.
                Some(Ok(())) if main.as_deref().is_some_and(|m| m.contains('+')) => {
                    errors.push(FieldError::new(
                        "main",
                        "may not contain '+' (the engine is started with it)",
                    ))
                }
                _ => {}
            }
            (None, main.unwrap_or_default())
        }
        [field] => (
            string_field(&object[field], field, &mut errors),
            MAIN_FILE.to_string(),
        ),
        [_, second, ..] => {
            errors.push(FieldError::new(
                second,
                "give one of input_latex, its alias latex, or main",
            ));
            (None, MAIN_FILE.to_string())
        }
    };

    let engine = match object.get("engine") {
        None | Some(Value::Null) => Some(Engine::default()),
        Some(value) => {
            let engine = value.as_str().and_then(|s| s.parse::<Engine>().ok());
            if engine.is_none() {
                errors.push(FieldError::new(
                    "engine",
                    "must be one of pdflatex, xelatex, lualatex",
                ));
            }
            engine
        }
    };

    let halt_on_error = match object.get("halt_on_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            errors.push(FieldError::new("halt_on_error", "must be a boolean"));
            false
        }
    };

    let use_cache = match object.get("cache") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            errors.push(FieldError::new("cache", "must be a boolean"));
            true
        }
    };

    let timeout_seconds = match object.get("timeout_seconds") {
        None | Some(Value::Null) => limits.default_timeout_seconds,
        Some(value) => match value.as_u64() {
            Some(seconds) if (1..=u64::from(limits.max_timeout_seconds)).contains(&seconds) => {
                seconds as u32
            }
            _ => {
                errors.push(FieldError::new(
                    "timeout_seconds",
                    format!(
                        "must be an integer from 1 to {}",
                        limits.max_timeout_seconds
                    ),
                ));
                limits.default_timeout_seconds
            }
        },
    };

    let mut files = Vec::new();
    // The field each file came from, to name it in a conflict.
    let mut fields = Vec::new();
    let inline = main_document.is_some();
    if let Some(main) = main_document {
        files.push(SourceFile {
            path: MAIN_FILE.to_string(),
            content: main.into_bytes(),
        });
        fields.push("input_latex".to_string());
    }
    match object.get("files") {
        None | Some(Value::Null) => {}
        Some(Value::Array(entries)) if entries.len() > MAX_FILES => {
            errors.push(FieldError::new(
                "files",
                format!("at most {MAX_FILES} files"),
            ));
        }
        Some(Value::Array(entries)) => {
            let mut seen = HashSet::new();
            for (index, entry) in entries.iter().enumerate() {
                if let Some(file) = parse_file(entry, &format!("files[{index}]"), &mut errors) {
                    if seen.insert(file.path.clone()) {
                        files.push(file);
                        fields.push(format!("files[{index}].path"));
                    } else {
                        errors.push(FieldError::new(
                            format!("files[{index}].path"),
                            "appears twice",
                        ));
                    }
                }
            }
        }
        Some(_) => errors.push(FieldError::new("files", "must be an array")),
    }

    if inline {
        if let Some(index) = files.iter().skip(1).position(|f| f.path == MAIN_FILE) {
            errors.push(FieldError::new(
                fields[index + 1].clone(),
                format!(
                    "{MAIN_FILE} is the main document; send it as input_latex or name it with main"
                ),
            ));
        }
    } else if given == ["main"] && !main.is_empty() && !files.iter().any(|f| f.path == main) {
        errors.push(FieldError::new("main", "must name one of the files"));
    }
    for (file, field) in files.iter().zip(&fields) {
        if let Some(message) = reserved_beside_main(&file.path, &main) {
            errors.push(FieldError::new(field.clone(), message));
        }
    }

    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    for (index, message) in folder_conflicts(&paths) {
        errors.push(FieldError::new(fields[index].clone(), message));
    }

    match (project_id, engine, errors.is_empty()) {
        (Some(project_id), Some(engine), true) => Ok(NewJob {
            project_id,
            engine,
            halt_on_error,
            timeout_seconds,
            main,
            files,
            use_cache,
        }),
        _ => Err(errors),
    }
}

/// The `project_id` of a body, if it has a well-formed one; checked before anything else so
/// that a token used against another project is refused as `403` whatever else is wrong.
pub fn project_id(body: &Value) -> Option<Uuid> {
    body.get("project_id")?
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
}

fn unknown_fields(
    object: &Map<String, Value>,
    known: &[&str],
    prefix: &str,
    errors: &mut Vec<FieldError>,
) {
    for key in object.keys().filter(|key| !known.contains(&key.as_str())) {
        errors.push(FieldError::new(format!("{prefix}{key}"), "unknown field"));
    }
}

fn string_field(value: &Value, field: &str, errors: &mut Vec<FieldError>) -> Option<String> {
    match value.as_str() {
        Some(text) if !text.trim().is_empty() => Some(text.to_string()),
        Some(_) => {
            errors.push(FieldError::new(field, "must not be empty"));
            None
        }
        None => {
            errors.push(FieldError::new(field, "must be a string"));
            None
        }
    }
}

fn parse_file(entry: &Value, field: &str, errors: &mut Vec<FieldError>) -> Option<SourceFile> {
    let Some(object) = entry.as_object() else {
        errors.push(FieldError::new(
            field,
            "must be an object with path and content or content_base64",
        ));
        return None;
    };
    let before = errors.len();
    unknown_fields(object, FILE_FIELDS, &format!("{field}."), errors);
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
    let content = match (object.get("content"), object.get("content_base64")) {
        (Some(Value::String(text)), None) => Some(text.clone().into_bytes()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMITS: Limits = Limits {
        default_timeout_seconds: 60,
        max_timeout_seconds: 300,
    };
    const PROJECT: &str = "0b9f3c2a-1d4e-4f5a-9b6c-7d8e9f0a1b2c";

    fn fields(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn accepts_both_source_fields_and_files() {
        for key in ["input_latex", "latex"] {
            let body = json!({ "project_id": PROJECT, key: "\\relax", "files": [
                { "path": "img/a.png", "content_base64": "iVBORw==" },
                { "path": "ch1.tex", "content": "Hi" } ] });
            let request = parse(&body, &LIMITS).ok().unwrap();
            assert_eq!(request.engine, Engine::Pdflatex);
            assert_eq!(request.timeout_seconds, 60);
            let paths: Vec<_> = request.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(paths, ["main.tex", "img/a.png", "ch1.tex"]);
            assert_eq!(request.files[1].content, [0x89, b'P', b'N', b'G']);
        }
    }

    #[test]
    fn names_every_bad_field() {
        let body = json!({ "project_id": "nope", "latex": "x", "input_latex": "y", "engine": "tex",
            "timeout_seconds": 0, "halt_on_error": "yes", "colour": 1,
            "files": [ { "path": "../x", "content": "a" }, { "path": "a.tex" }, 3 ] });
        let mut names = fields(parse(&body, &LIMITS).err().unwrap());
        names.sort();
        assert_eq!(
            names,
            [
                "colour",
                "engine",
                "files[0].path",
                "files[1].content",
                "files[2]",
                "halt_on_error",
                "latex",
                "project_id",
                "timeout_seconds"
            ]
        );
    }

    #[test]
    fn a_file_where_a_folder_must_be_is_refused_by_name() {
        let body = json!({ "project_id": PROJECT, "input_latex": "x", "files": [
            { "path": "a", "content": "1" }, { "path": "a/b.tex", "content": "2" },
            { "path": "main.tex/x.tex", "content": "3" } ] });
        assert_eq!(
            fields(parse(&body, &LIMITS).err().unwrap()),
            ["files[1].path", "files[2].path"]
        );
    }

    #[test]
    fn main_names_one_of_the_files_and_reserves_outputs_beside_it() {
        let body = json!({ "project_id": PROJECT, "main": "paper/main.tex", "files": [
            { "path": "paper/main.tex", "content": "x" }, { "path": "main.tex", "content": "y" },
            { "path": "output.pdf", "content": "z" } ] });
        let request = parse(&body, &LIMITS).ok().unwrap();
        assert_eq!(request.main, "paper/main.tex");
        let paths: Vec<_> = request.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["paper/main.tex", "main.tex", "output.pdf"]);

        for (body, wanted) in [
            (
                json!({ "project_id": PROJECT, "main": "a.tex", "files": [
                { "path": "b.tex", "content": "x" } ] }),
                vec!["main"],
            ),
            (
                json!({ "project_id": PROJECT, "main": "../a.tex" }),
                vec!["main", "main"],
            ),
            (
                json!({ "project_id": PROJECT, "main": "c++.tex", "files": [
                    { "path": "c++.tex", "content": "x" } ] }),
                vec!["main"],
            ),
            (
                json!({ "project_id": PROJECT, "main": "a.tex", "input_latex": "x", "files": [
                { "path": "a.tex", "content": "x" } ] }),
                vec!["main"],
            ),
            (
                json!({ "project_id": PROJECT, "main": "p/a.tex", "files": [
                { "path": "p/a.tex", "content": "x" }, { "path": "p/output.log", "content": "y" } ] }),
                vec!["files[1].path"],
            ),
            (
                json!({ "project_id": PROJECT, "input_latex": "x", "files": [
                { "path": "main.tex", "content": "y" }, { "path": "output.aux", "content": "z" } ] }),
                vec!["files[0].path", "files[1].path"],
            ),
        ] {
            assert_eq!(
                fields(parse(&body, &LIMITS).err().unwrap()),
                wanted,
                "{body}"
            );
        }
    }

    #[test]
    fn requires_a_document_and_refuses_duplicates() {
        let body = json!({ "project_id": PROJECT });
        assert_eq!(
            fields(parse(&body, &LIMITS).err().unwrap()),
            ["input_latex"]
        );
        let body = json!({ "project_id": PROJECT, "input_latex": "x", "files": [
            { "path": "a.tex", "content": "1" }, { "path": "a.tex", "content": "2" } ] });
        assert_eq!(
            fields(parse(&body, &LIMITS).err().unwrap()),
            ["files[1].path"]
        );
    }
}
