//! Which connection gives way when the API is full (see [`super`]'s documentation).

use super::{Activity, Open, EVICTION_GRACE};
use ipnet::{Ipv4Net, Ipv6Net};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;

impl Open {
    /// The connection to close to make room (see the module's documentation): within the
    /// wide network (IPv4 /16, IPv6 /48) holding the most, the narrower one (/24, /56) holding
    /// the most, then the address (/32, /64) holding the most, its oldest progress, idle
    /// first. Only when every wide network holds one does the oldest quiet one anywhere go.
    pub(super) fn to_close(&self) -> Option<u64> {
        // Newcomers are not counted: a client whose connections are all newcomers (opened and
        // dropped within the grace) would otherwise be chosen with nothing to take.
        let mut within: Vec<IpAddr> = self
            .by_id
            .values()
            .filter(|(_, activity)| !activity.is_newcomer())
            .map(|(address, _)| *address)
            .collect();
        for (depth, prefixes) in [Some((16, 48)), Some((24, 56)), None]
            .into_iter()
            .enumerate()
        {
            let mut held: HashMap<IpAddr, usize> = HashMap::new();
            for address in &within {
                *held.entry(network(*address, prefixes)).or_default() += 1;
            }
            let (heaviest, count) = held.into_iter().max_by_key(|(net, count)| (*count, *net))?;
            if depth == 0 && count == 1 {
                return self.oldest(|_, activity| activity.quiet_for() >= EVICTION_GRACE);
            }
            within.retain(|address| network(*address, prefixes) == heaviest);
        }
        let heaviest = within.first().copied()?;
        self.oldest(|address, activity| address == heaviest && !activity.is_newcomer())
    }

    /// Of the connections `chosen` picks, the one with the oldest progress, idle ones first.
    fn oldest(&self, chosen: impl Fn(IpAddr, &Activity) -> bool) -> Option<u64> {
        self.by_id
            .iter()
            .filter(|(_, (address, activity))| chosen(*address, activity))
            .map(|(id, (_, activity))| {
                let serving = activity.in_flight.load(Ordering::Acquire) > 0;
                let progress = *activity.last_progress.lock().expect("not poisoned");
                ((serving, progress), *id)
            })
            .min()
            .map(|(_, id)| id)
    }
}

/// The network `address` (already [`counted_as`]) counts in: itself, or with `prefixes` its
/// IPv4 or IPv6 network of that length.
fn network(address: IpAddr, prefixes: Option<(u8, u8)>) -> IpAddr {
    match (prefixes, address) {
        (None, address) => address,
        (Some((v4, _)), IpAddr::V4(address)) => {
            IpAddr::V4(Ipv4Net::new(address, v4).expect("a valid prefix").network())
        }
        (Some((_, v6)), IpAddr::V6(address)) => {
            IpAddr::V6(Ipv6Net::new(address, v6).expect("a valid prefix").network())
        }
    }
}
