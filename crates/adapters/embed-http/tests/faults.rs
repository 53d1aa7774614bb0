//! The HTTP embedder against a loopback server that answers with 429, 500,
//! slow and malformed responses, OpenAI-shaped errors and wrong dimensions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use weft_core::ports::Embedder;
use weft_embed_http::{EmbedApiError, HttpEmbedder, HttpEmbedderOptions};

/// What the server does with the n-th request (0-based).
type Script = Arc<dyn Fn(usize, &serde_json::Value) -> Response + Send + Sync>;

struct Server {
    url: String,
    requests: Arc<AtomicUsize>,
    max_concurrent: Arc<AtomicUsize>,
}

fn embeddings(body: &serde_json::Value, dimension: usize) -> Response {
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    // Answer out of order, with indices, to check that order is restored.
    let data: Vec<serde_json::Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, text)| {
            // [length of the text, 1, 0, …]: a direction that names the text.
            let length = text.as_str().unwrap_or_default().len() as f32;
            let v: Vec<f32> = (0..dimension)
                .map(|d| match d {
                    0 => length,
                    1 => 1.0,
                    _ => 0.0,
                })
                .collect();
            serde_json::json!({"object": "embedding", "index": i, "embedding": v})
        })
        .collect();
    axum::Json(serde_json::json!({"object": "list", "data": data})).into_response()
}

