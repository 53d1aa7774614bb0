//! The distributed pipeline over real processes: nats-server (JetStream),
//! weft-crawler, two weft-chunker workers, weft-embedder writing to embedded
//! stores in a data directory, then weft-query over that directory, asked
//! over gRPC. Workers are killed with SIGKILL mid-run and restarted; the
//! exact chunk counts afterwards show that nothing was lost or duplicated.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use weft_core::ports::Catalog;
use weft_core::{ChunkId, DocumentId};
use weft_e2e::{Service, crawl, model_dir, start_query};
use weft_nats::Jet;
use weft_nats::testing::NatsServer;
use weft_proto::v1;

const PROJECT: &str = "e2e";

/// Distinct small files: Java classes and markdown guides, plus a binary.
fn write_tree(root: &Path, files: usize) {
    for i in 0..files {
        let (name, body) = if i % 3 == 2 {
            (
                format!("docs/guide{i}.md"),
                format!(
                    "# Guide {i}\n\nThis guide explains topic number {i} of the widget system.\n\n## Setup {i}\n\nInstall widget {i} with the package manager and restart the service.\n\n## Troubleshooting {i}\n\nIf widget {i} fails to start, check the logs for error {i}.\n"
                ),
            )
        } else {
            (
                format!("src/Widget{i}.java"),
                format!(
                    "package demo;\n\n/** Widget {i} counts events of kind {i}. */\npublic final class Widget{i} {{\n  private long count{i};\n\n  /** Records one event of kind {i}. */\n  public void record{i}() {{\n    count{i} += {i};\n  }}\n\n  /** The events of kind {i} so far. */\n  public long total{i}() {{\n    return count{i};\n  }}\n}}\n"
                ),
            )
        };
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    std::fs::write(
        root.join("docs/rate-limiter.md"),
        "# Rate limiter\n\nThe token bucket hands out permits at a fixed rate; callers that exceed the rate are throttled until a permit is free.\n",
    )
    .unwrap();
    std::fs::write(root.join("logo.png"), [0x89, b'P', b'N', b'G', 0, 0, 1, 2]).unwrap();
}

struct Pipeline {
    jet: Jet,
    catalog: weft_nats::NatsCatalog,
}

impl Pipeline {
    /// Waits until both work queues are empty and the catalog holds exactly
    /// `documents` records of the project.
    async fn drained(&self, documents: usize, services: &mut [&mut Service]) {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let docs = self.jet.stream_messages("WEFT_DOCS").await.unwrap();
            let chunks = self.jet.stream_messages("WEFT_CHUNKS").await.unwrap();
            let records = self.catalog.documents(Some(PROJECT)).await.unwrap().len();
            if docs == 0 && chunks == 0 && records == documents {
                return;
            }
            for s in services.iter_mut() {
                assert!(s.running(), "{} died:\n{}", s.name, s.log());
            }
            assert!(
                Instant::now() < deadline,
                "not drained: {docs} documents and {chunks} batches queued, {records} of {documents} records"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn records(&self) -> usize {
        self.catalog.documents(Some(PROJECT)).await.unwrap().len()
    }
}

/// Every file under `root`.
fn walkdir(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Counts the chunks in the data directory (the embedder must be stopped)
/// and checks that each expected chunk is there, once.
async fn check_stores(data: &Path, expected: &BTreeMap<DocumentId, u32>) {
    let stores = weft_wiring::DataDir::new(data).open_existing().unwrap();
    let total: u64 = expected.values().map(|&n| n as u64).sum();
    assert_eq!(
        stores.vectors.count().await.unwrap(),
        total,
        "vector points"
    );
    assert_eq!(stores.text.count().await.unwrap(), total, "text documents");
    let ids: Vec<ChunkId> = expected
        .iter()
        .flat_map(|(doc, &n)| (0..n).map(move |i| ChunkId::new(doc, i)))
        .collect();
    let found = stores.vectors.get(&ids).await.unwrap();
    assert_eq!(found.len() as u64, total, "every expected chunk, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_chunk_embed_query_with_crashes_changes_and_poison() {
    let nats = NatsServer::start();
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    write_tree(tree.path(), 36);
    let expected = weft_e2e::expected_chunks(tree.path(), PROJECT);
    let documents = expected.len();
    assert_eq!(documents, 38);

    let common = vec![
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT__NATS__ACK_WAIT_SECS", "3".to_owned()),
        ("WEFT__NATS__MAX_DELIVER", "3".to_owned()),
        ("WEFT_MODEL_DIR", model_dir().display().to_string()),
        ("WEFT_DATA_DIR", data.path().display().to_string()),
    ];
    let with = |extra: &[(&'static str, &str)]| {
        let mut env = common.clone();
        env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        env
    };
    // Workers take one message at a time and pause before each, so the
    // kills below land mid-run.
    let chunker_env = with(&[
        ("WEFT__NATS__FETCH_BATCH", "1"),
        ("WEFT_FAULT_DELAY_MS", "150"),
        ("WEFT_LOG", "info,weft_chunker=debug"),
    ]);
    let embedder_env = with(&[
        ("WEFT__NATS__FETCH_BATCH", "2"),
        ("WEFT__EMBEDDING__BATCH_SIZE", "4"),
        ("WEFT_FAULT_DELAY_MS", "300"),
    ]);
    let jet = Jet::connect(&nats.config()).await.unwrap();
    let pipeline = Pipeline {
        catalog: jet.catalog().await.unwrap(),
        jet: jet.clone(),
    };

    let mut chunker_a = Service::start("chunker-a", "weft-chunker", &[], &chunker_env, logs.path());
    let mut chunker_b = Service::start("chunker-b", "weft-chunker", &[], &chunker_env, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &embedder_env, logs.path());

    // A poison message: not a document at all.
    let poison_subject = weft_nats::docs_subject(0, PROJECT, "00000000000000aa");
    jet.publish(
        poison_subject.clone(),
        Default::default(),
        "\u{1}not protobuf".into(),
    )
    .await
    .unwrap();

    let tree_arg = tree.path().display().to_string();
    let summary = crawl(&[&tree_arg, "--project", PROJECT], &common);
    let source = &summary["sources"][0];
    assert_eq!(source["documents_published"], documents, "{summary}");
    assert_eq!(source["documents_unchanged"], 0, "{summary}");

    // SIGKILL a chunker while documents wait, and the embedder once some,
    // not all, documents are written; restart the embedder.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        jet.stream_messages("WEFT_DOCS").await.unwrap() > 0,
        "the chunkers finished before the kill; the test needs a longer WEFT_FAULT_DELAY_MS"
    );
    chunker_a.kill();
    let deadline = Instant::now() + Duration::from_secs(300);
    while pipeline.records().await < 3 {
        assert!(
            Instant::now() < deadline,
            "the embedder wrote nothing:\n{}",
            embedder.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written_before_kill = pipeline.records().await;
    assert!(
        written_before_kill < documents,
        "the embedder finished before the kill"
    );
    embedder.kill();
    eprintln!(
        "killed chunker a mid-run and the embedder after {written_before_kill} of {documents} documents"
    );
    let mut embedder = Service::start(
        "embedder-2",
        "weft-embedder",
        &[],
        &embedder_env,
        logs.path(),
    );
    pipeline
        .drained(documents, &mut [&mut chunker_b, &mut embedder])
        .await;

    // Both chunkers took documents.
    let chunked = |log: &str| log.lines().filter(|l| l.contains("chunked")).count();
    assert!(
        chunked(&chunker_a.log()) > 0,
        "chunker a:\n{}",
        chunker_a.log()
    );
    assert!(
        chunked(&chunker_b.log()) > 0,
        "chunker b:\n{}",
        chunker_b.log()
    );

    // The poison message is in the dead-letter stream with its error.
    let dead = jet.jetstream().get_stream("WEFT_DEAD").await.unwrap();
    let consumer = dead
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let mut letters = consumer.fetch().max_messages(10).messages().await.unwrap();
    let letter = letters.next().await.expect("a dead letter").unwrap();
    let headers = letter.headers.clone().unwrap();
    assert_eq!(
        headers.get(weft_nats::SUBJECT_HEADER).unwrap().as_str(),
        poison_subject
    );
    assert!(
        headers
            .get(weft_nats::ERROR_HEADER)
            .unwrap()
            .as_str()
            .contains("not a weft.v1.Document"),
        "{headers:?}"
    );
    assert!(letters.next().await.is_none(), "only the poison message");

    // The binary file is catalogued with no chunks.
    let logo = pipeline
        .catalog
        .document(&DocumentId::new(PROJECT, "logo.png"))
        .await
        .unwrap()
        .expect("logo.png is catalogued");
    assert_eq!(logo.chunk_count, 0);

    // Nothing changed: nothing is published.
    let again = crawl(&[&tree_arg, "--project", PROJECT], &common);
    assert_eq!(again["sources"][0]["documents_published"], 0, "{again}");
    assert_eq!(
        again["sources"][0]["documents_unchanged"], documents,
        "{again}"
    );

    // The catalog names the chunker that cut each document. A crawler
    // configured with other chunking settings publishes them all again; the
    // chunkers cut them by their own settings, as before.
    let chunker = weft_chunking::Chunker::new(Default::default()).unwrap();
    let fingerprint = chunker.fingerprint();
    let record = pipeline
        .catalog
        .document(&DocumentId::new(PROJECT, "docs/rate-limiter.md"))
        .await
        .unwrap()
        .expect("rate-limiter.md is catalogued");
    assert!(
        record.identity.chunker == fingerprint,
        "{record:?} names the chunker {fingerprint}"
    );
    let other_settings = with(&[("WEFT__CHUNKING__CODE__MAX_CHARS", "900")]);
    let recut = crawl(&[&tree_arg, "--project", PROJECT], &other_settings);
    assert_eq!(
        recut["sources"][0]["documents_published"], documents,
        "{recut}"
    );
    pipeline
        .drained(documents, &mut [&mut chunker_b, &mut embedder])
        .await;

    // A document changed twice in quick succession ends at its last
    // version; a deleted one goes.
    let changed = tree.path().join("docs/rate-limiter.md");
    std::fs::write(&changed, "# Rate limiter\n\nVersion two: a leaky bucket.\n").unwrap();
    let first = crawl(&[&tree_arg, "--project", PROJECT], &common);
    std::fs::write(
        &changed,
        "# Rate limiter\n\nVersion three: the token bucket refills permits every second; callers over the rate wait for a permit.\n",
    )
    .unwrap();
    std::fs::remove_file(tree.path().join("src/Widget0.java")).unwrap();
    let second = crawl(&[&tree_arg, "--project", PROJECT], &common);
    assert_eq!(first["sources"][0]["documents_published"], 1, "{first}");
    assert_eq!(second["sources"][0]["documents_published"], 1, "{second}");
    assert_eq!(second["sources"][0]["documents_deleted"], 1, "{second}");
    let expected = weft_e2e::expected_chunks(tree.path(), PROJECT);
    pipeline
        .drained(expected.len(), &mut [&mut chunker_b, &mut embedder])
        .await;
    let chunker_log = chunker_b.stop();
    assert!(
        chunker_log.contains("weft-chunker stopped"),
        "{chunker_log}"
    );
    embedder.stop();
    // `weft status` over the embedder's data directory (before anything
    // else opens it): its chunks, and no catalog (the pipeline's is in
    // NATS); looking makes none.
    let out = std::process::Command::new(weft_e2e::bin("weft"))
        .args(["status", "--json", "--data-dir"])
        .arg(data.path())
        .env("WEFT_MODEL_DIR", model_dir())
        .current_dir(data.path())
        .output()
        .expect("weft status runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    let total: u32 = expected.values().sum();
    assert_eq!(status["chunks"]["vector_index"], total, "{status}");
    assert_eq!(status["catalog"], false, "{status}");
    let made: Vec<_> = walkdir(data.path())
        .into_iter()
        .filter(|p| p.ends_with("catalog.redb"))
        .collect();
    assert!(made.is_empty(), "weft status made a catalog: {made:?}");
    check_stores(data.path(), &expected).await;
    eprintln!(
        "stores hold exactly the {} expected chunks of {} documents",
        expected.values().sum::<u32>(),
        expected.len()
    );
    {
        let stores = weft_wiring::DataDir::new(data.path())
            .open_existing()
            .unwrap();
        let id = DocumentId::new(PROJECT, "docs/rate-limiter.md");
        let n = expected[&id];
        let ids: Vec<ChunkId> = (0..n).map(|i| ChunkId::new(&id, i)).collect();
        let text: String = stores
            .vectors
            .get(&ids)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.content)
            .collect();
        assert!(text.contains("Version three"), "{text}");
        assert!(!text.contains("Version two"), "{text}");
    }

    // The query service over the data directory, over gRPC.
    let (mut query, mut client) = start_query(&common, logs.path()).await;
    let response = client
        .search(v1::SearchRequest {
            query: "token bucket permits rate".into(),
            projects: vec![PROJECT.into()],
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        response.results[0].uri, "docs/rate-limiter.md",
        "{response:?}"
    );
    let widget = client
        .search(v1::SearchRequest {
            query: "Widget7 records events of kind 7".into(),
            limit: 3,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(widget.results[0].uri, "src/Widget7.java", "{widget:?}");
    let doc = DocumentId::new(PROJECT, "src/Widget7.java");
    let chunks = client
        .get_chunks(v1::GetChunksRequest {
            document_id: doc.as_str().into(),
            start_index: 0,
            end_index: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(chunks.total_chunks, expected[&doc]);
    assert_eq!(chunks.chunks.len() as u32, expected[&doc]);
    query.stop();
}
