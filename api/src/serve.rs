//! Serving HTTP connections with bounds, so that slow or silent clients cannot hold the API:
//! which connections stay open, and for how long, is [`crate::connections`]'s to decide;
//! request bodies must arrive within `body_timeout_seconds` ([`crate::receiving`]); HTTP/2 peers
//! that stop answering pings are dropped; what a network sends besides requests is read at a
//! bounded pace ([`crate::read_pacing`]). On shutdown the listener closes, waiting requests
//! are answered at once and in-flight ones finish before the connections close.

use crate::client_address::Peer;
use crate::connections::{Connections, Slot};
use crate::metrics;
use crate::read_pacing::{self, Meter, Paced, ReadPacing};
use crate::sending::Charge;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

/// How long in-flight requests may take to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(30);
/// The send buffer of every connection (Linux doubles it): 512 KiB drains in about five
/// seconds at 100 KB/s, and allows 5 MB/s at a round trip of 100 ms.
const SEND_BUFFER_BYTES: usize = 256 * 1024;
/// How often an HTTP/2 connection is pinged, and how long its answer may take.
const HTTP2_PING: Duration = Duration::from_secs(20);
/// Requests one HTTP/2 connection may have in flight at once (hyper's default is 200): each
/// may hold a database or S3 connection while its client reads slowly, and what hyper buffers
/// of its answer ([`ANSWER_PIECE`]) with the piece on its way, uncounted by the budget: 16 KiB
/// a stream, 128 KiB a connection, 128 MiB at 1024 connections.
const HTTP2_STREAMS: u32 = 8;
/// What hyper may buffer of one HTTP/1 connection (headers read, answers not yet written;
/// its default is about 400 KiB), and of one HTTP/2 stream's answer ([`ANSWER_PIECE`]; 400 KiB
/// too). An answer's body is asked for its next piece only when that has room, so what a
/// client has not taken stays in the answer, counted by [`crate::sending`], not in hyper's
/// buffers, which hold only copies of the last pieces.
const HTTP1_BUFFER: usize = 64 * 1024;

/// Connections the kernel may hold for the API before it accepts them (Linux caps it at
/// `net.core.somaxconn`, 4096 by default): a burst from one client that fills a short backlog
/// makes every other client's connect wait for its SYN to be sent again, a second and more.
const BACKLOG: u32 = 4096;

/// A listener on `address` (`host:port`) with room for [`BACKLOG`] connections.
pub async fn bind(address: &str) -> std::io::Result<TcpListener> {
    let address = tokio::net::lookup_host(address)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{address} names no address")))?;
    let socket = match address {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(BACKLOG)
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    connections: Arc<Connections>,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(HTTP1_BUFFER);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(HTTP2_PING)
        .keep_alive_timeout(HTTP2_PING)
        .max_concurrent_streams(HTTP2_STREAMS)
        .max_send_buf_size(ANSWER_PIECE);
    let pacing = ReadPacing::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, say: pause rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // A small send buffer, so that a client reading slowly still takes a frame of its
        // answer every few seconds and is not judged stalled (the kernel's autotuned buffer
        // holds megabytes: a reader at 100 KB/s took no frame for 40 s).
        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER_BYTES);
        // A streamed answer's pieces go out as they come: with Nagle's algorithm the first
        // piece after the head waited for the client's delayed ACK, 40 ms for every download.
        let _ = stream.set_nodelay(true);
        if connections.refuses(peer.ip()) {
            metrics::CONNECTIONS_REFUSED.inc();
            continue;
        }
        let socket = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned().ok();
        let slot = connections.admit(peer.ip(), socket);
        let meter = pacing.meter(peer.ip(), connections.is_trusted_proxy(peer.ip()));
        let connection = serve_connection(&builder, stream, slot, meter, router.clone(), &graceful);
        tokio::spawn(connection);
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain period; closing them");
    }
}

