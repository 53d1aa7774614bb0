//! Which addresses the crawler may connect to: public ones, plus the
//! networks `crawl.allow_private_networks` lists. The site crawler and the
//! distributed crawler's git check the address they actually connect to:
//! a name is resolved once, its addresses are checked, and only the
//! checked addresses are handed to the connection (no second lookup that a
//! DNS-rebinding server could answer differently). IP-literal hosts never
//! reach a resolver, so they are checked on their own ([`NetworkPolicy::check_url`]).
//!
//! Not public: loopback, RFC 1918 private, link-local (169.254.0.0/16, where
//! cloud metadata services answer, and fe80::/10), carrier-grade NAT
//! (100.64.0.0/10), multicast, broadcast, unspecified, documentation,
//! benchmarking and reserved ranges, IPv6 unique-local (fc00::/7) and
//! site-local addresses, and every IPv6 form that embeds an IPv4 address
//! (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64
//! `64:ff9b::/96` and 6to4 `2002::/16` of a non-public address, Teredo).
//! IPv6 outside global unicast (2000::/3) is refused whatever it is.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use weft_config::InvalidSetting;
use weft_config::{Cidr, CrawlConfig};

/// The networks the crawler may reach besides public addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicy {
    allow: Vec<Cidr>,
}

/// An address the crawler may not connect to, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{address} is {reason}; the crawler connects only to public addresses (to allow it: crawl.allow_private_networks = [\"{}\"])",
    single(*address)
)]
pub struct AddressRefused {
    /// The address.
    pub address: IpAddr,
    /// What kind of address it is.
    pub reason: String,
}

fn single(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => format!("{v4}/32"),
        IpAddr::V6(v6) => format!("{v6}/128"),
    }
}

/// Why a host could not be connected to.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// An IP-literal host that is not allowed.
    #[error(transparent)]
    Refused(#[from] AddressRefused),
    /// A name whose every address is refused.
    #[error(
        "{host} resolves to {}, which is {}; the crawler connects only to public addresses (to allow it: crawl.allow_private_networks = [\"{}\"])",
        refused.address,
        refused.reason,
        single(refused.address)
    )]
    NameRefused {
        /// The name.
        host: String,
        /// The first refused address.
        refused: AddressRefused,
    },
    /// The name could not be resolved.
    #[error("cannot resolve {host}: {source}")]
    Lookup {
        /// The name.
        host: String,
        /// What the resolver said.
        #[source]
        source: std::io::Error,
    },
    /// The name resolved to nothing.
    #[error("{host} resolves to no address")]
    NoAddress {
        /// The name.
        host: String,
    },
}

impl NetworkPolicy {
    /// Public addresses plus `allow`.
    pub fn new(allow: Vec<Cidr>) -> Self {
        Self { allow }
    }

    /// The policy of `crawl.allow_private_networks`.
    pub fn from_config(config: &CrawlConfig) -> Result<Self, InvalidSetting> {
        Ok(Self::new(config.private_network_allow_list()?))
    }

    /// Whether the crawler may connect to `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), AddressRefused> {
        let Some(reason) = non_public_reason(ip) else {
            return Ok(());
        };
        let embedded = embedded_ipv4(ip);
        let allowed = self
            .allow
            .iter()
            .any(|net| net.contains(ip) || embedded.is_some_and(|v4| net.contains(v4.into())));
        if allowed {
            Ok(())
        } else {
            Err(AddressRefused {
                address: ip,
                reason,
            })
        }
    }

    /// Checks the host of `url` when it is an IP literal (however it was
    /// written: `http://2130706433/`, `http://0x7f.1/` and
    /// `http://[::ffff:127.0.0.1]/` are all 127.0.0.1 once parsed); names
    /// are checked when they are resolved.
    pub fn check_url(&self, url: &url::Url) -> Result<(), AddressRefused> {
        match url.host() {
            Some(url::Host::Ipv4(v4)) => self.check(v4.into()),
            Some(url::Host::Ipv6(v6)) => self.check(v6.into()),
            _ => Ok(()),
        }
    }

    /// Resolves `host` with `lookup` and keeps the addresses the policy
    /// allows; an error when none is left. An IP literal is checked as it is.
    pub async fn resolve(&self, lookup: &dyn Lookup, host: &str) -> Result<Vec<IpAddr>, NetError> {
        if let Some(ip) = ip_literal(host) {
            self.check(ip)?;
            return Ok(vec![ip]);
        }
        let addresses = lookup
            .lookup(host)
            .await
            .map_err(|source| NetError::Lookup {
                host: host.to_owned(),
                source,
            })?;
        self.keep_allowed(host, addresses)
    }

    /// [`Self::resolve`] with the system resolver, blocking (for code that
    /// blocks anyway, such as running git).
    pub fn resolve_blocking(&self, host: &str) -> Result<Vec<IpAddr>, NetError> {
        use std::net::ToSocketAddrs as _;
        if let Some(ip) = ip_literal(host) {
            self.check(ip)?;
            return Ok(vec![ip]);
        }
        let addresses = (host, 0)
            .to_socket_addrs()
            .map_err(|source| NetError::Lookup {
                host: host.to_owned(),
                source,
            })?
            .map(|a| a.ip())
            .collect();
        self.keep_allowed(host, addresses)
    }

    fn keep_allowed(&self, host: &str, addresses: Vec<IpAddr>) -> Result<Vec<IpAddr>, NetError> {
        let mut allowed = Vec::new();
        let mut first_refused = None;
        for ip in addresses {
            match self.check(ip) {
                Ok(()) => allowed.push(ip),
                Err(refused) => {
                    tracing::debug!(host, "{refused}");
                    first_refused.get_or_insert(refused);
                }
            }
        }
        match (allowed.is_empty(), first_refused) {
            (false, _) => Ok(allowed),
            (true, Some(refused)) => Err(NetError::NameRefused {
                host: host.to_owned(),
                refused,
            }),
            (true, None) => Err(NetError::NoAddress {
                host: host.to_owned(),
            }),
        }
    }
}

