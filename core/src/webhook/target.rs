//! Where a webhook may go. A webhook URL is the client's and the delivery is the service's own
//! request, so an endpoint must not reach the service's network (the SSRF of Judge0's
//! callbacks): the URL is `http` or `https` without credentials, and every address its host
//! resolves to must be public, unless the operator allows its range in
//! `webhook_allowed_cidrs`. Public means outside every entry of IANA's special-purpose address
//! registries (`special_purpose_addresses.csv`: loopback, private, link-local with the cloud
//! metadata address, shared, documentation, benchmarking, translation and relay prefixes,
//! anycast services), outside multicast, and for IPv6 inside global unicast (2000::/3). The
//! check runs at registration and at every delivery (DNS may change), and the delivery
//! connects to the address checked.

use crate::project_slots::ProjectSlots;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::LazyLock;
use url::{Host, Url};
use uuid::Uuid;

/// A parsed webhook URL: what is connected to and what is named in the request.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: Url,
    pub host: String,
    pub port: u16,
}

/// The operator's exceptions, from `webhook_allowed_cidrs` (comma-separated CIDRs).
pub fn allowed_ranges(setting: &str) -> anyhow::Result<Vec<IpNet>> {
    setting
        .split(',')
        .map(str::trim)
        .filter(|range| !range.is_empty())
        .map(|range| {
            range.parse::<IpNet>().map_err(|_| {
                anyhow::anyhow!("webhook_allowed_cidrs: {range:?} is not a CIDR range")
            })
        })
        .collect()
}

/// The URL's form: `http` or `https`, a host, no user or password, at most 2,000 bytes.
pub fn parse(url: &str) -> Result<Target, String> {
    if url.len() > 2000 {
        return Err("must be at most 2000 bytes".into());
    }
    let parsed = Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must be an http or https URL".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not carry a user name or password".into());
    }
    let host = match parsed.host() {
        Some(Host::Domain(name)) => name.to_string(),
        Some(Host::Ipv4(address)) => address.to_string(),
        Some(Host::Ipv6(address)) => address.to_string(),
        None => return Err("must name a host".into()),
    };
    let port = parsed
        .port_or_known_default()
        .ok_or("must have a port or a known scheme")?;
    Ok(Target {
        url: parsed,
        host,
        port,
    })
}

/// How long a host may take to resolve.
const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Lookups that may run at once, in all and per project: each takes a blocking thread until
/// the resolver answers, whatever the timeout (half of tokio's 512, which also open database
/// and S3 connections), and a project whose names never resolve keeps its own few busy.
static LOOKUPS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(256);
const LOOKUPS_PER_PROJECT: usize = 4;
static PROJECT_LOOKUPS: LazyLock<ProjectSlots> =
    LazyLock::new(|| ProjectSlots::new(LOOKUPS_PER_PROJECT));

/// What a client is told of a host it may not use, whatever the reason: telling "does not
/// resolve" from "resolves to a private address" would let it map the operator's internal
/// names. The log keeps the reason.
pub const REFUSED_HOST: &str = "must resolve to public addresses only";

/// Resolves the target's host and returns the address to connect to: the first, once every
/// address it resolves to is allowed (one forbidden address refuses the host, so that a name
/// cannot mix a public address with an internal one).
pub async fn resolve(
    target: &Target,
    allowed: &[IpNet],
    project: Uuid,
) -> Result<SocketAddr, String> {
    let Some(place) = PROJECT_LOOKUPS.take(project) else {
        tracing::warn!(host = target.host, %project, "webhook host refused: the project's lookups are all in flight");
        return Err(REFUSED_HOST.into());
    };
    let (host, port) = (target.host.clone(), target.port);
    let lookup = async move {
        let permit = LOOKUPS.acquire().await.expect("never closed");
        // The places go with the lookup, which runs on to its end after a timeout.
        tokio::task::spawn_blocking(move || {
            let _places = (permit, place);
            (host.as_str(), port).to_socket_addrs().map(Vec::from_iter)
        })
        .await
    };
    let addresses: Vec<SocketAddr> = match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
        Ok(Ok(Ok(addresses))) => addresses,
        _ => Vec::new(),
    };
    if addresses.is_empty() {
        tracing::warn!(
            host = target.host,
            "webhook host refused: it does not resolve within {} s",
            RESOLVE_TIMEOUT.as_secs()
        );
        return Err(REFUSED_HOST.into());
    }
    if let Some(forbidden) = addresses.iter().find(|a| !is_allowed(a.ip(), allowed)) {
        tracing::warn!(host = target.host, address = %forbidden.ip(), "webhook host refused: a special-purpose address");
        return Err(REFUSED_HOST.into());
    }
    Ok(addresses[0])
}

