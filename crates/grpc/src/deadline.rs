//! Deadlines of gRPC calls, answered as gRPC says: `DEADLINE_EXCEEDED`.
//!
//! A call ends at the earlier of the caller's deadline (the `grpc-timeout`
//! metadata, e.g. `1m` for one millisecond) and the server's own limit
//! (`query.request_timeout_secs`). tonic enforces the caller's deadline too,
//! but answers `CANCELLED` ("Timeout expired"); this layer sits inside
//! tonic's and starts its clock first, so at the same deadline it always
//! answers first, with `DEADLINE_EXCEEDED` and which limit passed. The call's
//! work is dropped then; an answer that is ready only after the deadline is
//! replaced by `DEADLINE_EXCEEDED` too. A `grpc-timeout` that is not one (tonic ignores
//! those) is `INVALID_ARGUMENT` naming it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::Status;

/// The metadata key of a call's deadline.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// Applies deadlines to every call of the services it wraps.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    server_timeout: Duration,
}

impl DeadlineLayer {
    /// Calls end after `server_timeout`, or sooner when the caller says so.
    pub fn new(server_timeout: Duration) -> Self {
        Self { server_timeout }
    }
}

impl<S> tower_layer::Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            server_timeout: self.server_timeout,
        }
    }
}

/// The service [`DeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    server_timeout: Duration,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for Deadline<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let limit = match request.headers().get(GRPC_TIMEOUT) {
            None => Limit::Server(self.server_timeout),
            Some(value) => match parse_grpc_timeout(value.as_bytes()) {
                Some(d) if d < self.server_timeout => Limit::Caller(d),
                Some(_) => Limit::Server(self.server_timeout),
                None => {
                    let status = Status::invalid_argument(format!(
                        "{GRPC_TIMEOUT} metadata: {:?} is not a gRPC timeout \
                         (1 to 8 digits and a unit: H, M, S, m, u or n)",
                        String::from_utf8_lossy(value.as_bytes())
                    ));
                    return Box::pin(std::future::ready(Ok(status.into_http())));
                }
            },
        };
        // The clock starts before the call does (and before tonic's own,
        // which starts when this returns): at one deadline, this answers.
        let deadline = tokio::time::Instant::now() + limit.duration();
        let call = self.inner.call(request);
        Box::pin(async move {
            tokio::select! {
                biased;
                // An answer ready only after the deadline is not one: the
                // caller has given up on it.
                answer = call => if tokio::time::Instant::now() < deadline {
                    answer
                } else {
                    Ok(limit.exceeded().into_http())
                },
                () = tokio::time::sleep_until(deadline) => Ok(limit.exceeded().into_http()),
            }
        })
    }
}

/// Which limit a call runs under.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// The caller's `grpc-timeout`.
    Caller(Duration),
    /// `query.request_timeout_secs`.
    Server(Duration),
}

impl Limit {
    fn duration(self) -> Duration {
        match self {
            Self::Caller(d) | Self::Server(d) => d,
        }
    }

    fn exceeded(self) -> Status {
        match self {
            Self::Caller(d) => Status::deadline_exceeded(format!(
                "the call's deadline ({GRPC_TIMEOUT} {d:?}) passed before the answer was ready"
            )),
            Self::Server(d) => Status::deadline_exceeded(format!(
                "the server's limit for one call (query.request_timeout_secs, {d:?}) passed before the answer was ready"
            )),
        }
    }
}

/// A `grpc-timeout` value: 1 to 8 ASCII digits and a unit (`H`ours,
/// `M`inutes, `S`econds, `m`illiseconds, `u`microseconds, `n`anoseconds).
pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_as_the_protocol_says() {
        assert_eq!(parse_grpc_timeout(b"1m"), Some(Duration::from_millis(1)));
        assert_eq!(parse_grpc_timeout(b"30S"), Some(Duration::from_secs(30)));
        assert_eq!(parse_grpc_timeout(b"2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout(b"5M"), Some(Duration::from_secs(300)));
        assert_eq!(
            parse_grpc_timeout(b"250u"),
            Some(Duration::from_micros(250))
        );
        assert_eq!(parse_grpc_timeout(b"0n"), Some(Duration::ZERO));
        assert_eq!(
            parse_grpc_timeout(b"99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        for bad in [
            &b""[..],
            b"m",
            b"1",
            b"123456789m",
            b"-1m",
            b"1.5S",
            b"1x",
            b"1 m",
            b"\xff",
        ] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }
}
