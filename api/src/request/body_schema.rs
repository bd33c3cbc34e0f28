//! The body of `POST /compile` as the OpenAPI document shows it; [`super::body::parse`] is what
//! checks a body, and a unit test keeps the two in step.

use texfleet_core::model::Engine;
use uuid::Uuid;

/// The body of `POST /compile`.
#[allow(dead_code)] // read by the OpenAPI derive only
#[derive(utoipa::ToSchema)]
pub struct CompileBody {
    project_id: Uuid,
    /// The main document (compiled as `main.tex`). Give this, `latex` or `main`.
    input_latex: Option<String>,
    /// Alias of `input_latex`.
    latex: Option<String>,
    /// The path of the main document among `files` (`paper/main.tex`), instead of
    /// `input_latex`: the compile runs in its folder, with the top level searched as well.
    main: Option<String>,
    engine: Option<Engine>,
    /// Extra files beside the main document. `output.*` beside the main document is reserved.
    files: Option<Vec<FileBody>>,
    /// Fail the job on the first LaTeX error. Default false.
    halt_on_error: Option<bool>,
    /// 1 to the operator's maximum (300 by default).
    #[schema(minimum = 1)]
    timeout_seconds: Option<u32>,
    /// Reuse the result of an identical earlier job of the project, if one is retained.
    /// Default true.
    cache: Option<bool>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::body::{FIELDS, FILE_FIELDS};
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
}
