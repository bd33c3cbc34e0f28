//! Which connection gives way when the API is full (see [`super`]'s documentation).

use super::open::Open;
use super::{Activity, EVICTION_GRACE};
use std::sync::atomic::Ordering;
use tokio::time::Instant;

/// Of the connections of clients tied for holding the most that all serve requests, how many
/// are compared: the choice then costs no more than this however many tie.
const SERVING_COMPARED: usize = 64;

#[cfg(test)]
thread_local! {
    /// How many connections' activities choices on this thread compared.
    pub(super) static COMPARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Open {
    /// The connection to close to make room: of the clients tied for holding the most (from
    /// the widest networks down to the address, see [`super::standing`]), an idle connection,
    /// the longest quiet; else a newcomer, the newest; else one serving a request, the longest
    /// quiet. A tie is never broken by address: a client alone in its /24 beside many others
    /// alone in theirs would then be closed for its number. Trusted proxies' connections go
    /// only when nothing else is open.
    pub(super) fn to_close(&self) -> Option<u64> {
        let now = Instant::now();
        let Some(offer) = self.standings.heaviest_offer() else {
            return self.first_to_give_way(self.proxies.iter().copied(), now);
        };
        let quiet_since = |id: u64| self.by_id.get(&id).map(|c| c.accepted);
        let never_served = offer
            .oldest_unserved
            .and_then(|id| Some((quiet_since(id)?, id)))
            .filter(|(accepted, _)| now.saturating_duration_since(*accepted) >= EVICTION_GRACE);
        let idle = [never_served, offer.longest_idle]
            .into_iter()
            .flatten()
            .min();
        if let Some((_, id)) = idle {
            return Some(id);
        }
        if let Some(newest) = offer.newest_unserved {
            return Some(newest);
        }
        let serving = self.standings.heaviest_serving(SERVING_COMPARED);
        self.first_to_give_way(serving.into_iter(), now)
    }

    fn first_to_give_way(&self, ids: impl Iterator<Item = u64>, now: Instant) -> Option<u64> {
        #[cfg(test)]
        let ids = ids.inspect(|_| COMPARED.set(COMPARED.get() + 1));
        ids.filter_map(|id| Some((order(&self.by_id.get(&id)?.activity, now), id)))
            .min()
            .map(|(_, id)| id)
    }
}

/// Which of a trusted proxy's connections, or of connections serving requests, goes first: one
/// serving a request last, so that no work is cut while a silent connection could go instead;
/// before it, one just accepted that has not had time to send its request (a newcomer); first,
/// an idle one. Idle and serving ones, the longest quiet first; newcomers, the newest first: a
/// party that opens and drops connections faster than a client sends its request's head then
/// closes its own, not the client's.
pub(super) fn order(activity: &Activity, now: Instant) -> (bool, bool, i128) {
    let serving = activity.in_flight.load(Ordering::Acquire) > 0;
    let quiet = activity.quiet_at(now);
    let newcomer = activity.is_newcomer_at(quiet);
    let quiet = quiet.as_nanos() as i128;
    (serving, newcomer, if newcomer { quiet } else { -quiet })
}
