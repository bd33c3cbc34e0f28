//! Looking a token up in the database, bounded so that no client's lookups hold up
//! another's, whether its tokens are valid or made up:
//! - a token missing from the set of live tokens ([`crate::live_tokens`]) is never looked up:
//!   it waits for the set's next refresh, in a waiting room where a client network (an IPv4
//!   /24, an IPv6 /48) has at most [`PER_NETWORK`] places (`429` past them), and is refused if
//!   that refresh does not find it, so made-up tokens cost the database nothing of their own;
//! - requests of one token share its lookup in flight: a token's flood of concurrent requests
//!   costs one query at a time, before its rate limit refuses most of them;
//! - lookups take at most as many connections as the pool has, so that the projects' own work
//!   waits behind one pool's worth of them at most.
//!
//! Every request of a token in the set is looked up, so a revoked token is refused from the
//! next lookup on.

use crate::live_tokens::{LiveTokens, Unsure};
use crate::problem::Problem;
use async_singleflight::Group;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use texfleet_core::db::{self, Pool};
use tokio::sync::Semaphore;
use uuid::Uuid;

/// The tokens missing from the set that one client network may have waiting.
pub const PER_NETWORK: usize = 8;
/// How long a lookup waits for the set's refresh or for one of the lookups' connections.
const WAIT: Duration = Duration::from_secs(5);
/// How often lookups whose first caller left before the end are forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(60);

pub struct TokenLookups {
    in_flight: Group<Vec<u8>, Lookup, db::DbError>,
    by_network: Mutex<HashMap<IpAddr, usize>>,
    live: Arc<LiveTokens>,
    connections: Semaphore,
}

/// How a lookup ended, for its caller and for every request that joined it.
#[derive(Clone)]
enum Lookup {
    Found(Option<Uuid>),
    NetworkBusy,
    Busy,
    Unavailable,
}

impl TokenLookups {
    /// Lookups in `pool` that hold at most `connections` of it at once.
    pub fn new(pool: &Pool, connections: usize) -> Arc<TokenLookups> {
        let lookups = Arc::new(TokenLookups::with(
            LiveTokens::new(pool.clone()),
            connections,
        ));
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
            if !self.live.holds(token_hash) {
                let Some(_place) = self.network_slot(network) else {
                    return Ok(Lookup::NetworkBusy);
                };
                match self.live.after_refresh(token_hash, WAIT).await {
                    Ok(true) => {}
                    Ok(false) => {
                        refused("set");
                        return Ok(Lookup::Found(None));
                    }
                    Err(Unsure::TooSlow) => return Ok(Lookup::Busy),
                    Err(Unsure::Unread) => return Ok(Lookup::Unavailable),
                }
            }
            let Ok(Ok(_connection)) = tokio::time::timeout(WAIT, self.connections.acquire()).await
            else {
                return Ok(Lookup::Busy);
            };
            let client = pool.get().await?;
            let project = db::authenticate(&client, token_hash).await?;
            if project.is_none() {
                refused("lookup");
                self.live.forget(token_hash);
            }
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
            Ok(Lookup::Busy) => Err(Problem::unavailable(
                "too many token lookups are waiting; retry shortly",
            )),
            Err(Some(error)) => Err(error.into()),
            // The lookup this request joined failed; its own caller was told why.
            Ok(Lookup::Unavailable) | Err(None) => Err(Problem::unavailable(
                "the database is unavailable; retry shortly",
            )),
        }
    }

    fn with(live: Arc<LiveTokens>, connections: usize) -> TokenLookups {
        TokenLookups {
            in_flight: Group::new(),
            by_network: Mutex::default(),
            live,
            connections: Semaphore::new(connections.max(1)),
        }
    }

    /// One of `network`'s places in the waiting room, or None when it has [`PER_NETWORK`].
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

fn refused(by: &str) {
    crate::metrics::TOKENS_REFUSED
        .with_label_values(&[by])
        .inc();
}

/// The network a client's lookups count under: its IPv4 /24 or IPv6 /48.
fn network_of(client: IpAddr) -> IpAddr {
    texfleet_core::network::of(client, 24, 48)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_holds_its_places_in_the_waiting_room_and_gets_them_back() {
        let lookups = TokenLookups::with(LiveTokens::unread(), 1);
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
}
