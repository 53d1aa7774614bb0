//! A load generator for the query API (`weft.v1.QueryService`): several
//! connections sending good and hostile requests as fast as they are
//! answered, each answer checked — a good search must find its document, a
//! hostile request must get its status code. Prints one JSON summary
//! (requests by kind, unexpected answers with samples, latencies, rate) and
//! exits 1 when any answer was not the expected one.
//!
//! ```sh
//! weft-grpc-load --addr http://127.0.0.1:50051 --query "where do certificates go" \
//!     --expect-uri guide.md --document 0123456789abcdef --seconds 20
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use tonic::Code;
use weft_proto::v1;
use weft_proto::v1::query_service_client::QueryServiceClient;

/// Good and hostile requests against a query service, every answer checked.
#[derive(Debug, Parser)]
struct Args {
    /// The service, e.g. http://127.0.0.1:50051.
    #[arg(long)]
    addr: String,
    /// A query whose best document is `--expect-uri`.
    #[arg(long)]
    query: String,
    /// The uri the good query's best document must have.
    #[arg(long)]
    expect_uri: String,
    /// A document id GetChunks must find.
    #[arg(long)]
    document: String,
    /// The server's `query.max_query_chars`.
    #[arg(long, default_value_t = 4096)]
    max_query_chars: usize,
    /// The server's `query.max_request_bytes`.
    #[arg(long, default_value_t = 1024 * 1024)]
    max_request_bytes: usize,
    /// How long to send.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Connections, each sending one request at a time.
    #[arg(long, default_value_t = 4)]
    connections: usize,
}

/// One kind of request and what it must get.
#[derive(Clone, Copy)]
enum Kind {
    GoodSearch,
    GoodGetChunks,
    OversizeQuery,
    OversizeMessage,
    HugeLimit,
    BadPathPrefix,
    HugeWindow,
    BadContentType,
    UnknownProject,
    UnknownDocument,
    BadRange,
    OneMillisecond,
}

const KINDS: [Kind; 12] = [
    Kind::GoodSearch,
    Kind::OversizeQuery,
    Kind::GoodGetChunks,
    Kind::HugeLimit,
    Kind::GoodSearch,
    Kind::BadPathPrefix,
    Kind::HugeWindow,
    Kind::GoodSearch,
    Kind::BadContentType,
    Kind::UnknownProject,
    Kind::OneMillisecond,
    Kind::UnknownDocument,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::GoodSearch => "good search",
            Kind::GoodGetChunks => "good GetChunks",
            Kind::OversizeQuery => "query over max_query_chars",
            Kind::OversizeMessage => "message over max_request_bytes",
            Kind::HugeLimit => "limit 10^9",
            Kind::BadPathPrefix => "path_prefix ../",
            Kind::HugeWindow => "code_window 2^32-1",
            Kind::BadContentType => "content type 99",
            Kind::UnknownProject => "unknown project",
            Kind::UnknownDocument => "unknown document",
            Kind::BadRange => "end_index before start_index",
            Kind::OneMillisecond => "1 ms deadline",
        }
    }
}

#[derive(Default, serde::Serialize)]
struct Tally {
    sent: u64,
    expected: u64,
    unexpected: u64,
    /// The status codes that came back, expected or not.
    codes: BTreeMap<String, u64>,
    samples: Vec<String>,
}

#[derive(Default)]
struct Totals {
    by_kind: BTreeMap<&'static str, Tally>,
    good_search_ms: Vec<f64>,
}

type Client = QueryServiceClient<tonic::transport::Channel>;

