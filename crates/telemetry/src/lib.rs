//! # weft-telemetry
//!
//! Operations plumbing every weft service shares: the Prometheus metrics of
//! [`Metrics`] (one registry per process, [`metrics()`]) served on
//! `/metrics` by [`serve_metrics`], traces ([`trace`]: the W3C trace
//! context and OpenTelemetry export over OTLP), log setup
//! ([`init_logging`]) and the shutdown signal ([`shutdown_signal`]).

#![warn(missing_docs)]

pub mod trace;

use std::sync::OnceLock;
use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// The metrics of a weft process. Stage labels: `crawler`, `chunker`,
/// `embedder`; stream labels: the JetStream stream names.
pub struct Metrics {
    registry: Registry,
    /// Documents handled, by stage and outcome (`indexed`, `deleted`, `skipped`, `dead_letter`).
    pub documents: IntCounterVec,
    /// Chunks handled, by stage (`chunked`, `embedded`, `unchanged`, `deleted`).
    pub chunks: IntCounterVec,
    /// Errors, by stage.
    pub errors: IntCounterVec,
    /// Messages waiting in a consumer, by stream: the queue lag.
    pub pending: IntGaugeVec,
    /// Seconds per embedding call.
    pub embedding_seconds: Histogram,
    /// Texts per embedding call.
    pub embedding_batch_size: Histogram,
    /// Seconds per query, by outcome (`ok`, `error`).
    pub query_seconds: HistogramVec,
    /// Requests an embedding API may have in flight now: the adaptive limit
    /// (at most `embedding.max_in_flight`, lowered when the API throttles).
    pub embedding_api_concurrency: IntGauge,
    /// Requests in flight to an embedding API now.
    pub embedding_api_in_flight: IntGauge,
    /// Embedding API requests answered with a sign of overload, by reason
    /// (`rate_limited`: 429, `unavailable`: 503/504 or `Retry-After`, `timeout`).
    pub embedding_api_throttled: IntCounterVec,
}

fn build() -> Result<Metrics, prometheus::Error> {
    let registry = Registry::new();
    let documents = IntCounterVec::new(
        Opts::new(
            "weft_documents_total",
            "Documents handled, by stage and outcome",
        ),
        &["stage", "outcome"],
    )?;
    let chunks = IntCounterVec::new(
        Opts::new("weft_chunks_total", "Chunks handled, by stage and outcome"),
        &["stage", "outcome"],
    )?;
    let errors = IntCounterVec::new(
        Opts::new("weft_errors_total", "Errors, by stage"),
        &["stage"],
    )?;
    let pending = IntGaugeVec::new(
        Opts::new(
            "weft_queue_pending_messages",
            "Messages not yet delivered to the consumer, by stream (queue lag)",
        ),
        &["stream"],
    )?;
    let embedding_seconds = Histogram::with_opts(
        HistogramOpts::new("weft_embedding_batch_seconds", "Seconds per embedding call").buckets(
            vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0],
        ),
    )?;
    let embedding_batch_size = Histogram::with_opts(
        HistogramOpts::new("weft_embedding_batch_size", "Texts per embedding call")
            .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
    )?;
    let query_seconds = HistogramVec::new(
        HistogramOpts::new("weft_query_seconds", "Seconds per search, by outcome").buckets(vec![
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
        ]),
        &["outcome"],
    )?;
    let embedding_api_concurrency = IntGauge::new(
        "weft_embedding_api_concurrency",
        "Requests the embedding API may have in flight now (adaptive, at most embedding.max_in_flight)",
    )?;
    let embedding_api_in_flight = IntGauge::new(
        "weft_embedding_api_in_flight",
        "Requests in flight to the embedding API",
    )?;
    let embedding_api_throttled = IntCounterVec::new(
        Opts::new(
            "weft_embedding_api_throttled_total",
            "Embedding API requests answered with a sign of overload, by reason",
        ),
        &["reason"],
    )?;
    registry.register(Box::new(documents.clone()))?;
    registry.register(Box::new(chunks.clone()))?;
    registry.register(Box::new(errors.clone()))?;
    registry.register(Box::new(pending.clone()))?;
    registry.register(Box::new(embedding_seconds.clone()))?;
    registry.register(Box::new(embedding_batch_size.clone()))?;
    registry.register(Box::new(query_seconds.clone()))?;
    registry.register(Box::new(embedding_api_concurrency.clone()))?;
    registry.register(Box::new(embedding_api_in_flight.clone()))?;
    registry.register(Box::new(embedding_api_throttled.clone()))?;
    Ok(Metrics {
        registry,
        documents,
        chunks,
        errors,
        pending,
        embedding_seconds,
        embedding_batch_size,
        query_seconds,
        embedding_api_concurrency,
        embedding_api_in_flight,
        embedding_api_throttled,
    })
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    // The metric definitions are constants: building them fails only on a
    // programming error (a duplicate or malformed name), caught by the tests.
    METRICS.get_or_init(|| build().expect("weft's metric definitions are valid"))
}

