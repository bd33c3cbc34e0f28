//! The open connections: each one's address, activity and [`State`], and their
//! [`Standings`], which a connection's arrival, departure and requests keep current.

use super::standing::{Heard, Standings, State};
use super::Activity;
use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use tokio::time::Instant;

pub(super) struct Connection {
    pub address: IpAddr,
    pub activity: Arc<Activity>,
    pub accepted: Instant,
    /// `None` for a trusted proxy's, which [`Standings`] leaves out.
    pub state: Option<State>,
    /// A second descriptor of its socket until its first request, to see whether bytes of one
    /// wait there unread: its task may not have run since the accept.
    socket: Option<OwnedFd>,
}

impl Connection {
    /// The bytes of a request that arrived: read, or, until any is read, waiting unread now
    /// (its task has not read since the accept), up to [`PEEKED`] of them.
    fn heard(&self, now: Instant) -> Option<Heard> {
        let waiting = |socket: &OwnedFd| {
            let mut bytes = [MaybeUninit::uninit(); PEEKED];
            let peeked = socket2::SockRef::from(socket)
                .recv_with_flags(&mut bytes, libc::MSG_PEEK | libc::MSG_DONTWAIT)
                .ok()
                .filter(|&peeked| peeked > 0)?;
            Some(Heard {
                bytes: peeked as u64,
                last: now,
            })
        };
        let read = self.activity.heard();
        read.or_else(|| self.socket.as_ref().and_then(waiting))
    }
}

/// How many bytes waiting unread a look counts at most: more than a request's head usually
/// holds, so that one that arrived whole outranks a part of one.
const PEEKED: usize = 4096;

#[derive(Default)]
pub(super) struct Open {
    next_id: u64,
    pub(super) by_id: HashMap<u64, Connection>,
    pub(super) standings: Standings,
    /// The connections of trusted proxies, which carry every client's requests: they are not
    /// one client holding many.
    pub(super) proxies: HashSet<u64>,
}

impl Open {
    /// Counts a new connection, whose activity is made knowing its id.
    pub(super) fn insert(
        &mut self,
        address: IpAddr,
        proxy: bool,
        socket: Option<OwnedFd>,
        activity: impl FnOnce(u64) -> Arc<Activity>,
    ) -> (u64, Arc<Activity>) {
        let id = self.next_id;
        self.next_id += 1;
        let activity = activity(id);
        let state = (!proxy).then_some(State::Unserved);
        self.by_id.insert(
            id,
            Connection {
                address,
                activity: activity.clone(),
                accepted: Instant::now(),
                state,
                // A trusted proxy's is never looked at.
                socket: socket.filter(|_| !proxy),
            },
        );
        match state {
            None => {
                self.proxies.insert(id);
            }
            Some(state) => self.standings.change(address, id, None, Some(state)),
        }
        (id, activity)
    }

    pub(super) fn remove(&mut self, id: u64) -> Option<Arc<Activity>> {
        let connection = self.by_id.remove(&id)?;
        match connection.state {
            None => {
                self.proxies.remove(&id);
            }
            old => self.standings.change(connection.address, id, old, None),
        }
        Some(connection.activity)
    }

    /// Connection `id` has requests in flight (`serving`), or none.
    pub(super) fn set_serving(&mut self, id: u64, serving: bool) {
        let Some(connection) = self.by_id.get_mut(&id) else {
            return;
        };
        let Some(old) = connection.state else {
            return;
        };
        let new = match (old, serving) {
            (State::Serving, true) | (State::Idle(_), false) => return,
            (_, true) => State::Serving,
            // A request that began and ended before it took the lock ends here too.
            (_, false) => State::Idle(Instant::now()),
        };
        connection.state = Some(new);
        connection.socket = None;
        self.standings
            .change(connection.address, id, Some(old), Some(new));
    }

    /// Looks whether connection `id`, which has had no request, was heard from since its
    /// state last said: if so its state follows (arriving, since its last byte), and the
    /// answer is true.
    pub(super) fn look(&mut self, id: u64, now: Instant) -> bool {
        let Some(connection) = self.by_id.get_mut(&id) else {
            return false;
        };
        let old = connection.state;
        let known = match old {
            Some(State::Unserved) => None,
            Some(State::Arriving(heard)) => Some((heard.last, heard.bytes)),
            _ => return false,
        };
        let Some(heard) = connection
            .heard(now)
            .filter(|heard| Some((heard.last, heard.bytes)) > known)
        else {
            return false;
        };
        let new = Some(State::Arriving(heard));
        connection.state = new;
        self.standings.change(connection.address, id, old, new);
        true
    }

    /// Whether connection `id` holds a second descriptor of its socket.
    #[cfg(test)]
    pub(super) fn holds_socket(&self, id: u64) -> bool {
        self.by_id.get(&id).is_some_and(|c| c.socket.is_some())
    }

    pub(super) fn held_by(&self, address: IpAddr) -> usize {
        self.standings.held_by(address)
    }
}