fn ip_literal(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The IPv4 address an IPv6 address stands for, when it embeds one:
/// IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
fn embedded_ipv4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else { return None };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let bits = u128::from(v6);
    let s = v6.segments();
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if bits >> 32 == 0 && bits > 1 {
        return Some(low32); // ::a.b.c.d
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low32);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    None
}

/// What kind of non-public address `ip` is; `None` when it is public.
pub fn non_public_reason(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => ipv4_reason(v4).map(str::to_owned),
        IpAddr::V6(v6) => ipv6_reason(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn ipv4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u32, &str)] = &[
        (
            [0, 0, 0, 0],
            8,
            "an unspecified (\"this network\") address, 0.0.0.0/8",
        ),
        ([10, 0, 0, 0], 8, "a private address (RFC 1918)"),
        (
            [100, 64, 0, 0],
            10,
            "a carrier-grade NAT address, 100.64.0.0/10",
        ),
        ([127, 0, 0, 0], 8, "a loopback address"),
        (
            [169, 254, 0, 0],
            16,
            "a link-local address, 169.254.0.0/16 (where cloud metadata services answer)",
        ),
        ([172, 16, 0, 0], 12, "a private address (RFC 1918)"),
        (
            [192, 0, 0, 0],
            24,
            "an IETF protocol assignment, 192.0.0.0/24",
        ),
        ([192, 0, 2, 0], 24, "a documentation address, 192.0.2.0/24"),
        (
            [192, 88, 99, 0],
            24,
            "a 6to4 relay anycast address, 192.88.99.0/24",
        ),
        ([192, 168, 0, 0], 16, "a private address (RFC 1918)"),
        ([198, 18, 0, 0], 15, "a benchmarking address, 198.18.0.0/15"),
        (
            [198, 51, 100, 0],
            24,
            "a documentation address, 198.51.100.0/24",
        ),
        (
            [203, 0, 113, 0],
            24,
            "a documentation address, 203.0.113.0/24",
        ),
        ([224, 0, 0, 0], 4, "a multicast address"),
        ([255, 255, 255, 255], 32, "the broadcast address"),
        ([240, 0, 0, 0], 4, "a reserved address, 240.0.0.0/4"),
    ];
    RANGES
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map(|(_, _, reason)| *reason)
}

fn ipv6_reason(ip: Ipv6Addr) -> Option<String> {
    let s = ip.segments();
    let bits = u128::from(ip);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return ipv4_reason(v4).map(|r| format!("an IPv4-mapped form of {v4}, {r}"));
    }
    if bits == 0 {
        return Some("the unspecified address".into());
    }
    if bits == 1 {
        return Some("a loopback address".into());
    }
    if bits >> 32 == 0 {
        let v4 = Ipv4Addr::from(bits as u32);
        return Some(format!(
            "an IPv4-compatible form of {v4} (deprecated, ::/96)"
        ));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 of a public address is how IPv6-only networks reach it.
        let v4 = Ipv4Addr::from(bits as u32);
        return ipv4_reason(v4).map(|r| format!("a NAT64 form of {v4}, {r}"));
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some("a local-use NAT64 address, 64:ff9b:1::/48".into());
    }
    if s[0] & 0xe000 != 0x2000 {
        let kind = match s[0] {
            x if x & 0xfe00 == 0xfc00 => "a unique local address, fc00::/7 (IPv6's private range)",
            x if x & 0xffc0 == 0xfe80 => "a link-local address, fe80::/10",
            x if x & 0xffc0 == 0xfec0 => "a site-local address, fec0::/10 (deprecated)",
            x if x & 0xff00 == 0xff00 => "a multicast address",
            0x0100 if s[1..4] == [0, 0, 0] => "a discard-only address, 100::/64",
            _ => "not a global unicast address (outside 2000::/3)",
        };
        return Some(kind.into());
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return Some("a Teredo address, 2001::/32".into());
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return Some("a documentation address, 2001:db8::/32".into());
    }
    if s[0] == 0x2001 && s[1] < 0x0200 {
        return Some("an IETF protocol assignment, 2001::/23".into());
    }
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::from((bits >> 80) as u32);
        return ipv4_reason(v4).map(|r| format!("a 6to4 form of {v4}, {r}"));
    }
    if s[0] == 0x3fff && s[1] < 0x1000 {
        return Some("a documentation address, 3fff::/20".into());
    }
    None
}

