//! TLS of the gRPC port (rustls), from the PEM files `[query]` names, with
//! optional client certificates (mutual TLS).

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use weft_config::QueryServiceConfig;

/// A TLS file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{key} {path}: {source}")]
pub struct TlsSetupError {
    /// The setting naming the file.
    pub key: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The error.
    #[source]
    pub source: std::io::Error,
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsSetupError> {
    let bytes = std::fs::read(path).map_err(|source| TlsSetupError {
        key,
        path: path.to_owned(),
        source,
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(TlsSetupError {
            key,
            path: path.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a PEM file (no -----BEGIN line)",
            ),
        });
    }
    Ok(bytes)
}

/// The server's TLS when `query.tls_cert_file` and `query.tls_key_file`
/// are set (`None` otherwise), requiring client certificates signed by
/// `query.tls_client_ca_file` when that is set. A certificate and key that
/// do not parse fail when the server starts, naming TLS.
pub fn from_config(config: &QueryServiceConfig) -> Result<Option<ServerTlsConfig>, TlsSetupError> {
    let (Some(cert), Some(key)) = (&config.tls_cert_file, &config.tls_key_file) else {
        return Ok(None);
    };
    // The process's rustls crypto provider: ring, as for every client.
    weft_http_client::install_crypto_provider();
    let identity = Identity::from_pem(
        read("query.tls_cert_file", cert)?,
        read("query.tls_key_file", key)?,
    );
    let mut tls = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &config.tls_client_ca_file {
        tls = tls.client_ca_root(Certificate::from_pem(read("query.tls_client_ca_file", ca)?));
    }
    tracing::info!(
        cert = %cert.display(),
        client_certificates = config.tls_client_ca_file.is_some(),
        "gRPC over TLS"
    );
    Ok(Some(tls))
}