/// Serves one connection until it ends or its [`Connections::deadline`] passes.
fn serve_connection(
    builder: &Builder<TokioExecutor>,
    stream: TcpStream,
    slot: Slot,
    meter: Meter,
    router: Router,
    graceful: &GracefulShutdown,
) -> impl Future<Output = ()> + Send + 'static {
    let peer = stream.peer_addr().map(|address| address.ip()).ok();
    let activity = slot.activity.clone();
    let heard = slot.activity.clone();
    let stream = Paced::new(stream, meter.clone(), move |bytes| heard.hear(bytes));
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let mut in_flight = activity.begin();
        if let Some(peer) = peer {
            request.extensions_mut().insert(Peer(peer));
        }
        let head = read_pacing::head_credit(&request);
        meter.give_back(head);
        let receiving = activity.clone();
        let body_meter = meter.clone();
        let response = router.clone().oneshot(request.map(|body| {
            Body::new(Receiving {
                body,
                activity: receiving,
                meter: body_meter,
            })
        }));
        let meter = meter.clone();
        async move {
            let mut response = response.await?;
            if response.status() == StatusCode::TOO_MANY_REQUESTS {
                meter.charge_refused(head);
            }
            in_flight.answering();
            let charge = response.extensions_mut().remove::<Charge>();
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                Body::new(Answering {
                    body,
                    in_flight,
                    rest: Bytes::new(),
                    charge,
                })
            }))
        }
    });
    let connection = graceful.watch(
        builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned(),
    );
    async move {
        tokio::select! {
            _ = connection => {}
            closed = slot.deadline() => {
                metrics::CONNECTIONS_CLOSED
                    .with_label_values(&[closed.as_str()])
                    .inc();
            }
        }
        drop(slot);
    }
}

/// A request body whose every frame counts as progress of its connection, and whose bytes
/// are given back to its connection's [`Meter`].
struct Receiving {
    body: Incoming,
    activity: Arc<crate::connections::Activity>,
    meter: Meter,
}

impl hyper::body::Body for Receiving {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &frame {
            // An empty frame costs nothing to send: it is no progress.
            if frame.data_ref().is_none_or(|data| !data.is_empty()) {
                self.activity.progress();
            }
            if let Some(data) = frame.data_ref() {
                self.meter.give_back_body(data.len());
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that keeps its request in flight until the last byte is sent, and counts
/// every frame the client takes as progress. Frames go out in pieces of at most
/// [`ANSWER_PIECE`] bytes: HTTP/2 buffers a whole frame whatever the peer's window, so a large
/// frame would be held for a peer that never reads, outside the stall deadline. An answer built
/// in memory holds its place in the [`crate::sending`] budget until its last frame is taken.
struct Answering {
    body: Body,
    in_flight: crate::connections::InFlight,
    rest: Bytes,
    charge: Option<Charge>,
}

const ANSWER_PIECE: usize = 8 * 1024;

impl hyper::body::Body for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.rest.is_empty() {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.rest = data,
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                Poll::Ready(None) => {
                    self.charge = None;
                    return Poll::Ready(None);
                }
                other => return other,
            }
        }
        // A copy: a slice would keep the whole answer alive while hyper holds the piece,
        // after the answer has given its place in the budget back.
        let piece = self.rest.len().min(ANSWER_PIECE);
        let piece = Bytes::copy_from_slice(&self.rest.split_to(piece));
        self.in_flight.progress();
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let (body, rest) = (self.body.size_hint(), self.rest.len() as u64);
        let mut hint = SizeHint::new();
        hint.set_lower(body.lower() + rest);
        if let Some(upper) = body.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_address::TrustedProxies;
    use crate::connections::Limits;
    use crate::sending::SendingBudget;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn an_answer_goes_out_in_pieces_keeps_its_length_and_its_budget_until_the_end() {
        let connections = Connections::new(Limits {
            max_connections: 1,
            max_per_address: 0,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            trusted_proxies: TrustedProxies::parse("10.0.0.0/8", "x-forwarded-for").unwrap(),
        });
        let slot = connections.admit(std::net::Ipv4Addr::LOCALHOST.into(), None);
        let budget = SendingBudget::new(1024 * 1024);
        let mut answer = Answering {
            body: Body::from(vec![7u8; 40_000]),
            in_flight: slot.activity.begin(),
            rest: Bytes::new(),
            charge: budget.charge(uuid::Uuid::new_v4(), 40, true),
        };
        assert_eq!(hyper::body::Body::size_hint(&answer).exact(), Some(40_000));
        let mut pieces = Vec::new();
        while let Some(frame) = answer.frame().await {
            assert_eq!(budget.held_kib(), 40, "held until the last frame");
            pieces.push(frame.unwrap().into_data().unwrap().len());
        }
        assert_eq!(pieces, [8_192, 8_192, 8_192, 8_192, 7_232]);
        assert!(hyper::body::Body::is_end_stream(&answer));
        assert_eq!(budget.held_kib(), 0, "given back at the end");
    }
}
