//! The one rule naming the bucket of a per-client-IP limit, used by every per-IP limit of both
//! halves (the edge's waiting-room limit, the origin's promo-code guess limit).
//!
//! An IPv4 client holds one address, but an IPv6 client is handed a whole prefix (a /64 at
//! least, often a /56 or /48) and may pick any address in it: limiting per address would let
//! one client take a fresh bucket for every request. So:
//!
//! - an IPv4 address is its own bucket (`198.51.100.23`);
//! - an IPv6 address is limited per prefix of [`Ipv6LimitPrefix`] bits (default
//!   [`DEFAULT_IPV6_LIMIT_PREFIX`], `2001:db8:1:2::/64`);
//! - an IPv6 address that carries an IPv4 client's address shares that IPv4 address's bucket:
//!   IPv4-mapped `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2), NAT64 `64:ff9b::a.b.c.d` (RFC 6052),
//!   6to4 `2002:aabb:ccdd::/48` (RFC 3056) and Teredo `2001:0::/32` (RFC 4380, the client's
//!   public IPv4 address is the last 32 bits inverted).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Default prefix length of the IPv6 bucket, bits: the smallest prefix an IPv6 end site is
/// given (RFC 6177).
pub const DEFAULT_IPV6_LIMIT_PREFIX: u8 = 64;
/// Shortest accepted prefix length, bits.
pub const MIN_IPV6_LIMIT_PREFIX: u8 = 32;
/// Longest accepted prefix length, bits (one bucket per address).
pub const MAX_IPV6_LIMIT_PREFIX: u8 = 128;

/// The length of the IPv6 prefix that shares one per-IP bucket, in bits
/// ([`MIN_IPV6_LIMIT_PREFIX`]`..=`[`MAX_IPV6_LIMIT_PREFIX`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6LimitPrefix(u8);

impl Default for Ipv6LimitPrefix {
    fn default() -> Self {
        Ipv6LimitPrefix(DEFAULT_IPV6_LIMIT_PREFIX)
    }
}

impl Ipv6LimitPrefix {
    /// The prefix of `bits`. Errors (a message naming the bounds) outside
    /// [`MIN_IPV6_LIMIT_PREFIX`]`..=`[`MAX_IPV6_LIMIT_PREFIX`].
    pub fn new(bits: u8) -> Result<Self, String> {
        if (MIN_IPV6_LIMIT_PREFIX..=MAX_IPV6_LIMIT_PREFIX).contains(&bits) {
            Ok(Ipv6LimitPrefix(bits))
        } else {
            Err(out_of_bounds())
        }
    }

    /// The prefix of a setting's text (`"64"`, `"/56"`); errors as [`Ipv6LimitPrefix::new`],
    /// or when it is not a number.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let t = t.strip_prefix('/').unwrap_or(t);
        t.parse::<u8>()
            .map_err(|_| out_of_bounds())
            .and_then(Self::new)
    }

    /// The length, bits.
    pub fn bits(self) -> u8 {
        self.0
    }
}

fn out_of_bounds() -> String {
    format!(
        "must be an IPv6 prefix length of {MIN_IPV6_LIMIT_PREFIX} to {MAX_IPV6_LIMIT_PREFIX} bits"
    )
}

/// The IPv4 client an IPv6 address stands for, when it carries one (see the module docs).
fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    // The last 32 bits (truncation intended).
    let low = Ipv4Addr::from(v6.to_bits() as u32);
    match s {
        // NAT64 well-known prefix 64:ff9b::/96.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        // 6to4 2002:V4ADDR::/48.
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        // Teredo 2001:0::/32: the client's public address, inverted.
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!u32::from(low))),
        _ => None,
    }
}

/// The bucket key of client address `ip` for every per-IP limit: an IPv4 address itself
/// (`198.51.100.23`), an IPv6 address carrying an IPv4 client's address that IPv4 address,
/// any other IPv6 address its network of `prefix` bits (`2001:db8:1:2::/64`).
pub fn limit_key(ip: IpAddr, prefix: Ipv6LimitPrefix) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match embedded_ipv4(v6) {
            Some(v4) => v4.to_string(),
            None => {
                let bits = u32::from(prefix.bits());
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                format!("{}/{bits}", Ipv6Addr::from_bits(v6.to_bits() & mask))
            }
        },
    }
}

