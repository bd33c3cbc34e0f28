//! Looking a token up in the database, bounded so that no client's lookups hold up
//! another's, whether its tokens are valid or made up:
//! - requests of one token share its lookup in flight: a token's flood of concurrent requests
//!   costs one query at a time, before its rate limit refuses most of them;
//! - a token this process has found live before (the last [`KNOWN`] of them) is looked up in a
//!   lane of its own, so that made-up tokens, however many networks send them, never queue in
//!   front of a known one; a token the lookup no longer finds leaves that lane;
//! - any other token is looked up in the second lane, where a client network (an IPv4 /24, an
//!   IPv6 /48) has at most [`PER_NETWORK`] lookups in flight, and more are refused at once
//!   (`429`) instead of queueing before everyone else's;
//! - each lane takes at most as many connections as the pool has, so that the projects' own
//!   work waits behind two pools' worth of lookups at most.
//!
//! Every request is looked up, known token or not, so a revoked token is refused from the
//! next lookup on.

use crate::problem::Problem;
use async_singleflight::Group;
use lru::LruCache;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use texfleet_core::db::{self, Pool};
use tokio::sync::Semaphore;
use uuid::Uuid;

/// The lookups of tokens not known live that one client network may have in flight.
pub const PER_NETWORK: usize = 8;
/// How many tokens found live are remembered (a hash and a little bookkeeping each).
const KNOWN: usize = 100_000;
/// How long a lookup waits for one of the lookups' connections.
const WAIT: Duration = Duration::from_secs(5);
/// How often lookups whose first caller left before the end are forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(60);

pub struct TokenLookups {
    in_flight: Group<Vec<u8>, Lookup, db::DbError>,
    by_network: Mutex<HashMap<IpAddr, usize>>,
    known: Mutex<LruCache<Vec<u8>, ()>>,
    known_lane: Semaphore,
    other_lane: Semaphore,
}

/// How a lookup ended, for its caller and for every request that joined it.
#[derive(Clone)]
enum Lookup {
    Found(Option<Uuid>),
    NetworkBusy,
    ConnectionsBusy,
}

impl TokenLookups {
    /// Lookups whose each lane holds at most `connections` of the pool at once.
    pub fn new(connections: usize) -> Arc<TokenLookups> {
        let lookups = Arc::new(TokenLookups::with_lanes(connections));
        crate::tidy_while_held(&lookups, FORGET_EVERY, |lookups| async move {
            lookups.in_flight.purge_stale().await
        });
        lookups
    }

    /// The project of the live token whose hash is `token_hash`, joining a lookup of the same
    /// token already in flight; `client` is who asks (None: a caller the server did not see).
    pub async fn project(
        &self,
        pool: &Pool,
        token_hash: &[u8],
        client: Option<IpAddr>,
    ) -> Result<Option<Uuid>, Problem> {
        let network = client.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), network_of);
        let lookup = async {
            let known = self.is_known(token_hash);
            let _slot = match known {
                true => None,
                false => match self.network_slot(network) {
                    Some(slot) => Some(slot),
                    None => return Ok(Lookup::NetworkBusy),
                },
            };
            let lane = match known {
                true => &self.known_lane,
                false => &self.other_lane,
            };
            let Ok(Ok(_connection)) = tokio::time::timeout(WAIT, lane.acquire()).await else {
                return Ok(Lookup::ConnectionsBusy);
            };
            let client = pool.get().await?;
            let project = db::authenticate(&client, token_hash).await?;
            self.remember(token_hash, project.is_some());
            Ok(Lookup::Found(project))
        };
        match self.in_flight.work(token_hash, lookup).await {
            Ok(Lookup::Found(project)) => Ok(project),
            Ok(Lookup::NetworkBusy) => {
                crate::metrics::RATE_LIMITED
                    .with_label_values(&["network"])
                    .inc();
                Err(Problem::rate_limited(
                    "too many token lookups in flight from this network; slow down",
                    1,
                ))
            }
            Ok(Lookup::ConnectionsBusy) => Err(Problem::unavailable(
                "too many token lookups are waiting; retry shortly",
            )),
            Err(Some(error)) => Err(error.into()),
            // The lookup this request joined failed; its own caller was told why.
            Err(None) => Err(Problem::unavailable(
                "the database is unavailable; retry shortly",
            )),
        }
    }

    fn with_lanes(connections: usize) -> TokenLookups {
        TokenLookups {
            in_flight: Group::new(),
            by_network: Mutex::default(),
            known: Mutex::new(LruCache::new(NonZeroUsize::new(KNOWN).expect("not zero"))),
            known_lane: Semaphore::new(connections.max(1)),
            other_lane: Semaphore::new(connections.max(1)),
        }
    }

    fn is_known(&self, token_hash: &[u8]) -> bool {
        self.known
            .lock()
            .expect("never poisoned")
            .get(token_hash)
            .is_some()
    }

    fn remember(&self, token_hash: &[u8], live: bool) {
        let mut known = self.known.lock().expect("never poisoned");
        match live {
            true => drop(known.put(token_hash.to_vec(), ())),
            false => drop(known.pop(token_hash)),
        }
    }

    /// One of `network`'s lookups in flight, or None when it has [`PER_NETWORK`].
    fn network_slot(&self, network: IpAddr) -> Option<NetworkSlot<'_>> {
        let mut by_network = self.by_network.lock().expect("never poisoned");
        let held = by_network.entry(network).or_default();
        if *held == PER_NETWORK {
            return None;
        }
        *held += 1;
        Some(NetworkSlot {
            lookups: self,
            network,
        })
    }
}

struct NetworkSlot<'a> {
    lookups: &'a TokenLookups,
    network: IpAddr,
}

impl Drop for NetworkSlot<'_> {
    fn drop(&mut self) {
        let mut by_network = self.lookups.by_network.lock().expect("never poisoned");
        if let Some(held) = by_network.get_mut(&self.network) {
            *held -= 1;
            if *held == 0 {
                by_network.remove(&self.network);
            }
        }
    }
}

/// The network a client's lookups count under: its IPv4 /24 or IPv6 /48.
fn network_of(client: IpAddr) -> IpAddr {
    texfleet_core::network::of(client, 24, 48)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_holds_its_share_of_lookups_and_gets_them_back() {
        let lookups = TokenLookups::with_lanes(1);
        let one = network_of("192.0.2.7".parse().unwrap());
        let held: Vec<_> = (0..PER_NETWORK)
            .map(|_| lookups.network_slot(one).expect("within the share"))
            .collect();
        assert!(lookups.network_slot(one).is_none());
        let other = network_of("198.51.100.1".parse().unwrap());
        assert!(lookups.network_slot(other).is_some());
        drop(held);
        assert!(lookups.network_slot(one).is_some());
        assert!(lookups.by_network.lock().unwrap().is_empty());
    }

    #[test]
    fn a_token_found_live_is_known_until_a_lookup_no_longer_finds_it() {
        let lookups = TokenLookups::with_lanes(1);
        assert!(!lookups.is_known(b"token"));
        lookups.remember(b"token", true);
        assert!(lookups.is_known(b"token"));
        lookups.remember(b"token", false);
        assert!(!lookups.is_known(b"token"));
    }
}
