//! The buckets of the networks that owe something or were used in the last [`KEEP`], each
//! brought up to date after the network around it: a network forgives its sub-networks by its
//! own clock, which slows when it holds many of them ([`super::bucket::FORGIVEN_AT_FULL_RATE`]).

use super::bucket::{Bucket, Level, LEVELS};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;
use tokio::time::Instant;

/// A network: its level in [`LEVELS`] and its first address.
pub type Network = (usize, IpAddr);

/// Buckets kept before the full ones (as good as new) are dropped.
const PRUNE_AT: usize = 1024;
/// How long a full bucket is kept after its last use: a client that asks again within it is
/// still known, not a newcomer to a crowded network.
const KEEP: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct Buckets {
    by_network: HashMap<Network, Bucket>,
    prune_at: usize,
}

impl Buckets {
    /// Brings the buckets of `networks` (a connection's, narrowest first) up to `now`, making
    /// those it lacks, widest first.
    pub fn use_at(&mut self, networks: &[Network], now: Instant) {
        let mut around = None;
        for (index, network) in networks.iter().enumerate().rev() {
            let level = &LEVELS[network.0];
            match self.by_network.get_mut(network) {
                Some(bucket) => {
                    bucket.refill(level, now, around);
                    bucket.used = now;
                }
                // Made used now.
                None => {
                    self.by_network
                        .insert(*network, Bucket::new(level, now, around));
                    if let Some(wider) = networks.get(index + 1) {
                        self.get_mut(wider).children += 1;
                    }
                }
            }
            let bucket = &self.by_network[network];
            around = Some(bucket.around(level, around));
        }
    }

    pub fn get_mut(&mut self, network: &Network) -> &mut Bucket {
        self.by_network
            .get_mut(network)
            .expect("brought up to date")
    }

    /// Drops the buckets that have refilled and were not used for [`KEEP`], once the map has
    /// doubled since it was last pruned.
    pub fn prune(&mut self, now: Instant) {
        if self.by_network.len() < self.prune_at.max(PRUNE_AT) {
            return;
        }
        let mut networks: Vec<Network> = self.by_network.keys().copied().collect();
        networks.sort_unstable_by_key(|&(level, _)| std::cmp::Reverse(level));
        // Only the clocks matter to a refill: whether a network is for newcomers does not.
        for network in &networks {
            let around =
                wider(network).map(|wider| self.by_network[&wider].around(&LEVELS[wider.0], None));
            self.get_mut(network)
                .refill(&LEVELS[network.0], now, around);
        }
        for network in networks.iter().rev() {
            let bucket = &self.by_network[network];
            let unused = now.duration_since(bucket.used) >= KEEP;
            if unused && bucket.children == 0 && bucket.is_full(&LEVELS[network.0]) {
                self.by_network.remove(network);
                if let Some(wider) = wider(network) {
                    self.get_mut(&wider).children -= 1;
                }
            }
        }
        self.prune_at = 2 * self.by_network.len();
    }

    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.by_network.len()
    }
}

/// The network around `network`, None for all clients.
fn wider(&(level, first): &Network) -> Option<Network> {
    let wider = level + 1;
    LEVELS
        .get(wider)
        .map(|around| (wider, network_of(first, around)))
}

/// The network of `peer` at `level`; all addresses, IPv4 and IPv6, at the widest.
pub fn network_of(peer: IpAddr, level: &Level) -> IpAddr {
    if level.v4 == 0 {
        return IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
    }
    texfleet_core::network::of(peer, level.v4, level.v6)
}