/// Sends one request of `kind`: the code that came back, or what was wrong
/// with the answer.
async fn send(client: &mut Client, args: &Args, kind: Kind) -> Result<Code, (Code, String)> {
    let search = |query: String| v1::SearchRequest {
        query,
        limit: 3,
        ..Default::default()
    };
    let code_of = |r: Result<(), tonic::Status>| match r {
        Ok(()) => Code::Ok,
        Err(s) => s.code(),
    };
    let expect = |got: Code, want: &[Code]| {
        if want.contains(&got) {
            Ok(got)
        } else {
            Err((got, format!("{} got {got:?}, wanted {want:?}", kind.name())))
        }
    };
    match kind {
        Kind::GoodSearch => {
            let answer = client
                .search(search(args.query.clone()))
                .await
                .map_err(|s| (s.code(), format!("good search failed: {s}")))?
                .into_inner();
            match answer.results.first() {
                Some(top) if top.uri == args.expect_uri => Ok(Code::Ok),
                other => Err((
                    Code::Ok,
                    format!(
                        "good search: best document {:?}, wanted {}",
                        other.map(|d| &d.uri),
                        args.expect_uri
                    ),
                )),
            }
        }
        Kind::GoodGetChunks => {
            let answer = client
                .get_chunks(v1::GetChunksRequest {
                    document_id: args.document.clone(),
                    ..Default::default()
                })
                .await
                .map_err(|s| (s.code(), format!("good GetChunks failed: {s}")))?
                .into_inner();
            if answer.total_chunks > 0 && answer.chunks.len() as u32 == answer.total_chunks {
                Ok(Code::Ok)
            } else {
                Err((Code::Ok, format!("good GetChunks: {answer:?}")))
            }
        }
        Kind::OversizeQuery => {
            let r = client
                .search(search("q".repeat(args.max_query_chars + 1)))
                .await;
            expect(code_of(r.map(drop)), &[Code::InvalidArgument])
        }
        Kind::OversizeMessage => {
            let r = client
                .search(search("q".repeat(args.max_request_bytes)))
                .await;
            expect(
                code_of(r.map(drop)),
                &[Code::OutOfRange, Code::ResourceExhausted],
            )
        }
        Kind::HugeLimit => {
            let r = client
                .search(v1::SearchRequest {
                    limit: 1_000_000_000,
                    ..search("x".into())
                })
                .await;
            expect(code_of(r.map(drop)), &[Code::InvalidArgument])
        }
        Kind::BadPathPrefix => {
            let r = client
                .search(v1::SearchRequest {
                    path_prefix: "../../etc".into(),
                    ..search("x".into())
                })
                .await;
            expect(code_of(r.map(drop)), &[Code::InvalidArgument])
        }
        Kind::HugeWindow => {
            let r = client
                .search(v1::SearchRequest {
                    expansion: Some(v1::Expansion {
                        code_window: Some(u32::MAX),
                        ..Default::default()
                    }),
                    ..search(args.query.clone())
                })
                .await;
            expect(code_of(r.map(drop)), &[Code::InvalidArgument])
        }
        Kind::BadContentType => {
            let r = client
                .search(v1::SearchRequest {
                    content_types: vec![99],
                    ..search("x".into())
                })
                .await;
            expect(code_of(r.map(drop)), &[Code::InvalidArgument])
        }
        Kind::UnknownProject => {
            let r = client
                .search(v1::SearchRequest {
                    projects: vec!["no-such-project".into()],
                    ..search(args.query.clone())
                })
                .await;
            expect(code_of(r.map(drop)), &[Code::NotFound])
        }
        Kind::UnknownDocument => {
            let r = client
                .get_chunks(v1::GetChunksRequest {
                    document_id: "0000000000000000".into(),
                    ..Default::default()
                })
                .await;
            expect(code_of(r.map(drop)), &[Code::NotFound])
        }
        Kind::BadRange => {
            let r = client
                .get_chunks(v1::GetChunksRequest {
                    document_id: args.document.clone(),
                    start_index: 5,
                    end_index: Some(2),
                })
                .await;
            expect(code_of(r.map(drop)), &[Code::InvalidArgument])
        }
        Kind::OneMillisecond => {
            let mut request = tonic::Request::new(search(args.query.clone()));
            request.set_timeout(Duration::from_millis(1));
            let r = client.search(request).await;
            // The server answers DEADLINE_EXCEEDED; the client's own timer,
            // set to the same deadline, may fire first (CANCELLED).
            expect(
                code_of(r.map(drop)),
                &[Code::DeadlineExceeded, Code::Cancelled, Code::Ok],
            )
        }
    }
}

async fn connection(
    args: Arc<Args>,
    totals: Arc<Mutex<Totals>>,
    offset: usize,
) -> Result<(), String> {
    let channel = tonic::transport::Endpoint::from_shared(args.addr.clone())
        .map_err(|e| format!("{}: {e}", args.addr))?
        .connect()
        .await
        .map_err(|e| format!("connect to {}: {e}", args.addr))?;
    let mut client = QueryServiceClient::new(channel)
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    let stop = Instant::now() + Duration::from_secs(args.seconds);
    let mut i = offset;
    while Instant::now() < stop {
        // Every 50th request of a connection is a message over the limit.
        let kind = if i % 50 == 49 {
            Kind::OversizeMessage
        } else if i % 50 == 48 {
            Kind::BadRange
        } else {
            KINDS[i % KINDS.len()]
        };
        i += 1;
        let started = Instant::now();
        let outcome = send(&mut client, &args, kind).await;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let mut t = totals.lock().map_err(|e| e.to_string())?;
        if matches!(kind, Kind::GoodSearch) && outcome.is_ok() {
            t.good_search_ms.push(ms);
        }
        let tally = t.by_kind.entry(kind.name()).or_default();
        tally.sent += 1;
        let code = match outcome {
            Ok(code) => {
                tally.expected += 1;
                code
            }
            Err((code, e)) => {
                tally.unexpected += 1;
                if tally.samples.len() < 3 {
                    tally.samples.push(e);
                }
                code
            }
        };
        *tally.codes.entry(format!("{code:?}")).or_default() += 1;
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Arc::new(Args::parse());
    let totals = Arc::new(Mutex::new(Totals::default()));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.connections)
        .map(|c| tokio::spawn(connection(args.clone(), totals.clone(), c * 5)))
        .collect();
    let mut failures = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(e.to_string()),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let Ok(mut t) = totals.lock() else {
        eprintln!("weft-grpc-load: a connection panicked");
        return ExitCode::FAILURE;
    };
    t.good_search_ms.sort_by(f64::total_cmp);
    let requests: u64 = t.by_kind.values().map(|k| k.sent).sum();
    let unexpected: u64 = t.by_kind.values().map(|k| k.unexpected).sum();
    let summary = serde_json::json!({
        "requests": requests,
        "unexpected": unexpected,
        "connection_failures": failures,
        "seconds": elapsed,
        "requests_per_second": requests as f64 / elapsed.max(1e-9),
        "good_search_ms": {
            "count": t.good_search_ms.len(),
            "p50": percentile(&t.good_search_ms, 0.5),
            "p99": percentile(&t.good_search_ms, 0.99),
            "max": t.good_search_ms.last().copied().unwrap_or(0.0),
        },
        "by_kind": t.by_kind,
    });
    println!("{summary:#}");
    if unexpected == 0 && failures.is_empty() && requests > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
