//! # weft-rerank-http
//!
//! A [`Reranker`] over an HTTP rerank API, in either of the two common shapes:
//!
//! - [`ApiShape::Tei`]: Hugging Face text-embeddings-inference,
//!   `POST {url}/rerank` with `{"query", "texts"}`, answering
//!   `[{"index", "score"}, …]`;
//! - [`ApiShape::Cohere`]: `POST {url}/v1/rerank` with
//!   `{"model", "query", "documents", "top_n"}`, answering
//!   `{"results": [{"index", "relevance_score"}, …]}` (also served by Jina,
//!   Voyage and many gateways).
//!
//! Scores come back in the order of the passages given; an error body is
//! quoted in the error.

#![warn(missing_docs)]

use std::time::Duration;

use serde_json::{Value, json};
use weft_core::ports::{ErrorKind, PortError, PortResult, Reranker};

/// Which API shape the service speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiShape {
    /// text-embeddings-inference `/rerank`.
    Tei,
    /// Cohere-style `/v1/rerank`.
    Cohere,
}

/// A reranker behind an HTTP API.
#[derive(Debug, Clone)]
pub struct HttpReranker {
    client: reqwest::Client,
    endpoint: String,
    shape: ApiShape,
    model: Option<String>,
    name: String,
}

/// What went wrong talking to the rerank API.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    /// The HTTP client could not be built, or the request failed.
    #[error("{endpoint}")]
    Http {
        /// The URL called.
        endpoint: String,
        /// What happened.
        #[source]
        source: reqwest::Error,
    },
    /// The service answered with an error status.
    #[error("{endpoint}: HTTP {status}: {body}")]
    Status {
        /// The URL called.
        endpoint: String,
        /// The status.
        status: reqwest::StatusCode,
        /// The start of the answer's body.
        body: String,
    },
    /// The answer is not JSON.
    #[error("{endpoint}: the answer is not JSON")]
    Json {
        /// The URL called.
        endpoint: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The answer is not in the expected shape.
    #[error("{endpoint}: unexpected answer: {message}")]
    Shape {
        /// The URL called.
        endpoint: String,
        /// What is wrong.
        message: String,
    },
}

impl RerankError {
    /// What kind of failure it is: an error status the kind of its HTTP
    /// status (401/403 `PermissionDenied`, 429 `ResourceExhausted`, 5xx
    /// `Unavailable`, another 4xx `Invalid`); a request that could not be
    /// built `Invalid`, one that got no answer `Unavailable`; an answer
    /// not in the API's shape `Internal`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RerankError::Http { source, .. } if source.is_builder() => ErrorKind::Invalid,
            RerankError::Http { source, .. } => {
                source.status().map_or(ErrorKind::Unavailable, |s| {
                    ErrorKind::of_http_status(s.as_u16())
                })
            }
            RerankError::Status { status, .. } => ErrorKind::of_http_status(status.as_u16()),
            RerankError::Json { .. } | RerankError::Shape { .. } => ErrorKind::Internal,
        }
    }
}

