//! The API's open connections, so that sockets that say nothing, stop reading, or belong to
//! one client with many of them cannot hold the service.
//!
//! Every open connection counts against `max_connections`. What keeps one open is progress: a
//! request arriving, a frame of its body received, a frame of an answer taken by the client, a
//! request ending. A connection with no request in flight is closed `header_timeout` after its
//! accept (whatever the protocol turns out to be), or `idle_timeout` after its last answer; one
//! with an answer of which the client has taken no frame for `idle_timeout` (a TCP or HTTP/2
//! window left shut) is closed too, whatever its other requests do.
//!
//! Every connection is accepted at once: a listener that stopped accepting while the API is
//! full would leave the kernel's backlog to fill with one client's connections and drop
//! everyone else's. When a connection arrives at a full API, one is closed to make room: one
//! of the client that holds the most, however busy it keeps them, so that a client with many
//! connections gives way before one with few (as nginx reuses its keep-alive connections, and
//! per address). The client is found from the top: the IPv4 /16 or IPv6 /32 holding the most,
//! within it the IPv6 /48, the /24 or /56, then the address (an IPv6 /64), so that one party's
//! many addresses and networks count as one. Of the connections of the clients tied for that,
//! [`open::Open::choose_to_close`] closes a quiet one first (idle, nothing heard from it, or an
//! answer nothing of which was taken, for [`EVICTION_GRACE`]) and one serving a request last;
//! between them, a newcomer (accepted less than the grace ago, nothing heard from it, the newest
//! first) goes before one whose request is arriving (a byte of it heard within the grace, the
//! fewest bytes first), and those before a connection between two requests of its client, so
//! that a party churning connections, silent or sending a byte each, closes its own, not a
//! client's whose request is on its way or who is about to send its next. A tie is never
//! broken by address. Trusted proxies' connections carry everyone's requests: they are no
//! client holding many, and go only when nothing else is open. One address holds at most
//! `max_per_address` connections, except a trusted proxy.

use crate::client_address::{counted_as, TrustedProxies};
use crate::metrics;
use open::Open;
use standing::Heard;
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod eviction;
mod open;
mod standing;

/// How long a connection's last progress must lie back before it may be closed to make room.
pub const EVICTION_GRACE: Duration = Duration::from_secs(1);

pub struct Limits {
    pub max_connections: usize,
    /// 0: no cap per address.
    pub max_per_address: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub trusted_proxies: TrustedProxies,
}

/// The set of open connections.
pub struct Connections {
    limits: Limits,
    open: Mutex<Open>,
}

/// What one connection is doing, shared by its task, its requests and the registry.
pub struct Activity {
    id: u64,
    /// Told when the first request begins and the last ends, for [`standing`].
    connections: Weak<Connections>,
    in_flight: AtomicUsize,
    served: AtomicBool,
    /// Bytes read from the connection before its first request.
    heard: Mutex<Option<Heard>>,
    last_progress: Mutex<Instant>,
    /// The last frame taken of each answer being sent (the head is out, the body is not done),
    /// by request.
    answers: Mutex<HashMap<u64, Instant>>,
    next_request: AtomicU64,
    /// Notified when a request begins, starts its answer or ends, so that the deadline follows.
    changed: Notify,
    evicted: CancellationToken,
}

/// Why the API closed a connection that its client had not closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No complete request within `header_timeout` of the accept.
    HeaderTimeout,
    /// No new request within `idle_timeout` of the last answer.
    IdleTimeout,
    /// An answer the client took no frame of for `idle_timeout`.
    Stalled,
    /// Closed to make room for another client (see the module's documentation).
    Evicted,
}

impl Closed {
    pub fn as_str(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Stalled => "stalled",
            Closed::Evicted => "evicted",
        }
    }
}

/// A connection's place among the open ones; dropping it frees the place.
pub struct Slot {
    connections: Arc<Connections>,
    id: u64,
    pub activity: Arc<Activity>,
}

