//! What a request carries beside its path: the body of `POST /compile` ([`body`], documented by [`body_schema`]), the headers
//! it may send ([`headers`]) and the query of the listing route ([`list_query`]).

mod body;
mod body_schema;
mod budget;
mod headers;
mod list_query;

pub use body::{parse, project_id, Limits};
pub use body_schema::CompileBody;
pub use budget::{exceeds as exceeds_member_budget, MAX_MEMBERS};
pub use headers::{idempotency_key, prefer_wait};
pub use list_query::{encode_cursor, parse_list_query};
