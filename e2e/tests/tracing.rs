//! OpenTelemetry traces over OTLP: with `OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! each document's journey is one trace — the crawler's span, the
//! chunker's span as its child, the embedder's as the chunker's child —
//! and a query is a server span under the caller's `traceparent`.

use std::time::{Duration, Instant};

use weft_e2e::otlp::{OtlpReceiver, ReceivedSpan};
use weft_e2e::{Service, crawl, model_dir, start_query, wait_for_documents, write_files};
use weft_nats::Jet;
use weft_nats::testing::NatsServer;
use weft_proto::v1;

fn find<'a>(spans: &'a [ReceivedSpan], service: &str, name: &str) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|s| s.service == service && s.name == name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_is_one_trace_across_services_and_a_query_continues_its_caller() {
    let receiver = OtlpReceiver::start().await;
    let nats = NatsServer::start();
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    write_files(
        tree.path(),
        &[
            (
                "backup.md",
                "# Backups\n\nSnapshots are taken every night and kept for a week.\n",
            ),
            (
                "restore.md",
                "# Restore\n\nPick a snapshot and restore it into a new volume.\n",
            ),
        ],
    );
    let env = vec![
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT_DATA_DIR", data.path().display().to_string()),
        ("WEFT_MODEL_DIR", model_dir().display().to_string()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    let mut chunker = Service::start("chunker", "weft-chunker", &[], &env, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let tree_arg = tree.path().display().to_string();
    let crawl_env = env.clone();
    let summary = tokio::task::spawn_blocking(move || {
        crawl(&[tree_arg.as_str(), "--project", "ops"], &crawl_env)
    })
    .await
    .unwrap();
    assert_eq!(summary["sources"][0]["documents_published"], 2, "{summary}");

    let jet = Jet::connect(&nats.config()).await.unwrap();
    let catalog = jet.catalog().await.unwrap();
    wait_for_documents(&catalog, "ops", 2, &mut embedder, Duration::from_secs(120)).await;
    // A graceful stop exports the spans still pending.
    chunker.stop();
    embedder.stop();

    let (mut query, mut client) = start_query(&env, logs.path()).await;
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let mut request = tonic::Request::new(v1::SearchRequest {
        query: "how long are snapshots kept".into(),
        ..Default::default()
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{caller_trace}-{caller_span}-01")
            .parse()
            .unwrap(),
    );
    let response = client.search(request).await.unwrap();
    let answered = response
        .metadata()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("the answer names its trace");
    assert!(
        answered.starts_with(&format!("00-{caller_trace}-")),
        "{answered}"
    );
    let query_span_id = answered.split('-').nth(2).unwrap().to_owned();
    assert_eq!(
        response.into_inner().results[0].uri,
        "backup.md",
        "the query still answers"
    );
    query.stop();

    // Spans arrive in batches; wait for all of them.
    let deadline = Instant::now() + Duration::from_secs(20);
    let spans = loop {
        let spans = receiver.spans();
        let complete = find(&spans, "weft-crawler", "crawler publish").len() >= 2
            && find(&spans, "weft-chunker", "chunker process").len() >= 2
            && find(&spans, "weft-embedder", "embedder process").len() >= 2
            && !find(&spans, "weft-query", "weft.v1.QueryService/Search").is_empty();
        if complete || Instant::now() > deadline {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let summary: Vec<String> = spans
        .iter()
        .map(|s| {
            format!(
                "{} {} {}/{}<-{}",
                s.service, s.name, s.trace_id, s.span_id, s.parent_span_id
            )
        })
        .collect();
    let roots = find(&spans, "weft-crawler", "crawler publish");
    assert_eq!(
        roots.len(),
        2,
        "one crawler span per document: {summary:#?}"
    );
    let mut uris = Vec::new();
    for root in roots {
        assert!(
            root.parent_span_id.is_empty(),
            "the crawler's span is the root"
        );
        uris.push(root.attributes["weft.uri"].clone());
        let chunker = find(&spans, "weft-chunker", "chunker process");
        let chunked: Vec<_> = chunker
            .iter()
            .filter(|s| s.trace_id == root.trace_id && s.parent_span_id == root.span_id)
            .collect();
        assert_eq!(
            chunked.len(),
            1,
            "{}: one chunker span under the crawler's: {summary:#?}",
            root.attributes["weft.uri"]
        );
        assert_eq!(chunked[0].attributes["weft.outcome"], "done");
        assert!(
            chunked[0].attributes["messaging.destination.name"].starts_with("weft.docs.g0.ops.")
        );
        let embedded: Vec<_> = find(&spans, "weft-embedder", "embedder process")
            .into_iter()
            .filter(|s| s.trace_id == root.trace_id && s.parent_span_id == chunked[0].span_id)
            .collect();
        assert_eq!(
            embedded.len(),
            1,
            "{}: one embedder span under the chunker's: {summary:#?}",
            root.attributes["weft.uri"]
        );
        assert_eq!(embedded[0].attributes["weft.outcome"], "done");
        assert!(!embedded[0].failed);
    }
    uris.sort();
    assert_eq!(uris, ["backup.md", "restore.md"]);

    let searches = find(&spans, "weft-query", "weft.v1.QueryService/Search");
    assert_eq!(searches.len(), 1, "{summary:#?}");
    let search = searches[0];
    assert_eq!(search.trace_id, caller_trace);
    assert_eq!(search.parent_span_id, caller_span);
    assert_eq!(
        search.span_id, query_span_id,
        "the answer's traceparent is the server span"
    );
    assert_eq!(search.attributes["rpc.method"], "Search");
    assert!(!search.failed);
}
