//! CORS, only for the origins an operator names (`cors_allowed_origins`): by default the API
//! sends no CORS headers, so a page of another origin can neither read its answers nor send
//! it a request with a token. Its own editor (`/play`) is of its origin and needs none.

use axum::http::{header, HeaderName, HeaderValue, Method};
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The layer for the comma-separated `origins`, or None when there are none.
pub fn layer(origins: &str) -> anyhow::Result<Option<CorsLayer>> {
    let origins: Vec<HeaderValue> = origins
        .split(',')
        .map(str::trim)
        .filter(|origin| !origin.is_empty())
        .map(|origin| match origin.parse::<axum::http::Uri>() {
            Ok(uri)
                if uri.scheme().is_some()
                    && uri.host().is_some()
                    && uri.path() == "/"
                    && !origin.ends_with('/') =>
            {
                Ok(HeaderValue::from_str(origin)?)
            }
            _ => anyhow::bail!(
                "cors_allowed_origins: {origin:?} is not an origin (scheme://host[:port])"
            ),
        })
        .collect::<anyhow::Result<_>>()?;
    if origins.is_empty() {
        return Ok(None);
    }
    let named = |name: &'static str| HeaderName::from_static(name);
    Ok(Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::IF_NONE_MATCH,
                named("prefer"),
                named("idempotency-key"),
            ])
            .expose_headers([
                header::ETAG,
                header::LOCATION,
                header::RETRY_AFTER,
                named("page-size"),
                named("preference-applied"),
                named("x-request-id"),
            ])
            .max_age(Duration::from_secs(600)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_origins_are_allowed() {
        assert!(layer("").unwrap().is_none());
        assert!(layer(" , ").unwrap().is_none());
        assert!(layer("https://editor.example, http://localhost:8080")
            .unwrap()
            .is_some());
        for bad in [
            "editor.example",
            "https://editor.example/",
            "https://e.example/path",
            "*",
        ] {
            assert!(layer(bad).is_err(), "{bad}");
        }
    }
}
