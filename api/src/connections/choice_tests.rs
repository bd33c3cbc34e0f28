//! The connection [`Open::choose_to_close`] picks is the one a walk over every connection of the
//! clients tied for holding the most would pick, whatever connections came, went, and began
//! and ended requests before.

use super::eviction::LOOKS;
use super::standing::{network, State, NETWORKS};
use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Admit(usize),
    Begin(usize),
    End(usize),
    Close(usize),
    Wait(u64),
    /// Bytes arrive on a connection (how many, from the number).
    Hear(usize),
}

/// Addresses of two IPv4 /16s and one IPv6 /32, a few networks within each.
fn address(n: usize) -> IpAddr {
    let n = n % 24;
    match n < 16 {
        true => format!("198.{}.{}.{}", 51 + n % 2, n / 2 % 3, n / 6),
        false => format!("2001:db8:{}:{}::{}", n % 2, n / 2 % 2, n / 4),
    }
    .parse()
    .unwrap()
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..64usize).prop_map(Step::Admit),
        2 => (0..64usize).prop_map(Step::Begin),
        2 => (0..64usize).prop_map(Step::End),
        1 => (0..64usize).prop_map(Step::Close),
        2 => (1..1500u64).prop_map(Step::Wait),
        1 => (0..64usize).prop_map(Step::Hear),
    ]
}

/// The walk: every connection's counts from the widest network to its address, the greatest
/// of them, and of the connections with it the first by the rule of [`Open::choose_to_close`].
fn walked(open: &Open, now: Instant) -> Option<u64> {
    let counts = |address: IpAddr| -> Vec<usize> {
        let mut counts: Vec<usize> = NETWORKS
            .iter()
            .map(|&prefixes| {
                let within = |c: &&open::Connection| {
                    network(c.address, prefixes) == network(address, prefixes)
                };
                open.by_id.values().filter(within).count()
            })
            .collect();
        counts.push(open.by_id.values().filter(|c| c.address == address).count());
        counts
    };
    let heaviest = open.by_id.values().map(|c| counts(c.address)).max()?;
    let tied: Vec<(u64, &open::Connection)> = open
        .by_id
        .iter()
        .filter(|(_, c)| counts(c.address) == heaviest)
        .map(|(id, c)| (*id, c))
        .collect();
    let quiet = |at: Instant| now.saturating_duration_since(at) >= EVICTION_GRACE;
    let idle_since = |c: &open::Connection| match c.state {
        Some(State::Idle(since)) => Some(since),
        _ => None,
    };
    let unserved =
        |c: &open::Connection| matches!(c.state, Some(State::Unserved | State::Arriving(_)));
    // Quiet since: the last byte of a request arriving, else the accept.
    let quiet_since = |c: &open::Connection| c.activity.heard().map_or(c.accepted, |h| h.last);
    let long_quiet = tied.iter().filter_map(|&(id, c)| match idle_since(c) {
        Some(since) => quiet(since).then_some((since, id)),
        None if unserved(c) => quiet(quiet_since(c)).then_some((quiet_since(c), id)),
        None => None,
    });
    if let Some((_, id)) = long_quiet.min() {
        return Some(id);
    }
    let silent = |c: &open::Connection| unserved(c) && c.activity.heard().is_none();
    let newest = tied
        .iter()
        .filter(|(_, c)| silent(c))
        .map(|&(id, _)| id)
        .max();
    let arriving = tied
        .iter()
        .filter(|(_, c)| unserved(c))
        .filter_map(|&(id, c)| c.activity.heard().map(|h| (h.bytes, h.last, id)))
        .min()
        .map(|(_, _, id)| id);
    if let Some(fresh) = newest.or(arriving) {
        let address = open.by_id[&fresh].address;
        let own_idle = open
            .by_id
            .iter()
            .filter(|(_, c)| c.address == address)
            .filter_map(|(id, c)| Some((idle_since(c)?, *id)))
            .min();
        return Some(own_idle.map_or(fresh, |(_, id)| id));
    }
    let idle = tied
        .iter()
        .filter_map(|&(id, c)| Some((idle_since(c)?, id)));
    if let Some((_, id)) = idle.min() {
        return Some(id);
    }
    tied.iter()
        .map(|&(id, c)| (eviction::order(&c.activity, now), id))
        .min()
        .map(|(_, id)| id)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn the_connection_to_close_is_the_one_a_walk_over_every_tied_connection_finds(
        steps in proptest::collection::vec(step(), 1..80)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let connections = Connections::new(Limits {
                max_connections: 1000,
                max_per_address: 0,
                header_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(30),
                trusted_proxies: TrustedProxies::parse("", "").unwrap(),
            });
            let mut slots: Vec<Slot> = Vec::new();
            let mut requests: Vec<InFlight> = Vec::new();
            let mut heard = 0;
            for step in steps {
                match step {
                    Step::Admit(n) => slots.push(connections.admit(address(n), None)),
                    Step::Begin(n) if !slots.is_empty() => {
                        requests.push(slots[n % slots.len()].activity.begin());
                    }
                    Step::End(n) if !requests.is_empty() => drop(requests.remove(n % requests.len())),
                    Step::Close(n) if !slots.is_empty() => drop(slots.remove(n % slots.len())),
                    Step::Wait(ms) => tokio::time::advance(Duration::from_millis(ms)).await,
                    // Fewer than a choice looks at, so that every look is the walk's.
                    Step::Hear(n) if !slots.is_empty() && heard < LOOKS => {
                        slots[n % slots.len()].activity.hear(n % 5 + 1);
                        heard += 1;
                    }
                    _ => {}
                }
                // Events a millisecond apart: two newcomers accepted at one instant would tie.
                tokio::time::advance(Duration::from_millis(1)).await;
                // Compared once the lock is given back: a failure then unwinds through the
                // slots' drops, which take it.
                let (chosen, walked) = {
                    let mut open = connections.open.lock().unwrap();
                    let walked = walked(&open, Instant::now());
                    (open.choose_to_close(), walked)
                };
                assert_eq!(chosen, walked);
            }
        });
    }
}
