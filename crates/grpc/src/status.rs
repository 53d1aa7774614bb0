//! The one place where an error's [`ErrorKind`] becomes a gRPC code:
//! every store, model or search failure the service answers with goes
//! through [`code_of`], so a missing collection is `NOT_FOUND`, a refused
//! store key `PERMISSION_DENIED`, a store that cannot be reached
//! `UNAVAILABLE`, and so on (DESIGN §2: errors keep their kind across
//! ports and are mapped once to gRPC).

use tonic::{Code, Status};
use weft_auth::AuthError;
use weft_core::ErrorKind;
use weft_core::ports::PortError;
use weft_core::query::QueryError;

/// The gRPC code of an error of `kind`.
pub fn code_of(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::Invalid => Code::InvalidArgument,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
        ErrorKind::ResourceExhausted => Code::ResourceExhausted,
        ErrorKind::FailedPrecondition => Code::FailedPrecondition,
        ErrorKind::Internal => Code::Internal,
    }
}

/// The answer to a failed search: its kind's code, its message.
pub fn query_status(error: &QueryError) -> Status {
    Status::new(code_of(error.kind()), error.to_string())
}

/// The answer to a failed store call: its kind's code, its message.
pub fn port_status(error: &PortError) -> Status {
    Status::new(code_of(error.kind()), error.to_string())
}

/// The answer to a refused caller: `UNAUTHENTICATED`, `PERMISSION_DENIED`
/// or `RESOURCE_EXHAUSTED`, with the refusal's message.
pub fn auth_status(error: &AuthError) -> Status {
    Status::new(code_of(error.kind()), error.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_code_and_the_message_is_kept() {
        for (kind, code) in [
            (ErrorKind::Unavailable, Code::Unavailable),
            (ErrorKind::NotFound, Code::NotFound),
            (ErrorKind::Invalid, Code::InvalidArgument),
            (ErrorKind::Unauthenticated, Code::Unauthenticated),
            (ErrorKind::PermissionDenied, Code::PermissionDenied),
            (ErrorKind::ResourceExhausted, Code::ResourceExhausted),
            (ErrorKind::FailedPrecondition, Code::FailedPrecondition),
            (ErrorKind::Internal, Code::Internal),
        ] {
            assert_eq!(code_of(kind), code);
        }
        let status = port_status(&PortError::not_found(
            "vector index (Qdrant c)",
            "collection c does not exist",
        ));
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(
            status.message(),
            "vector index (Qdrant c): collection c does not exist"
        );
        // A search this deployment is not set up for, as before.
        assert_eq!(
            query_status(&QueryError::NoEmbedder).code(),
            Code::FailedPrecondition
        );
        let refused = QueryError::Port(PortError::permission_denied("reranker", "HTTP 401"));
        assert_eq!(query_status(&refused).code(), Code::PermissionDenied);
        // Refused callers get the codes they always got.
        for (error, code) in [
            (
                AuthError::Unauthenticated("no key".into()),
                Code::Unauthenticated,
            ),
            (
                AuthError::PermissionDenied("not p".into()),
                Code::PermissionDenied,
            ),
            (
                AuthError::RateLimited("wait".into()),
                Code::ResourceExhausted,
            ),
        ] {
            let status = auth_status(&error);
            assert_eq!(status.code(), code);
            assert_eq!(status.message(), error.message());
        }
    }
}
