//! The one place where an error's [`ErrorKind`] becomes an HTTP status
//! (DESIGN §2: errors keep their kind and are mapped once to HTTP). Over
//! streamable HTTP, the only errors answered with a status are refused
//! callers ([`refusal`]): a tool that fails answers with an MCP tool error
//! in a 200.

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use weft_auth::AuthError;
use weft_core::ErrorKind;

/// The HTTP status of an error of `kind`.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Invalid | ErrorKind::FailedPrecondition => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        ErrorKind::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The HTTP answer to a request the authentication layer refused: 401
/// without a valid key, 403 outside its scope, 429 over its rate; the
/// refusal's message as the body.
pub(crate) fn refusal(error: &AuthError) -> axum::response::Response {
    let code = status_of(error.kind());
    tracing::warn!(code = %code, message = error.message(), "MCP request refused");
    (
        code,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        format!("{}\n", error.message()),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_keep_their_statuses() {
        for (error, code) in [
            (
                AuthError::Unauthenticated("invalid API key".into()),
                StatusCode::UNAUTHORIZED,
            ),
            (
                AuthError::PermissionDenied("not p".into()),
                StatusCode::FORBIDDEN,
            ),
            (
                AuthError::RateLimited("retry in 5 ms".into()),
                StatusCode::TOO_MANY_REQUESTS,
            ),
        ] {
            let response = refusal(&error);
            assert_eq!(response.status(), code);
            assert_eq!(
                response.headers().get(header::WWW_AUTHENTICATE).unwrap(),
                "Bearer"
            );
        }
        assert_eq!(
            status_of(ErrorKind::Unavailable),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status_of(ErrorKind::NotFound), StatusCode::NOT_FOUND);
        assert_eq!(
            status_of(ErrorKind::Internal),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
