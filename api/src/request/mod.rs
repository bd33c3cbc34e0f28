//! What a request carries beside its path: the body of `POST /compile` as JSON ([`body`],
//! documented by [`body_schema`]) or multipart ([`multipart`]), its files from either
//! ([`files`]), the headers it may send ([`headers`]) and the query of the listing route
//! ([`list_query`]).

mod body;
mod body_schema;
mod budget;
mod files;
mod headers;
mod list_query;
mod multipart;

pub use body::{parse, parse_multipart, project_id, Limits};
pub use body_schema::{CompileBody, MultipartBody};
pub use budget::{exceeds as exceeds_member_budget, MAX_MEMBERS};
pub use headers::{idempotency_key, prefer_wait};
pub use list_query::{encode_cursor, parse_list_query};
pub use multipart::{boundary as multipart_boundary, read as read_multipart};

use crate::problem::FieldError;
use serde_json::{Map, Value};

/// Reports each field of `object` that is not one of `known`, named with `prefix`.
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
