//! The open connections, counted by address and by network as they come and go, and each
//! network's narrower networks and addresses listed under it, so that finding the client that
//! holds the most looks at the networks holding the most and what they hold, not at every
//! connection: a client churning connections makes the API look for one to close on every
//! accept, and a walk over every /24 and address on each would keep others' connections in
//! the listen queue.

use super::Activity;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

/// The networks a client is found by, widest first, as (IPv4, IPv6) prefix lengths. IPv6's
/// widest is a /32, an ISP's allocation: /48s are cheap enough that one party can hold
/// thousands, and would otherwise count as thousands of clients.
pub(super) const NETWORKS: [(u8, u8); 3] = [(16, 32), (16, 48), (24, 56)];

#[derive(Default)]
pub(super) struct Open {
    next_id: u64,
    pub(super) by_id: HashMap<u64, (IpAddr, Arc<Activity>)>,
    /// Each address's connections (an address is already [`super::counted_as`]), trusted
    /// proxies' aside.
    pub(super) by_address: HashMap<IpAddr, HashSet<u64>>,
    /// How many connections each network of each length of [`NETWORKS`] holds, trusted
    /// proxies' aside.
    pub(super) per_network: [HashMap<IpAddr, usize>; NETWORKS.len()],
    /// What each network of each length of [`NETWORKS`] holds that has connections open: its
    /// networks of the next length, or, at the narrowest, its addresses.
    pub(super) held_within: [HashMap<IpAddr, HashSet<IpAddr>>; NETWORKS.len()],
    /// The connections of trusted proxies, which carry every client's requests: they are not
    /// one client holding many.
    pub(super) proxies: HashSet<u64>,
}

impl Open {
    pub(super) fn insert(&mut self, address: IpAddr, proxy: bool, activity: Arc<Activity>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.by_id.insert(id, (address, activity));
        if proxy {
            self.proxies.insert(id);
            return id;
        }
        self.by_address.entry(address).or_default().insert(id);
        for (held, prefixes) in self.per_network.iter_mut().zip(NETWORKS) {
            *held.entry(network(address, prefixes)).or_default() += 1;
        }
        for (level, within) in self.held_within.iter_mut().enumerate() {
            within
                .entry(network(address, NETWORKS[level]))
                .or_default()
                .insert(narrower(address, level));
        }
        id
    }

    pub(super) fn remove(&mut self, id: u64) -> Option<(IpAddr, Arc<Activity>)> {
        let (address, activity) = self.by_id.remove(&id)?;
        if self.proxies.remove(&id) {
            return Some((address, activity));
        }
        if let Some(ids) = self.by_address.get_mut(&address) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_address.remove(&address);
            }
        }
        for (held, prefixes) in self.per_network.iter_mut().zip(NETWORKS) {
            let net = network(address, prefixes);
            if let Some(count) = held.get_mut(&net) {
                *count -= 1;
                if *count == 0 {
                    held.remove(&net);
                }
            }
        }
        // Narrowest first: a network goes from the one around it once it holds nothing.
        for level in (0..NETWORKS.len()).rev() {
            let child = narrower(address, level);
            let still_open = match level + 1 < NETWORKS.len() {
                true => self.per_network[level + 1].contains_key(&child),
                false => self.by_address.contains_key(&child),
            };
            if still_open {
                break;
            }
            let net = network(address, NETWORKS[level]);
            if let Some(within) = self.held_within[level].get_mut(&net) {
                within.remove(&child);
                if within.is_empty() {
                    self.held_within[level].remove(&net);
                }
            }
        }
        Some((address, activity))
    }

    pub(super) fn held_by(&self, address: IpAddr) -> usize {
        self.by_address.get(&address).map_or(0, HashSet::len)
    }
}

/// What `address` is under its network of the length `level` of [`NETWORKS`]: its network of
/// the next length, or the address itself under the narrowest.
fn narrower(address: IpAddr, level: usize) -> IpAddr {
    NETWORKS
        .get(level + 1)
        .map_or(address, |&prefixes| network(address, prefixes))
}

/// The network of `address` with `prefixes`' length for its family.
pub(super) fn network(address: IpAddr, (v4, v6): (u8, u8)) -> IpAddr {
    texfleet_core::network::of(address, v4, v6)
}
