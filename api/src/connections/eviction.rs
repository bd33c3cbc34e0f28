//! Which connection gives way when the API is full (see [`super`]'s documentation).

use super::open::{network, Open, NETWORKS};
use super::Activity;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

impl Open {
    /// The connection to close to make room: within the wide network (IPv4 /16, IPv6 /48)
    /// holding the most, the narrower one (/24, /56) holding the most, within it the address
    /// (/32, /64) holding the most, the first of its connections to give way ([`order`]). When
    /// every wide network holds one, the first of all to give way.
    pub(super) fn to_close(&self) -> Option<u64> {
        let [wide, narrow] = &self.per_network;
        let (&heaviest, &count) = wide.iter().max_by_key(|&(net, count)| (*count, *net))?;
        if count == 1 {
            return self.first_to_give_way(self.by_id.keys());
        }
        let (&narrower, _) = narrow
            .iter()
            .filter(|&(net, _)| network(*net, NETWORKS[0]) == heaviest)
            .max_by_key(|&(net, count)| (*count, *net))?;
        let (_, ids) = self
            .by_address
            .iter()
            .filter(|&(address, _)| network(*address, NETWORKS[1]) == narrower)
            .max_by_key(|&(address, ids)| (ids.len(), *address))?;
        self.first_to_give_way(ids.iter())
    }

    fn first_to_give_way<'a>(&self, ids: impl Iterator<Item = &'a u64>) -> Option<u64> {
        ids.filter_map(|id| Some((order(&self.by_id.get(id)?.1), *id)))
            .min()
            .map(|(_, id)| id)
    }
}

/// Which of a client's connections goes first: newcomers last (they have had no time to send
/// a request), then idle ones before those serving, then the oldest progress.
fn order(activity: &Activity) -> (bool, bool, Instant) {
    let serving = activity.in_flight.load(Ordering::Acquire) > 0;
    let progress = *activity.last_progress.lock().expect("not poisoned");
    (activity.is_newcomer(), serving, progress)
}