impl Connections {
    pub fn new(limits: Limits) -> Arc<Connections> {
        Arc::new(Connections {
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    /// Whether `peer` holds its cap of connections already.
    pub fn refuses(&self, peer: IpAddr) -> bool {
        let capped = self.limits.max_per_address > 0 && !self.limits.trusted_proxies.contains(peer);
        let open = self.open.lock().expect("not poisoned");
        capped && open.held_by(counted_as(peer)) >= self.limits.max_per_address
    }

    /// Whether `peer` is a trusted proxy, whose connections carry many clients.
    pub fn is_trusted_proxy(&self, peer: IpAddr) -> bool {
        self.limits.trusted_proxies.contains(peer)
    }

    /// A place for a connection from `peer` ([`Connections::refuses`] comes first); when the
    /// API is full, another connection is closed to make room (see the module's
    /// documentation). `socket`, a second descriptor of the connection's socket, is looked at
    /// for a request waiting unread while it has sent none.
    pub fn admit(self: &Arc<Self>, peer: IpAddr, socket: Option<OwnedFd>) -> Slot {
        let mut open = self.open.lock().expect("not poisoned");
        // Room is made before the connection is counted, so that it never closes itself.
        if open.by_id.len() >= self.limits.max_connections.max(1) {
            if let Some(closed) = open.choose_to_close().and_then(|id| open.remove(id)) {
                tracing::debug!("closing a connection to make room");
                closed.evicted.cancel();
            }
        }
        let proxy = self.is_trusted_proxy(peer);
        let (id, activity) = open.insert(counted_as(peer), proxy, socket, |id| {
            Arc::new(Activity {
                id,
                connections: Arc::downgrade(self),
                in_flight: AtomicUsize::new(0),
                served: AtomicBool::new(false),
                heard: Mutex::new(None),
                last_progress: Mutex::new(Instant::now()),
                answers: Mutex::new(HashMap::new()),
                next_request: AtomicU64::new(0),
                changed: Notify::new(),
                evicted: CancellationToken::new(),
            })
        });
        metrics::set_open_connections(open.by_id.len());
        Slot {
            connections: self.clone(),
            id,
            activity,
        }
    }

    /// Counts a request beginning or ending on `activity`'s connection. When the count leaves
    /// or reaches 0 its standing follows, under the lock, from the count as it then is: a
    /// request beginning on another thread as the last ends leaves it serving, whichever
    /// takes the lock first.
    fn count_request(&self, activity: &Activity, begins: bool) {
        let crossed = match begins {
            true => activity.in_flight.fetch_add(1, Ordering::AcqRel) == 0,
            false => activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1,
        };
        if crossed {
            let mut open = self.open.lock().expect("not poisoned");
            let serving = activity.in_flight.load(Ordering::Acquire) > 0;
            open.set_serving(activity.id, serving);
        }
    }

    /// Resolves when the connection must close: its deadline passed, or it was closed to make
    /// room. A request being handled (a wait, an upload: each bounded by its own limit) has no
    /// deadline here; an answer being sent has its own.
    async fn deadline(&self, activity: &Activity) -> Closed {
        loop {
            let changed = activity.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let limit_and_since = if activity.in_flight.load(Ordering::Acquire) == 0 {
                let served = activity.served.load(Ordering::Acquire);
                let (limit, reason) = match served {
                    true => (self.limits.idle_timeout, Closed::IdleTimeout),
                    false => (self.limits.header_timeout, Closed::HeaderTimeout),
                };
                Some((
                    limit,
                    *activity.last_progress.lock().expect("not poisoned"),
                    reason,
                ))
            } else {
                activity
                    .oldest_answer_frame()
                    .map(|since| (self.limits.idle_timeout, since, Closed::Stalled))
            };
            let wait = async {
                match limit_and_since {
                    Some((limit, since, _)) => tokio::time::sleep_until(since + limit).await,
                    None => std::future::pending().await,
                }
            };
            if let Some((limit, since, reason)) = limit_and_since {
                if since.elapsed() >= limit {
                    return reason;
                }
            }
            tokio::select! {
                () = activity.evicted.cancelled() => return Closed::Evicted,
                () = changed => {}
                () = wait => {}
            }
        }
    }
}

impl Slot {
    /// See [`Connections::deadline`].
    pub async fn deadline(&self) -> Closed {
        self.connections.deadline(&self.activity).await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.connections.open.lock().expect("not poisoned");
        open.remove(self.id);
        metrics::set_open_connections(open.by_id.len());
    }
}

impl Activity {
    /// Marks a request as being served until the returned guard is dropped (with its
    /// response's body, which may stream long after the handler returned).
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.served.store(true, Ordering::Release);
        self.progress();
        self.count_request(true);
        self.changed.notify_one();
        InFlight {
            activity: self.clone(),
            id: self.next_request.fetch_add(1, Ordering::Relaxed),
            answering: false,
        }
    }

    fn count_request(&self, begins: bool) {
        match self.connections.upgrade() {
            Some(connections) => connections.count_request(self, begins),
            None if begins => {
                self.in_flight.fetch_add(1, Ordering::AcqRel);
            }
            None => {
                self.in_flight.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Something moved on the connection: a frame of a request's body arrived, say.
    pub fn progress(&self) {
        *self.last_progress.lock().expect("not poisoned") = Instant::now();
    }

    /// Bytes were read from the connection: before its first request, a request arriving,
    /// however slowly, for as long as its bytes keep coming.
    pub fn hear(&self, bytes: usize) {
        if !self.served.load(Ordering::Acquire) {
            let mut heard = self.heard.lock().expect("not poisoned");
            let before = heard.map_or(0, |h| h.bytes);
            *heard = Some(Heard {
                bytes: before.saturating_add(bytes as u64),
                last: Instant::now(),
            });
        }
    }

    /// The bytes read before the first request.
    fn heard(&self) -> Option<Heard> {
        *self.heard.lock().expect("not poisoned")
    }

    /// Accepted less than [`EVICTION_GRACE`] ago and no request yet: it has not had time to
    /// send one.
    fn is_newcomer_at(&self, quiet: Duration) -> bool {
        !self.served.load(Ordering::Acquire)
            && self.in_flight.load(Ordering::Acquire) == 0
            && quiet < EVICTION_GRACE
    }

    /// How long it has been quiet at `now`.
    fn quiet_at(&self, now: Instant) -> Duration {
        now.saturating_duration_since(*self.last_progress.lock().expect("not poisoned"))
    }

    /// When the answer that has gone longest without a frame taken took its last one.
    fn oldest_answer_frame(&self) -> Option<Instant> {
        self.answers
            .lock()
            .expect("not poisoned")
            .values()
            .min()
            .copied()
    }
}

/// A request in flight on a connection.
pub struct InFlight {
    activity: Arc<Activity>,
    id: u64,
    answering: bool,
}

impl InFlight {
    /// The handler answered: from now on the request moves only when the client takes a frame
    /// of the answer ([`InFlight::progress`]).
    pub fn answering(&mut self) {
        if !self.answering {
            self.answering = true;
            let now = Instant::now();
            self.activity
                .answers
                .lock()
                .expect("not poisoned")
                .insert(self.id, now);
            self.activity.progress();
            self.activity.changed.notify_one();
        }
    }

    /// The client took a frame of the answer.
    pub fn progress(&self) {
        let now = Instant::now();
        if let Some(last) = self
            .activity
            .answers
            .lock()
            .expect("not poisoned")
            .get_mut(&self.id)
        {
            *last = now;
        }
        self.activity.progress();
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.activity.progress();
        if self.answering {
            self.activity
                .answers
                .lock()
                .expect("not poisoned")
                .remove(&self.id);
        }
        self.activity.count_request(false);
        self.activity.changed.notify_one();
    }
}

#[cfg(test)]
mod arrival_tests;
#[cfg(test)]
mod choice_tests;
#[cfg(test)]
mod tests;
