//! Which connection gives way when the API is full (see [`super`]'s documentation).

use super::open::Open;
use super::{Activity, EVICTION_GRACE};
use std::sync::atomic::Ordering;
use tokio::time::Instant;

/// Of the connections of clients tied for holding the most that all serve requests, how many
/// are compared: the choice then costs no more than this however many tie.
pub(super) const SERVING_COMPARED: usize = 64;

/// How many connections counted as silent one choice looks at to see whether they were heard
/// from since: a connection is counted as arriving from its first look that finds bytes, so that
/// the looks of every choice together cost at most one per connection and this many more.
pub(super) const LOOKS: usize = 16;

#[cfg(test)]
thread_local! {
    /// How many connections' activities choices on this thread compared.
    pub(super) static COMPARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Open {
    /// The connection to close to make room, of the clients tied for holding the most (from
    /// the widest networks down to the address, see [`super::standing`]):
    /// 1. a quiet one: served and idle for [`EVICTION_GRACE`], or with no request and nothing
    ///    heard from it for that long (since its accept, or since the last byte of a request
    ///    that stopped arriving); the longest quiet. Else one with an answer of which the
    ///    client has taken nothing for that long (an HTTP/2 window left shut), the longest;
    /// 2. a newcomer, silent since an accept less than [`EVICTION_GRACE`] ago: the newest;
    /// 3. one whose request is arriving, a byte of it heard within [`EVICTION_GRACE`] (read,
    ///    or waiting unread before any was read): the one heard the fewest bytes from, of
    ///    those the one whose last byte came longest ago, so that a party opening connections
    ///    that each send a byte closes its own: not a request that arrived whole, nor a head
    ///    whose bytes keep coming once its second has come;
    /// 4. one idle after a request for less than [`EVICTION_GRACE`], the longest quiet: a
    ///    client between requests has shown it is one, which no byte does;
    /// 5. one serving a request, the longest quiet.
    ///
    /// In 2 and 3, a client that has an idle connection gives it instead of a fresh one. Whether
    /// a connection with no request was heard from since its state last said is looked at when
    /// it is about to be chosen, [`LOOKS`] at most per choice. A tie is never broken by
    /// address: a client alone in its /24 beside many others alone in theirs would then be
    /// closed for its number. Trusted proxies' connections go only when nothing else is open.
    pub(super) fn choose_to_close(&mut self) -> Option<u64> {
        let now = Instant::now();
        let mut looks = 0;
        // Looks change no serving connection: the walk to them is made once.
        let mut serving = None;
        loop {
            let Some(offer) = self.standings.heaviest_offer() else {
                return self.first_to_give_way(self.proxies.iter().copied(), now);
            };
            let mut look = |open: &mut Open, id: u64| {
                looks += 1;
                looks <= LOOKS && open.look(id, now)
            };
            let quiet = |at: &Instant| now.saturating_duration_since(*at) >= EVICTION_GRACE;
            let accepted = |id: u64| self.by_id.get(&id).map(|c| (c.accepted, id));
            let silent = offer
                .oldest_unserved
                .and_then(accepted)
                .filter(|(at, _)| quiet(at));
            let idle = offer.longest_idle.filter(|(at, _)| quiet(at));
            let stalled = offer.oldest_arriving.filter(|(at, _)| quiet(at));
            if let Some((_, id)) = [silent, idle, stalled].into_iter().flatten().min() {
                if Some(id) != idle.map(|(_, id)| id) && look(self, id) {
                    continue;
                }
                return Some(id);
            }
            let serving: &[u64] =
                serving.get_or_insert_with(|| self.standings.heaviest_serving(SERVING_COMPARED));
            if let Some(id) = self.longest_untaken_answer(serving, now) {
                return Some(id);
            }
            if let Some(newest) = offer.newest_unserved {
                if look(self, newest) {
                    continue;
                }
                return Some(self.own_idle_or(newest));
            }
            if let Some((_, _, least)) = offer.least_arrived {
                if look(self, least) {
                    continue;
                }
                return Some(self.own_idle_or(least));
            }
            if let Some((_, id)) = offer.longest_idle {
                return Some(id);
            }
            return self.first_to_give_way(serving.iter().copied(), now);
        }
    }

    /// Of [`SERVING_COMPARED`] serving connections of the tied clients, the one with an answer
    /// of which nothing was taken for [`EVICTION_GRACE`], the longest.
    fn longest_untaken_answer(&self, serving: &[u64], now: Instant) -> Option<u64> {
        serving
            .iter()
            .copied()
            .filter_map(|id| Some((self.by_id.get(&id)?.activity.oldest_answer_frame()?, id)))
            .filter(|(taken, _)| now.saturating_duration_since(*taken) >= EVICTION_GRACE)
            .min()
            .map(|(_, id)| id)
    }

    /// The idle connection of `fresh`'s client, if it has one: a client gives it before a
    /// fresh one.
    fn own_idle_or(&self, fresh: u64) -> u64 {
        let address = self.by_id.get(&fresh).map(|c| c.address);
        let idle = address.and_then(|a| self.standings.longest_idle_of(a));
        idle.unwrap_or(fresh)
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
