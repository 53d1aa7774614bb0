//! The adaptive limit on requests in flight against a loopback server that
//! throttles: 429 with `Retry-After` for a while, or 429 whenever more
//! requests arrive than it has room for. The server counts what it sees
//! (arrival times, requests in flight at each arrival, answers).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;
use weft_core::ports::Embedder;
use weft_embed_http::{HttpEmbedder, HttpEmbedderOptions, LimitSnapshot};

/// What the server saw of one request.
#[derive(Debug, Clone, Copy)]
struct Seen {
    arrived: Instant,
    /// Requests in flight at the server when it arrived, itself included.
    concurrent: usize,
    /// When it was answered and with what.
    answered: Instant,
    status: u16,
}

/// How the server answers: given the request's number and the requests in
/// flight when it arrived, a status and an optional Retry-After in seconds.
type Policy = Arc<dyn Fn(usize, usize) -> (StatusCode, Option<u64>) + Send + Sync>;

#[derive(Default)]
struct Log {
    in_flight: usize,
    seen: Vec<Seen>,
}

struct Server {
    url: String,
    log: Arc<Mutex<Log>>,
}

impl Server {
    fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().seen.clone()
    }
}

fn embeddings(body: &serde_json::Value) -> Response {
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    let data: Vec<serde_json::Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let length = text.as_str().unwrap_or_default().len() as f32;
            serde_json::json!({"index": i, "embedding": [length, 1.0, 0.0, 0.0]})
        })
        .collect();
    axum::Json(serde_json::json!({"data": data})).into_response()
}

async fn serve(policy: Policy) -> Server {
    let log: Arc<Mutex<Log>> = Arc::default();
    let l = log.clone();
    let app = axum::Router::new().route(
        "/v1/embeddings",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let (log, policy) = (l.clone(), policy.clone());
            async move {
                let arrived = Instant::now();
                let (n, concurrent) = {
                    let mut log = log.lock().unwrap();
                    log.in_flight += 1;
                    let n = log.seen.len();
                    let concurrent = log.in_flight;
                    log.seen.push(Seen {
                        arrived,
                        concurrent,
                        answered: arrived,
                        status: 0,
                    });
                    (n, concurrent)
                };
                let (status, retry_after) = policy(n, concurrent);
                if status == StatusCode::OK {
                    // Long enough for requests to overlap.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                {
                    let mut log = log.lock().unwrap();
                    log.in_flight -= 1;
                    log.seen[n].answered = Instant::now();
                    log.seen[n].status = status.as_u16();
                }
                if status == StatusCode::OK {
                    return embeddings(&body);
                }
                let mut response = (
                    status,
                    axum::Json(serde_json::json!({"error": {"message": "slow down"}})),
                )
                    .into_response();
                if let Some(secs) = retry_after {
                    response
                        .headers_mut()
                        .insert("retry-after", secs.to_string().parse().unwrap());
                }
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
        log,
    }
}

fn options(url: &str, max_in_flight: usize) -> HttpEmbedderOptions {
    HttpEmbedderOptions {
        dimension: Some(4),
        batch_size: 1,
        max_in_flight,
        timeout: Duration::from_secs(10),
        max_retries: 8,
        initial_backoff: Duration::from_millis(20),
        ..HttpEmbedderOptions::new(url, "test-model")
    }
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| "x".repeat(i + 1)).collect()
}

fn throttled(reason: &str) -> u64 {
    weft_telemetry::metrics()
        .embedding_api_throttled
        .with_label_values(&[reason])
        .get()
}

/// Vectors in input order: text i has length i + 1.
fn check_order(vectors: &[Vec<f32>]) {
    for (i, v) in vectors.iter().enumerate() {
        assert!((v[0] / v[1] - (i + 1) as f32).abs() < 1e-3, "{i}: {v:?}");
    }
}