async fn serve(script: Script) -> Server {
    let requests = Arc::new(AtomicUsize::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_concurrent = Arc::new(AtomicUsize::new(0));
    let (r, f, m) = (requests.clone(), in_flight.clone(), max_concurrent.clone());
    let app = axum::Router::new().route(
        "/v1/embeddings",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let (r, f, m, script) = (r.clone(), f.clone(), m.clone(), script.clone());
            async move {
                let n = r.fetch_add(1, Ordering::SeqCst);
                let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                // Long enough for concurrent requests to overlap.
                tokio::time::sleep(Duration::from_millis(30)).await;
                let response = script(n, &body);
                f.fetch_sub(1, Ordering::SeqCst);
                response
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Server {
        url: format!("http://{addr}"),
        requests,
        max_concurrent,
    }
}

fn options(url: &str) -> HttpEmbedderOptions {
    HttpEmbedderOptions {
        dimension: Some(4),
        batch_size: 2,
        max_in_flight: 3,
        timeout: Duration::from_millis(500),
        max_retries: 3,
        initial_backoff: Duration::from_millis(20),
        ..HttpEmbedderOptions::new(url, "test-model")
    }
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| "x".repeat(i + 1)).collect()
}

#[tokio::test]
async fn batches_run_concurrently_and_keep_their_order() {
    let server = serve(Arc::new(|_, body| embeddings(body, 4))).await;
    let embedder = HttpEmbedder::connect(options(&server.url)).await.unwrap();
    let vectors = embedder.embed(&texts(11)).await.unwrap();
    assert_eq!(vectors.len(), 11);
    // 11 texts in batches of 2: 6 requests, at most 3 at once, more than 1.
    assert_eq!(server.requests.load(Ordering::SeqCst), 6);
    let concurrent = server.max_concurrent.load(Ordering::SeqCst);
    assert!((2..=3).contains(&concurrent), "{concurrent} in flight");
    // Unit length, and in input order: text i has length i + 1.
    for (i, v) in vectors.iter().enumerate() {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{i}: {norm}");
        assert!((v[0] / v[1] - (i + 1) as f32).abs() < 1e-3, "{i}: {v:?}");
    }
}

#[tokio::test]
async fn the_dimension_is_probed_when_not_given() {
    let server = serve(Arc::new(|_, body| embeddings(body, 7))).await;
    let embedder = HttpEmbedder::connect(HttpEmbedderOptions {
        dimension: None,
        ..options(&server.url)
    })
    .await
    .unwrap();
    assert_eq!(embedder.dimension(), 7);
    assert_eq!(embedder.model_id(), "http:test-model");
    assert_eq!(embedder.endpoint(), format!("{}/v1/embeddings", server.url));
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_honouring_retry_after() {
    let server = serve(Arc::new(|n, body| match n {
        0 => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            axum::Json(
                serde_json::json!({"error": {"message": "slow down", "type": "rate_limit"}}),
            ),
        )
            .into_response(),
        1 | 2 => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        _ => embeddings(body, 4),
    }))
    .await;
    let embedder = HttpEmbedder::connect(HttpEmbedderOptions {
        max_in_flight: 1,
        ..options(&server.url)
    })
    .await
    .unwrap();
    let started = Instant::now();
    let vectors = embedder.embed(&texts(2)).await.unwrap();
    assert_eq!(vectors.len(), 2);
    assert_eq!(server.requests.load(Ordering::SeqCst), 4);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was honoured ({:?})",
        started.elapsed()
    );
}

#[tokio::test]
async fn slow_answers_time_out_and_are_retried() {
    let server = serve(Arc::new(|n, body| {
        if n == 0 {
            std::thread::sleep(Duration::from_millis(900));
        }
        embeddings(body, 4)
    }))
    .await;
    let embedder = HttpEmbedder::connect(options(&server.url)).await.unwrap();
    let vectors = embedder.embed(&texts(1)).await.unwrap();
    assert_eq!(vectors.len(), 1);
    assert!(server.requests.load(Ordering::SeqCst) >= 2);
}

#[tokio::test]
async fn retries_end_with_the_last_failure() {
    let server = serve(Arc::new(|_, _| {
        (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance").into_response()
    }))
    .await;
    let embedder = HttpEmbedder::connect(options(&server.url)).await.unwrap();
    let error = embedder.embed(&texts(1)).await.unwrap_err();
    assert_eq!(error.kind(), weft_core::ErrorKind::Unavailable);
    let error = error.to_string();
    assert!(error.contains("gave up after 4 attempts"), "{error}");
    assert!(error.contains("down for maintenance"), "{error}");
    assert_eq!(server.requests.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn client_errors_fail_at_once_with_the_api_message() {
    let server = serve(Arc::new(|_, _| {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({"error": {"message": "model 'test-model' does not exist", "type": "invalid_request_error", "code": null}})),
        )
            .into_response()
    }))
    .await;
    let embedder = HttpEmbedder::connect(options(&server.url)).await.unwrap();
    let error = embedder.embed(&texts(1)).await.unwrap_err();
    // A request the API refuses as invalid: no attempt will pass.
    assert_eq!(error.kind(), weft_core::ErrorKind::Invalid);
    let error = error.to_string();
    assert!(
        error.contains("400") && error.contains("does not exist"),
        "{error}"
    );
    assert_eq!(server.requests.load(Ordering::SeqCst), 1, "no retry");
}

#[tokio::test]
async fn malformed_answers_and_wrong_dimensions_are_clear_errors() {
    let server = serve(Arc::new(|n, body| match n {
        0 => (StatusCode::OK, "{\"data\": [oops").into_response(),
        1 => axum::Json(serde_json::json!({"data": []})).into_response(),
        _ => embeddings(body, 5),
    }))
    .await;
    let embedder = HttpEmbedder::connect(options(&server.url)).await.unwrap();
    let e1 = embedder.embed(&texts(1)).await.unwrap_err().to_string();
    assert!(e1.contains("malformed answer"), "{e1}");
    let e2 = embedder.embed(&texts(1)).await.unwrap_err().to_string();
    assert!(e2.contains("0 embeddings for 1 inputs"), "{e2}");
    let e3 = embedder.embed(&texts(1)).await.unwrap_err().to_string();
    assert!(
        e3.contains("5-dimensional") && e3.contains("expected 4"),
        "{e3}"
    );
}

#[tokio::test]
async fn an_unreachable_api_fails_at_connect() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let result = HttpEmbedder::connect(HttpEmbedderOptions {
        dimension: None,
        max_retries: 1,
        ..options(&format!("http://127.0.0.1:{port}"))
    })
    .await;
    let Err(error) = result else {
        panic!("connected to nothing")
    };
    assert!(matches!(error, EmbedApiError::Exhausted { .. }), "{error}");
    assert!(error.to_string().contains(&port.to_string()), "{error}");
}

#[tokio::test]
async fn queries_and_documents_get_their_prefix_and_input_type() {
    let seen: Arc<std::sync::Mutex<Vec<serde_json::Value>>> = Arc::default();
    let log = seen.clone();
    let server = serve(Arc::new(move |_, body| {
        log.lock().unwrap().push(body.clone());
        embeddings(body, 4)
    }))
    .await;
    let embedder = HttpEmbedder::connect(HttpEmbedderOptions {
        query_prefix: "query: ".into(),
        document_prefix: "passage: ".into(),
        query_input_type: Some("query".into()),
        document_input_type: Some("document".into()),
        ..options(&server.url)
    })
    .await
    .unwrap();
    embedder.embed(&["a chunk".to_owned()]).await.unwrap();
    embedder
        .embed_queries(&["a question".to_owned()])
        .await
        .unwrap();
    // Unset: plain texts, no input_type field at all.
    let plain = HttpEmbedder::connect(options(&server.url)).await.unwrap();
    plain.embed_queries(&["q".to_owned()]).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0]["input"][0], "passage: a chunk");
    assert_eq!(seen[0]["input_type"], "document");
    assert_eq!(seen[1]["input"][0], "query: a question");
    assert_eq!(seen[1]["input_type"], "query");
    assert_eq!(seen[2]["input"][0], "q");
    assert!(seen[2].get("input_type").is_none(), "{:?}", seen[2]);
}