/// Whether a delivery may connect to `address`.
pub fn is_allowed(address: IpAddr, allowed: &[IpNet]) -> bool {
    let address = match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    };
    allowed.iter().any(|range| range.contains(&address)) || is_public(address)
}

fn is_public(address: IpAddr) -> bool {
    let special = match address {
        // Multicast has a registry of its own.
        IpAddr::V4(v4) => v4.is_multicast(),
        // IANA's IPv6 Address Space: only 2000::/3 is global unicast; the rest is loopback,
        // link-local, unique-local, multicast or not allocated.
        IpAddr::V6(v6) => (v6.segments()[0] & 0xe000) != 0x2000,
    };
    !special
        && !SPECIAL_PURPOSE
            .iter()
            .any(|entry| entry.block.contains(&address))
}

/// One entry of IANA's special-purpose address registries.
struct Registered {
    block: IpNet,
    #[cfg_attr(not(test), allow(dead_code))]
    name: &'static str,
}

/// Every entry of both registries, from `special_purpose_addresses.csv`; each is refused.
static SPECIAL_PURPOSE: LazyLock<Vec<Registered>> = LazyLock::new(|| {
    include_str!("special_purpose_addresses.csv")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with("block,"))
        .map(|line| {
            let mut fields = line.splitn(3, ',');
            let block = fields.next().unwrap_or_default();
            Registered {
                block: block
                    .parse()
                    .unwrap_or_else(|_| panic!("{block:?} in the registry is a CIDR block")),
                name: fields.next().unwrap_or_default(),
            }
        })
        .collect()
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_http_urls_without_credentials_pass() {
        for bad in [
            "ftp://example.org/",
            "file:///etc/passwd",
            "http://user:pw@example.org/",
            "http://user@example.org/",
            "javascript:alert(1)",
            "http://",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let target = parse("https://hooks.example.org/texfleet?x=1").unwrap();
        assert_eq!(
            (target.host.as_str(), target.port),
            ("hooks.example.org", 443)
        );
        assert_eq!(parse("http://[::1]:8080/").unwrap().host, "::1");
    }

    #[test]
    fn addresses_of_special_networks_are_refused_unless_allowed() {
        for forbidden in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "::a9fe:a9fe",
            "::ffff:0:a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "100::1",
            "198.18.0.1",
            "192.0.0.170",
            "203.0.113.9",
        ] {
            let address: IpAddr = forbidden.parse().unwrap();
            assert!(!is_allowed(address, &[]), "{forbidden}");
        }
        for public in ["93.184.216.34", "2606:4700::1111", "100.128.0.1"] {
            assert!(is_allowed(public.parse().unwrap(), &[]), "{public}");
        }
        let loopback = allowed_ranges("127.0.0.0/8, ::1/128").unwrap();
        assert!(is_allowed("127.0.0.1".parse().unwrap(), &loopback));
        assert!(is_allowed("::1".parse().unwrap(), &loopback));
        assert!(!is_allowed("10.0.0.1".parse().unwrap(), &loopback));
        assert!(allowed_ranges("not-a-range").is_err());
    }

    /// The first, a middle and the last address of every registry entry.
    #[test]
    fn every_address_of_every_special_purpose_entry_is_refused() {
        assert!(
            SPECIAL_PURPOSE.len() >= 50,
            "{} entries",
            SPECIAL_PURPOSE.len()
        );
        for entry in SPECIAL_PURPOSE.iter() {
            let (first, last) = (entry.block.network(), entry.block.broadcast());
            let middle = match (first, last) {
                (IpAddr::V4(a), IpAddr::V4(b)) => {
                    let middle = (u64::from(u32::from(a)) + u64::from(u32::from(b))) / 2;
                    IpAddr::V4(std::net::Ipv4Addr::from(middle as u32))
                }
                (IpAddr::V6(a), IpAddr::V6(b)) => IpAddr::V6(std::net::Ipv6Addr::from(
                    u128::from(a) / 2 + u128::from(b) / 2,
                )),
                _ => unreachable!(),
            };
            for address in [first, middle, last] {
                assert!(!is_allowed(address, &[]), "{address} of {}", entry.name);
            }
        }
        // Beside the entries, public space stays public.
        for public in [
            "192.88.100.1",
            "198.20.0.1",
            "2001:4860::1",
            "2620:4f:8001::1",
            "2a00:1450::1",
        ] {
            assert!(is_allowed(public.parse().unwrap(), &[]), "{public}");
        }
    }
}
