//! Who holds the most, and what each holds that could give way, kept up to date as
//! connections come, go and start or end requests, so that choosing the connection to close
//! costs a few map lookups however many clients tie for holding the most. A walk over the tied
//! clients' connections on each accept would let a party that churns connections from many
//! networks of equal weight spend the API's CPU on that walk.
//!
//! The open connections form a tree: the widest networks of [`NETWORKS`], within each its
//! narrower ones, then addresses, then connections. A node's *standing* is its count of
//! connections followed by the standing of its heaviest child, so that comparing standings
//! compares the widest networks first, then the narrower ones within them, down to the address:
//! the heaviest client is the one with the greatest standing, and clients that tie have equal
//! standings. Each node groups its children by standing and keeps, for the group of the
//! greatest, what its connections offer to be closed ([`Offer`]); the root's offer is then the
//! offer of every connection of every client tied for holding the most.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use tokio::time::Instant;

/// The networks a client is found by, widest first, as (IPv4, IPv6) prefix lengths. IPv6's
/// widest is a /32, an ISP's allocation: /48s are cheap enough that one party can hold
/// thousands, and would otherwise count as thousands of clients.
pub(super) const NETWORKS: [(u8, u8); 3] = [(16, 32), (16, 48), (24, 56)];

/// The levels of the tree below its root: the networks of [`NETWORKS`], then addresses.
const DEPTH: usize = NETWORKS.len() + 1;

/// A node's count of connections, then its heaviest child's standing (zeros below an address).
pub(super) type Standing = [usize; DEPTH];

/// What a connection is doing, as far as closing it to make room goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// No request yet, and none of one seen at the last look: quiet since its accept, which
    /// its id orders.
    Unserved,
    /// No request yet, but bytes of one have arrived (as last looked at).
    Arriving(Heard),
    /// Served, no request in flight since the instant.
    Idle(Instant),
    Serving,
}

/// Bytes of a request heard before it began: how many, and when the last of them came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Heard {
    pub bytes: u64,
    pub last: Instant,
}

impl Heard {
    /// Which arriving connection gives way first: the one heard the fewest bytes from, of
    /// those the one whose last byte came longest ago.
    fn rank(self, id: u64) -> (u64, Instant, u64) {
        (self.bytes, self.last, id)
    }
}

/// The connections of a set that each class would close first: the oldest and newest that
/// never had a request, the one idle longest after its last, the arriving one whose last byte
/// came longest ago, and the arriving one that gives way first ([`Heard::rank`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Offer {
    pub oldest_unserved: Option<u64>,
    pub newest_unserved: Option<u64>,
    pub longest_idle: Option<(Instant, u64)>,
    pub oldest_arriving: Option<(Instant, u64)>,
    pub least_arrived: Option<(u64, Instant, u64)>,
    /// Whether any of them serves a request.
    pub serving: bool,
}

/// Children with one standing, ordered by what each offers.
#[derive(Default)]
struct Group {
    members: BTreeSet<IpAddr>,
    oldest_unserved: BTreeSet<(u64, IpAddr)>,
    newest_unserved: BTreeSet<(u64, IpAddr)>,
    longest_idle: BTreeSet<((Instant, u64), IpAddr)>,
    oldest_arriving: BTreeSet<((Instant, u64), IpAddr)>,
    least_arrived: BTreeSet<((u64, Instant, u64), IpAddr)>,
    /// The children with a connection serving a request, so that finding those never walks
    /// the children without.
    serving: BTreeSet<IpAddr>,
}

impl Group {
    fn offer(&self) -> Offer {
        Offer {
            oldest_unserved: self.oldest_unserved.first().map(|(id, _)| *id),
            newest_unserved: self.newest_unserved.last().map(|(id, _)| *id),
            longest_idle: self.longest_idle.first().map(|(idle, _)| *idle),
            oldest_arriving: self.oldest_arriving.first().map(|(arriving, _)| *arriving),
            least_arrived: self.least_arrived.first().map(|(rank, _)| *rank),
            serving: !self.serving.is_empty(),
        }
    }

