//! The query of the listing route: a status filter, a page size and an opaque cursor.

use crate::problem::FieldError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use std::collections::HashMap;
use texfleet_core::db::ListPosition;
use texfleet_core::model::JobStatus;
use time::OffsetDateTime;
use uuid::Uuid;

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
        let status = s.parse::<JobStatus>().ok();
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

/// A cursor this API could have made: its time within the years a job can have been created
/// (a crafted one outside Postgres's range would otherwise fail the query).
fn decode_cursor(cursor: &str) -> Option<ListPosition> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    let (nanos, id) = text.split_once('.')?;
    let created_at = OffsetDateTime::from_unix_timestamp_nanos(nanos.parse().ok()?).ok()?;
    if !(2000..=9999).contains(&created_at.year()) {
        return None;
    }
    Some((created_at, Uuid::parse_str(id).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let position = (
            OffsetDateTime::from_unix_timestamp_nanos(1_795_000_000_123_456_000).unwrap(),
            Uuid::new_v4(),
        );
        let query = HashMap::from([("cursor".to_string(), encode_cursor(position))]);
        assert_eq!(parse_list_query(&query).ok().unwrap().after, Some(position));
        let ancient = OffsetDateTime::from_unix_timestamp(-230_000_000_000).unwrap();
        let crafted = encode_cursor((ancient, Uuid::new_v4()));
        let query = HashMap::from([("cursor".to_string(), crafted)]);
        assert!(parse_list_query(&query).is_err(), "a cursor before 4713 BC");
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
