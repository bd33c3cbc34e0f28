//! The body of `POST /compile`, checked field by field so that a client learns every problem at
//! once, each named by its field (`files[2].path`), as the contract asks. A multipart body's
//! `metadata` part is checked here too, with its file parts ([`super::files`]).

use super::files::{self, Listed, MainDocument};
use super::unknown_fields;
use crate::problem::FieldError;
use serde_json::Value;
use texfleet_core::model::{CheckMode, Engine, NewJob, SourceFile, MAIN_FILE, THUMBNAIL_WIDTHS};
use texfleet_core::validate::check_path;
use uuid::Uuid;

pub(super) const FIELDS: &[&str] = &[
    "project_id",
    "input_latex",
    "latex",
    "main",
    "engine",
    "texlive",
    "files",
    "halt_on_error",
    "draft",
    "wordcount",
    "check",
    "thumbnail_width",
    "timeout_seconds",
    "cache",
];
/// The fields of a multipart body's `metadata` part: the JSON body without file contents
/// (its `files` may only name project files by hash).
pub(super) const METADATA_FIELDS: &[&str] = &[
    "project_id",
    "files",
    "main",
    "engine",
    "texlive",
    "halt_on_error",
    "draft",
    "wordcount",
    "check",
    "thumbnail_width",
    "timeout_seconds",
    "cache",
];

pub struct Limits {
    pub default_timeout_seconds: u32,
    pub max_timeout_seconds: u32,
    /// The TeX Live years a job may ask for, and the one it gets when it names none.
    pub texlive_years: Vec<String>,
    pub default_texlive: String,
}

/// Checks a parsed JSON body and makes the job it asks for: the main document first, as
/// `main.tex`, then the extra files; or only the files, one of which `main` names as the main
/// document. `Err` lists every field that is wrong.
pub fn parse(body: Value, limits: &Limits) -> Result<NewJob, Vec<FieldError>> {
    parse_with(body, None, limits)
}

/// Checks the `metadata` part of a multipart body and makes the job with its file parts;
/// `main` defaults to `main.tex`.
pub fn parse_multipart(
    metadata: Value,
    uploads: Vec<SourceFile>,
    limits: &Limits,
) -> Result<NewJob, Vec<FieldError>> {
    parse_with(metadata, Some(uploads), limits)
}

