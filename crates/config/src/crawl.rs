//! `[crawl]`: limits of a documentation-site crawl, the networks the
//! crawler may reach, the credentials sites get, and the transports the
//! distributed crawler's git may use (SECURITY.md).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::bad;
use crate::site_credentials::{SiteAuth, SiteCredential, validate_all};
use crate::{Cidr, InvalidSetting};

/// `[crawl]`: limits of a documentation-site crawl, the networks the
/// crawler may reach, and the transports the distributed crawler's git may
/// use (SECURITY.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrawlConfig {
    /// At most this many pages are fetched.
    pub max_pages: usize,
    /// Links are followed at most this many hops from the start URL.
    pub max_depth: usize,
    /// Per-request timeout in seconds, from connecting to the last byte of
    /// the body.
    pub timeout_secs: u64,
    /// Seconds to wait for a connection.
    pub connect_timeout_secs: u64,
    /// The user agent sent, and matched against robots.txt groups.
    pub user_agent: String,
    /// Networks the crawler may connect to although they are not public
    /// (loopback, RFC 1918, link-local, CGNAT, IPv6 ULA, …): CIDRs such as
    /// `"10.20.0.0/16"`, or single addresses. Empty: public addresses only.
    /// Checked on the address actually connected to, on every redirect,
    /// for sites and for the distributed crawler's git.
    pub allow_private_networks: Vec<String>,
    /// A response body larger than this (after decompression) is refused.
    pub max_page_bytes: u64,
    /// Redirects followed per request (each checked like the first URL).
    pub max_redirects: usize,
    /// Media types of pages that are fetched; others are skipped without
    /// reading their body.
    pub content_types: Vec<String>,
    /// An HTTP proxy for site crawling (`http://proxy:3128`). Unset: no
    /// proxy at all; the `HTTP(S)_PROXY` variables are ignored, since a
    /// proxy connects on the crawler's behalf, out of reach of the address
    /// check. With a proxy the check applies to the names as the crawler
    /// resolves them; the proxy must enforce its own egress policy.
    pub proxy: Option<String>,
    /// Transports the distributed crawler (`weft-crawler`) lets git use:
    /// any of `https`, `ssh`, `http`, `git`, `file`. `weft index` on your
    /// own machine allows all five; remote helpers (`ext::`, `fd::`) are
    /// never allowed.
    pub git_protocols: Vec<String>,
    /// Credentials for documentation sites that want a login, one entry per
    /// origin, the secret read from an environment variable or a file
    /// ([`SiteCredential`]). A site URL may not hold a user name or password
    /// itself (they would become part of every crawled page's uri). They are
    /// sent only to requests on the entry's origin, and only by a crawl
    /// that starts there.
    pub site_credentials: Vec<SiteCredential>,
    /// Credentials for git over http(s), one entry per origin
    /// (`https://git.example.com`), in the shape of `site_credentials`: a
    /// `username` with `password_env` or `password_file` (HTTP Basic; a
    /// host's access token is such a password, e.g. user `x-access-token`
    /// on GitHub), or `token_env` / `token_file` (`Authorization: Bearer`).
    /// The secret is read when a crawl starts (from a mounted Secret's file,
    /// say) and given to git in its environment, through a credential
    /// helper or an extra header scoped to that origin: never on git's
    /// command line, in a URL, a log or `--json`. A repository URL must not
    /// hold credentials itself where these are set.
    pub git_credentials: Vec<SiteCredential>,
    /// The private key git's ssh logs in with (a mounted Secret's file,
    /// e.g. `/etc/weft-git/id_ed25519`). Needs `git_known_hosts_file`.
    pub git_ssh_key_file: Option<PathBuf>,
    /// The `known_hosts` file ssh checks git servers' host keys against:
    /// a host missing from it, or with another key, is refused
    /// (`StrictHostKeyChecking=yes`; never `no`).
    pub git_known_hosts_file: Option<PathBuf>,
    /// The disk git checkouts may take together, in bytes (the checkout
    /// cache: `<data dir>/sources`, a PVC in prod). Checkouts are kept and
    /// fetched run after run; when a sync would take the cache past this,
    /// the checkouts synced least recently are removed first (never one a
    /// crawl is reading; a crawl job's sources still to come only when
    /// nothing else is left), and cloned again, partially, the next time
    /// their source is crawled. Unset: no limit.
    pub max_checkout_bytes: Option<u64>,
}

