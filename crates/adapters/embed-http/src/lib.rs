//! # weft-embed-http
//!
//! The [`Embedder`] port over an OpenAI-compatible embeddings API
//! (`POST {base}/v1/embeddings` with `{"model", "input": [...]}`), as served
//! by OpenAI, text-embeddings-inference, vLLM, Ollama and others.
//!
//! Texts are sent in requests of at most `batch_size`, answers put back in
//! order. Requests in flight are bounded by an adaptive limit shared by all
//! calls of one embedder (AIMD, module `limit`): it starts at
//! `max_in_flight`, halves when the API shows overload (429, 503, 504, a
//! timeout, a `Retry-After`) and grows back by one per window of answers;
//! after a `Retry-After` no request is sent before it has passed. 429, 5xx,
//! timeouts and connection failures are retried with exponential backoff
//! and full jitter, waiting at least what a `Retry-After` header asks;
//! other 4xx answers fail at once with the API's own message. Every vector
//! is checked against the expected dimension and normalised to unit
//! length. The limit, the requests in flight and the throttled requests
//! are Prometheus metrics (`weft_embedding_api_*`, in `weft-telemetry`).
//!
//! Models trained with distinct query and document inputs get them: a text
//! prefix for each (e5's `query: ` / `passage: `) and an `input_type` field
//! for each (APIs that take one, e.g. `query` / `passage`), as configured.

#![warn(missing_docs)]

mod limit;
#[doc(hidden)]
pub mod testing;

pub use limit::LimitSnapshot;

use std::time::Duration;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use serde::Deserialize;
use weft_core::ports::{Embedder, ErrorKind, PortError, PortResult};

use crate::limit::{Limiter, Throttle};

/// How an embedder of the API's `model` is named in weft's index records
/// (`http:<model>`), known without calling the API.
pub fn model_id(model: &str) -> String {
    format!("http:{model}")
}

/// How to reach and use the API.
#[derive(Debug, Clone)]
pub struct HttpEmbedderOptions {
    /// Base URL (`http://host:port`, `https://api.openai.com`); `/v1/embeddings`
    /// is appended unless the URL already ends in `/embeddings`.
    pub url: String,
    /// The model name sent with each request.
    pub model: String,
    /// Bearer token, when the API needs one.
    pub api_key: Option<String>,
    /// The vector dimension; `None`: asked of the API once at connect.
    pub dimension: Option<usize>,
    /// Texts per request.
    pub batch_size: usize,
    /// Requests in flight at once, at most: the adaptive limit starts here
    /// and never goes above it.
    pub max_in_flight: usize,
    /// Time allowed for one request.
    pub timeout: Duration,
    /// Attempts after the first, for retryable failures.
    pub max_retries: u32,
    /// First backoff; doubles per attempt (with full jitter), at most 30 s.
    pub initial_backoff: Duration,
    /// Put before every query text (e5: `"query: "`).
    pub query_prefix: String,
    /// Put before every document text (e5: `"passage: "`).
    pub document_prefix: String,
    /// Sent as `input_type` with queries, when set.
    pub query_input_type: Option<String>,
    /// Sent as `input_type` with documents, when set.
    pub document_input_type: Option<String>,
}

impl HttpEmbedderOptions {
    /// Options for `url` and `model` with the defaults: 64 texts per request,
    /// 4 in flight, 60 s timeout, 5 retries from 250 ms, queries and
    /// documents sent alike.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            model: model.into(),
            api_key: None,
            dimension: None,
            batch_size: 64,
            max_in_flight: 4,
            timeout: Duration::from_secs(60),
            max_retries: 5,
            initial_backoff: Duration::from_millis(250),
            query_prefix: String::new(),
            document_prefix: String::new(),
            query_input_type: None,
            document_input_type: None,
        }
    }
}

