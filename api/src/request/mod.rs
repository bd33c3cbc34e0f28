//! What a request carries beside its path: the body of `POST /compile` ([`body`]), the headers
//! it may send ([`headers`]) and the query of the listing route ([`list_query`]).

mod body;
mod budget;
mod headers;
mod list_query;

pub use body::{parse, project_id, CompileBody, Limits};
pub use budget::{exceeds as exceeds_member_budget, MAX_MEMBERS};
pub use headers::{idempotency_key, prefer_wait};
pub use list_query::{encode_cursor, parse_list_query};