/// The transports `crawl.git_protocols` may name.
pub const GIT_PROTOCOLS: &[&str] = &["https", "ssh", "http", "git", "file"];

impl Default for CrawlConfig {
    fn default() -> Self {
        Self {
            max_pages: 1000,
            max_depth: 8,
            timeout_secs: 30,
            connect_timeout_secs: 10,
            user_agent: "weft".into(),
            allow_private_networks: Vec::new(),
            max_page_bytes: 16 * 1024 * 1024,
            max_redirects: 5,
            content_types: [
                "text/html",
                "application/xhtml+xml",
                "text/markdown",
                "text/x-markdown",
                "text/plain",
            ]
            .map(String::from)
            .to_vec(),
            proxy: None,
            git_protocols: vec!["https".into(), "ssh".into()],
            site_credentials: Vec::new(),
            git_credentials: Vec::new(),
            git_ssh_key_file: None,
            git_known_hosts_file: None,
            max_checkout_bytes: None,
        }
    }
}

impl CrawlConfig {
    /// The networks of `allow_private_networks`, parsed.
    pub fn private_network_allow_list(&self) -> Result<Vec<Cidr>, InvalidSetting> {
        self.allow_private_networks
            .iter()
            .map(|n| {
                n.parse::<Cidr>().map_err(|message| InvalidSetting {
                    key: "crawl.allow_private_networks".into(),
                    message,
                })
            })
            .collect()
    }

    /// The credentials `site_credentials` gives for `origin`, the secret
    /// read now; `None` if no entry is for that origin. Errors name the
    /// entry's field and the variable or file, never the secret.
    pub fn site_auth_for(&self, origin: &url::Origin) -> Result<Option<SiteAuth>, InvalidSetting> {
        for (i, entry) in self.site_credentials.iter().enumerate() {
            if entry.parsed_origin().as_ref() == Ok(origin) {
                return entry
                    .read(&format!("crawl.site_credentials[{i}]"))
                    .map(Some);
            }
        }
        Ok(None)
    }

