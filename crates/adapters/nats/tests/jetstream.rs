//! weft-nats against a real nats-server with JetStream.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_nats::HeaderMap;
use futures::StreamExt;
use weft_core::DocumentId;
use weft_core::ports::{Catalog, DocumentRecord, ProjectState};
use weft_nats::testing::NatsServer;
use weft_nats::trace::{TraceContext, TraceHeaders as _};
use weft_nats::{
    Delivery, Failure, Handler, Jet, Outcome, WorkerOptions, docs_subject, run_worker,
};

fn record(project: &str, uri: &str, hash: &str) -> DocumentRecord {
    DocumentRecord {
        document_id: DocumentId::new(project, uri),
        project: project.into(),
        uri: uri.into(),
        content_hash: hash.into(),
        chunk_count: 3,
        identity: "m/weft-ctx-v3/chunker-1-x".parse().unwrap(),
        version: 7,
    }
}

/// Services started together race to create the streams: every one of
/// them connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_starting_together_all_connect() {
    let server = NatsServer::start();
    let config = server.config();
    let connects = (0..8).map(|_| {
        let config = config.clone();
        tokio::spawn(async move { Jet::connect(&config).await.map(|_| ()) })
    });
    for joined in futures::future::join_all(connects).await {
        joined.unwrap().unwrap();
    }
}

