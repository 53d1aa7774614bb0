//! The authentication `[query]` configures for a server: API keys from
//! `query.api_keys_file`, or none where that is allowed.

use std::sync::Arc;

use crate::authorize::Auth;
use crate::keys_file::KeysFileError;
use crate::rate::RateLimit;
use crate::store::KeyStore;

/// What a binary does when `query.auth` is unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthDefault {
    /// Keys are required (`weft-query`): without `query.api_keys_file` the
    /// service does not start.
    Required,
    /// The keys of `query.api_keys_file` when set; else no authentication,
    /// but only on a loopback address (`weft serve` on a laptop).
    OpenOnLoopback,
}

/// Why authentication could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// Keys are required and no keys file is configured.
    #[error(
        "{what} requires API keys: set query.api_keys_file (WEFT__QUERY__API_KEYS_FILE) to a keys file made with `weft keys new`, or set query.auth = \"none\" (WEFT__QUERY__AUTH=none) to serve every project to anyone who reaches {listen}"
    )]
    KeysRequired {
        /// Which server and why.
        what: String,
        /// The listen address.
        listen: String,
    },
    /// The keys file could not be used.
    #[error(transparent)]
    KeysFile(#[from] KeysFileError),
}

/// The authentication `[query]` configures for a server listening on
/// `listen`; `default` decides when `query.auth` is unset. Serving without
/// authentication is logged as a warning.
pub fn from_config(
    config: &weft_config::QueryServiceConfig,
    listen: &str,
    default: AuthDefault,
) -> Result<Auth, AuthSetupError> {
    use weft_config::QueryAuth;
    let loopback = listen
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback());
    let open = |why: &str| {
        tracing::warn!(
            listen,
            "the query API has no authentication ({why}): every caller that reaches it reads every project"
        );
        Ok(Auth::Open)
    };
    let file = match (config.auth, &config.api_keys_file, default) {
        (Some(QueryAuth::None), _, _) => return open("query.auth = \"none\""),
        (_, Some(file), _) => file,
        (None, None, AuthDefault::OpenOnLoopback) if loopback => {
            return open("loopback address, no query.api_keys_file");
        }
        (_, None, AuthDefault::Required) => {
            return Err(AuthSetupError::KeysRequired {
                what: "the query service".into(),
                listen: listen.to_owned(),
            });
        }
        (_, None, AuthDefault::OpenOnLoopback) => {
            return Err(AuthSetupError::KeysRequired {
                what: format!("serving on {listen}, which is not a loopback address,"),
                listen: listen.to_owned(),
            });
        }
    };
    let default_rate = config
        .rate_limit_per_sec
        .map(|rate| RateLimit::new(rate, config.rate_limit_burst));
    let store = KeyStore::open(file, default_rate)?;
    tracing::info!(file = %file.display(), keys = store.ids().len(), "query API requires API keys");
    Ok(Auth::Keys(Arc::new(store)))
}