/// What went wrong with the API.
#[derive(Debug, thiserror::Error)]
pub enum EmbedApiError {
    /// The API answered with an error that retrying will not fix.
    #[error("{url} answered {status}: {message}")]
    Rejected {
        /// The endpoint.
        url: String,
        /// HTTP status.
        status: u16,
        /// The API's message (OpenAI's `error.message`, else the body).
        message: String,
    },
    /// Retryable failures went on past the retries.
    #[error("{url}: gave up after {attempts} attempts: {last}")]
    Exhausted {
        /// The endpoint.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
        /// Whether the last failure was the API's rate limit (429).
        rate_limited: bool,
    },
    /// The answer was not the expected JSON.
    #[error("{url}: malformed answer: {message}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// A vector of the wrong size.
    #[error("{url}: model {model:?} returned {got}-dimensional vectors, expected {expected}")]
    Dimension {
        /// The endpoint.
        url: String,
        /// The model.
        model: String,
        /// The expected dimension.
        expected: usize,
        /// What came.
        got: usize,
    },
    /// The client could not be built or the options are unusable.
    #[error("embedding API client: {0}")]
    Setup(String),
}

impl EmbedApiError {
    /// What kind of failure it is: a refusal the kind of its HTTP status
    /// (401/403 `PermissionDenied`, 404 `NotFound`, 400 or 422 — a text
    /// the model does not take — `Invalid`); retries that ran out
    /// `ResourceExhausted` after a 429, else `Unavailable`; an answer not
    /// in the API's shape `Internal`; vectors of another dimension than
    /// the index's `FailedPrecondition`; unusable options `Invalid`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EmbedApiError::Rejected { status, .. } => ErrorKind::of_http_status(*status),
            EmbedApiError::Exhausted {
                rate_limited: true, ..
            } => ErrorKind::ResourceExhausted,
            EmbedApiError::Exhausted { .. } => ErrorKind::Unavailable,
            EmbedApiError::Malformed { .. } => ErrorKind::Internal,
            EmbedApiError::Dimension { .. } => ErrorKind::FailedPrecondition,
            EmbedApiError::Setup(_) => ErrorKind::Invalid,
        }
    }
}

/// An [`Embedder`] over an OpenAI-compatible embeddings API.
pub struct HttpEmbedder {
    client: reqwest::Client,
    endpoint: String,
    options: HttpEmbedderOptions,
    dimension: usize,
    model_id: String,
    limiter: Limiter,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorDetail {
    Object { message: String },
    Text(String),
}

/// What the texts of a request are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Query,
    Document,
}

/// One failed attempt: may it be retried, after at least how long?
enum Attempt {
    Retry {
        reason: String,
        after: Option<Duration>,
        /// A sign of overload: the limit comes down.
        throttle: Option<Throttle>,
    },
    Fatal(EmbedApiError),
}

impl HttpEmbedder {
    /// Builds the client; when the dimension is not given, embeds one probe
    /// text to learn it (so a wrong URL or key fails here, clearly).
    pub async fn connect(options: HttpEmbedderOptions) -> Result<Self, EmbedApiError> {
        if options.batch_size == 0 || options.max_in_flight == 0 {
            return Err(EmbedApiError::Setup(
                "batch_size and max_in_flight must be at least 1".into(),
            ));
        }
        let base = options.url.trim_end_matches('/');
        let endpoint = if base.ends_with("/embeddings") {
            base.to_owned()
        } else {
            format!("{base}/v1/embeddings")
        };
        reqwest::Url::parse(&endpoint)
            .map_err(|e| EmbedApiError::Setup(format!("{:?} is not a URL: {e}", options.url)))?;
        let client = weft_http_client::client_builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| EmbedApiError::Setup(e.to_string()))?;
        let mut embedder = Self {
            client,
            endpoint,
            model_id: model_id(&options.model),
            dimension: options.dimension.unwrap_or(0),
            limiter: Limiter::new(options.max_in_flight),
            options,
        };
        if embedder.dimension == 0 {
            let probe = embedder
                .request(&["dimension probe".to_owned()], Role::Document)
                .await?;
            embedder.dimension = probe.first().map(Vec::len).unwrap_or(0);
            if embedder.dimension == 0 {
                return Err(EmbedApiError::Malformed {
                    url: embedder.endpoint.clone(),
                    message: "an empty vector for the probe text".into(),
                });
            }
        }
        Ok(embedder)
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The adaptive limit on requests in flight, and how many are.
    pub fn in_flight(&self) -> LimitSnapshot {
        self.limiter.snapshot()
    }