#[tokio::test]
async fn the_catalog_bucket_is_a_catalog() {
    let server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();
    let catalog = jet.catalog().await.unwrap();
    assert!(catalog.documents(None).await.unwrap().is_empty());
    let (a, b, c) = (
        record("alpha", "src/a.rs", "h1"),
        record("alpha", "docs/b.md", "h2"),
        record("beta", "c.py", "h3"),
    );
    catalog
        .put_documents(&[a.clone(), b.clone(), c.clone()])
        .await
        .unwrap();
    assert_eq!(
        catalog.document(&a.document_id).await.unwrap(),
        Some(a.clone())
    );
    let mut alpha = catalog.documents(Some("alpha")).await.unwrap();
    alpha.sort_by(|x, y| x.uri.cmp(&y.uri));
    assert_eq!(alpha, vec![b.clone(), a.clone()]);
    assert_eq!(catalog.documents(None).await.unwrap().len(), 3);
    catalog
        .remove_documents(std::slice::from_ref(&a.document_id))
        .await
        .unwrap();
    assert_eq!(catalog.document(&a.document_id).await.unwrap(), None);
    assert_eq!(catalog.documents(Some("alpha")).await.unwrap(), vec![b]);

    // Project names with characters keys cannot hold.
    let state = ProjectState {
        source: "https://example.com/x.git".into(),
        revision: Some("abc".into()),
        indexed_at: None,
        overlay: None,
    };
    catalog.put_project("org/repo name", &state).await.unwrap();
    assert_eq!(
        catalog.project("org/repo name").await.unwrap(),
        Some(state.clone())
    );
    assert_eq!(
        catalog.projects().await.unwrap(),
        vec![("org/repo name".to_owned(), state)]
    );
    catalog.remove_project("org/repo name").await.unwrap();
    assert!(catalog.projects().await.unwrap().is_empty());

    // A second connection sees the same bucket.
    let again = Jet::connect(&server.config()).await.unwrap();
    assert_eq!(
        again
            .catalog()
            .await
            .unwrap()
            .documents(None)
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn a_newer_document_replaces_an_unprocessed_older_one() {
    let server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();
    let subject = docs_subject(0, "my project", "0123456789abcdef");
    assert_eq!(subject, "weft.docs.g0.my_project.0123456789abcdef");
    for version in ["v1", "v2", "v3"] {
        jet.publish(subject.clone(), HeaderMap::new(), version.into())
            .await
            .unwrap();
    }
    jet.publish(
        docs_subject(0, "p", "fedcba9876543210"),
        HeaderMap::new(),
        "other".into(),
    )
    .await
    .unwrap();
    assert_eq!(jet.stream_messages("WEFT_DOCS").await.unwrap(), 2);
}

/// Fails `poison` every time, fails `flaky` on its first delivery only,
/// handles the rest.
struct Picky {
    seen: Arc<AtomicUsize>,
    traces: Vec<TraceContext>,
}

#[async_trait::async_trait]
impl Handler for Picky {
    async fn handle(&mut self, deliveries: &[Delivery]) -> Vec<Outcome> {
        deliveries
            .iter()
            .map(|d| {
                self.seen.fetch_add(1, Ordering::SeqCst);
                self.traces.push(d.trace.clone());
                match (&*d.payload, d.delivered) {
                    (b"poison", _) => Failure::unavailable("cannot handle poison").into(),
                    (b"malformed", _) => Failure::invalid("not a document\nat all").into(),
                    (b"flaky", 1) => Failure::unavailable("try again").into(),
                    _ => Outcome::Done,
                }
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_ack_retry_and_dead_letter() {
    let server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();
    let root = TraceContext::new_root();
    for (i, payload) in ["fine", "flaky", "poison", "malformed", "fine too"]
        .iter()
        .enumerate()
    {
        jet.publish(
            docs_subject(0, "p", &format!("{i:016x}")),
            root.headers(),
            payload.as_bytes().to_vec().into(),
        )
        .await
        .unwrap();
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let mut handler = Picky {
        seen: seen.clone(),
        traces: Vec::new(),
    };
    let options = WorkerOptions {
        stage: "chunker",
        stream: "WEFT_DOCS".into(),
        durable: "test-chunkers".into(),
        batch: 8,
        linger: Duration::from_millis(200),
    };
    let jet2 = jet.clone();
    let drained = async move {
        // Until the queue is empty (retries back off 1 s, then 2 s).
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if jet2.stream_messages("WEFT_DOCS").await.unwrap() == 0 {
                break;
            }
        }
    };
    let stats = tokio::time::timeout(
        Duration::from_secs(60),
        run_worker(&jet, &options, &mut handler, drained),
    )
    .await
    .expect("drained within a minute")
    .unwrap();
    assert_eq!(stats.done, 3, "{stats:?}");
    assert_eq!(stats.dead_lettered, 2, "{stats:?}");
    // poison: 3 deliveries (max_deliver 3); flaky: 2; malformed: 1; the rest 1 each.
    assert_eq!(stats.retried, 2 + 1, "{stats:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 3 + 2 + 1 + 1 + 1);
    assert!(handler.traces.iter().all(|t| t.trace_id == root.trace_id));

    // The dead letters carry the payload, the error and where they came from.
    let dead = jet.jetstream().get_stream("WEFT_DEAD").await.unwrap();
    let consumer = dead
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let mut messages = consumer.fetch().max_messages(10).messages().await.unwrap();
    let mut letters = Vec::new();
    while let Some(m) = messages.next().await {
        let m = m.unwrap();
        let h = m.headers.clone().unwrap();
        letters.push((
            m.subject.to_string(),
            String::from_utf8(m.payload.to_vec()).unwrap(),
            h.get(weft_nats::ERROR_HEADER).unwrap().to_string(),
            h.get(weft_nats::DELIVERIES_HEADER).unwrap().to_string(),
            h.get(weft_nats::SUBJECT_HEADER).unwrap().to_string(),
            h.get(weft_nats::ERROR_KIND_HEADER).unwrap().to_string(),
        ));
    }
    letters.sort();
    assert_eq!(letters.len(), 2, "{letters:?}");
    let (subject, payload, error, deliveries, original, kind) = &letters[0];
    assert_eq!(payload, "poison");
    assert!(
        subject.starts_with("weft.dead.chunker.docs.g0.p."),
        "{subject}"
    );
    assert_eq!(error, "cannot handle poison");
    assert_eq!(deliveries, "3");
    assert!(original.starts_with("weft.docs.g0.p."));
    assert_eq!(kind, "unavailable");
    // Invalid input is dead-lettered at its first delivery.
    assert_eq!(letters[1].1, "malformed");
    assert_eq!(letters[1].2, "not a document at all");
    assert_eq!(letters[1].3, "1");
    assert_eq!(letters[1].5, "invalid");
}

#[tokio::test]
async fn a_dead_server_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = weft_config::NatsConfig {
        url: format!("nats://127.0.0.1:{port}"),
        ..Default::default()
    };
    let error = Jet::connect(&config).await.err().expect("no server");
    let text = error.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("cannot connect to NATS"), "{text}");
}

/// The generations record: a deployment that never recorded one reads as
/// generation 0 live; concurrent changes all land (compare-and-swap); a
/// transition that is not allowed changes nothing; each generation has
/// its own catalog bucket, removable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generations_record_is_changed_atomically() {
    use weft_core::generations::{GenerationError, GenerationState, Generations};
    use weft_core::ports::{GenerationRegistry, RegistryError};
    let server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();
    let registry = Arc::new(jet.registry().await.unwrap());
    let record = registry.load().await.unwrap();
    assert_eq!(record.live_number(), Some(0));

    // Sixteen writers begin and abort generations at once: none is lost.
    let writers = (0..16).map(|i| {
        let registry = registry.clone();
        tokio::spawn(async move {
            registry
                .update(&|g: &mut Generations| {
                    let n = g.begin(i, Some(0))?;
                    g.abort(n, i, "test")
                })
                .await
        })
    });
    for joined in futures::future::join_all(writers).await {
        joined.unwrap().unwrap();
    }
    let record = registry.load().await.unwrap();
    assert_eq!(record.generations.len(), 17, "{record:?}");
    let numbers: std::collections::BTreeSet<u32> =
        record.generations.iter().map(|g| g.number).collect();
    assert_eq!(numbers.len(), 17, "every generation got its own number");

    // Only one rebuild at a time; a refused change changes nothing.
    let building = registry
        .update(&|g: &mut Generations| g.begin(100, Some(0)).map(|_| ()))
        .await
        .unwrap()
        .building()
        .unwrap()
        .number;
    let refused = registry
        .update(&|g: &mut Generations| g.begin(101, Some(0)).map(|_| ()))
        .await;
    assert!(matches!(
        refused,
        Err(RegistryError::Transition(GenerationError::AlreadyBuilding(n))) if n == building
    ));
    registry
        .update(&|g: &mut Generations| g.switch_to(building, 102))
        .await
        .unwrap();
    let record = registry.load().await.unwrap();
    assert_eq!(record.live_number(), Some(building));
    assert_eq!(record.get(0).unwrap().state, GenerationState::Retired);

    // Per-generation catalogs, removable.
    let catalog = jet.catalog_of(building).await.unwrap();
    catalog
        .put_documents(&[record_of("p", "a.md")])
        .await
        .unwrap();
    assert_eq!(
        jet.catalog()
            .await
            .unwrap()
            .documents(None)
            .await
            .unwrap()
            .len(),
        0
    );
    assert_eq!(catalog.documents(None).await.unwrap().len(), 1);
    jet.delete_catalog_of(building).await.unwrap();
    jet.delete_catalog_of(building).await.unwrap();
    assert!(
        jet.catalog_of(building)
            .await
            .unwrap()
            .documents(None)
            .await
            .unwrap()
            .is_empty()
    );
}

fn record_of(project: &str, uri: &str) -> DocumentRecord {
    record(project, uri, "h")
}

/// A server killed (SIGKILL) and back after longer than a few reconnect
/// attempts take: the connection is found again (weft reconnects for as
/// long as it takes), and the streams, buckets and what they held survive
/// (JetStream on disk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_and_restarted_later_is_reconnected_with_its_data() {
    let mut server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();
    let catalog = jet.catalog().await.unwrap();
    catalog
        .put_documents(&[record("p", "a.md", "h1")])
        .await
        .unwrap();
    let subject = docs_subject(0, "p", "d1");
    jet.publish(subject.clone(), HeaderMap::new(), "one".into())
        .await
        .unwrap();

    server.kill();
    // Longer than the first ten reconnect attempts take (0.1 s doubling,
    // at most 5 s each: about 13 s); five attempts would have given up.
    let down: Duration = (1..=8).map(weft_nats::reconnect_delay).sum();
    assert!(down > Duration::from_secs(10), "{down:?}");
    tokio::time::sleep(down).await;
    server.restart();

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match jet
            .publish(subject.clone(), HeaderMap::new(), "two".into())
            .await
        {
            Ok(()) => break,
            Err(e) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "not reconnected 30 s after the restart: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    // The catalog entry written before the crash is there.
    let records = catalog.documents(Some("p")).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(jet.stream_messages("WEFT_DOCS").await.unwrap() >= 1);
}

/// Streams and buckets are made with `nats.replicas` copies; more copies
/// than the servers there are is refused, naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_buckets_have_the_configured_replicas() {
    let server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();
    jet.catalog().await.unwrap();
    jet.registry().await.unwrap();
    for stream in [
        "WEFT_DOCS",
        "WEFT_CHUNKS",
        "WEFT_DEAD",
        "KV_weft-catalog",
        "KV_weft-generations",
    ] {
        let mut s = jet.jetstream().get_stream(stream).await.unwrap();
        assert_eq!(s.info().await.unwrap().config.num_replicas, 1, "{stream}");
    }
    let other = NatsServer::start();
    let config = weft_config::NatsConfig {
        replicas: 3,
        ..other.config()
    };
    let error = Jet::connect(&config)
        .await
        .err()
        .expect("one server, three replicas");
    let text = weft_core::error_chain(&error);
    assert!(text.contains("nats.replicas = 3"), "{text}");
}
