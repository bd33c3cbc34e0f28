//! Which connection gives way when the API is full (see [`super`]'s documentation).

use super::open::{network, Open, NETWORKS};
use super::Activity;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

impl Open {
    /// The connection to close to make room: from the widest network (IPv4 /16, IPv6 /32)
    /// holding the most down through each narrower one holding the most to the address holding
    /// the most, the first of its connections to give way ([`order`]). When every widest
    /// network holds one, the first of all to give way. Trusted proxies' connections go only
    /// when nothing else is open.
    pub(super) fn to_close(&self) -> Option<u64> {
        let [widest, narrower @ ..] = &self.per_network;
        let Some((&heaviest, &count)) = widest.iter().max_by_key(|&(net, count)| (*count, *net))
        else {
            return self.first_to_give_way(self.proxies.iter());
        };
        if count == 1 {
            return self.first_to_give_way(self.by_address.values().flatten());
        }
        let mut within = heaviest;
        for (held, wider) in narrower.iter().zip(NETWORKS) {
            within = heaviest_within(
                held.iter().map(|(net, count)| (*net, *count)),
                wider,
                within,
            )?;
        }
        let addresses = self
            .by_address
            .iter()
            .map(|(address, ids)| (*address, ids.len()));
        let address = heaviest_within(addresses, NETWORKS[NETWORKS.len() - 1], within)?;
        self.first_to_give_way(self.by_address[&address].iter())
    }

    fn first_to_give_way<'a>(&self, ids: impl Iterator<Item = &'a u64>) -> Option<u64> {
        ids.filter_map(|id| Some((order(&self.by_id.get(id)?.1), *id)))
            .min()
            .map(|(_, id)| id)
    }
}

/// Of `held` (networks or addresses with their counts), the one holding the most among those
/// inside `within`, a network of the `wider` lengths.
fn heaviest_within(
    held: impl Iterator<Item = (IpAddr, usize)>,
    wider: (u8, u8),
    within: IpAddr,
) -> Option<IpAddr> {
    held.filter(|(net, _)| network(*net, wider) == within)
        .max_by_key(|&(net, count)| (count, net))
        .map(|(net, _)| net)
}

/// Which of a client's connections goes first: one serving a request last, so that no work
/// is cut while a silent connection could go instead; before it, one just accepted that has not
/// had time to send its request; first, an idle one. Within each, the oldest progress.
fn order(activity: &Activity) -> (bool, bool, Instant) {
    let serving = activity.in_flight.load(Ordering::Acquire) > 0;
    let progress = *activity.last_progress.lock().expect("not poisoned");
    (serving, activity.is_newcomer(), progress)
}
