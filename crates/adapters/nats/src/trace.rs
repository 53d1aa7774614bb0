//! W3C trace context (`traceparent`) in NATS message headers, so one
//! document can be followed from the crawler through the chunker to the
//! embedder: each stage keeps the trace id and starts its own span id.

use async_nats::HeaderMap;

/// The header name of the W3C trace context.
pub const TRACEPARENT: &str = "traceparent";

/// A parsed `traceparent`: version 00, trace id, parent span id, flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex characters.
    pub trace_id: String,
    /// 16 lowercase hex characters: the span of the stage that published.
    pub span_id: String,
    /// Trace flags (01 = sampled).
    pub flags: u8,
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && s.bytes().any(|b| b != b'0')
}

fn random_hex(len: usize) -> String {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        out.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    out.truncate(len);
    out
}

impl TraceContext {
    /// A new trace (a root span).
    pub fn new_root() -> Self {
        Self {
            trace_id: random_hex(32),
            span_id: random_hex(16),
            flags: 1,
        }
    }

    /// Parses a `traceparent` value; `None` when it is not a valid version-00 one.
    pub fn parse(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('-');
        let (version, trace_id, span_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "00"
            || parts.next().is_some()
            || !is_hex(trace_id, 32)
            || !is_hex(span_id, 16)
        {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Self {
            trace_id: trace_id.to_owned(),
            span_id: span_id.to_owned(),
            flags,
        })
    }

    /// A child span in the same trace.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id.clone(),
            span_id: random_hex(16),
            flags: self.flags,
        }
    }

    /// The header value.
    pub fn header_value(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.span_id, self.flags)
    }

    /// The context a message carries, if any.
    pub fn from_headers(headers: Option<&HeaderMap>) -> Option<Self> {
        headers?
            .get(TRACEPARENT)
            .and_then(|v| Self::parse(v.as_str()))
    }

    /// The span for work on a received message: a child of its context, or
    /// a new root when it carries none.
    pub fn continue_from(headers: Option<&HeaderMap>) -> Self {
        Self::from_headers(headers)
            .map(|c| c.child())
            .unwrap_or_else(Self::new_root)
    }

    /// Headers carrying this context.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT, self.header_value().as_str());
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_keeps_the_trace_and_round_trips() {
        let root = TraceContext::new_root();
        let child = root.child();
        assert_eq!(child.trace_id, root.trace_id);
        assert_ne!(child.span_id, root.span_id);
        let headers = child.headers();
        assert_eq!(
            TraceContext::from_headers(Some(&headers)),
            Some(child.clone())
        );
        let next = TraceContext::continue_from(Some(&headers));
        assert_eq!(next.trace_id, root.trace_id);
    }

    #[test]
    fn invalid_values_are_ignored() {
        for bad in [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        ] {
            assert!(TraceContext::parse(bad).is_none(), "{bad}");
        }
        let ok =
            TraceContext::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        assert_eq!(ok.flags, 1);
    }
}
