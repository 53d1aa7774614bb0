//! `[query]`: the gRPC query service (`weft-query`, `weft serve`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use weft_core::query::RequestBounds;

use crate::InvalidSetting;
use crate::error::{bad, check_socket_addr};

/// `[query]`: the gRPC query service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryServiceConfig {
    /// Address the gRPC server listens on.
    pub listen: String,
    /// Requests running longer are cancelled (DEADLINE_EXCEEDED); a client's
    /// shorter `grpc-timeout` wins.
    pub request_timeout_secs: u64,
    /// Largest response message, in bytes.
    pub max_message_bytes: usize,
    /// Largest request message, in bytes: a bigger one is refused
    /// (RESOURCE_EXHAUSTED) before it is decoded. The largest request the
    /// other bounds allow is well under 100 KB.
    pub max_request_bytes: usize,
    /// Connections the port holds open at once: past it, a new connection
    /// is closed on arrival, before anything of it is read (callers that
    /// never authenticate cannot hold memory and descriptors without bound).
    pub max_connections: usize,
    /// Requests in flight on one connection (HTTP/2 streams); more wait.
    pub max_streams_per_connection: u32,
    /// Longest query text a search may send, in characters; longer ones are
    /// refused (INVALID_ARGUMENT naming `query`). The model reads at most
    /// its first few hundred tokens anyway.
    pub max_query_chars: usize,
    /// Most hits one search may ask for (`limit`); more is INVALID_ARGUMENT.
    pub max_limit: u32,
    /// Who may call the query API: `api_keys` (bearer API keys from
    /// `api_keys_file`, each bound to projects) or `none` (anyone who
    /// reaches `listen`, logged as a warning at start). Unset: `weft-query`
    /// requires keys (it fails to start without `api_keys_file`); `weft
    /// serve` uses the keys of `api_keys_file` when set, else serves
    /// without authentication on a loopback address only.
    pub auth: Option<QueryAuth>,
    /// The API keys file (TOML, `[[keys]]` entries with salted SHA-256
    /// hashes, as `weft keys new` prints them), e.g. mounted from a
    /// Kubernetes Secret. Re-read when it changes: keys are added, rotated
    /// and revoked without a restart.
    pub api_keys_file: Option<PathBuf>,
    /// Seconds between checks of `api_keys_file` for changes.
    pub api_keys_reload_secs: u64,
    /// Requests per second each API key may make (token bucket), unless
    /// its entry sets its own; unset: no limit. Over it: RESOURCE_EXHAUSTED.
    pub rate_limit_per_sec: Option<f64>,
    /// Requests a key may make at once after being idle (the bucket's
    /// size); unset: the per-second rate, rounded up.
    pub rate_limit_burst: Option<u32>,
    /// PEM certificate chain: with `tls_key_file`, the gRPC port speaks TLS
    /// (rustls) only.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// PEM CA certificate(s): when set, clients must present a certificate
    /// signed by one of them (mutual TLS). Needs `tls_cert_file`.
    pub tls_client_ca_file: Option<PathBuf>,
}

impl QueryServiceConfig {
    /// The bounds every surface (gRPC, MCP, `weft search`) holds a request
    /// to: `max_query_chars` and `max_limit` from these settings, the rest
    /// [`RequestBounds`]' defaults.
    pub fn request_bounds(&self) -> RequestBounds {
        RequestBounds {
            max_query_chars: self.max_query_chars,
            max_limit: self.max_limit as usize,
            ..RequestBounds::default()
        }
    }
}

/// `query.auth`: how callers of the query API are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryAuth {
    /// Bearer API keys from `query.api_keys_file`.
    ApiKeys,
    /// No authentication: every caller reads every project.
    None,
}

impl Default for QueryServiceConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".into(),
            request_timeout_secs: 30,
            max_message_bytes: 16 * 1024 * 1024,
            max_request_bytes: 1024 * 1024,
            max_connections: 1024,
            max_streams_per_connection: 64,
            max_query_chars: weft_core::query::MAX_QUERY_CHARS,
            max_limit: weft_core::query::MAX_LIMIT as u32,
            auth: None,
            api_keys_file: None,
            api_keys_reload_secs: 5,
            rate_limit_per_sec: None,
            rate_limit_burst: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_client_ca_file: None,
        }
    }
}