    fn change(&mut self, child: IpAddr, offer: Offer, add: bool) {
        edit(&mut self.members, child, add);
        if let Some(id) = offer.oldest_unserved {
            edit(&mut self.oldest_unserved, (id, child), add);
        }
        if let Some(id) = offer.newest_unserved {
            edit(&mut self.newest_unserved, (id, child), add);
        }
        if let Some(idle) = offer.longest_idle {
            edit(&mut self.longest_idle, (idle, child), add);
        }
        if let Some(arriving) = offer.oldest_arriving {
            edit(&mut self.oldest_arriving, (arriving, child), add);
        }
        if let Some(rank) = offer.least_arrived {
            edit(&mut self.least_arrived, (rank, child), add);
        }
        if offer.serving {
            edit(&mut self.serving, child, add);
        }
    }
}

fn edit<T: Ord>(set: &mut BTreeSet<T>, entry: T, add: bool) {
    match add {
        true => set.insert(entry),
        false => set.remove(&entry),
    };
}

/// A network's children, or the tree's widest networks, grouped by standing.
#[derive(Default)]
struct Children(BTreeMap<Standing, Group>);

impl Children {
    fn heaviest(&self) -> Option<(&Standing, &Group)> {
        self.0.last_key_value()
    }

    fn replace(&mut self, child: IpAddr, old: Option<Summary>, new: Option<Summary>) {
        if let Some((standing, offer)) = old {
            if let Some(group) = self.0.get_mut(&standing) {
                group.change(child, offer, false);
                if group.members.is_empty() {
                    self.0.remove(&standing);
                }
            }
        }
        if let Some((standing, offer)) = new {
            self.0
                .entry(standing)
                .or_default()
                .change(child, offer, true);
        }
    }
}

type Summary = (Standing, Offer);

#[derive(Default)]
struct Network {
    count: usize,
    children: Children,
}

/// An address's connections by state.
#[derive(Default)]
struct Address {
    unserved: BTreeSet<u64>,
    arriving: BTreeSet<(Instant, u64)>,
    arriving_ranks: BTreeSet<(u64, Instant, u64)>,
    idle: BTreeSet<(Instant, u64)>,
    serving: BTreeSet<u64>,
}

impl Address {
    fn count(&self) -> usize {
        self.unserved.len() + self.arriving.len() + self.idle.len() + self.serving.len()
    }

    fn change(&mut self, id: u64, state: State, add: bool) {
        match state {
            State::Unserved => edit(&mut self.unserved, id, add),
            State::Arriving(heard) => {
                edit(&mut self.arriving, (heard.last, id), add);
                edit(&mut self.arriving_ranks, heard.rank(id), add);
            }
            State::Idle(since) => edit(&mut self.idle, (since, id), add),
            State::Serving => edit(&mut self.serving, id, add),
        }
    }
}

/// The tree of open connections (trusted proxies' aside).
#[derive(Default)]
pub(super) struct Standings {
    widest: Children,
    networks: [HashMap<IpAddr, Network>; NETWORKS.len()],
    addresses: HashMap<IpAddr, Address>,
}

impl Standings {
    /// Records that connection `id` of `address` went from `old` to `new` (`None`: not open).
    pub(super) fn change(
        &mut self,
        address: IpAddr,
        id: u64,
        old: Option<State>,
        new: Option<State>,
    ) {
        let keys = path(address);
        let before: [Option<Summary>; DEPTH] =
            std::array::from_fn(|level| self.summary(level, keys[level]));
        let entry = self.addresses.entry(address).or_default();
        if let Some(old) = old {
            entry.change(id, old, false);
        }
        if let Some(new) = new {
            entry.change(id, new, true);
        }
        if entry.count() == 0 {
            self.addresses.remove(&address);
        }
        let grew = isize::from(new.is_some()) - isize::from(old.is_some());
        for (level, networks) in self.networks.iter_mut().enumerate() {
            let network = networks.entry(keys[level]).or_default();
            network.count = network.count.saturating_add_signed(grew);
        }
        for level in (0..DEPTH).rev() {
            let after = self.summary(level, keys[level]);
            if after.is_none() && level < NETWORKS.len() {
                self.networks[level].remove(&keys[level]);
            }
            let parent = match level {
                0 => &mut self.widest,
                _ => match self.networks[level - 1].get_mut(&keys[level - 1]) {
                    Some(network) => &mut network.children,
                    None => continue,
                },
            };
            parent.replace(keys[level], before[level], after);
        }
    }

