//! `multipart/form-data` submissions: a `metadata` part holding the JSON body without file
//! contents, and one part per file whose `filename` is its path in the project. Files travel
//! as raw bytes, so the body size limit counts what was sent, with no base64 overhead. The
//! parts are read from the body already held in memory (read under its size and time limits),
//! with multer, the parser axum's own `Multipart` extractor uses.

use crate::problem::{FieldError, Problem};
use axum::body::Bytes;
use axum::http::{header, HeaderMap};
use serde_json::Value;
use texfleet_core::model::SourceFile;
use texfleet_core::validate::MAX_FILES;

/// The name of the part that holds the submission's fields.
pub const METADATA_PART: &str = "metadata";
/// The largest `metadata` part: a few fields, and files named by hash, never contents.
const MAX_METADATA_BYTES: usize = 256 * 1024;

/// The boundary of a `multipart/form-data` body, or None for any other content type.
pub fn boundary(headers: &HeaderMap) -> Option<String> {
    let content_type = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let mime = content_type.split(';').next()?.trim();
    if !mime.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    multer::parse_boundary(content_type).ok()
}

/// The `metadata` part, parsed as JSON, and the file parts in the order they came.
pub async fn read(body: Bytes, boundary: String) -> Result<(Value, Vec<SourceFile>), Problem> {
    let stream = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut parts = multer::Multipart::new(stream, boundary);
    let mut metadata = None;
    let mut files = Vec::new();
    let mut index = 0;
    while let Some(part) = parts.next_field().await.map_err(malformed)? {
        index += 1;
        let name = part.name().map(str::to_string);
        let file_name = part.file_name().map(str::to_string);
        match (name.as_deref(), file_name) {
            (Some(METADATA_PART), None) => {
                if metadata.is_some() {
                    return Err(field_problem(METADATA_PART, "appears twice"));
                }
                let bytes = part.bytes().await.map_err(malformed)?;
                if bytes.len() > MAX_METADATA_BYTES {
                    return Err(field_problem(
                        METADATA_PART,
                        format!("must be at most {MAX_METADATA_BYTES} bytes; files go in parts of their own"),
                    ));
                }
                metadata = Some(serde_json::from_slice::<Value>(&bytes).map_err(|e| {
                    Problem::invalid_json(format!("the metadata part is not valid JSON: {e}"))
                })?);
            }
            (_, Some(path)) => {
                if files.len() == MAX_FILES {
                    return Err(field_problem(
                        "files",
                        format!("at most {MAX_FILES} file parts"),
                    ));
                }
                let content = part.bytes().await.map_err(malformed)?.to_vec();
                files.push(SourceFile { path, content });
            }
            (name, None) => {
                return Err(field_problem(
                    format!("parts[{}]", index - 1),
                    format!(
                        "{} is neither the {METADATA_PART} part nor a file (a file part needs a filename, its path in the project)",
                        name.map_or("a part without a name".to_string(), |n| format!("the part {n:?}"))
                    ),
                ))
            }
        }
    }
    let metadata = metadata.ok_or_else(|| {
        field_problem(
            METADATA_PART,
            "is required: a part holding project_id and the other fields as JSON",
        )
    })?;
    Ok((metadata, files))
}

fn field_problem(field: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem::validation(vec![FieldError::new(field, message)])
}

fn malformed(error: multer::Error) -> Problem {
    Problem::invalid_multipart(format!("the multipart body is malformed: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(parts: &[(&str, Option<&str>, &str)]) -> Bytes {
        let mut text = String::new();
        for (name, file_name, content) in parts {
            text.push_str("--B\r\nContent-Disposition: form-data; name=\"");
            text.push_str(name);
            text.push('"');
            if let Some(file_name) = file_name {
                text.push_str(&format!("; filename=\"{file_name}\""));
            }
            text.push_str("\r\n\r\n");
            text.push_str(content);
            text.push_str("\r\n");
        }
        text.push_str("--B--\r\n");
        Bytes::from(text)
    }

    #[tokio::test]
    async fn reads_the_metadata_and_the_files_in_order() {
        let (metadata, files) = read(
            body(&[
                ("file", Some("paper/main.tex"), "\\relax"),
                ("metadata", None, r#"{"main": "paper/main.tex"}"#),
                ("file", Some("img/a b.png"), "PNG"),
            ]),
            "B".into(),
        )
        .await
        .unwrap();
        assert_eq!(metadata["main"], "paper/main.tex");
        let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["paper/main.tex", "img/a b.png"]);
        assert_eq!(files[1].content, b"PNG");
    }

    #[tokio::test]
    async fn refuses_what_is_not_a_submission() {
        for (parts, code) in [
            (vec![("file", Some("a.tex"), "x")], "validation_failed"),
            (
                vec![("metadata", None, "{}"), ("metadata", None, "{}")],
                "validation_failed",
            ),
            (
                vec![("metadata", None, "{"), ("x", None, "y")],
                "invalid_json",
            ),
            (
                vec![("metadata", None, "{}"), ("note", None, "y")],
                "validation_failed",
            ),
        ] {
            let problem = read(body(&parts), "B".into()).await.err().unwrap();
            assert_eq!(problem.code(), code, "{parts:?}");
        }
        let problem = read(Bytes::from_static(b"--B\r\ngarbage"), "B".into())
            .await
            .err()
            .unwrap();
        assert_eq!(problem.code(), "invalid_multipart");
    }
}
