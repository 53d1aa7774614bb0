//! What goes wrong: a setting that cannot work ([`InvalidSetting`], what
//! each section's `validate` returns) and a configuration that cannot be
//! loaded ([`ConfigError`], which names where it came from).

use std::path::PathBuf;

/// A setting that cannot work, with the key that holds it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {key}: {message}")]
pub struct InvalidSetting {
    /// The dotted key, as written in `weft.toml` (`chunking.code.min_chars`).
    pub key: String,
    /// What is wrong with its value.
    pub message: String,
}

/// `Err(InvalidSetting)` for `key`: the sections' checks end with it.
pub(crate) fn bad<T>(
    key: impl Into<String>,
    message: impl Into<String>,
) -> Result<T, InvalidSetting> {
    Err(InvalidSetting {
        key: key.into(),
        message: message.into(),
    })
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file named with `--config` does not exist.
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    /// A file or variable could not be read or has a value of the wrong shape.
    #[error("{source_name}: {message}")]
    Malformed {
        /// The file, or "environment".
        source_name: String,
        /// What the parser said, including the key.
        message: String,
    },
    /// A value has the right shape but cannot work.
    #[error("{source_name}: {setting}")]
    Invalid {
        /// Where the settings came from.
        source_name: String,
        /// The key and what is wrong with it.
        setting: InvalidSetting,
    },
}

/// Checks that `addr` (the value of `key`) is a socket address such as
/// `127.0.0.1:50051`, as the listen settings of several sections must be.
pub(crate) fn check_socket_addr(key: &str, addr: &str) -> Result<(), InvalidSetting> {
    if addr.parse::<std::net::SocketAddr>().is_err() {
        return bad(
            key,
            format!("{addr:?} is not an address like 127.0.0.1:50051"),
        );
    }
    Ok(())
}

/// Whether `name` is a non-empty run of ASCII letters, digits, `-` and `_`:
/// what NATS stream and bucket names and Meilisearch index uids may be.
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