/// The future of a [`Lookup`].
pub type LookupFuture = Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;

/// Turns a host name into addresses. [`SystemLookup`] asks the system
/// resolver; tests give fixed answers.
pub trait Lookup: Send + Sync {
    /// The addresses of `host`.
    fn lookup(&self, host: &str) -> LookupFuture;
}

/// The system resolver (`getaddrinfo`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_owned();
        Box::pin(async move {
            let addresses = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addresses.map(|a| a.ip()).collect())
        })
    }
}

/// reqwest's resolver for the site crawler: every name is resolved once and
/// only its allowed addresses are returned, so the connection goes to a
/// checked address. `exempt` (the configured proxy's host) is resolved
/// unchecked.
pub(crate) struct GuardedResolver {
    pub(crate) policy: Arc<NetworkPolicy>,
    pub(crate) lookup: Arc<dyn Lookup>,
    pub(crate) exempt: Option<String>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let policy = self.policy.clone();
        let lookup = self.lookup.clone();
        let exempt = self.exempt.as_deref() == Some(host.as_str());
        Box::pin(async move {
            let addresses = if exempt {
                lookup
                    .lookup(&host)
                    .await
                    .map_err(|source| NetError::Lookup {
                        host: host.clone(),
                        source,
                    })?
            } else {
                policy.resolve(lookup.as_ref(), &host).await?
            };
            let addrs: reqwest::dns::Addrs =
                Box::new(addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn public_addresses_pass_and_the_rest_say_what_they_are() {
        let policy = NetworkPolicy::default();
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "151.101.1.69",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "64:ff9b::808:808", // NAT64 of 8.8.8.8
            "2002:808:808::1",  // 6to4 of 8.8.8.8
        ] {
            assert_eq!(policy.check(ip(public)), Ok(()), "{public}");
        }
        for (address, kind) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.31.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "metadata"),
            ("100.100.100.200", "carrier-grade NAT"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("192.0.2.1", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "IPv4-mapped"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "IPv4-compatible"),
            ("64:ff9b::7f00:1", "NAT64"),
            ("64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254"),
            ("64:ff9b:1::a00:1", "local-use NAT64"),
            ("2002:7f00:1::1", "6to4 form of 127.0.0.1"),
            ("2001::1", "Teredo"),
            ("2001:db8::1", "documentation"),
            ("fd00:ec2::254", "unique local"),
            ("fc00::1", "unique local"),
            ("fe80::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("100::1", "discard"),
            ("5f00::1", "global unicast"),
        ] {
            let refused = policy.check(ip(address)).unwrap_err();
            assert!(
                refused.reason.contains(kind),
                "{address}: {}",
                refused.reason
            );
            assert!(refused.to_string().contains("crawl.allow_private_networks"));
        }
    }

    #[test]
    fn allowed_networks_pass_in_every_form() {
        let policy = NetworkPolicy::new(vec![
            "127.0.0.0/8".parse().unwrap(),
            "fd00::/8".parse().unwrap(),
        ]);
        for allowed in [
            "127.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::7f00:1",
            "fd12::1",
        ] {
            assert_eq!(policy.check(ip(allowed)), Ok(()), "{allowed}");
        }
        for refused in ["::1", "10.0.0.1", "169.254.169.254", "fe80::1"] {
            assert!(policy.check(ip(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn odd_ip_literals_are_the_addresses_they_parse_to() {
        let policy = NetworkPolicy::default();
        for url in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://0/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[0:0:0:0:0:ffff:169.254.169.254]/",
            "http://[::]/",
            "http://0xa9fea9fe/",
            "http://169.254.169.254./",
        ] {
            let parsed = url::Url::parse(url).unwrap();
            let refused = policy.check_url(&parsed);
            assert!(refused.is_err(), "{url} parses to {:?}", parsed.host());
        }
    }

    struct Fixed(Vec<IpAddr>);
    impl Lookup for Fixed {
        fn lookup(&self, _: &str) -> LookupFuture {
            let answer = self.0.clone();
            Box::pin(async move { Ok(answer) })
        }
    }

    #[tokio::test]
    async fn names_keep_only_their_allowed_addresses() {
        let policy = NetworkPolicy::default();
        let mixed = Fixed(vec![ip("10.0.0.1"), ip("8.8.8.8")]);
        assert_eq!(
            policy.resolve(&mixed, "mixed.test").await.unwrap(),
            [ip("8.8.8.8")]
        );
        let private = Fixed(vec![ip("169.254.169.254")]);
        let e = policy.resolve(&private, "metadata.test").await.unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("metadata.test") && text.contains("169.254.169.254"),
            "{text}"
        );
        let e = policy
            .resolve(&Fixed(vec![]), "none.test")
            .await
            .unwrap_err();
        assert!(matches!(e, NetError::NoAddress { .. }));
    }
}
