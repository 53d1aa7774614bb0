//! The query service over gRPC: an index built with the real model in a
//! temporary data directory, served on a free loopback port, asked through
//! the generated client, the health service and reflection.

use std::path::PathBuf;
use std::sync::Arc;

use tonic::Code;
use weft_index::{IndexOptions, Indexer};
use weft_proto::v1;
use weft_proto::v1::query_service_client::QueryServiceClient;
use weft_sources::SourceSpec;
use weft_wiring::DataDir;

fn model_dir() -> PathBuf {
    std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(weft_config::default_model_dir)
}

const THROTTLE: &str = "package demo;\n\n/** Hands out permits at a fixed rate: a token bucket. */\npublic final class Throttle {\n  private double permits;\n\n  /** Blocks until a permit is available, then takes it. */\n  public void acquirePermit() {\n    while (permits < 1.0) {\n      refill();\n    }\n    permits -= 1.0;\n  }\n\n  /** Adds the permits earned since the last refill. */\n  private void refill() {\n    permits += 0.5;\n  }\n}\n";

const GUIDE: &str = "# Guide\n\nHow to run the demo.\n\n## Installing\n\nDownload the archive and unpack it into your home directory.\n\n## TLS certificates\n\nPut the server certificate and its private key in the config directory;\nthe demo reloads certificates when they change.\n\n## Logging\n\nLogs go to standard error unless a log file is configured.\n";

struct Served {
    client: QueryServiceClient<tonic::transport::Channel>,
    channel: tonic::transport::Channel,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), weft_grpc::ServiceError>>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