impl HttpReranker {
    /// A reranker at base URL `url` speaking `shape`; `model` is sent to
    /// Cohere-shaped APIs.
    pub fn new(url: &str, shape: ApiShape, model: Option<String>) -> Result<Self, RerankError> {
        let base = url.trim_end_matches('/');
        let endpoint = match shape {
            ApiShape::Tei => format!("{base}/rerank"),
            ApiShape::Cohere => format!("{base}/v1/rerank"),
        };
        let client = weft_http_client::client_builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|source| RerankError::Http {
                endpoint: endpoint.clone(),
                source,
            })?;
        let name = format!(
            "{} {}",
            match shape {
                ApiShape::Tei => "tei",
                ApiShape::Cohere => "cohere",
            },
            endpoint
        );
        Ok(Self {
            client,
            endpoint,
            shape,
            model,
            name,
        })
    }

    /// Scores `passages` against `query`, in passage order.
    pub async fn scores(&self, query: &str, passages: &[String]) -> Result<Vec<f32>, RerankError> {
        let body = match self.shape {
            ApiShape::Tei => json!({"query": query, "texts": passages, "truncate": true}),
            ApiShape::Cohere => {
                let mut b = json!({"query": query, "documents": passages, "top_n": passages.len()});
                if let Some(model) = &self.model {
                    b["model"] = json!(model);
                }
                b
            }
        };
        let http = |source: reqwest::Error| RerankError::Http {
            endpoint: self.endpoint.clone(),
            source,
        };
        let response = self
            .client
            .post(&self.endpoint)
            .json(&body)
            .send()
            .await
            .map_err(http)?;
        let status = response.status();
        let text = response.text().await.map_err(http)?;
        if !status.is_success() {
            return Err(RerankError::Status {
                endpoint: self.endpoint.clone(),
                status,
                body: text.chars().take(500).collect(),
            });
        }
        let value: Value = serde_json::from_str(&text).map_err(|source| RerankError::Json {
            endpoint: self.endpoint.clone(),
            source,
        })?;
        parse_scores(self.shape, &value, passages.len()).map_err(|message| RerankError::Shape {
            endpoint: self.endpoint.clone(),
            message,
        })
    }
}

/// Reads `(index, score)` pairs of either shape into passage order.
fn parse_scores(shape: ApiShape, value: &Value, n: usize) -> Result<Vec<f32>, String> {
    let (items, score_key) = match shape {
        ApiShape::Tei => (value.as_array(), "score"),
        ApiShape::Cohere => (
            value.get("results").and_then(Value::as_array),
            "relevance_score",
        ),
    };
    let items = items.ok_or("no list of results")?;
    let mut scores = vec![f32::NEG_INFINITY; n];
    let mut filled = 0;
    for item in items {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .ok_or("a result without an index")? as usize;
        let score = item
            .get(score_key)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("a result without {score_key}"))? as f32;
        let slot = scores
            .get_mut(index)
            .ok_or_else(|| format!("index {index} but only {n} passages"))?;
        *slot = score;
        filled += 1;
    }
    if filled != n {
        return Err(format!("{filled} scores for {n} passages"));
    }
    Ok(scores)
}

#[async_trait::async_trait]
impl Reranker for HttpReranker {
    fn name(&self) -> &str {
        &self.name
    }
    async fn rerank(&self, query: &str, passages: &[String]) -> PortResult<Vec<f32>> {
        self.scores(query, passages)
            .await
            .map_err(|e| PortError::new(e.kind(), "reranker", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_status_has_its_kind() {
        let status = |code: u16| RerankError::Status {
            endpoint: "e".into(),
            status: reqwest::StatusCode::from_u16(code).unwrap(),
            body: String::new(),
        };
        assert_eq!(status(403).kind(), ErrorKind::PermissionDenied);
        assert_eq!(status(400).kind(), ErrorKind::Invalid);
        assert_eq!(status(503).kind(), ErrorKind::Unavailable);
        let shape = RerankError::Shape {
            endpoint: "e".into(),
            message: "m".into(),
        };
        assert_eq!(shape.kind(), ErrorKind::Internal);
    }

    #[test]
    fn both_shapes_are_read_into_passage_order() {
        let tei = json!([{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}]);
        assert_eq!(parse_scores(ApiShape::Tei, &tei, 2), Ok(vec![0.1, 0.9]));
        let cohere = json!({"results": [{"index": 0, "relevance_score": 0.3}, {"index": 1, "relevance_score": 0.7}]});
        assert_eq!(
            parse_scores(ApiShape::Cohere, &cohere, 2),
            Ok(vec![0.3, 0.7])
        );
        assert!(parse_scores(ApiShape::Tei, &tei, 3).is_err());
        assert!(parse_scores(ApiShape::Tei, &json!([{"index": 5, "score": 1.0}]), 1).is_err());
        assert!(parse_scores(ApiShape::Cohere, &json!({"error": "x"}), 1).is_err());
    }
}
