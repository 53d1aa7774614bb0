//! The HTTP reranker against a loopback server speaking each API shape:
//! the request it sends, the scores it reads back, and a service error
//! quoted in the error. (No rerank model server is installable here; the
//! server below checks the request body and answers in the documented shape.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use serde_json::{Value, json};
use weft_core::ports::Reranker;
use weft_rerank_http::{ApiShape, HttpReranker};

/// Serves one request: hands its path and JSON body to `answer`, which
/// returns (status line, body).
fn serve_once(answer: impl Fn(&str, Value) -> (String, String) + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            if header.trim().is_empty() {
                break;
            }
            if let Some((_, v)) = header
                .split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        let (status, reply) = answer(&path, serde_json::from_slice(&body).unwrap());
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
            reply.len()
        )
        .unwrap();
    });
    base
}

/// Scores by how many query words a passage contains: a stand-in model.
fn overlap(query: &str, passage: &str) -> f64 {
    query
        .split_whitespace()
        .filter(|w| passage.contains(w))
        .count() as f64
}

fn passages() -> Vec<String> {
    vec![
        "unrelated text".into(),
        "retry with backoff".into(),
        "retry".into(),
    ]
}

#[tokio::test]
async fn tei_shape() {
    let base = serve_once(|path, body| {
        assert_eq!(path, "/rerank");
        let query = body["query"].as_str().unwrap().to_owned();
        let texts = body["texts"].as_array().unwrap();
        // TEI answers best first.
        let mut scored: Vec<(usize, f64)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i, overlap(&query, t.as_str().unwrap())))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        let reply: Vec<Value> = scored
            .into_iter()
            .map(|(i, s)| json!({"index": i, "score": s}))
            .collect();
        ("200 OK".into(), Value::Array(reply).to_string())
    });
    let reranker = HttpReranker::new(&base, ApiShape::Tei, None).unwrap();
    let scores = reranker.rerank("retry backoff", &passages()).await.unwrap();
    assert_eq!(scores, vec![0.0, 2.0, 1.0], "back in passage order");
}

#[tokio::test]
async fn cohere_shape_sends_the_model() {
    let base = serve_once(|path, body| {
        assert_eq!(path, "/v1/rerank");
        assert_eq!(body["model"], "rerank-v3.5");
        assert_eq!(body["top_n"], 3);
        let query = body["query"].as_str().unwrap().to_owned();
        let results: Vec<Value> = body["documents"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, d)| json!({"index": i, "relevance_score": overlap(&query, d.as_str().unwrap()) / 2.0}))
            .collect();
        ("200 OK".into(), json!({ "results": results }).to_string())
    });
    let reranker = HttpReranker::new(&base, ApiShape::Cohere, Some("rerank-v3.5".into())).unwrap();
    let scores = reranker.rerank("retry backoff", &passages()).await.unwrap();
    assert_eq!(scores, vec![0.0, 1.0, 0.5]);
}

#[tokio::test]
async fn a_service_error_is_quoted() {
    let base = serve_once(|_, _| {
        (
            "413 Payload Too Large".into(),
            json!({"error": "batch size 3 > maximum allowed batch size 2"}).to_string(),
        )
    });
    let reranker = HttpReranker::new(&base, ApiShape::Tei, None).unwrap();
    let err = reranker
        .rerank("q", &passages())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("413") && err.contains("maximum allowed batch size"),
        "{err}"
    );
    assert!(err.contains("/rerank"), "{err}");
}
