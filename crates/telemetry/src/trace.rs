//! Traces: the W3C trace context (`traceparent`) that follows one document
//! from the crawler through the chunker to the embedder (in NATS headers)
//! and one query into the query service (in gRPC metadata), and its
//! export as OpenTelemetry spans over OTLP.
//!
//! Export is on when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set: spans go as OTLP/HTTP
//! protobuf to `<endpoint>/v1/traces`, batched (`OTEL_BSP_*` settings
//! apply), with `service.name` the binary's name unless
//! `OTEL_SERVICE_NAME` says otherwise. Without it, [`start_span`] costs
//! nothing. Each stage's span has exactly the span id that the stage
//! passes on in its `traceparent`, so the exported spans and the headers
//! agree: crawler → chunker → embedder is one trace per document version.

use std::sync::OnceLock;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};

/// The header (and gRPC metadata key) of the W3C trace context.
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

    /// The context a `traceparent` value carries continued by a new span:
    /// a child of it, or a new root when the value is missing or invalid.
    pub fn continue_value(value: Option<&str>) -> Self {
        value
            .and_then(Self::parse)
            .map(|c| c.child())
            .unwrap_or_else(Self::new_root)
    }
}

static TRACER: OnceLock<Tracer> = OnceLock::new();

thread_local! {
    /// The ids the next span started on this thread takes (see [`start_span`]).
    static PRESET: std::cell::Cell<Option<(TraceId, SpanId)>> = const { std::cell::Cell::new(None) };
}

/// Ids for spans: the preset ones of [`start_span`] (the ids weft carries
/// in its `traceparent` headers), random ones otherwise.
#[derive(Debug, Default)]
struct PresetIds(opentelemetry_sdk::trace::RandomIdGenerator);

impl opentelemetry_sdk::trace::IdGenerator for PresetIds {
    fn new_trace_id(&self) -> TraceId {
        match PRESET.with(std::cell::Cell::get) {
            Some((trace_id, _)) => trace_id,
            None => self.0.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match PRESET.with(std::cell::Cell::get) {
            Some((_, span_id)) => span_id,
            None => self.0.new_span_id(),
        }
    }
}

/// Why trace export could not start.
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry trace export to {endpoint:?} (OTEL_EXPORTER_OTLP_ENDPOINT): {message}")]
pub struct TracingError {
    /// The configured endpoint.
    pub endpoint: String,
    /// What went wrong.
    pub message: String,
}

/// Trace export of a process; [`Tracing::shutdown`] flushes what is pending.
#[derive(Debug)]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Starts OTLP trace export for `service` when `OTEL_EXPORTER_OTLP_ENDPOINT`
/// or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED`
/// is not `true`); otherwise spans are not recorded at all. Call it before
/// starting an async runtime: the exporter's HTTP client runs on a thread
/// of its own.
pub fn init_tracing(service: &'static str) -> Result<Tracing, TracingError> {
    let endpoint =
        env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"));
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let Some(endpoint) = endpoint.filter(|_| !disabled) else {
        return Ok(Tracing { provider: None });
    };
    use opentelemetry_otlp::{Protocol, WithExportConfig as _};
    // The exporter's reqwest client takes the process's TLS provider.
    weft_http_client::install_crypto_provider();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| TracingError {
            endpoint: endpoint.clone(),
            message: e.to_string(),
        })?;
    let name = env("OTEL_SERVICE_NAME").unwrap_or_else(|| service.to_owned());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(name)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_id_generator(PresetIds::default())
        .with_resource(resource)
        .build();
    let _ = TRACER.set(provider.tracer("weft"));
    tracing::info!(%endpoint, "exporting traces over OTLP");
    Ok(Tracing {
        provider: Some(provider),
    })
}

impl Tracing {
    /// Whether spans are exported.
    pub fn enabled(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is pending and stops. Call it outside an async runtime
    /// (after it has ended), as the process exits.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("OpenTelemetry trace export: {e}");
        }
    }
}

/// What a span stands for (OpenTelemetry span kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Sends work on (the crawler publishing a document).
    Producer,
    /// Works on a received message (chunker, embedder).
    Consumer,
    /// Answers a request (the query service).
    Server,
}

/// A span being recorded; it ends when dropped (or [`TraceSpan::end`]).
/// Without trace export it records nothing.
pub struct TraceSpan(Option<opentelemetry_sdk::trace::Span>);

impl std::fmt::Debug for TraceSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TraceSpan").field(&self.0.is_some()).finish()
    }
}

fn trace_id(hex: &str) -> TraceId {
    TraceId::from_hex(hex).unwrap_or(TraceId::INVALID)
}

fn span_id(hex: &str) -> SpanId {
    SpanId::from_hex(hex).unwrap_or(SpanId::INVALID)
}

/// Starts the span `context` stands for (its trace id and span id), a
/// child of `parent` when the work came from another process, with
/// string `attributes`.
pub fn start_span(
    name: impl Into<String>,
    kind: Kind,
    context: &TraceContext,
    parent: Option<&TraceContext>,
    attributes: &[(&'static str, String)],
) -> TraceSpan {
    let Some(tracer) = TRACER.get() else {
        return TraceSpan(None);
    };
    let parent_context = match parent {
        Some(p) => Context::new().with_remote_span_context(SpanContext::new(
            trace_id(&p.trace_id),
            span_id(&p.span_id),
            TraceFlags::new(p.flags),
            true,
            TraceState::default(),
        )),
        None => Context::new(),
    };
    let builder = tracer
        .span_builder(name.into())
        .with_kind(match kind {
            Kind::Producer => SpanKind::Producer,
            Kind::Consumer => SpanKind::Consumer,
            Kind::Server => SpanKind::Server,
        })
        .with_attributes(
            attributes
                .iter()
                .map(|(k, v)| KeyValue::new(*k, v.clone()))
                .collect::<Vec<_>>(),
        );
    // The SDK takes span (and root trace) ids from its id generator:
    // preset them, so the span is the one the headers name.
    PRESET.with(|p| {
        p.set(Some((
            trace_id(&context.trace_id),
            span_id(&context.span_id),
        )))
    });
    let span = builder.start_with_context(tracer, &parent_context);
    PRESET.with(|p| p.set(None));
    TraceSpan(Some(span))
}

impl TraceSpan {
    /// Adds a string attribute.
    pub fn set(&mut self, key: &'static str, value: impl Into<String>) {
        if let Some(span) = &mut self.0 {
            span.set_attribute(KeyValue::new(key, value.into()));
        }
    }

    /// Marks the span failed with `message`.
    pub fn fail(&mut self, message: impl Into<String>) {
        if let Some(span) = &mut self.0 {
            span.set_status(Status::error(message.into()));
        }
    }

    /// Ends the span now.
    pub fn end(self) {
        if let Some(mut span) = self.0 {
            span.end();
        }
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
        assert_eq!(
            TraceContext::parse(&child.header_value()),
            Some(child.clone())
        );
        let next = TraceContext::continue_value(Some(&child.header_value()));
        assert_eq!(next.trace_id, root.trace_id);
        assert_ne!(next.span_id, child.span_id);
        let fresh = TraceContext::continue_value(Some("garbage"));
        assert_ne!(fresh.trace_id, root.trace_id);
    }

    #[test]
    fn without_export_spans_record_nothing() {
        // No OTEL_EXPORTER_OTLP_ENDPOINT in unit tests: no tracer is set.
        let context = TraceContext::new_root();
        let mut span = start_span("x", Kind::Server, &context, None, &[]);
        span.set("k", "v");
        span.fail("no");
        assert!(span.0.is_none());
        span.end();
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
