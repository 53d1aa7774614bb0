//! A loopback OTLP/HTTP trace receiver: what an OpenTelemetry collector
//! does with `POST /v1/traces` (protobuf), keeping the spans for tests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;

/// One received span.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// `service.name` of the process that sent it.
    pub service: String,
    /// The span's name.
    pub name: String,
    /// 32 hex characters.
    pub trace_id: String,
    /// 16 hex characters.
    pub span_id: String,
    /// 16 hex characters, empty for a root span.
    pub parent_span_id: String,
    /// String attributes.
    pub attributes: HashMap<String, String>,
    /// Whether its status is an error.
    pub failed: bool,
}

/// The receiver, listening on a free loopback port until dropped.
pub struct OtlpReceiver {
    url: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    task: tokio::task::JoinHandle<()>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

fn collect(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref()))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                out.push(ReceivedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                        .collect(),
                    // STATUS_CODE_ERROR = 2
                    failed: span.status.is_some_and(|s| s.code == 2),
                });
            }
        }
    }
    out
}

impl OtlpReceiver {
    /// Starts it on the current tokio runtime.
    pub async fn start() -> Self {
        let spans: Arc<Mutex<Vec<ReceivedSpan>>> = Arc::default();
        let sink = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let sink = sink.clone();
                async move {
                    let protobuf = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.starts_with("application/x-protobuf"));
                    if !protobuf {
                        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
                    }
                    match ExportTraceServiceRequest::decode(body) {
                        Ok(request) => {
                            sink.lock().expect("spans").extend(collect(request));
                            (
                                StatusCode::OK,
                                ExportTraceServiceResponse::default().encode_to_vec(),
                            )
                        }
                        Err(_) => (StatusCode::BAD_REQUEST, Vec::new()),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("bound address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}"),
            spans,
            task,
        }
    }

    /// The endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().expect("spans").clone()
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