    /// Checks the section: positive limits and timeouts, networks that
    /// parse, media types, an http(s) proxy, git transports weft knows,
    /// site credentials that name an origin and one place for their secret.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.max_pages == 0 {
            return bad("crawl.max_pages", "must be at least 1");
        }
        if self.timeout_secs == 0 {
            return bad("crawl.timeout_secs", "must be at least 1");
        }
        if self.connect_timeout_secs == 0 {
            return bad("crawl.connect_timeout_secs", "must be at least 1");
        }
        if self.max_checkout_bytes == Some(0) {
            return bad(
                "crawl.max_checkout_bytes",
                "must be at least 1 (leave it out for no limit)",
            );
        }
        if self.max_page_bytes < 1024 {
            return bad("crawl.max_page_bytes", "must be at least 1024");
        }
        self.private_network_allow_list()?;
        if self.content_types.is_empty() {
            return bad("crawl.content_types", "must name at least one media type");
        }
        for t in &self.content_types {
            let ok = t.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "/+-.".contains(c))
            });
            if !ok {
                return bad(
                    "crawl.content_types",
                    format!("{t:?} is not a media type like text/html"),
                );
            }
        }
        if let Some(proxy) = &self.proxy
            && !(proxy.starts_with("http://") || proxy.starts_with("https://"))
        {
            return bad(
                "crawl.proxy",
                format!("{proxy:?} is not an http:// or https:// proxy URL"),
            );
        }
        for p in &self.git_protocols {
            if !GIT_PROTOCOLS.contains(&p.as_str()) {
                return bad(
                    "crawl.git_protocols",
                    format!(
                        "{p:?} is not one of {}; remote helpers such as ext run commands and are never allowed",
                        GIT_PROTOCOLS.join(", ")
                    ),
                );
            }
        }
        validate_all("crawl.site_credentials", &self.site_credentials)?;
        validate_all("crawl.git_credentials", &self.git_credentials)?;
        if self.git_ssh_key_file.is_some() && self.git_known_hosts_file.is_none() {
            return bad(
                "crawl.git_ssh_key_file",
                "needs crawl.git_known_hosts_file: ssh checks each git server's host key against it (an unknown host is refused, never trusted on first use)",
            );
        }
        for (key, path) in [
            ("crawl.git_ssh_key_file", &self.git_ssh_key_file),
            ("crawl.git_known_hosts_file", &self.git_known_hosts_file),
        ] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return bad(key, "names no file");
            }
        }
        Ok(())
    }

    /// The credentials `git_credentials` gives, each with its origin, the
    /// secrets read now. Errors name the entry's field and the variable or
    /// file, never the secret.
    pub fn git_auth(&self) -> Result<Vec<(url::Origin, SiteAuth)>, InvalidSetting> {
        self.git_credentials
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let key = format!("crawl.git_credentials[{i}]");
                let origin = entry.parsed_origin().map_err(|message| InvalidSetting {
                    key: format!("{key}.origin"),
                    message,
                })?;
                Ok((origin, entry.read(&key)?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_refused, env, load_toml_with_env};

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_eq!(CrawlConfig::default().validate(), Ok(()));
        assert_refused(&[
            ("[crawl]\nmax_pages = 0\n", "crawl.max_pages"),
            (
                "[crawl]\nallow_private_networks = [\"10.0.0.1/8\"]\n",
                "crawl.allow_private_networks",
            ),
            (
                "[crawl]\ngit_protocols = [\"https\", \"ext\"]\n",
                "crawl.git_protocols",
            ),
            (
                "[crawl]\ncontent_types = [\"html\"]\n",
                "crawl.content_types",
            ),
            ("[crawl]\nproxy = \"socks5://p\"\n", "crawl.proxy"),
            ("[crawl]\nmax_page_bytes = 10\n", "crawl.max_page_bytes"),
            (
                "[crawl]\nmax_checkout_bytes = 0\n",
                "crawl.max_checkout_bytes",
            ),
            (
                "[crawl]\nmax_checkout_bytes = \"40Gi\"\n",
                "max_checkout_bytes",
            ),
        ]);
        // The manifests set it in bytes through the environment.
        let crawl = load_toml_with_env(
            "",
            env(&[("WEFT__CRAWL__MAX_CHECKOUT_BYTES", "42949672960")]),
        )
        .unwrap()
        .crawl;
        assert_eq!(crawl.max_checkout_bytes, Some(42_949_672_960));
    }

    #[test]
    fn crawl_network_settings_come_from_file_and_environment() {
        let crawl = load_toml_with_env(
            "[crawl]\ngit_protocols = [\"https\"]\n",
            env(&[(
                "WEFT__CRAWL__ALLOW_PRIVATE_NETWORKS",
                "10.20.0.0/16,fd00::/8",
            )]),
        )
        .unwrap()
        .crawl;
        assert_eq!(crawl.git_protocols, ["https"]);
        let nets = crawl.private_network_allow_list().unwrap();
        assert_eq!(nets.len(), 2);
        assert!(nets[0].contains("10.20.3.4".parse().unwrap()));
        assert!(nets[1].contains("fd12::1".parse().unwrap()));
        // Public addresses only, by default.
        assert!(CrawlConfig::default().allow_private_networks.is_empty());
    }
}