impl QueryServiceConfig {
    /// Checks the section: the listen address, the request bounds, then
    /// the authentication, rate-limit and TLS settings.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        check_socket_addr("query.listen", &self.listen)?;
        if self.request_timeout_secs == 0 {
            return bad("query.request_timeout_secs", "must be at least 1");
        }
        if self.max_message_bytes < 1024 {
            return bad("query.max_message_bytes", "must be at least 1024");
        }
        if self.max_request_bytes < 1024 {
            return bad("query.max_request_bytes", "must be at least 1024");
        }
        if self.max_connections == 0 {
            return bad("query.max_connections", "must be at least 1");
        }
        if self.max_streams_per_connection == 0 {
            return bad("query.max_streams_per_connection", "must be at least 1");
        }
        self.validate_security()
    }

    /// Checks the authentication, rate-limit and TLS settings.
    fn validate_security(&self) -> Result<(), InvalidSetting> {
        if self.auth == Some(QueryAuth::ApiKeys) && self.api_keys_file.is_none() {
            return bad(
                "query.api_keys_file",
                "is required when query.auth is api_keys (mint keys with `weft keys new`)",
            );
        }
        if self.api_keys_reload_secs == 0 {
            return bad("query.api_keys_reload_secs", "must be at least 1");
        }
        if self.max_query_chars == 0 {
            return bad("query.max_query_chars", "must be at least 1");
        }
        if !(1..=10_000).contains(&self.max_limit) {
            return bad("query.max_limit", "must be within 1..=10000");
        }
        if let Some(rate) = self.rate_limit_per_sec
            && !(rate.is_finite() && rate > 0.0)
        {
            return bad(
                "query.rate_limit_per_sec",
                "must be a positive number (unset: no limit)",
            );
        }
        if self.rate_limit_burst == Some(0) {
            return bad("query.rate_limit_burst", "must be at least 1");
        }
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => {
                return bad("query.tls_key_file", "is required with query.tls_cert_file");
            }
            (None, Some(_)) => {
                return bad("query.tls_cert_file", "is required with query.tls_key_file");
            }
            _ => {}
        }
        if self.tls_client_ca_file.is_some() && self.tls_cert_file.is_none() {
            return bad(
                "query.tls_client_ca_file",
                "needs query.tls_cert_file and query.tls_key_file (client certificates are checked over TLS)",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::test_support::{assert_refused, env, load_toml_with_env};

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_eq!(QueryServiceConfig::default().validate(), Ok(()));
        assert_refused(&[
            ("[query]\nlisten = \"localhost\"\n", "query.listen"),
            ("[query]\nauth = \"api_keys\"\n", "query.api_keys_file"),
            ("[query]\nauth = \"open\"\n", "open"),
            (
                "[query]\ntls_cert_file = \"/tls/cert.pem\"\n",
                "query.tls_key_file",
            ),
            (
                "[query]\ntls_client_ca_file = \"/tls/ca.pem\"\n",
                "query.tls_client_ca_file",
            ),
            (
                "[query]\nrate_limit_per_sec = 0.0\n",
                "query.rate_limit_per_sec",
            ),
            ("[query]\nrate_limit_burst = 0\n", "query.rate_limit_burst"),
            ("[query]\nmax_query_chars = 0\n", "query.max_query_chars"),
            ("[query]\nmax_limit = 0\n", "query.max_limit"),
            ("[query]\nmax_limit = 1000000000\n", "query.max_limit"),
            (
                "[query]\napi_keys_reload_secs = 0\n",
                "query.api_keys_reload_secs",
            ),
        ]);
    }

    #[test]
    fn query_security_settings_come_from_file_and_environment() {
        let config = load_toml_with_env(
            "[query]\napi_keys_file = \"/etc/weft-auth/keys.toml\"\ntls_cert_file = \"/tls/tls.crt\"\ntls_key_file = \"/tls/tls.key\"\n",
            env(&[
                ("WEFT__QUERY__AUTH", "api_keys"),
                ("WEFT__QUERY__RATE_LIMIT_PER_SEC", "2.5"),
                ("WEFT__STORES__MEILI_SEARCH_KEY_ENV", "MEILI_SEARCH_KEY"),
            ]),
        )
        .unwrap();
        assert_eq!(config.query.auth, Some(QueryAuth::ApiKeys));
        assert_eq!(
            config.query.api_keys_file.as_deref(),
            Some(Path::new("/etc/weft-auth/keys.toml"))
        );
        assert_eq!(config.query.rate_limit_per_sec, Some(2.5));
        assert!(config.query.tls_key_file.is_some());
        assert_eq!(
            config.stores.meili_search_key_env.as_deref(),
            Some("MEILI_SEARCH_KEY")
        );
        let config = load_toml_with_env("", env(&[("WEFT__QUERY__AUTH", "none")])).unwrap();
        assert_eq!(config.query.auth, Some(QueryAuth::None));
        // Unset by default: each binary decides (weft-query requires keys).
        assert_eq!(QueryServiceConfig::default().auth, None);
    }
}
