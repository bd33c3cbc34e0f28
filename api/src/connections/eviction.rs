//! Which connection gives way when the API is full (see [`super`]'s documentation).

use super::open::Open;
use super::Activity;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

impl Open {
    /// The connection to close to make room: from the widest networks (IPv4 /16, IPv6 /32)
    /// holding the most down through the narrower ones holding the most within them to the
    /// addresses holding the most, the first of their connections to give way ([`order`]). A
    /// tie is never broken by address: a client alone in its /24 beside many others alone in
    /// theirs would then be closed for its number. Trusted proxies' connections go only when
    /// nothing else is open.
    pub(super) fn to_close(&self) -> Option<u64> {
        let widest = &self.per_network[0];
        if widest.is_empty() {
            return self.first_to_give_way(self.proxies.iter());
        }
        let mut within = heaviest(widest.iter().map(|(net, count)| (*net, *count)));
        for (level, held) in self.held_within.iter().enumerate() {
            let count = |held: &IpAddr| match self.per_network.get(level + 1) {
                Some(per_network) => per_network.get(held).copied().unwrap_or(0),
                None => self.by_address.get(held).map_or(0, |ids| ids.len()),
            };
            within = heaviest(
                within
                    .iter()
                    .filter_map(|net| held.get(net))
                    .flatten()
                    .map(|held| (*held, count(held))),
            );
        }
        self.first_to_give_way(
            within
                .iter()
                .filter_map(|address| self.by_address.get(address))
                .flatten(),
        )
    }

    fn first_to_give_way<'a>(&self, ids: impl Iterator<Item = &'a u64>) -> Option<u64> {
        let now = Instant::now();
        ids.filter_map(|id| Some((order(&self.by_id.get(id)?.1, now), *id)))
            .min()
            .map(|(_, id)| id)
    }
}

/// Of `held` (networks or addresses with their counts, each once), those holding the most.
fn heaviest(held: impl Iterator<Item = (IpAddr, usize)>) -> Vec<IpAddr> {
    let mut most = 0;
    let mut heaviest = Vec::new();
    for (net, count) in held {
        if count > most {
            most = count;
            heaviest.clear();
        }
        if count == most {
            heaviest.push(net);
        }
    }
    heaviest
}

/// Which of a client's connections goes first: one serving a request last, so that no work
/// is cut while a silent connection could go instead; before it, one just accepted that has not
/// had time to send its request (a newcomer); first, an idle one. Idle and serving ones, the
/// longest quiet first; newcomers, the newest first: a party that opens and drops connections
/// faster than a client sends its request's head then closes its own, not the client's.
fn order(activity: &Activity, now: Instant) -> (bool, bool, i128) {
    let serving = activity.in_flight.load(Ordering::Acquire) > 0;
    let quiet = activity.quiet_at(now);
    let newcomer = activity.is_newcomer_at(quiet);
    let quiet = quiet.as_nanos() as i128;
    (serving, newcomer, if newcomer { quiet } else { -quiet })
}
