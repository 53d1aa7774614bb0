//! Hostile requests to `weft-query` (a real process over a data directory
//! indexed by `weft index`), while a second process (`weft-grpc-load`)
//! hammers it with good and hostile requests: every hostile request gets
//! its status code and a message naming the field, every good request its
//! right answer, before, during and after; the service stays healthy and
//! stops cleanly.

use std::net::SocketAddr;
use std::process::Command;

use bytes::Bytes;
use prost::Message as _;
use tonic::Code;
use weft_e2e::{QueryClient, bin, model_dir, start_query_at, write_files};
use weft_proto::v1;

const MAX_QUERY_CHARS: usize = 2000;
const MAX_LIMIT: u32 = 50;
const MAX_REQUEST_BYTES: usize = 256 << 10;
const QUERY: &str = "where do the TLS certificates go";

/// A gRPC call over a bare HTTP/2 connection: no client-side deadline, so
/// what comes back is what the server decided. Returns `grpc-status` and
/// the (percent-decoded) `grpc-message`.
async fn raw_call(
    addr: SocketAddr,
    path: &str,
    message: Vec<u8>,
    grpc_timeout: Option<&str>,
) -> (i32, String) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = grpc_timeout {
        request = request.header("grpc-timeout", t);
    }
    let mut client = client.ready().await.unwrap();
    let (response, mut body) = client
        .send_request(request.body(()).unwrap(), false)
        .unwrap();
    let mut framed = vec![0u8];
    framed.extend((message.len() as u32).to_be_bytes());
    framed.extend(message);
    body.send_data(Bytes::from(framed), true).unwrap();
    let response = response.await.unwrap();
    let status_of = |headers: &http::HeaderMap| {
        headers.get("grpc-status").map(|s| {
            let message = headers
                .get("grpc-message")
                .map(|m| percent_decode(m.as_bytes()))
                .unwrap_or_default();
            (s.to_str().unwrap().parse::<i32>().unwrap(), message)
        })
    };
    // An error comes as headers only; an answer as data, then trailers.
    if let Some(status) = status_of(response.headers()) {
        return status;
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.unwrap().expect("trailers");
    status_of(&trailers).expect("grpc-status in the trailers")
}

fn percent_decode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&String::from_utf8_lossy(&bytes[i + 1..i + 3]), 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn search(query: &str) -> v1::SearchRequest {
    v1::SearchRequest {
        query: query.into(),
        limit: 3,
        ..Default::default()
    }
}

