//! Networks written as CIDRs (`10.0.0.0/8`, `fd00::/8`, or one address),
//! as `crawl.allow_private_networks` lists them.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A network: an address and how many of its leading bits are fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// The network's first address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// How many leading bits are fixed.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies in the network. An IPv4-mapped IPv6 address
    /// (`::ffff:10.1.2.3`) is the IPv4 address it maps.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    /// `a.b.c.d/n`, `x:y::z/n`, or one address (a /32 or /128). Bits set
    /// beyond the prefix are an error: `10.0.0.1/8` is probably a typo.
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?} is not an IP network like 10.0.0.0/8 or fd00::/8"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        let cidr = Self { network, prefix };
        let masked = match network {
            IpAddr::V4(n) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                IpAddr::from(std::net::Ipv4Addr::from(u32::from(n) & mask))
            }
            IpAddr::V6(n) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                IpAddr::from(std::net::Ipv6Addr::from(u128::from(n) & mask))
            }
        };
        if masked != network {
            return Err(format!(
                "{text:?} has bits set after the prefix; did you mean {masked}/{prefix}?"
            ));
        }
        Ok(cidr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_contain_their_addresses() {
        let net: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains(ip("10.255.1.2")));
        assert!(net.contains(ip("::ffff:10.1.1.1")), "IPv4-mapped");
        assert!(!net.contains(ip("11.0.0.1")));
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert_eq!(one.prefix(), 32);
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("8.8.8.8")) && !all.contains(ip("::1")));
        let ula: Cidr = "fd00::/8".parse().unwrap();
        assert!(ula.contains(ip("fd12::1")) && !ula.contains(ip("fe80::1")));
        let v6: Cidr = "::1".parse().unwrap();
        assert_eq!((v6.prefix(), v6.to_string()), (128, "::1/128".to_owned()));
    }

    #[test]
    fn bad_networks_say_why() {
        for (text, needle) in [
            ("10.0.0.1/8", "10.0.0.0/8"),
            ("10.0.0.0/33", "0 to 32"),
            ("fd00::/129", "0 to 128"),
            ("localhost", "not an IP network"),
            ("10.0.0.0/x", "prefix"),
        ] {
            let e = text.parse::<Cidr>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
