//! Who a request comes from, and how fast one client may ask.
//!
//! The client is the connection's peer, unless the peer is one of the operator's trusted
//! proxies: then it is the address that proxy wrote into `client_address_header` (the
//! rightmost address that is not itself a trusted proxy, since each proxy appends the peer it
//! saw and only the proxies' own entries can be believed). IPv6 clients count by their /64,
//! the block one subscriber usually holds.
//!
//! Requests are limited per client before any token is looked up ([`limit_per_address`]), so
//! that traffic without a valid token costs no database query past its rate.

use crate::metrics;
use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ipnet::{IpNet, Ipv6Net};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use texfleet_core::Config;

/// The peer address of the connection a request came on; the server sets it on every request.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub IpAddr);

/// The operator's proxies, whose header names the client.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    ranges: Vec<IpNet>,
    header: Option<HeaderName>,
}

impl TrustedProxies {
    /// From `trusted_proxies` (comma-separated CIDRs) and `client_address_header`: both or
    /// neither, so that a header is never believed from just anyone.
    pub fn parse(ranges: &str, header: &str) -> anyhow::Result<TrustedProxies> {
        let ranges = ranges
            .split(',')
            .map(str::trim)
            .filter(|range| !range.is_empty())
            .map(|range| {
                range
                    .parse::<IpNet>()
                    .map_err(|_| anyhow::anyhow!("trusted_proxies: {range:?} is not a CIDR range"))
            })
            .collect::<anyhow::Result<Vec<IpNet>>>()?;
        let header = header.trim();
        if ranges.is_empty() != header.is_empty() {
            anyhow::bail!(
                "trusted_proxies and client_address_header are set together or not at all"
            );
        }
        let header = match header {
            "" => None,
            name => Some(HeaderName::try_from(name).map_err(|_| {
                anyhow::anyhow!("client_address_header: {name:?} is not a header name")
            })?),
        };
        Ok(TrustedProxies { ranges, header })
    }

    /// Whether `address` is a trusted proxy's; an IPv4 proxy reaching a dual-stack listener
    /// arrives as an IPv4-mapped IPv6 address, and is one all the same.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.ranges.iter().any(|range| range.contains(&address))
    }

    /// The client of a request that came from `peer` with `headers`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let Some(header) = &self.header else {
            return peer;
        };
        if !self.contains(peer) {
            return peer;
        }
        let mut client = peer;
        // Several header lines count as one list, in order.
        let entries = headers
            .get_all(header)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .collect::<Vec<_>>();
        for entry in entries.iter().rev() {
            match entry.trim().parse::<IpAddr>() {
                Ok(address) if self.contains(address) => client = address,
                Ok(address) => return address,
                // What a proxy would never write: trust nothing further left.
                Err(_) => return client,
            }
        }
        client
    }
}

/// The key a client counts under: its IPv4 address, or its IPv6 /64.
pub fn counted_as(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(
                Ipv6Net::new(v6, 64)
                    .expect("64 is a valid prefix")
                    .network(),
            ),
        },
        v4 => v4,
    }
}

/// Requests per client address: a token bucket per address (governor's GCRA).
pub struct AddressLimiter {
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    proxies: TrustedProxies,
}

/// How often the limiter forgets addresses whose buckets are full again.
const FORGET_EVERY: Duration = Duration::from_secs(60);

impl AddressLimiter {
    pub fn new(config: &Config, proxies: TrustedProxies) -> Arc<AddressLimiter> {
        let limiter = NonZeroU32::new(config.address_rate_limit_per_second).map(|rate| {
            let burst = NonZeroU32::new(config.address_rate_limit_burst).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        let limiter = Arc::new(AddressLimiter { limiter, proxies });
        if limiter.limiter.is_some() {
            crate::tidy_while_held(&limiter, FORGET_EVERY, |limiter| async move {
                if let Some(buckets) = &limiter.limiter {
                    buckets.retain_recent();
                    buckets.shrink_to_fit();
                }
            });
        }
        limiter
    }
}

/// Who a request comes from, as [`limit_per_address`] found it.
#[derive(Debug, Clone, Copy)]
pub struct Client(pub IpAddr);

/// Middleware: answers `429` to a client over its rate, before anything else looks at the
/// request, and tells later steps who the client is ([`Client`]).
pub async fn limit_per_address(
    State(limiter): State<Arc<AddressLimiter>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(&Peer(peer)) = request.extensions().get::<Peer>() else {
        return next.run(request).await;
    };
    let client = limiter.proxies.client(peer, request.headers());
    request.extensions_mut().insert(Client(client));
    if let Some(buckets) = &limiter.limiter {
        if let Err(not_until) = buckets.check_key(&counted_as(client)) {
            metrics::RATE_LIMITED.with_label_values(&["address"]).inc();
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            return Problem::rate_limited(
                "too many requests from this address; slow down",
                wait.as_secs_f64().ceil() as u64,
            )
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn the_header_is_believed_from_trusted_proxies_only_and_read_from_the_right() {
        let proxies = TrustedProxies::parse("10.0.0.0/8", "X-Forwarded-For").unwrap();
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let stranger: IpAddr = "198.51.100.7".parse().unwrap();
        let forwarded = headers(&["203.0.113.1, 198.51.100.9", "10.0.0.9"]);
        assert_eq!(
            proxies.client(proxy, &forwarded),
            "198.51.100.9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(proxies.client(stranger, &forwarded), stranger);
        let mapped: IpAddr = "::ffff:10.0.0.5".parse().unwrap();
        assert!(
            proxies.contains(mapped),
            "a proxy reaching a dual-stack listener"
        );
        assert_eq!(
            proxies.client(mapped, &forwarded),
            "198.51.100.9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(proxies.client(proxy, &HeaderMap::new()), proxy);
        assert_eq!(
            proxies.client(proxy, &headers(&["junk, 10.0.0.7"])),
            "10.0.0.7".parse::<IpAddr>().unwrap()
        );
        let no_proxies = TrustedProxies::parse("", "").unwrap();
        assert_eq!(no_proxies.client(proxy, &forwarded), proxy);
        assert!(TrustedProxies::parse("10.0.0.0/8", "").is_err());
        assert!(TrustedProxies::parse("", "x-real-ip").is_err());
        assert!(TrustedProxies::parse("not-a-range", "x-real-ip").is_err());
    }

    #[test]
    fn ipv6_clients_count_by_their_64() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let same: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(counted_as(one), counted_as(same));
        assert_ne!(counted_as(one), counted_as(other));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(counted_as(mapped), "192.0.2.1".parse::<IpAddr>().unwrap());
    }
}
