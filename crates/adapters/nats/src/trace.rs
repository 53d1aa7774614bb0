//! W3C trace context (`traceparent`) in NATS message headers, so one
//! document can be followed from the crawler through the chunker to the
//! embedder: each stage keeps the trace id and starts its own span id.
//! The context itself is [`weft_telemetry::trace::TraceContext`], shared
//! with the gRPC query service; this module reads and writes it in headers.

use async_nats::HeaderMap;

pub use weft_telemetry::trace::{TRACEPARENT, TraceContext};

/// A [`TraceContext`] in NATS headers.
pub trait TraceHeaders: Sized {
    /// The context a message carries, if any.
    fn from_headers(headers: Option<&HeaderMap>) -> Option<Self>;
    /// The span for work on a received message: a child of its context,
    /// or a new root when it carries none.
    fn continue_from(headers: Option<&HeaderMap>) -> Self;
    /// Headers carrying this context.
    fn headers(&self) -> HeaderMap;
}

impl TraceHeaders for TraceContext {
    fn from_headers(headers: Option<&HeaderMap>) -> Option<Self> {
        headers?
            .get(TRACEPARENT)
            .and_then(|v| Self::parse(v.as_str()))
    }

    fn continue_from(headers: Option<&HeaderMap>) -> Self {
        Self::continue_value(headers.and_then(|h| h.get(TRACEPARENT)).map(|v| v.as_str()))
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT, self.header_value().as_str());
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_round_trips_through_headers() {
        let root = TraceContext::new_root();
        let child = root.child();
        let headers = child.headers();
        assert_eq!(
            TraceContext::from_headers(Some(&headers)),
            Some(child.clone())
        );
        let next = TraceContext::continue_from(Some(&headers));
        assert_eq!(next.trace_id, root.trace_id);
        assert_ne!(next.span_id, child.span_id);
        assert!(TraceContext::from_headers(None).is_none());
    }
}