impl Metrics {
    /// Records one search.
    pub fn observe_query(&self, elapsed: Duration, ok: bool) {
        self.query_seconds
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .observe(elapsed.as_secs_f64());
    }

    /// Records one embedding call.
    pub fn observe_embedding(&self, elapsed: Duration, texts: usize) {
        self.embedding_seconds.observe(elapsed.as_secs_f64());
        self.embedding_batch_size.observe(texts as f64);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding to a Vec cannot fail for well-formed metric families.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics on {addr}: {source}")]
pub struct MetricsError {
    /// The address.
    pub addr: String,
    /// The error.
    #[source]
    pub source: std::io::Error,
}

/// Serves `GET /metrics` on `addr` in the background; returns the bound address.
pub async fn serve_metrics(addr: &str) -> Result<std::net::SocketAddr, MetricsError> {
    let err = |source| MetricsError {
        addr: addr.to_owned(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(err)?;
    let bound = listener.local_addr().map_err(err)?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            (
                [("content-type", "text/plain; version=0.0.4")],
                metrics().render(),
            )
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics endpoint stopped: {e}");
        }
    });
    Ok(bound)
}

/// Directives every default log filter ends with: dependencies whose
/// warnings weft reports better itself. qdrant-edge logs internal notices;
/// meilisearch-sdk warns "Expected response code 200, got 404" on every
/// first connect to a new index, and before every refusal weft then names
/// with the setting and server.
pub const QUIET_DEPENDENCIES: &str = "qdrant_edge=error,meilisearch_sdk=error";

/// The log filter: `WEFT_LOG` when set, else `default_filter` (e.g. `info`,
/// or `warn,weft_crawler=info`) followed by [`QUIET_DEPENDENCIES`].
fn log_filter(default_filter: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_env("WEFT_LOG")
        .unwrap_or_else(|_| format!("{default_filter},{QUIET_DEPENDENCIES}").into())
}

/// Logs to stderr, filtered by `WEFT_LOG` when set, else by `default_filter`
/// (`warn` for `weft`, `info` for services) and [`QUIET_DEPENDENCIES`].
pub fn init_logging(default_filter: &str) {
    let filter = log_filter(default_filter);
    // A second initialisation (tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Completes on Ctrl-C or SIGTERM (what Kubernetes sends before killing a pod).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_exposed() {
        let m = metrics();
        m.documents.with_label_values(&["chunker", "indexed"]).inc();
        m.observe_query(Duration::from_millis(12), true);
        m.observe_embedding(Duration::from_millis(40), 16);
        m.pending.with_label_values(&["WEFT_DOCS"]).set(3);
        m.embedding_api_concurrency.set(2);
        m.embedding_api_throttled
            .with_label_values(&["rate_limited"])
            .inc();
        let text = m.render();
        for name in [
            "weft_documents_total{outcome=\"indexed\",stage=\"chunker\"} 1",
            "weft_query_seconds_bucket",
            "weft_embedding_batch_size_sum 16",
            "weft_queue_pending_messages{stream=\"WEFT_DOCS\"} 3",
            "weft_embedding_api_concurrency 2",
            "weft_embedding_api_in_flight 0",
            "weft_embedding_api_throttled_total{reason=\"rate_limited\"} 1",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }

    #[tokio::test]
    async fn the_endpoint_serves_the_exposition() {
        let addr = serve_metrics("127.0.0.1:0").await.unwrap();
        metrics().errors.with_label_values(&["embedder"]).inc();
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).await.unwrap();
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        assert!(
            body.contains("weft_errors_total{stage=\"embedder\"}"),
            "{body}"
        );
    }
}