/// The first six requests (all sent at once) are told 429 with
/// `Retry-After: 2`. Nothing reaches the server until the two seconds are
/// over; then the client comes back with half its width, and grows back to
/// the full width as answers come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_and_the_width_halves_then_grows_back() {
    let before = throttled("rate_limited");
    let server = serve(Arc::new(|n, _| {
        if n < 6 {
            (StatusCode::TOO_MANY_REQUESTS, Some(2))
        } else {
            (StatusCode::OK, None)
        }
    }))
    .await;
    let embedder = Arc::new(
        HttpEmbedder::connect(options(&server.url, 6))
            .await
            .unwrap(),
    );
    assert_eq!(
        embedder.in_flight(),
        LimitSnapshot {
            limit: 6,
            in_flight: 0
        }
    );
    // Sample the client's limit while it works.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (embedder, done) = (embedder.clone(), done.clone());
        tokio::spawn(async move {
            let mut limits = Vec::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                limits.push(embedder.in_flight().limit);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            limits
        })
    };
    let vectors = embedder.embed(&texts(150)).await.unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(vectors.len(), 150);
    check_order(&vectors);
    let after_run = embedder.in_flight();
    let limits = sampler.await.unwrap();

    let seen = server.seen();
    let rejected: Vec<&Seen> = seen.iter().filter(|s| s.status == 429).collect();
    assert_eq!(rejected.len(), 6, "{seen:?}");
    assert_eq!(seen.len(), 156, "150 answers after 6 refusals");
    // No request arrived while a Retry-After was running (requests already
    // on their way when the first 429 left may arrive just after it).
    let first_429 = rejected.iter().map(|s| s.answered).min().unwrap();
    let last_429 = rejected.iter().map(|s| s.answered).max().unwrap();
    let wait_over = first_429 + Duration::from_secs(2);
    let early: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.arrived > last_429 + Duration::from_millis(200) && s.arrived < wait_over)
        .collect();
    assert!(early.is_empty(), "sent during Retry-After: {early:?}");
    // (The refused requests themselves are left out: on a loaded machine
    // one of the six sent at once can reach the server late.)
    let resumed: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.status != 429 && s.arrived >= wait_over)
        .collect();
    assert_eq!(resumed.len(), 150, "everything else came after the wait");
    // Half the width after the refusals: the first requests after the wait
    // found at most 3 in flight (6 were waiting to be retried).
    let early_width = resumed.iter().take(6).map(|s| s.concurrent).max().unwrap();
    assert!(
        early_width <= 3,
        "{early_width} in flight right after the wait"
    );
    // …and the full width again later.
    let later_width = resumed.iter().map(|s| s.concurrent).max().unwrap();
    assert_eq!(later_width, 6, "grew back to max_in_flight");
    assert_eq!(after_run.limit, 6, "{after_run:?}");
    // The client's own view: 6, then 3, then 6 again.
    let low = limits
        .iter()
        .position(|&l| l == 3)
        .expect("the limit came down to 3");
    assert!(limits[..low].iter().all(|&l| l == 6), "{limits:?}");
    assert!(limits[low..].contains(&6), "and went back up");
    assert!(throttled("rate_limited") >= before + 6);
}

/// A server with room for two requests at a time answers 429 (no
/// Retry-After) to any more. A client allowed eight settles near two: few
/// refusals, and every text embedded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_at_capacity_is_not_flooded() {
    let server = serve(Arc::new(|_, concurrent| {
        if concurrent > 2 {
            (StatusCode::TOO_MANY_REQUESTS, None)
        } else {
            (StatusCode::OK, None)
        }
    }))
    .await;
    let embedder = HttpEmbedder::connect(options(&server.url, 8))
        .await
        .unwrap();
    let vectors = embedder.embed(&texts(200)).await.unwrap();
    assert_eq!(vectors.len(), 200);
    check_order(&vectors);
    let seen = server.seen();
    let refused = seen.iter().filter(|s| s.status == 429).count();
    let answered = seen.iter().filter(|s| s.status == 200).count();
    assert_eq!(answered, 200);
    // At a constant width of 8, six of every eight requests would be
    // refused (three refusals per answer); adapting, far fewer.
    assert!(
        refused * 2 < answered,
        "{refused} refused for {answered} answered"
    );
    assert!(
        embedder.in_flight().limit <= 4,
        "{:?}",
        embedder.in_flight()
    );
}

/// Timeouts and 503 bring the width down too; a 500 does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_and_timeouts_lower_the_width_a_plain_error_does_not() {
    let server = serve(Arc::new(|n, _| match n {
        0 => (StatusCode::INTERNAL_SERVER_ERROR, None),
        1 => (StatusCode::SERVICE_UNAVAILABLE, None),
        _ => (StatusCode::OK, None),
    }))
    .await;
    let embedder = HttpEmbedder::connect(options(&server.url, 4))
        .await
        .unwrap();
    let before = throttled("unavailable");
    embedder.embed(&texts(1)).await.unwrap();
    // 500 then 503 for the one text: one cut, from 4 to 2.
    assert_eq!(embedder.in_flight().limit, 2);
    assert!(throttled("unavailable") > before);

    // A server that never answers in time: the width comes down to 1.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let silent = HttpEmbedder::connect(HttpEmbedderOptions {
        timeout: Duration::from_millis(200),
        max_retries: 2,
        ..options(&format!("http://{addr}"), 4)
    })
    .await
    .unwrap();
    let before = throttled("timeout");
    let error = silent.embed(&texts(1)).await.unwrap_err().to_string();
    assert!(error.contains("timed out"), "{error}");
    assert_eq!(silent.in_flight().limit, 1, "4 → 2 → 1 → 1");
    assert!(throttled("timeout") >= before + 3);
}
