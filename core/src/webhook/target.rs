//! Where a webhook may go. A webhook URL is the client's and the delivery is the service's own
//! request, so an endpoint must not reach the service's network (the SSRF of Judge0's
//! callbacks): the URL is `http` or `https` without credentials, and every address its host
//! resolves to must be public (not loopback, private, link-local with the cloud metadata
//! address, unique-local, carrier-grade NAT, multicast, broadcast or unspecified), unless the
//! operator allows its range in `webhook_allowed_cidrs`. The check runs at registration and at
//! every delivery (DNS may change), and the delivery connects to the address checked.

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use url::{Host, Url};

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

/// Resolves the target's host and returns the address to connect to: the first, once every
/// address it resolves to is allowed (one forbidden address refuses the host, so that a name
/// cannot mix a public address with an internal one). The refusal does not say which address
/// a name has (that would map the operator's internal names for a client); the log does.
pub async fn resolve(target: &Target, allowed: &[IpNet]) -> Result<SocketAddr, String> {
    let lookup = tokio::net::lookup_host((target.host.as_str(), target.port));
    let addresses: Vec<SocketAddr> = match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
        Ok(Ok(addresses)) => addresses.collect(),
        Ok(Err(_)) | Err(_) => Vec::new(),
    };
    if addresses.is_empty() {
        return Err(format!(
            "{} does not resolve (within {} s)",
            target.host,
            RESOLVE_TIMEOUT.as_secs()
        ));
    }
    if let Some(forbidden) = addresses.iter().find(|a| !is_allowed(a.ip(), allowed)) {
        tracing::warn!(host = target.host, address = %forbidden.ip(), "webhook host refused");
        return Err(format!(
            "{} resolves to an address of a private or special network",
            target.host
        ));
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
    match address {
        IpAddr::V4(v4) => !is_special_v4(v4),
        IpAddr::V6(v6) => !is_special_v6(v6),
    }
}

fn is_special_v4(address: Ipv4Addr) -> bool {
    let [a, b, c, _] = address.octets();
    address.is_loopback()
        || address.is_private()
        || address.is_link_local()
        || address.is_multicast()
        || address.is_broadcast()
        || address.is_unspecified()
        || a == 0
        // Carrier-grade NAT, 100.64.0.0/10.
        || (a == 100 && (64..128).contains(&b))
        // Reserved for future use, 240.0.0.0/4.
        || a >= 240
        // IETF protocol assignments 192.0.0.0/24, benchmarking 198.18.0.0/15, documentation.
        || (a, b, c) == (192, 0, 0)
        || (a == 198 && (b == 18 || b == 19))
        || (a, b, c) == (192, 0, 2)
        || (a, b, c) == (198, 51, 100)
        || (a, b, c) == (203, 0, 113)
}

/// Only global unicast (2000::/3) counts as public, less the prefixes that carry an IPv4
/// address to a relay (Teredo 2001::/32, 6to4 2002::/16) and the documentation prefix; the
/// rest (loopback, link-local, unique-local, multicast, NAT64, IPv4-compatible, SIIT) is not
/// global unicast at all. IPv4-mapped addresses were judged as IPv4 before this.
fn is_special_v6(address: Ipv6Addr) -> bool {
    let [first, second, ..] = address.segments();
    (first & 0xe000) != 0x2000
        || (first, second) == (0x2001, 0x0000)
        || (first, second) == (0x2001, 0x0db8)
        || first == 0x2002
}

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
}