    /// One request, retried as configured; vectors in input order, unit length.
    async fn request(&self, texts: &[String], role: Role) -> Result<Vec<Vec<f32>>, EmbedApiError> {
        let mut attempt = 0u32;
        loop {
            let permit = self.limiter.acquire().await;
            let last = match self.attempt(texts, role).await {
                Ok(vectors) => {
                    permit.succeeded();
                    return Ok(vectors);
                }
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry {
                    reason,
                    after,
                    throttle,
                }) => {
                    if let Some(why) = throttle {
                        permit.throttled(why, after);
                    }
                    (reason, after, throttle == Some(Throttle::RateLimited))
                }
            };
            attempt += 1;
            if attempt > self.options.max_retries {
                return Err(EmbedApiError::Exhausted {
                    url: self.endpoint.clone(),
                    attempts: attempt,
                    last: last.0,
                    rate_limited: last.2,
                });
            }
            let backoff = jittered(self.options.initial_backoff, attempt);
            let wait = last.1.map_or(backoff, |after| after.max(backoff));
            tracing::warn!(
                url = %self.endpoint,
                attempt,
                "embedding request failed ({}); retrying in {wait:?}",
                last.0
            );
            tokio::time::sleep(wait).await;
        }
    }

    async fn attempt(&self, texts: &[String], role: Role) -> Result<Vec<Vec<f32>>, Attempt> {
        let url = &self.endpoint;
        let mut body = serde_json::json!({
            "model": self.options.model,
            "input": texts,
            "encoding_format": "float",
        });
        let input_type = match role {
            Role::Query => &self.options.query_input_type,
            Role::Document => &self.options.document_input_type,
        };
        if let Some(input_type) = input_type {
            body["input_type"] = serde_json::Value::String(input_type.clone());
        }
        let mut request = self.client.post(url).json(&body);
        if let Some(key) = &self.options.api_key {
            request = request.bearer_auth(key);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                let (kind, throttle) = if e.is_timeout() {
                    ("timed out", Some(Throttle::Timeout))
                } else {
                    ("request failed", None)
                };
                return Err(Attempt::Retry {
                    reason: format!("{kind}: {e}"),
                    after: None,
                    throttle,
                });
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(300.0)));
        let body = match response.bytes().await {
            Ok(b) => b,
            Err(e) => {
                return Err(Attempt::Retry {
                    reason: format!("reading the answer: {e}"),
                    after: None,
                    throttle: e.is_timeout().then_some(Throttle::Timeout),
                });
            }
        };
        if !status.is_success() {
            let message = match serde_json::from_slice::<ErrorBody>(&body) {
                Ok(ErrorBody {
                    error: ErrorDetail::Object { message } | ErrorDetail::Text(message),
                }) => message,
                Err(_) => String::from_utf8_lossy(&body).chars().take(300).collect(),
            };
            if status.as_u16() == 429 || status.is_server_error() {
                let throttle = match status.as_u16() {
                    429 => Some(Throttle::RateLimited),
                    503 | 504 => Some(Throttle::Unavailable),
                    _ => retry_after.map(|_| Throttle::Unavailable),
                };
                return Err(Attempt::Retry {
                    reason: format!("{status}: {message}"),
                    after: retry_after,
                    throttle,
                });
            }
            return Err(Attempt::Fatal(EmbedApiError::Rejected {
                url: url.clone(),
                status: status.as_u16(),
                message,
            }));
        }
        let malformed = |message: String| {
            Attempt::Fatal(EmbedApiError::Malformed {
                url: url.clone(),
                message,
            })
        };
        let parsed: EmbeddingsResponse = serde_json::from_slice(&body).map_err(|e| {
            malformed(format!(
                "{e} in {:?}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(120)
                    .collect::<String>()
            ))
        })?;
        if parsed.data.len() != texts.len() {
            return Err(malformed(format!(
                "{} embeddings for {} inputs",
                parsed.data.len(),
                texts.len()
            )));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for (position, item) in parsed.data.into_iter().enumerate() {
            let index = item.index.unwrap_or(position);
            let Some(slot) = slots.get_mut(index) else {
                return Err(malformed(format!("index {index} out of range")));
            };
            if self.dimension != 0 && item.embedding.len() != self.dimension {
                return Err(Attempt::Fatal(EmbedApiError::Dimension {
                    url: url.clone(),
                    model: self.options.model.clone(),
                    expected: self.dimension,
                    got: item.embedding.len(),
                }));
            }
            *slot = Some(normalized(item.embedding));
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(i, v)| v.ok_or_else(|| malformed(format!("no embedding for input {i}"))))
            .collect()
    }
}

