//! A request's `authorization` header to the caller's [`Scope`], or the
//! reason it is refused ([`AuthError`]), whatever the transport: gRPC
//! metadata and HTTP headers give the same text.

use std::sync::Arc;

use weft_core::ErrorKind;

use crate::scope::Scope;
use crate::store::KeyStore;

/// Why a caller is refused. The message is what the caller is told; each
/// transport maps the [`kind`](AuthError::kind) to its answer once (gRPC:
/// `UNAUTHENTICATED`, `PERMISSION_DENIED`, `RESOURCE_EXHAUSTED`; HTTP:
/// 401, 403, 429).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No API key, a malformed `authorization` header, another scheme or
    /// an unknown key.
    #[error("{0}")]
    Unauthenticated(String),
    /// A valid key asking for what it may not read.
    #[error("{0}")]
    PermissionDenied(String),
    /// A valid key over its rate limit; the message says how long to wait.
    #[error("{0}")]
    RateLimited(String),
    /// A valid key naming a project outside its scope: answered as a
    /// project that is not indexed ([`weft_core::projects`]), so a key
    /// learns nothing of the projects it may not read.
    #[error("{0}")]
    NotFound(String),
}

impl AuthError {
    /// What kind of refusal it is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            AuthError::Unauthenticated(_) => ErrorKind::Unauthenticated,
            AuthError::PermissionDenied(_) => ErrorKind::PermissionDenied,
            AuthError::RateLimited(_) => ErrorKind::ResourceExhausted,
            AuthError::NotFound(_) => ErrorKind::NotFound,
        }
    }

    /// What the caller is told.
    pub fn message(&self) -> &str {
        match self {
            AuthError::Unauthenticated(m)
            | AuthError::PermissionDenied(m)
            | AuthError::RateLimited(m)
            | AuthError::NotFound(m) => m,
        }
    }
}

/// How a server authenticates its callers.
#[derive(Debug, Clone)]
pub enum Auth {
    /// No authentication: every caller reads everything.
    Open,
    /// Bearer API keys.
    Keys(Arc<KeyStore>),
}

impl Auth {
    /// The caller's scope from the value of the request's `authorization`
    /// header or metadata (`None`: absent; a value that is not text should
    /// be given as `Some("")`): [`AuthError::Unauthenticated`] without a
    /// valid key, [`AuthError::RateLimited`] over its rate limit.
    pub fn authorize(&self, authorization: Option<&str>) -> Result<Scope, AuthError> {
        let store = match self {
            Auth::Open => return Ok(Scope::everything()),
            Auth::Keys(store) => store,
        };
        let value = authorization.ok_or_else(|| {
            AuthError::Unauthenticated(
                "this query service requires an API key: send `authorization: Bearer <key>`".into(),
            )
        })?;
        let token = bearer_token(value).ok_or_else(|| {
            AuthError::Unauthenticated("the authorization metadata must be `Bearer <key>`".into())
        })?;
        store.authenticate(token)
    }
}

/// The key of `Bearer <key>` (the scheme in any case), if that is what
/// `value` is.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    Some(token.trim()).filter(|t| scheme.eq_ignore_ascii_case("bearer") && !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mint;
    use crate::store::tests::store_with;

    #[test]
    fn the_bearer_scheme_is_required() {
        let minted = mint("a", vec!["p".into()], vec![]).unwrap();
        let (_dir, store) = store_with(vec![minted.entry], None);
        let auth = Auth::Keys(Arc::new(store));
        assert_eq!(
            auth.authorize(None).unwrap_err().kind(),
            ErrorKind::Unauthenticated
        );
        for value in [
            minted.key.clone(),
            format!("Basic {}", minted.key),
            "Bearer ".into(),
            String::new(),
        ] {
            assert_eq!(
                auth.authorize(Some(&value)).unwrap_err(),
                AuthError::Unauthenticated(
                    "the authorization metadata must be `Bearer <key>`".into()
                ),
                "{value}"
            );
        }
        assert!(
            auth.authorize(Some(&format!("bearer {}", minted.key)))
                .is_ok()
        );
        assert!(
            auth.authorize(Some(&format!("  Bearer   {}  ", minted.key)))
                .is_ok()
        );
        assert_eq!(Auth::Open.authorize(None).unwrap(), Scope::everything());
    }

    #[test]
    fn each_refusal_has_its_kind() {
        assert_eq!(
            AuthError::Unauthenticated("m".into()).kind(),
            ErrorKind::Unauthenticated
        );
        assert_eq!(
            AuthError::PermissionDenied("m".into()).kind(),
            ErrorKind::PermissionDenied
        );
        let limited = AuthError::RateLimited("wait".into());
        assert_eq!(limited.kind(), ErrorKind::ResourceExhausted);
        assert_eq!(limited.to_string(), "wait");
        assert_eq!(limited.message(), "wait");
    }
}