    /// The node at `level` of the tree with `key`: its standing and offer, or `None` when it
    /// holds nothing.
    fn summary(&self, level: usize, key: IpAddr) -> Option<Summary> {
        if level == NETWORKS.len() {
            let address = self.addresses.get(&key)?;
            let mut standing = [0; DEPTH];
            standing[0] = address.count();
            let offer = Offer {
                oldest_unserved: address.unserved.first().copied(),
                newest_unserved: address.unserved.last().copied(),
                longest_idle: address.idle.first().copied(),
                oldest_arriving: address.arriving.first().copied(),
                least_arrived: address.arriving_ranks.first().copied(),
                serving: !address.serving.is_empty(),
            };
            return Some((standing, offer));
        }
        let network = self.networks[level].get(&key).filter(|n| n.count > 0)?;
        let (heaviest, group) = network.children.heaviest()?;
        let mut standing = [0; DEPTH];
        standing[0] = network.count;
        standing[1..].copy_from_slice(&heaviest[..DEPTH - 1]);
        Some((standing, group.offer()))
    }

    /// What the clients tied for holding the most offer to close, or `None` when nothing is
    /// open.
    pub(super) fn heaviest_offer(&self) -> Option<Offer> {
        self.widest.heaviest().map(|(_, group)| group.offer())
    }

    /// The connections serving requests of the clients tied for holding the most, at most
    /// `limit` of them.
    pub(super) fn heaviest_serving(&self, limit: usize) -> Vec<u64> {
        let mut found = Vec::new();
        let Some((_, group)) = self.widest.heaviest() else {
            return found;
        };
        // One iterator per level over the children with connections serving requests, so that
        // a group of thousands is never listed whole.
        let mut levels = vec![group.serving.iter()];
        while found.len() < limit {
            let Some(key) = levels.last_mut().map(Iterator::next) else {
                break;
            };
            let Some(&key) = key else {
                levels.pop();
                continue;
            };
            let level = levels.len() - 1;
            if level == NETWORKS.len() {
                let serving = self
                    .addresses
                    .get(&key)
                    .into_iter()
                    .flat_map(|a| &a.serving);
                found.extend(serving.take(limit - found.len()));
                continue;
            }
            let heaviest = self.networks[level]
                .get(&key)
                .and_then(|n| n.children.heaviest());
            if let Some((_, group)) = heaviest {
                levels.push(group.serving.iter());
            }
        }
        found
    }

    /// `address`'s connection idle longest after its last request.
    pub(super) fn longest_idle_of(&self, address: IpAddr) -> Option<u64> {
        let address = self.addresses.get(&address)?;
        address.idle.first().map(|(_, id)| *id)
    }

    /// How many connections `address` holds.
    pub(super) fn held_by(&self, address: IpAddr) -> usize {
        self.addresses.get(&address).map_or(0, Address::count)
    }

    /// How many networks of each length of [`NETWORKS`], then addresses, hold connections.
    #[cfg(test)]
    pub(super) fn nodes(&self) -> [usize; DEPTH] {
        std::array::from_fn(|level| match self.networks.get(level) {
            Some(networks) => networks.len(),
            None => self.addresses.len(),
        })
    }
}

/// The keys of `address`'s nodes, widest first.
fn path(address: IpAddr) -> [IpAddr; DEPTH] {
    std::array::from_fn(|level| match NETWORKS.get(level) {
        Some(&prefixes) => network(address, prefixes),
        None => address,
    })
}

/// The network of `address` with `prefixes`' length for its family.
pub(super) fn network(address: IpAddr, (v4, v6): (u8, u8)) -> IpAddr {
    texfleet_core::network::of(address, v4, v6)
}