/// Full jitter: a uniform wait in [0, min(30 s, base × 2^(attempt-1))],
/// at least 10 ms.
fn jittered(base: Duration, attempt: u32) -> Duration {
    let cap = base
        .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
        .min(Duration::from_secs(30));
    // Uniform in [0, 1) from a v4 UUID's random bits.
    let random = (uuid::Uuid::new_v4().as_u128() >> 75) as f64 / (1u64 << 53) as f64;
    cap.mul_f64(random).max(Duration::from_millis(10))
}

fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[async_trait]
impl Embedder for HttpEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.embed_as(texts, Role::Document).await
    }

    async fn embed_queries(&self, queries: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.embed_as(queries, Role::Query).await
    }
}

impl HttpEmbedder {
    /// `texts` in requests of `batch_size`, with the role's prefix.
    async fn embed_as(&self, texts: &[String], role: Role) -> PortResult<Vec<Vec<f32>>> {
        let prefix = match role {
            Role::Query => &self.options.query_prefix,
            Role::Document => &self.options.document_prefix,
        };
        let batches: Vec<Vec<String>> = texts
            .chunks(self.options.batch_size)
            .map(|batch| batch.iter().map(|t| format!("{prefix}{t}")).collect())
            .collect();
        // The limiter bounds what is really in flight, across calls.
        let results: Vec<Vec<Vec<f32>>> = futures::stream::iter(batches)
            .map(|batch| async move { self.request(&batch, role).await })
            .buffered(self.options.max_in_flight)
            .try_collect()
            .await
            .map_err(|e| PortError::new(e.kind(), "embedding API", e))?;
        Ok(results.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_under_the_doubling_cap() {
        let base = Duration::from_millis(100);
        for attempt in 1..10 {
            let cap = (base * 2u32.pow(attempt - 1)).min(Duration::from_secs(30));
            for _ in 0..50 {
                let d = jittered(base, attempt);
                assert!(d <= cap.max(Duration::from_millis(10)), "{d:?} > {cap:?}");
            }
        }
    }

    #[test]
    fn each_failure_has_its_kind() {
        let rejected = |status| EmbedApiError::Rejected {
            url: "u".into(),
            status,
            message: "m".into(),
        };
        assert_eq!(rejected(401).kind(), ErrorKind::PermissionDenied);
        assert_eq!(rejected(404).kind(), ErrorKind::NotFound);
        assert_eq!(rejected(413).kind(), ErrorKind::Invalid);
        let exhausted = |rate_limited| EmbedApiError::Exhausted {
            url: "u".into(),
            attempts: 3,
            last: "l".into(),
            rate_limited,
        };
        assert_eq!(exhausted(true).kind(), ErrorKind::ResourceExhausted);
        assert_eq!(exhausted(false).kind(), ErrorKind::Unavailable);
    }

    #[test]
    fn vectors_are_unit_length() {
        let v = normalized(vec![3.0, 4.0]);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert_eq!(normalized(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }
}
