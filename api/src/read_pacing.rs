//! How fast the API reads what a network sends besides requests. HTTP/2 control frames (PING,
//! PRIORITY, SETTINGS, frames of unknown types) cost the API work to parse and answer, but
//! never become a request that a rate or a connection deadline counts: a flood of them over a
//! hundred connections from one address, without a token, kept the API's CPU busy and every
//! other client waiting seconds.
//!
//! So every byte read from a connection is charged to its address, its networks (an IPv4 /24
//! and the /16 around it, an IPv6 /48 and its /32) and the API as a whole ([`LEVELS`]), and
//! given back when it turns out to be a request's head or a frame of its body
//! ([`head_credit`]). A /24 may owe [`BURST`](bucket::BURST) bytes, refilled at [`RATE`](bucket::RATE) a second, its /16
//! four times as much, and all networks together sixteen times the pace and eight times the
//! burst; while one of them owes more, the connections under it are not read, so a flood
//! slows to that pace however many connections, addresses or networks carry it.
//!
//! A level that owes is not everyone's wait, though: a connection whose address owes almost
//! nothing (a client that sends requests, whose bytes are given back) may still read from the
//! level's reserve, and the clients of clean networks first ([`bucket`]). A flooding neighbour
//! then holds back its own address, not the other clients of its /24, and networks that flood
//! hold back themselves, not the networks that do not.
//!
//! A request answered `429` is charged again, a kilobyte at least, so a client pipelining
//! requests past its rate is paced too, instead of being answered as fast as it sends. A
//! connection gives back no more than it sent. Trusted proxies' connections are not paced:
//! they carry everyone's requests.
//!
//! The bucket is written here rather than taken from `governor` (the request rate's limiter),
//! which cannot give back what it has counted.

use crate::metrics;
use bucket::{Admission, Change, Standing, IN_GOOD_STANDING, LEVELS, RESERVE_READ};
use networks::{network_of, Buckets, Network};
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The longest a paced read waits before it looks at its networks' buckets again.
const LONGEST_WAIT: Duration = Duration::from_millis(250);
/// The buckets of the networks that owe something.
#[derive(Default)]
pub struct ReadPacing {
    buckets: Mutex<Buckets>,
}

impl ReadPacing {
    pub fn new() -> Arc<ReadPacing> {
        Arc::new(ReadPacing::default())
    }

    /// The meter of a connection from `peer`; a trusted proxy's is never paced.
    pub fn meter(self: &Arc<Self>, peer: IpAddr, trusted_proxy: bool) -> Meter {
        let networks = LEVELS
            .iter()
            .enumerate()
            .map(|(index, level)| (index, network_of(peer, level)))
            .collect();
        Meter {
            pacing: (!trusted_proxy).then(|| self.clone()),
            networks,
            unclaimed: Arc::default(),
            let_read_from_reserve: Arc::default(),
        }
    }

    /// Makes `change` to the buckets of each of `networks` (a read, to the reserve of those
    /// `from_reserve` names) and tells whether the connection may read again.
    fn update(&self, networks: &[Network], change: Change, from_reserve: Levels) -> Verdict {
        let mut buckets = self.buckets.lock().expect("not poisoned");
        let now = Instant::now();
        buckets.use_at(networks, now);
        let mut verdict = Verdict::default();
        let mut good = true;
        let mut shares_owed_below = 0.0;
        for (index, network) in networks.iter().enumerate() {
            let level = &LEVELS[network.0];
            let bucket = buckets.get_mut(network);
            // Standing as it was when the connection was let read. Good standing is the
            // address's own: a neighbour's flood that spent their /24 does not take it away at
            // the /16 or the API's level; it only ranks the /24's clients after a clean /24's.
            if index == 0 {
                good = bucket.owes() <= IN_GOOD_STANDING;
            }
            let standing = Standing {
                good,
                rank: shares_owed_below / index.max(1) as f64,
            };
            shares_owed_below += bucket.share_owed(level);
            let change = match change {
                Change::Read(bytes) if from_reserve.has(index) => Change::ReadFromReserve(bytes),
                change => change,
            };
            bucket.change(level, change, good);
            if let Some(pace) = &level.pace {
                match bucket.admit(pace, standing) {
                    Admission::Read => {}
                    Admission::FromReserve => verdict.from_reserve.add(index),
                    Admission::Wait(seconds) => {
                        // At least a millisecond: a debt of a few bytes' dust still waits.
                        let wait = Duration::from_secs_f64(seconds).max(Duration::from_millis(1));
                        verdict.wait = verdict.wait.max(wait);
                    }
                }
            }
        }
        buckets.prune(now);
        verdict
    }
}

/// Whether a connection may read: after `wait`, and, while it reads from the reserves of
/// `from_reserve`, a little at a time.
#[derive(Default)]
struct Verdict {
    wait: Duration,
    from_reserve: Levels,
}

/// Some of [`LEVELS`], by index.
#[derive(Default, Clone, Copy)]
struct Levels(u8);

impl Levels {
    fn add(&mut self, index: usize) {
        self.0 |= 1 << index;
    }

    fn has(self, index: usize) -> bool {
        self.0 & (1 << index) != 0
    }

    fn any(self) -> bool {
        self.0 != 0
    }
}

/// One connection's account with its networks' buckets.
#[derive(Clone)]
pub struct Meter {
    pacing: Option<Arc<ReadPacing>>,
    networks: Vec<Network>,
    /// Bytes this connection sent and was not yet given back: a request's head, as the server
    /// reckons it, can be longer than what it took on the wire (bare line ends, HPACK), and
    /// must not give back bytes that another connection's flood owes.
    unclaimed: Arc<AtomicUsize>,
    /// The levels whose reserves the connection was last let read from: its next read is
    /// charged to them, and to the other levels' buckets.
    let_read_from_reserve: Arc<AtomicU8>,
}