/// The good query's answer: its best document must be the guide.
async fn check_good(client: &mut QueryClient) -> String {
    let answer = client.search(search(QUERY)).await.unwrap().into_inner();
    let top = &answer.results[0];
    assert_eq!(top.uri, "guide.md", "{answer:?}");
    top.document_id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_their_codes_and_the_service_stays_well_under_load() {
    let tree = tempfile::tempdir().unwrap();
    write_files(
        tree.path(),
        &[
            (
                "guide.md",
                "# Guide\n\n## Installing\n\nUnpack the archive into your home directory.\n\n\
                 ## TLS certificates\n\nPut the server certificate and its private key in the \
                 config directory; the demo reloads certificates when they change.\n",
            ),
            (
                "src/Throttle.java",
                "package demo;\n\n/** Hands out permits at a fixed rate. */\npublic final class Throttle {\n  \
                 private double permits;\n\n  /** Blocks until a permit is available. */\n  public void acquire() {\n    \
                 while (permits < 1.0) { permits += 0.5; }\n    permits -= 1.0;\n  }\n}\n",
            ),
        ],
    );
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let indexed = Command::new(bin("weft"))
        .args(["index", tree.path().to_str().unwrap(), "--project", "demo"])
        .env("WEFT_DATA_DIR", data.path())
        .env("WEFT_MODEL_DIR", model_dir())
        .output()
        .unwrap();
    assert!(
        indexed.status.success(),
        "{}",
        String::from_utf8_lossy(&indexed.stderr)
    );
    let env = [
        ("WEFT_DATA_DIR", data.path().display().to_string()),
        ("WEFT_MODEL_DIR", model_dir().display().to_string()),
        // The index `weft index` made: its generations are recorded in the
        // data directory, not in NATS.
        ("WEFT__GENERATIONS__REGISTRY", "data_dir".to_owned()),
        ("WEFT__QUERY__MAX_QUERY_CHARS", MAX_QUERY_CHARS.to_string()),
        ("WEFT__QUERY__MAX_LIMIT", MAX_LIMIT.to_string()),
        (
            "WEFT__QUERY__MAX_REQUEST_BYTES",
            MAX_REQUEST_BYTES.to_string(),
        ),
    ];
    let (mut query, mut client, addr) = start_query_at(&env, logs.path()).await;
    let url = format!("http://{addr}");
    let addr: SocketAddr = addr.parse().unwrap();
    let guide = check_good(&mut client).await;

    // A second process loads the service meanwhile.
    let load = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft-grpc-load"))
        .args([
            "--addr",
            &url,
            "--query",
            QUERY,
            "--expect-uri",
            "guide.md",
            "--document",
            &guide,
            "--max-query-chars",
            &MAX_QUERY_CHARS.to_string(),
            "--max-request-bytes",
            &MAX_REQUEST_BYTES.to_string(),
            "--seconds",
            "20",
            "--connections",
            "4",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    // Each hostile request: its code, and a message naming the field.
    let mut cases: Vec<(&str, v1::SearchRequest, Code, &str)> = vec![
        (
            "query over query.max_query_chars",
            search(&"x".repeat(MAX_QUERY_CHARS + 1)),
            Code::InvalidArgument,
            "weft.v1.SearchRequest.query: is longer than 2000 characters (query.max_query_chars)",
        ),
        (
            "an empty query",
            search("   "),
            Code::InvalidArgument,
            "weft.v1.SearchRequest.query: is empty",
        ),
        (
            "a NUL in the query",
            search("tls\0certificates"),
            Code::InvalidArgument,
            "weft.v1.SearchRequest.query: holds a control character (U+0000)",
        ),
        (
            "limit 10^9",
            v1::SearchRequest {
                limit: 1_000_000_000,
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.limit: 1000000000 is over the maximum 50 (query.max_limit)",
        ),
        (
            "limit over query.max_limit",
            v1::SearchRequest {
                limit: MAX_LIMIT + 1,
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.limit: 51",
        ),
        (
            "a content type that does not exist",
            v1::SearchRequest {
                content_types: vec![99],
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "content_types: 99 is not prose, code or api_reference",
        ),
        (
            "a path prefix out of the tree",
            v1::SearchRequest {
                path_prefix: "../../etc".into(),
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.path_prefix: \"../../etc\" has a \"..\" path component",
        ),
        (
            "an absolute path prefix",
            v1::SearchRequest {
                path_prefix: "/etc/ssl".into(),
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.path_prefix: \"/etc/ssl\" is an absolute path",
        ),
        (
            "an empty project name",
            v1::SearchRequest {
                projects: vec![String::new()],
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.projects: value 0 is empty",
        ),
        (
            "a language with an escape sequence",
            v1::SearchRequest {
                languages: vec!["java\u{1b}[2J".into()],
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.languages: value 0 holds a control character (U+001B)",
        ),
        (
            "a window of 2^32-1",
            v1::SearchRequest {
                expansion: Some(v1::Expansion {
                    code_window: Some(u32::MAX),
                    ..Default::default()
                }),
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.expansion.code_window: 4294967295 is over the maximum 100",
        ),
        (
            "max_chunks 0",
            v1::SearchRequest {
                expansion: Some(v1::Expansion {
                    max_chunks: Some(0),
                    ..Default::default()
                }),
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.expansion.max_chunks: must be at least 1",
        ),
        (
            "max_tokens 10^9",
            v1::SearchRequest {
                max_tokens: Some(1_000_000_000),
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.max_tokens",
        ),
        (
            "a search mode that does not exist",
            v1::SearchRequest {
                mode: 7,
                ..search(QUERY)
            },
            Code::InvalidArgument,
            "weft.v1.SearchRequest.mode: 7 is not a search mode",
        ),
        (
            "a project that is not indexed",
            v1::SearchRequest {
                projects: vec!["demo".into(), "no-such-project".into()],
                ..search("zebra quantum marmalade")
            },
            Code::NotFound,
            "weft.v1.SearchRequest.projects: project \"no-such-project\" is not indexed",
        ),
        (
            "a rerank without a reranker",
            v1::SearchRequest {
                rerank: true,
                ..search(QUERY)
            },
            Code::FailedPrecondition,
            "rerank",
        ),
    ];
    // A message over query.max_request_bytes is refused before it is read.
    cases.push((
        "a message over query.max_request_bytes",
        search(&"q".repeat(MAX_REQUEST_BYTES)),
        Code::OutOfRange,
        "message length too large",
    ));
    for (what, request, code, says) in cases {
        let status = client
            .search(request)
            .await
            .expect_err(&format!("{what}: answered OK"));
        assert_eq!(status.code(), code, "{what}: {status:?}");
        assert!(
            status.message().contains(says),
            "{what}: {:?} should say {says:?}",
            status.message()
        );
        check_good(&mut client).await;
    }
    // A project that is indexed, with nothing matching: an empty answer.
    let nothing = client
        .search(v1::SearchRequest {
            projects: vec!["demo".into()],
            mode: v1::SearchMode::Text as i32,
            ..search("zebra quantum marmalade")
        })
        .await
        .unwrap()
        .into_inner();
    assert!(nothing.results.is_empty());
    // limit 0 is the documented default (10).
    let default_limit = client
        .search(v1::SearchRequest {
            limit: 0,
            ..search(QUERY)
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(default_limit.results[0].uri, "guide.md");

    let chunks = |document_id: &str, start: u32, end: Option<u32>| v1::GetChunksRequest {
        document_id: document_id.into(),
        start_index: start,
        end_index: end,
    };
    for (what, request, code, says) in [
        (
            "a document id that is not one",
            chunks("../../etc/passwd", 0, None),
            Code::InvalidArgument,
            "weft.v1.GetChunksRequest.document_id: \"../../etc/passwd\" is not 16 lowercase hex characters",
        ),
        (
            "a document that is not indexed",
            chunks("0123456789abcdef", 0, None),
            Code::NotFound,
            "weft.v1.GetChunksRequest.document_id: document 0123456789abcdef is not indexed",
        ),
        (
            "a range that ends before it starts",
            chunks(&guide, 5, Some(2)),
            Code::InvalidArgument,
            "weft.v1.GetChunksRequest.end_index: 2 is before start_index 5",
        ),
        (
            "a range of 2^32-1 chunks",
            chunks(&guide, 0, Some(u32::MAX)),
            Code::InvalidArgument,
            "at most 1000 per call",
        ),
        (
            "a range past the document's end",
            chunks(&guide, 4_000_000_000, None),
            Code::OutOfRange,
            "weft.v1.GetChunksRequest.start_index: 4000000000 is past the last chunk",
        ),
    ] {
        let status = client
            .get_chunks(request)
            .await
            .expect_err(&format!("{what}: answered OK"));
        assert_eq!(status.code(), code, "{what}: {status:?}");
        assert!(
            status.message().contains(says),
            "{what}: {:?} should say {says:?}",
            status.message()
        );
    }
    let whole = client
        .get_chunks(chunks(&guide, 0, None))
        .await
        .unwrap()
        .into_inner();
    assert!(whole.total_chunks >= 1 && whole.chunks.len() as u32 == whole.total_chunks);
    // An empty range of an indexed document is an empty answer.
    let empty = client
        .get_chunks(chunks(&guide, 1, Some(1)))
        .await
        .unwrap()
        .into_inner();
    assert!(empty.chunks.is_empty() && empty.total_chunks == whole.total_chunks);

    // Deadlines, as the server answers them (no client-side timer).
    let path = "/weft.v1.QueryService/Search";
    for (timeout, code, says) in [
        (
            "1m",
            Code::DeadlineExceeded,
            "the call's deadline (grpc-timeout 1ms) passed",
        ),
        ("0n", Code::DeadlineExceeded, "grpc-timeout 0ns"),
        ("500u", Code::DeadlineExceeded, "grpc-timeout 500µs"),
        (
            "soon",
            Code::InvalidArgument,
            "grpc-timeout metadata: \"soon\" is not a gRPC timeout",
        ),
        ("123456789S", Code::InvalidArgument, "is not a gRPC timeout"),
    ] {
        // A new query each time: no cached embedding makes it quick.
        let query = format!("certificates and keys, attempt {timeout}");
        let (status, message) =
            raw_call(addr, path, search(&query).encode_to_vec(), Some(timeout)).await;
        assert_eq!(status, code as i32, "grpc-timeout {timeout}: {message}");
        assert!(
            message.contains(says),
            "grpc-timeout {timeout}: {message:?} should say {says:?}"
        );
    }
    // A generous deadline is met.
    let (status, message) = raw_call(addr, path, search(QUERY).encode_to_vec(), Some("30S")).await;
    assert_eq!(status, 0, "{message}");
    // Bytes that are no message at all.
    let (status, message) = raw_call(addr, path, vec![0xff; 64], None).await;
    assert_eq!(status, Code::Internal as i32, "{message}");

    // The load: every answer as expected, good ones included.
    let out = load.wait_with_output().await.unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    println!("weft-grpc-load:\n{report}");
    assert!(
        out.status.success(),
        "weft-grpc-load saw unexpected answers:\n{report}\n{}\nquery log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        query.log()
    );
    let summary: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert!(summary["requests"].as_u64().unwrap() > 100, "{summary:#}");
    assert!(
        summary["good_search_ms"]["count"].as_u64().unwrap() > 10,
        "{summary:#}"
    );

    // Afterwards: healthy, the same answers, a clean stop.
    let mut health = tonic_health_client(&url).await;
    let reply = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "weft.v1.QueryService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        reply.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    assert_eq!(check_good(&mut client).await, guide);
    assert!(query.running(), "{}", query.log());
    let log = query.stop();
    assert!(!log.contains("panicked"), "{log}");
}

async fn tonic_health_client(
    url: &str,
) -> tonic_health::pb::health_client::HealthClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic_health::pb::health_client::HealthClient::new(channel)
}
