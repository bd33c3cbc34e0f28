//! The request headers `POST /compile` and `GET /compile/{id}` read: `Idempotency-Key` and
//! `Prefer: wait` (RFC 7240).

use crate::problem::FieldError;
use axum::http::HeaderMap;

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

/// Longest `Prefer: wait` honoured, in seconds (docs/API.md).
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
mod tests {
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