impl Meter {
    /// Counts `bytes` read from the connection.
    fn read(&self, bytes: usize) {
        self.unclaimed.fetch_add(bytes, Ordering::Relaxed);
        let from_reserve = Levels(self.let_read_from_reserve.swap(0, Ordering::Relaxed));
        if let Some(pacing) = &self.pacing {
            pacing.update(&self.networks, Change::Read(bytes as f64), from_reserve);
        }
    }

    fn change(&self, change: Change) {
        if let Some(pacing) = &self.pacing {
            pacing.update(&self.networks, change, Levels::default());
        }
    }

    /// Charges a request answered `429` again, at least [`LEAST_REQUEST_COST`]: a client
    /// pipelining requests past its rate is paced as they cost, however short they are.
    pub fn charge_refused(&self, head: usize) {
        self.change(Change::Cost(head.max(LEAST_REQUEST_COST) as f64));
    }

    /// Up to `bytes` of what the connection sent and was not given back yet.
    fn claim(&self, bytes: usize) -> usize {
        let mut claimed = 0;
        let _ = self
            .unclaimed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                claimed = left.min(bytes);
                Some(left - claimed)
            });
        claimed
    }

    /// Gives back `bytes` that were a request's head.
    pub fn give_back(&self, bytes: usize) {
        let bytes = self.claim(bytes);
        self.change(Change::GiveBack(bytes as f64));
    }

    /// Gives back a body frame's `data` bytes, less what a frame smaller than
    /// [`LEAST_FRAME_COST`] owes.
    pub fn give_back_body(&self, data: usize) {
        let owed = LEAST_FRAME_COST.saturating_sub(data);
        let data = self.claim(data);
        self.change(Change::GiveBack(data as f64));
        if owed > 0 {
            self.change(Change::Cost(owed as f64));
        }
    }

    /// Whether the connection may read now, `None` when it is never paced.
    fn admit(&self) -> Option<Verdict> {
        let verdict =
            self.pacing
                .as_ref()?
                .update(&self.networks, Change::Nothing, Levels::default());
        self.let_read_from_reserve
            .store(verdict.from_reserve.0, Ordering::Relaxed);
        Some(verdict)
    }
}

/// What a request gives back of what its connection was charged for its head: the head's
/// bytes as HTTP/1 sends them. An HTTP/2 head is compressed (HPACK), and a header kept in the
/// connection's table is sent again in a byte or two whatever its length: HTTP/2 gets back at
/// most [`HTTP2_HEAD_CREDIT`], or each small request would pay for a flood of frames.
pub fn head_credit<B>(request: &axum::http::Request<B>) -> usize {
    let target = request
        .uri()
        .path_and_query()
        .map_or(1, |target| target.as_str().len());
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    let head = request.method().as_str().len() + target + "  HTTP/1.1\r\n\r\n".len() + headers;
    match request.version() {
        axum::http::Version::HTTP_2 => head.min(HTTP2_HEAD_CREDIT),
        _ => head,
    }
}

/// What a body's frame costs at least: a frame of one byte costs the server about what a frame
/// of a kilobyte does (decoding its chunk, waking the reader), so a body sent a byte a chunk
/// is paced as its frames cost, not as its few bytes. Every frame of a body but its last is
/// larger than this as clients send them.
const LEAST_FRAME_COST: usize = 1024;

/// What a request answered `429` costs at least: answering it costs the server about the
/// same whatever its length, and a request line can be 16 bytes.
const LEAST_REQUEST_COST: usize = 1024;

/// The most an HTTP/2 request's head gives back: more than a repeated request's head takes
/// on the wire, less than a first request's.
const HTTP2_HEAD_CREDIT: usize = 128;

/// A connection's stream whose reads are charged to its [`Meter`], and wait while the
/// meter's network owes more than its burst.
pub struct Paced<S> {
    inner: S,
    meter: Meter,
    waiting: Option<Pin<Box<Sleep>>>,
    /// Called on every read that brought bytes.
    on_bytes: Box<dyn Fn(usize) + Send>,
}

impl<S> Paced<S> {
    pub fn new(inner: S, meter: Meter, on_bytes: impl Fn(usize) + Send + 'static) -> Paced<S> {
        Paced {
            inner,
            meter,
            waiting: None,
            on_bytes: Box::new(on_bytes),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Paced<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let from_reserve = loop {
            if let Some(waiting) = self.waiting.as_mut() {
                ready!(waiting.as_mut().poll(cx));
                self.waiting = None;
            }
            let verdict = self.meter.admit().unwrap_or_default();
            if verdict.wait.is_zero() {
                break verdict.from_reserve.any();
            }
            metrics::READS_PACED.inc();
            let wait = verdict.wait.min(LONGEST_WAIT);
            self.waiting = Some(Box::pin(tokio::time::sleep(wait)));
        };
        let read = if from_reserve && buf.remaining() > RESERVE_READ {
            let mut small = [0; RESERVE_READ];
            let mut limited = ReadBuf::new(&mut small);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut limited))?;
            buf.put_slice(limited.filled());
            limited.filled().len()
        } else {
            let before = buf.filled().len();
            ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
            buf.filled().len() - before
        };
        self.meter.read(read);
        if read > 0 {
            (self.on_bytes)(read);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Paced<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

mod bucket;
#[cfg(test)]
mod network_tests;
mod networks;
#[cfg(test)]
mod tests;
