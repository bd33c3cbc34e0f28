//! `/play`: texfleet's reference editor, a page of plain HTML and a little JavaScript (no
//! build step) that uses the API as any editor would: compile, the pages from page previews,
//! diagnostics that jump to their line, SyncTeX both ways, the word count. It holds no
//! secret: the user enters a token, which the page keeps for its tab only.
//!
//! Its headers are strict: a Content-Security-Policy that allows only this origin's own
//! script, style, images (and the `blob:` URLs the page makes of them) and requests, no inline
//! script, and no framing (`frame-ancestors 'none'`); the API sends no CORS headers.

use axum::http::{header, HeaderName, HeaderValue};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const PAGE: &str = include_str!("play/index.html");
const SCRIPT: &str = include_str!("play/play.js");
const STYLE: &str = include_str!("play/play.css");

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The editor's three routes.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/play",
            get(|| async { answer("text/html; charset=utf-8", PAGE) }),
        )
        .route(
            "/play/play.js",
            get(|| async { answer("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/play/play.css",
            get(|| async { answer("text/css; charset=utf-8", STYLE) }),
        )
}

fn answer(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    let headers: [(HeaderName, HeaderValue); 5] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(POLICY),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body)
}
