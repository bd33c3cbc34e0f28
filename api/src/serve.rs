//! Serving HTTP connections with bounds, so that slow or silent clients cannot hold the API:
//! at most `max_connections` open at once (the next wait in the kernel's backlog), request
//! headers within `header_timeout_seconds`, request bodies within `body_timeout_seconds`
//! ([`read_body`]). On shutdown the listener closes, waiting requests are answered at once and
//! in-flight ones finish before the connections close.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// How long in-flight requests may take to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(30);
/// The most of an oversized body that is read (and dropped) before the `413`, so that a
/// client that writes its whole body before it reads gets the answer, not a broken pipe.
const MAX_DRAINED_BYTES: usize = 256 * 1024 * 1024;

pub struct Bounds {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    bounds: Bounds,
    shutdown: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(bounds.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout);
    builder.http2().timer(TokioTimer::new());
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors, say: pause rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            router.clone().oneshot(request.map(Body::new))
        });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain period; closing them");
    }
}

/// Why a request body could not be had.
#[derive(Debug)]
pub enum BodyError {
    /// Larger than the limit (read to its end, up to a bound, so the client hears why).
    TooLarge,
    /// Not received within the body timeout.
    TimedOut,
    /// The connection broke while it was sent.
    Broken,
}

/// The whole body, if it is at most `limit` bytes and arrives within `timeout`.
pub async fn read_body(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, BodyError> {
    let read = async move {
        let mut body = body;
        let mut collected = Vec::new();
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| BodyError::Broken)?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            seen += data.len();
            if seen <= limit {
                collected.extend_from_slice(&data);
            } else if seen > MAX_DRAINED_BYTES {
                return Err(BodyError::TooLarge);
            }
        }
        if seen > limit {
            return Err(BodyError::TooLarge);
        }
        Ok(Bytes::from(collected))
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(BodyError::TimedOut))
}
