//! The machine-readable `code` of every error answer, one name per cause, so that clients
//! (and generated ones, through the OpenAPI enum) can act on it without reading the text.

use serde::Serialize;
use utoipa::ToSchema;

/// Stable machine-readable code of an error (the error table of docs/API.md).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    ToSchema,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ProblemCode {
    InvalidJson,
    InvalidMultipart,
    ValidationFailed,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    LengthRequired,
    RequestTimeout,
    UnsupportedMediaType,
    IdempotencyConflict,
    NotReady,
    AlreadyFinished,
    UploadInProgress,
    RateLimited,
    QueueFull,
    Unavailable,
    Internal,
}

impl ProblemCode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn json_and_text_names_agree() {
        for code in ProblemCode::VARIANTS {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::from(code.as_str())
            );
        }
    }
}