/// Takes the body by value: the contents are moved into the job, not copied.
fn parse_with(
    body: Value,
    uploads: Option<Vec<SourceFile>>,
    limits: &Limits,
) -> Result<NewJob, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Value::Object(mut object) = body else {
        return Err(vec![FieldError::new("", "the body must be a JSON object")]);
    };
    let known = if uploads.is_some() {
        METADATA_FIELDS
    } else {
        FIELDS
    };
    unknown_fields(&object, known, "", &mut errors);

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
        .filter(|field| object.contains_key(*field) && known.contains(field))
        .collect();
    let (inline_main, main) = match given[..] {
        [] if uploads.is_some() => (None, MAIN_FILE.to_string()),
        [] => {
            errors.push(FieldError::new(
                "input_latex",
                "is required (or its alias latex, or main naming one of the files)",
            ));
            (None, MAIN_FILE.to_string())
        }
        ["main"] => {
            let main = string_field(
                object.remove("main").unwrap_or_default(),
                "main",
                &mut errors,
            );
            if let Some(message) = main.as_deref().and_then(main_path_problem) {
                errors.push(FieldError::new("main", message));
            }
            (None, main.unwrap_or_default())
        }
        [field] => (
            string_field(object.remove(field).unwrap_or_default(), field, &mut errors),
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

    let texlive = match object.get("texlive") {
        None | Some(Value::Null) => Some(limits.default_texlive.clone()),
        Some(value) => {
            let year = value
                .as_str()
                .filter(|year| limits.texlive_years.iter().any(|known| known == year));
            if year.is_none() {
                errors.push(FieldError::new(
                    "texlive",
                    format!(
                        "must be one of this server's TeX Live years: {}",
                        limits.texlive_years.join(", ")
                    ),
                ));
            }
            year.map(str::to_string)
        }
    };

    if let (Some(engine), Some(year)) = (engine, &texlive) {
        if let Some(why) = crate::texlive_years::withheld(year, engine) {
            errors.push(FieldError::new(
                "engine",
                format!(
                    "{} is not offered with TeX Live {year}: {why}",
                    engine.as_str()
                ),
            ));
        }
    }

    let halt_on_error = flag(
        object.get("halt_on_error"),
        "halt_on_error",
        false,
        &mut errors,
    );

    let draft = flag(object.get("draft"), "draft", false, &mut errors);

    let wordcount = flag(object.get("wordcount"), "wordcount", false, &mut errors);

    let check = match object.get("check") {
        None | Some(Value::Null) => None,
        Some(value) => match value
            .as_str()
            .and_then(|text| text.parse::<CheckMode>().ok())
        {
            Some(check) => Some(check),
            None => {
                errors.push(FieldError::new("check", r#"must be "warn" or "error""#));
                None
            }
        },
    };

    let use_cache = flag(object.get("cache"), "cache", true, &mut errors);

    let timeout_seconds = integer(
        object.get("timeout_seconds"),
        "timeout_seconds",
        1..=limits.max_timeout_seconds,
        &mut errors,
    )
    .unwrap_or(limits.default_timeout_seconds);

    let thumbnail_width = integer(
        object.get("thumbnail_width"),
        "thumbnail_width",
        THUMBNAIL_WIDTHS,
        &mut errors,
    );

    let document = if inline_main.is_some() {
        MainDocument::Inline
    } else if given == ["main"] || (given.is_empty() && uploads.is_some()) {
        MainDocument::Named
    } else {
        MainDocument::Missing
    };
    let mut listed = inline_main.map(files::inline_main).unwrap_or_default();
    let only_named = uploads.is_some();
    if let Some(uploads) = uploads {
        files::add_uploads(&mut listed, uploads, &mut errors);
    }
    files::add_json(&mut listed, object.remove("files"), only_named, &mut errors);
    files::check_layout(&listed, &main, document, &mut errors);
    let Listed { files, stored, .. } = listed;

    match (project_id, engine, texlive, errors.is_empty()) {
        (Some(project_id), Some(engine), Some(texlive), true) => Ok(NewJob {
            project_id,
            engine,
            texlive,
            halt_on_error,
            draft,
            wordcount,
            check,
            thumbnail_width,
            timeout_seconds,
            main,
            files,
            stored_files: stored,
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

/// Why `main` cannot name the main document, beyond the rules of every path: the compile
/// driver names it on the engine's command line, which takes no `+` or space.
fn main_path_problem(main: &str) -> Option<String> {
    match check_path(main) {
        Err(message) => Some(message),
        Ok(()) if main.contains(['+', ' ']) => {
            Some("may not contain '+' or spaces (the engine is started with it)".into())
        }
        Ok(()) => None,
    }
}

/// A boolean field's value, `default` when it is absent or null.
fn flag(value: Option<&Value>, field: &str, default: bool, errors: &mut Vec<FieldError>) -> bool {
    match value {
        None | Some(Value::Null) => default,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            errors.push(FieldError::new(field, "must be a boolean"));
            default
        }
    }
}

/// An integer within `range`, or None when the field is absent, null or wrong (then `errors`
/// says so).
fn integer(
    value: Option<&Value>,
    field: &str,
    range: std::ops::RangeInclusive<u32>,
    errors: &mut Vec<FieldError>,
) -> Option<u32> {
    let value = value.filter(|value| !value.is_null())?;
    let within = value
        .as_u64()
        .and_then(|number| u32::try_from(number).ok())
        .filter(|number| range.contains(number));
    if within.is_none() {
        errors.push(FieldError::new(
            field,
            format!(
                "must be an integer from {} to {}",
                range.start(),
                range.end()
            ),
        ));
    }
    within
}

fn string_field(value: Value, field: &str, errors: &mut Vec<FieldError>) -> Option<String> {
    match value {
        Value::String(text) if !text.trim().is_empty() => Some(text),
        Value::String(_) => {
            errors.push(FieldError::new(field, "must not be empty"));
            None
        }
        _ => {
            errors.push(FieldError::new(field, "must be a string"));
            None
        }
    }
}

#[cfg(test)]
mod tests;
