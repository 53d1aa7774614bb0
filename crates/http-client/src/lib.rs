//! weft's outgoing HTTP: every `reqwest` client weft builds (embedding and
//! rerank APIs, the site crawler) starts from [`client_builder`], and every
//! TLS endpoint weft serves or calls uses the crypto provider that
//! [`install_crypto_provider`] installs.
//!
//! rustls needs one crypto provider per process. weft uses *ring*, which
//! tonic, qdrant-client and the Meilisearch client use already; reqwest is
//! built without its own default provider (aws-lc-rs), so a second
//! provider's C library is never compiled (one of the longest steps of a cold build,
//! bench/RESULTS.md "Cold release build"). reqwest then asks rustls for the
//! process default, and panics when there is none: hence one function that
//! every client and server path calls first.
//!
//! ```
//! let client = weft_http_client::client_builder()
//!     .timeout(std::time::Duration::from_secs(5))
//!     .build()
//!     .expect("a client");
//! # drop(client);
//! ```

/// Installs *ring* as the process's rustls crypto provider, unless one is
/// installed already (then that one stays). Cheap and idempotent: call it
/// before anything builds a TLS configuration (a reqwest client, a tonic
/// TLS server, the OTLP exporter's HTTP client).
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one between the check and here: the
        // error only says one is installed, which is all we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A `reqwest` client builder with the crypto provider installed
/// ([`install_crypto_provider`]); settings (timeouts, proxies, redirects)
/// stay with the caller.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_builds_and_the_provider_is_ring() {
        let client = client_builder().build();
        assert!(client.is_ok(), "{:?}", client.err());
        let provider = rustls::crypto::CryptoProvider::get_default().expect("installed");
        let ring = rustls::crypto::ring::default_provider();
        let names = |p: &rustls::crypto::CryptoProvider| {
            p.cipher_suites
                .iter()
                .map(|s| format!("{:?}", s.suite()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(provider), names(&ring));
        // Idempotent.
        install_crypto_provider();
        assert!(client_builder().build().is_ok());
    }
}
