//! The body of `POST /compile`, checked field by field so that a client learns every problem at
//! once, each named by its field (`files[2].path`), as CONTRACT.md asks.

use crate::problem::FieldError;
use axum::http::HeaderMap;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::collections::HashSet;
use texfleet_core::db::ListPosition;
use texfleet_core::model::{Engine, JobStatus, SourceFile, MAIN_FILE};
use texfleet_core::validate::{check_path, MAX_FILES};
use time::OffsetDateTime;
use uuid::Uuid;

const FIELDS: &[&str] = &[
    "project_id",
    "input_latex",
    "latex",
    "engine",
    "files",
    "halt_on_error",
    "timeout_seconds",
];
const FILE_FIELDS: &[&str] = &["path", "content_base64", "content"];

/// A request that passed every check.
pub struct CompileRequest {
    pub project_id: Uuid,
    pub engine: Engine,
    pub halt_on_error: bool,
    pub timeout_seconds: u32,
    /// The main document first, as `main.tex`, then the extra files.
    pub files: Vec<SourceFile>,
}

pub struct Limits {
    pub default_timeout_seconds: u32,
    pub max_timeout_seconds: u32,
}

/// Checks a parsed body. `Err` lists every field that is wrong.
pub fn parse(body: &Value, limits: &Limits) -> Result<CompileRequest, Vec<FieldError>> {
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

    let main_document = match (object.get("input_latex"), object.get("latex")) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "latex",
                "give input_latex or its alias latex, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                "input_latex",
                "is required (or its alias latex)",
            ));
            None
        }
        (Some(value), None) => string_field(value, "input_latex", &mut errors),
        (None, Some(value)) => string_field(value, "latex", &mut errors),
    };

    let engine = match object.get("engine") {
        None | Some(Value::Null) => Some(Engine::default()),
        Some(value) => {
            let engine = value.as_str().and_then(Engine::parse);
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
    if let Some(main) = main_document {
        files.push(SourceFile {
            path: MAIN_FILE.to_string(),
            content: main.into_bytes(),
        });
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

    match (project_id, engine, errors.is_empty()) {
        (Some(project_id), Some(engine), true) => Ok(CompileRequest {
            project_id,
            engine,
            halt_on_error,
            timeout_seconds,
            files,
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

/// The `Idempotency-Key` header, if any: 1 to 255 visible ASCII characters.
pub fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, FieldError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > 255 || !bytes.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Err(FieldError::new(
            "Idempotency-Key",
            "must be 1 to 255 visible ASCII characters",
        ));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// Longest `Prefer: wait` honoured, in seconds (CONTRACT.md).
pub const MAX_WAIT_SECONDS: u64 = 60;

/// The `wait` preference of RFC 7240 (`Prefer: wait=10`, possibly among other preferences),
/// capped at [`MAX_WAIT_SECONDS`]. Malformed values are ignored, as the RFC asks.
pub fn prefer_wait(headers: &HeaderMap) -> Option<u64> {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|preference| {
            let (name, value) = preference.split(';').next()?.split_once('=')?;
            if !name.trim().eq_ignore_ascii_case("wait") {
                return None;
            }
            value.trim().trim_matches('"').parse::<u64>().ok()
        })
        .map(|seconds| seconds.min(MAX_WAIT_SECONDS))
}

#[cfg(test)]
mod header_tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn reads_the_wait_preference() {
        assert_eq!(prefer_wait(&headers(&[("prefer", "wait=10")])), Some(10));
        assert_eq!(
            prefer_wait(&headers(&[("prefer", "respond-async, Wait=5")])),
            Some(5)
        );
        assert_eq!(
            prefer_wait(&headers(&[("prefer", "wait=600")])),
            Some(MAX_WAIT_SECONDS)
        );
        assert_eq!(prefer_wait(&headers(&[("prefer", "wait=soon")])), None);
        assert_eq!(prefer_wait(&headers(&[])), None);
    }

    #[test]
    fn checks_idempotency_keys() {
        assert_eq!(idempotency_key(&headers(&[])), Ok(None));
        assert_eq!(
            idempotency_key(&headers(&[("idempotency-key", "abc-123")])),
            Ok(Some("abc-123".into()))
        );
        assert!(idempotency_key(&headers(&[("idempotency-key", "has space")])).is_err());
        assert!(idempotency_key(&headers(&[("idempotency-key", &"k".repeat(256))])).is_err());
    }
}

/// The body of `POST /compile`, as the OpenAPI document shows it. [`parse`] is what checks
/// a body; a unit test keeps the two in step.
#[allow(dead_code)] // read by the OpenAPI derive only
#[derive(utoipa::ToSchema)]
pub struct CompileBody {
    project_id: Uuid,
    /// The main document (compiled as `main.tex`). Give this or `latex`.
    input_latex: Option<String>,
    /// Alias of `input_latex`.
    latex: Option<String>,
    engine: Option<Engine>,
    /// Extra files beside the main document.
    files: Option<Vec<FileBody>>,
    /// Fail the job on the first LaTeX error. Default false.
    halt_on_error: Option<bool>,
    /// 1 to the operator's maximum (300 by default).
    #[schema(minimum = 1)]
    timeout_seconds: Option<u32>,
}

#[allow(dead_code)] // read by the OpenAPI derive only
#[derive(utoipa::ToSchema)]
pub struct FileBody {
    /// Relative path of components `[A-Za-z0-9._+-]`, not starting with `.` or `-`.
    path: String,
    /// UTF-8 content; give this or `content_base64`.
    content: Option<String>,
    content_base64: Option<String>,
}

/// The query of `GET /projects/{project_id}/compiles`.
pub struct ListQuery {
    pub status: Option<JobStatus>,
    pub limit: i64,
    pub after: Option<ListPosition>,
}

pub const DEFAULT_PAGE: i64 = 20;
pub const MAX_PAGE: i64 = 100;

pub fn parse_list_query(query: &HashMap<String, String>) -> Result<ListQuery, Vec<FieldError>> {
    let mut errors = Vec::new();
    for key in query
        .keys()
        .filter(|k| !["status", "limit", "cursor"].contains(&k.as_str()))
    {
        errors.push(FieldError::new(key.clone(), "unknown query parameter"));
    }
    let status = query.get("status").filter(|s| !s.is_empty()).and_then(|s| {
        let status = JobStatus::parse(s);
        if status.is_none() {
            errors.push(FieldError::new(
                "status",
                "must be one of Queued, Running, Succeeded, Failed, TimedOut, Cancelled",
            ));
        }
        status
    });
    let limit = match query.get("limit").map(|l| l.parse::<i64>()) {
        None => DEFAULT_PAGE,
        Some(Ok(limit)) if (1..=MAX_PAGE).contains(&limit) => limit,
        Some(_) => {
            errors.push(FieldError::new(
                "limit",
                format!("must be an integer from 1 to {MAX_PAGE}"),
            ));
            DEFAULT_PAGE
        }
    };
    let after = query
        .get("cursor")
        .filter(|c| !c.is_empty())
        .and_then(|cursor| {
            let position = decode_cursor(cursor);
            if position.is_none() {
                errors.push(FieldError::new(
                    "cursor",
                    "is not a cursor this API returned",
                ));
            }
            position
        });
    if errors.is_empty() {
        Ok(ListQuery {
            status,
            limit,
            after,
        })
    } else {
        Err(errors)
    }
}

/// An opaque cursor: the position of a page's last job, base64url of `<unix nanos>.<id>`.
pub fn encode_cursor((created_at, id): ListPosition) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}.{id}", created_at.unix_timestamp_nanos()))
}

fn decode_cursor(cursor: &str) -> Option<ListPosition> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    let (nanos, id) = text.split_once('.')?;
    let created_at = OffsetDateTime::from_unix_timestamp_nanos(nanos.parse().ok()?).ok()?;
    Some((created_at, Uuid::parse_str(id).ok()?))
}

#[cfg(test)]
mod contract_tests {
    use super::*;
    use utoipa::PartialSchema;

    #[test]
    fn the_documented_body_has_exactly_the_fields_parse_accepts() {
        let schema = serde_json::to_value(CompileBody::schema()).unwrap();
        let mut documented: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        documented.sort();
        let mut accepted: Vec<String> = FIELDS.iter().map(|f| f.to_string()).collect();
        accepted.sort();
        assert_eq!(documented, accepted);
        let file = serde_json::to_value(FileBody::schema()).unwrap();
        let mut documented: Vec<&str> = file["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        documented.sort();
        let mut accepted = FILE_FIELDS.to_vec();
        accepted.sort();
        assert_eq!(documented, accepted);
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let position = (
            OffsetDateTime::from_unix_timestamp_nanos(1_795_000_000_123_456_000).unwrap(),
            Uuid::new_v4(),
        );
        let query = HashMap::from([("cursor".to_string(), encode_cursor(position))]);
        assert_eq!(parse_list_query(&query).ok().unwrap().after, Some(position));
        let bad = HashMap::from([
            ("cursor".to_string(), "nonsense".to_string()),
            ("limit".to_string(), "500".to_string()),
        ]);
        let fields: Vec<String> = parse_list_query(&bad)
            .err()
            .unwrap()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields.len(), 2, "{fields:?}");
    }
}