async fn serve_fixture() -> Served {
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("Throttle.java"), THROTTLE).unwrap();
    std::fs::write(tree.path().join("guide.md"), GUIDE).unwrap();
    let config = weft_config::WeftConfig::default();
    let model = weft_embed_local::LocalEmbedder::load(&model_dir(), 256)
        .expect("these tests need the embedding model (run tools/fetch-model.sh)");
    let model: Arc<dyn weft_core::ports::Embedder> = Arc::new(model);
    {
        let stores = DataDir::new(data.path())
            .open_for(model.model_id(), model.dimension())
            .unwrap();
        let indexer = Indexer::new(stores, model.clone(), &config, data.path().join("s")).unwrap();
        let summary = indexer
            .index(
                &SourceSpec::Dir(tree.path().to_owned()),
                &IndexOptions {
                    project: Some("demo".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(summary.documents_indexed, 2, "{summary:#?}");
    }
    let locations =
        weft_config::Locations::resolve(&config, Some(data.path().to_owned()), Some(model_dir()));
    let server = weft_grpc::open(&config, &locations, weft_wiring::LiveSource::DataDir)
        .await
        .unwrap()
        .0;
    let listener = weft_grpc::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = weft_grpc::ServeOptions::from_config(&config.query);
    let task = tokio::spawn(async move {
        weft_grpc::serve(server, listener, &options, async {
            let _ = stopped.await;
        })
        .await
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Served {
        client: QueryServiceClient::new(channel.clone()),
        channel,
        stop,
        task,
        _dirs: (tree, data),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_get_chunks_health_and_reflection_over_grpc() {
    let mut served = serve_fixture().await;
    let client = &mut served.client;

    // Search: the right document first, its hit marked, line ranges, explain.
    let response = client
        .search(v1::SearchRequest {
            query: "where do the TLS certificates go".into(),
            limit: 3,
            explain: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let top = &response.results[0];
    assert_eq!(top.uri, "guide.md");
    assert_eq!(top.project, "demo");
    let hit = top
        .spans
        .iter()
        .flat_map(|s| s.chunks.iter())
        .filter(|c| c.matched)
        .max_by(|a, b| a.score.total_cmp(&b.score))
        .expect("a matched chunk");
    let chunk = hit.chunk.as_ref().unwrap();
    assert!(chunk.section.contains("TLS certificates"), "{chunk:?}");
    assert!(top.spans[0].start_line >= 1 && top.spans[0].end_line >= top.spans[0].start_line);
    assert!(
        hit.vector.is_some() || hit.text.is_some(),
        "explain gives the components: {hit:?}"
    );
    assert!(response.context.is_none(), "no packing unless asked");
    assert!(response.timings.unwrap().total_ms > 0.0);

    // max_tokens: the spans packed, within the budget, each citation naming
    // the guide's lines it holds.
    let packed = client
        .search(v1::SearchRequest {
            query: "where do the TLS certificates go".into(),
            max_tokens: Some(120),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let context = packed.context.expect("a context pack");
    assert!(context.used_tokens <= 120, "{context:?}");
    assert_eq!(context.tokenizer, "chars/4");
    let first = &context.spans[0];
    assert_eq!(first.uri, "guide.md");
    assert_eq!(
        first.citation,
        format!("guide.md#L{}-L{}", first.start_line, first.end_line)
    );
    let lines: Vec<&str> = GUIDE.lines().collect();
    let cited = lines[first.start_line as usize - 1..first.end_line as usize].join("\n");
    assert_eq!(first.content, cited);
    assert!(first.content.contains("certificate"), "{first:?}");
    assert!(context.markdown.contains(&first.citation));
    let zero = client
        .search(v1::SearchRequest {
            query: "x".into(),
            max_tokens: Some(0),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(zero.code(), Code::InvalidArgument);
    assert!(zero.message().contains("max_tokens"), "{}", zero.message());

    // Filters travel: only code, only under a path that holds nothing.
    let code_only = client
        .search(v1::SearchRequest {
            query: "permits".into(),
            content_types: vec![v1::ContentType::Code as i32],
            mode: v1::SearchMode::Text as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!code_only.results.is_empty());
    assert!(code_only.results.iter().all(|d| d.uri == "Throttle.java"));
    let nothing = client
        .search(v1::SearchRequest {
            query: "permits".into(),
            path_prefix: "docs/".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(nothing.results.is_empty());

    // Without explain, no components; without expansion, only matched chunks.
    let plain = client
        .search(v1::SearchRequest {
            query: "acquire a permit".into(),
            expand: Some(false),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let chunks: Vec<_> = plain
        .results
        .iter()
        .flat_map(|d| d.spans.iter().flat_map(|s| s.chunks.iter()))
        .collect();
    assert!(chunks.iter().all(|c| c.matched && c.vector.is_none()));
    assert_eq!(plain.neighbours_requested, 0);

    // GetChunks: the whole guide, in order, in one call.
    let guide_id = top.document_id.clone();
    let all = client
        .get_chunks(v1::GetChunksRequest {
            document_id: guide_id.clone(),
            start_index: 0,
            end_index: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(all.total_chunks >= 2, "{all:?}");
    assert_eq!(all.chunks.len() as u32, all.total_chunks);
    let indices: Vec<u32> = all.chunks.iter().map(|c| c.chunk_index).collect();
    assert_eq!(indices, (0..all.total_chunks).collect::<Vec<_>>());
    let tail = client
        .get_chunks(v1::GetChunksRequest {
            document_id: guide_id.clone(),
            start_index: 1,
            end_index: Some(2),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tail.chunks.len(), 1);
    assert_eq!(tail.chunks[0].chunk_index, 1);

    // Bad requests name the field.
    for (request, field) in [
        (v1::SearchRequest::default(), "query"),
        (
            v1::SearchRequest {
                query: "x".into(),
                limit: 5000,
                ..Default::default()
            },
            "limit",
        ),
    ] {
        let status = client.search(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains(field), "{status:?}");
    }
    let status = client
        .get_chunks(v1::GetChunksRequest {
            document_id: "nothex".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("document_id"), "{status:?}");
    let status = client
        .search(v1::SearchRequest {
            query: "x".into(),
            rerank: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(status.message().contains("rerank"), "{status:?}");

    // grpc.health.v1 says SERVING for the query service.
    let mut health = tonic_health::pb::health_client::HealthClient::new(served.channel.clone());
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

    // Reflection lists the service.
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut reflection = ServerReflectionClient::new(served.channel.clone());
    let request = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies = reflection
        .server_reflection_info(tokio_stream::once(request))
        .await
        .unwrap()
        .into_inner();
    let reply = replies.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
        panic!("unexpected reflection reply {reply:?}");
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"weft.v1.QueryService"), "{names:?}");

    // Graceful shutdown.
    served.stop.send(()).unwrap();
    served.task.await.unwrap().unwrap();
}