/// [`limit_key`] of an address's text: an IPv4 or IPv6 address, surrounding spaces allowed,
/// an IPv6 one also in brackets (`[2001:db8::1]`, RFC 3986 §3.2.2, with or without a `:port`
/// after them) or with a zone (`fe80::1%eth0`, RFC 6874; the zone is dropped, the address
/// counts). `None` when it is none of these: no per-IP limit applies to a request without a
/// known address (behind Cloudflare every request carries one).
pub fn limit_key_of(text: &str, prefix: Ipv6LimitPrefix) -> Option<String> {
    let text = text.trim();
    let text = match text.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.0,
        None => text,
    };
    let text = text.split_once('%').map_or(text, |(addr, _zone)| addr);
    text.parse::<IpAddr>().ok().map(|ip| limit_key(ip, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str, bits: u8) -> Option<String> {
        limit_key_of(text, Ipv6LimitPrefix::new(bits).unwrap())
    }

    #[test]
    fn bracketed_and_zoned_ipv6_forms_count_as_their_address() {
        let plain = key("2001:db8:9:9::1", 64);
        assert_eq!(plain.as_deref(), Some("2001:db8:9:9::/64"));
        for form in [
            "[2001:db8:9:9::7]",
            " [2001:db8:9:9::7]:443 ",
            "2001:db8:9:9::7%eth0",
            "[2001:db8:9:9::7%25eth0]",
        ] {
            assert_eq!(key(form, 64), plain, "{form}");
        }
        assert_eq!(
            key("[::ffff:198.51.100.23]", 64).as_deref(),
            Some("198.51.100.23")
        );
        for junk in [
            "junk-1",
            "[2001:db8::1",
            "[]",
            "%eth0",
            "",
            "198.51.100.23:80",
        ] {
            assert_eq!(key(junk, 64), None, "{junk}");
        }
    }

    #[test]
    fn an_ipv4_address_is_its_own_bucket() {
        assert_eq!(key("198.51.100.23", 64).as_deref(), Some("198.51.100.23"));
        assert_eq!(key(" 203.0.113.7 ", 48).as_deref(), Some("203.0.113.7"));
        assert_ne!(key("198.51.100.23", 64), key("198.51.100.24", 64));
    }

    #[test]
    fn ipv6_addresses_share_a_bucket_per_64_by_default() {
        let p = Ipv6LimitPrefix::default();
        assert_eq!(p.bits(), 64);
        let a = limit_key_of("2001:db8:1:2::1", p).unwrap();
        assert_eq!(a, "2001:db8:1:2::/64");
        for other in [
            "2001:db8:1:2:ffff:ffff:ffff:ffff",
            "2001:DB8:1:2:abcd::7",
            "2001:0db8:0001:0002:0000:0000:0000:0002",
        ] {
            assert_eq!(limit_key_of(other, p).unwrap(), a, "{other}");
        }
        assert_eq!(
            limit_key_of("2001:db8:1:3::1", p).unwrap(),
            "2001:db8:1:3::/64"
        );
    }

    #[test]
    fn a_configured_prefix_of_48_or_56_widens_the_bucket() {
        assert_eq!(
            key("2001:db8:1:2::1", 48).as_deref(),
            Some("2001:db8:1::/48")
        );
        assert_eq!(key("2001:db8:1:ff02::1", 48), key("2001:db8:1:2::1", 48));
        assert_ne!(key("2001:db8:2::1", 48), key("2001:db8:1::1", 48));
        assert_eq!(
            key("2001:db8:1:12ff::1", 56).as_deref(),
            Some("2001:db8:1:1200::/56")
        );
        assert_ne!(key("2001:db8:1:1300::1", 56), key("2001:db8:1:1200::1", 56));
        assert_eq!(key("2001:db8::1", 128).as_deref(), Some("2001:db8::1/128"));
        assert_eq!(key("2001:db8::1", 32).as_deref(), Some("2001:db8::/32"));
    }

    #[test]
    fn ipv6_addresses_carrying_an_ipv4_client_share_its_bucket() {
        for bits in [48, 64, 128] {
            for v6 in [
                "::ffff:198.51.100.23",
                "::FFFF:c633:6417",
                "64:ff9b::198.51.100.23",
                "2002:c633:6417::1",
                "2002:c633:6417:ffff::9",
                // Teredo: server 65.54.227.120, client 198.51.100.23 inverted (39cc:9be8).
                "2001:0:4136:e378:8000:63bf:39cc:9be8",
            ] {
                assert_eq!(key(v6, bits).as_deref(), Some("198.51.100.23"), "{v6}");
            }
        }
        // IPv4-compatible `::a.b.c.d` is deprecated and not mapped: an ordinary IPv6 address.
        assert_eq!(key("::198.51.100.23", 64).as_deref(), Some("::/64"));
    }

    #[test]
    fn malformed_addresses_have_no_key() {
        for bad in [
            "",
            " ",
            "unknown",
            "198.51.100",
            "198.51.100.256",
            "2001:db8::1::2",
            "2001:db8::/64",
            "198.51.100.23:443",
        ] {
            assert_eq!(key(bad, 64), None, "{bad:?}");
        }
    }

    #[test]
    fn the_prefix_setting_is_bounded() {
        assert_eq!(Ipv6LimitPrefix::parse("48").unwrap().bits(), 48);
        assert_eq!(Ipv6LimitPrefix::parse(" /56 ").unwrap().bits(), 56);
        assert_eq!(Ipv6LimitPrefix::parse("128").unwrap().bits(), 128);
        for bad in ["0", "31", "129", "-1", "64.5", "abc", "", "300"] {
            let e = Ipv6LimitPrefix::parse(bad).unwrap_err();
            assert_eq!(
                e, "must be an IPv6 prefix length of 32 to 128 bits",
                "{bad}"
            );
        }
    }
}
