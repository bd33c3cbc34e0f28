//! The network an address belongs to, for the limits that count clients by network rather than
//! by address (one party's many addresses usually share one).

use std::net::IpAddr;

/// The network of `address` with a prefix of `v4` bits for IPv4 and `v6` bits for IPv6; an
/// IPv4 address mapped into IPv6 (a dual-stack listener's view of an IPv4 client) counts as
/// IPv4.
pub fn of(address: IpAddr, v4: u8, v6: u8) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V4(v4_address) => IpAddr::V4(
            ipnet::Ipv4Net::new(v4_address, v4)
                .expect("a valid prefix")
                .network(),
        ),
        IpAddr::V6(v6_address) => IpAddr::V6(
            ipnet::Ipv6Net::new(v6_address, v6)
                .expect("a valid prefix")
                .network(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_of_one_network_share_it() {
        let of24 = |address: &str| of(address.parse().unwrap(), 24, 48);
        assert_eq!(of24("192.0.2.7"), of24("192.0.2.200"));
        assert_ne!(of24("192.0.2.7"), of24("192.0.3.7"));
        assert_eq!(of24("::ffff:192.0.2.7"), of24("192.0.2.9"));
        assert_eq!(of24("2001:db8:1:2::1"), of24("2001:db8:1:ffff::9"));
        assert_ne!(of24("2001:db8:1::1"), of24("2001:db8:2::1"));
    }
}
