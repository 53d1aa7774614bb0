//! NATS that survives (issue 32): the distributed pipeline over real
//! processes while its nats-server (JetStream on disk) is killed with
//! SIGKILL and started again, twice, in the middle of indexing, and once
//! more while the query service answers.
//!
//! Every document ends up indexed exactly once (the catalog equals the
//! source; the stores hold each expected chunk once), nothing is
//! dead-lettered, the workers keep running through both outages, and the
//! query service says NOT_SERVING while NATS is away and answers again,
//! SERVING, once it is back.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use weft_core::ports::Catalog;
use weft_core::{ChunkId, DocumentId};
use weft_e2e::{Service, crawl, model_dir, start_query_at};
use weft_nats::Jet;
use weft_nats::testing::NatsServer;
use weft_proto::v1;

const PROJECT: &str = "restart";
const FILES: usize = 240;

/// Distinct small Python modules and markdown notes.
fn write_tree(root: &Path) {
    for i in 0..FILES {
        let (name, body) = if i % 2 == 0 {
            (
                format!("notes/note{i}.md"),
                format!(
                    "# Note {i}\n\nThe relay {i} forwards packets of class {i} to the next hop.\n\n## Limits {i}\n\nRelay {i} drops packets above {i} kilobytes.\n"
                ),
            )
        } else {
            (
                format!("relay/relay_{i}.py"),
                format!(
                    "\"\"\"Relay {i}.\"\"\"\n\n\ndef forward_{i}(packet):\n    \"\"\"Forwards a packet of class {i}.\"\"\"\n    return packet.hop({i})\n\n\ndef limit_{i}():\n    \"\"\"The size limit of relay {i}.\"\"\"\n    return {i} * 1024\n"
                ),
            )
        };
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
}

/// Records of the project in the catalog, or `None` while NATS is away.
async fn records(catalog: &weft_nats::NatsCatalog) -> Option<usize> {
    catalog.documents(Some(PROJECT)).await.ok().map(|r| r.len())
}

/// Waits (at most 300 s) until the catalog holds at least `n` records,
/// with the workers alive.
async fn wait_for_records(
    catalog: &weft_nats::NatsCatalog,
    n: usize,
    workers: &mut [&mut Service],
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(have) = records(catalog).await
            && have >= n
        {
            return have;
        }
        for w in workers.iter_mut() {
            assert!(w.running(), "{} died:\n{}", w.name, w.log());
        }
        assert!(Instant::now() < deadline, "fewer than {n} records in 300 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn health(url: &str) -> Option<i32> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .ok()?
        .connect()
        .await
        .ok()?;
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: "weft.v1.QueryService".into(),
        })
        .await
        .ok()
        .map(|r| r.into_inner().status)
}

/// Waits (at most `timeout`) until the query service's health is `status`.
async fn wait_for_health(url: &str, status: i32, timeout: Duration, query: &Service) {
    let deadline = Instant::now() + timeout;
    loop {
        let now = health(url).await;
        if now == Some(status) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "health stayed {now:?}, not {status}, for {timeout:?}:\n{}",
            query.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_restart_mid_run_twice_loses_and_duplicates_nothing() {
    let mut nats = NatsServer::start();
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    write_tree(tree.path());
    let expected = weft_e2e::expected_chunks(tree.path(), PROJECT);
    assert_eq!(expected.len(), FILES);
    let env = vec![
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT__NATS__ACK_WAIT_SECS", "10".to_owned()),
        ("WEFT_MODEL_DIR", model_dir().display().to_string()),
        ("WEFT_DATA_DIR", data.path().display().to_string()),
    ];
    let jet = Jet::connect(&nats.config()).await.unwrap();
    let catalog = jet.catalog().await.unwrap();

    let mut chunker = Service::start("chunker", "weft-chunker", &[], &env, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let tree_arg = tree.path().display().to_string();
    let published = crawl(&[&tree_arg, "--project", PROJECT], &env);
    assert_eq!(
        published["sources"][0]["documents_published"], FILES,
        "{published:#}"
    );

    // Two crashes of NATS while the workers are mid-run.
    let mut outages = Vec::new();
    for at in [FILES / 5, FILES / 2] {
        let before = wait_for_records(&catalog, at, &mut [&mut chunker, &mut embedder]).await;
        assert!(
            before < FILES,
            "indexing finished before NATS was killed: {before} records"
        );
        nats.kill();
        let down = Instant::now();
        tokio::time::sleep(Duration::from_secs(4)).await;
        nats.restart();
        assert!(chunker.running(), "the chunker exited:\n{}", chunker.log());
        assert!(
            embedder.running(),
            "the embedder exited:\n{}",
            embedder.log()
        );
        outages.push((before, down.elapsed()));
    }

    // Everything arrives, once; nothing is dead-lettered.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let docs = jet.stream_messages("WEFT_DOCS").await.unwrap_or(u64::MAX);
        let chunks = jet.stream_messages("WEFT_CHUNKS").await.unwrap_or(u64::MAX);
        let have = records(&catalog).await.unwrap_or(0);
        if docs == 0 && chunks == 0 && have == FILES {
            break;
        }
        assert!(chunker.running(), "the chunker exited:\n{}", chunker.log());
        assert!(
            embedder.running(),
            "the embedder exited:\n{}",
            embedder.log()
        );
        if Instant::now() > deadline {
            let mut state = Vec::new();
            for (stream, durable) in [
                ("WEFT_DOCS", "weft-chunkers"),
                ("WEFT_CHUNKS", "weft-embedders"),
            ] {
                if let Ok(mut s) = jet.jetstream().get_stream(stream).await
                    && let Ok(info) = s.info().await
                {
                    state.push(format!(
                        "{stream}: messages {} first {} last {}",
                        info.state.messages, info.state.first_sequence, info.state.last_sequence
                    ));
                    if let Ok(mut c) = s
                        .get_consumer::<async_nats::jetstream::consumer::pull::Config>(durable)
                        .await
                        && let Ok(ci) = c.info().await
                    {
                        state.push(format!(
                            "  {durable}: pending {} ack pending {} redelivered {} delivered {} ack floor {}",
                            ci.num_pending,
                            ci.num_ack_pending,
                            ci.num_redelivered,
                            ci.delivered.stream_sequence,
                            ci.ack_floor.stream_sequence
                        ));
                    }
                }
            }
            panic!(
                "not drained after the restarts: {docs} documents and {chunks} batches queued, {have} of {FILES} records\n{}\n{}",
                state.join("\n"),
                embedder.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        jet.stream_messages("WEFT_DEAD").await.unwrap(),
        0,
        "dead letters after the restarts"
    );
    let catalog_records = catalog.documents(Some(PROJECT)).await.unwrap();
    let in_catalog: BTreeMap<DocumentId, u32> = catalog_records
        .iter()
        .map(|r| (r.document_id.clone(), r.chunk_count))
        .collect();
    assert_eq!(in_catalog, expected, "the catalog equals the source");

    // The query service answers; NATS away: NOT_SERVING; back: SERVING and
    // answering again.
    let (mut query, mut client, addr) = start_query_at(&env, logs.path()).await;
    let url = format!("http://{addr}");
    let ask = |client: &mut weft_e2e::QueryClient| {
        let mut client = client.clone();
        async move {
            client
                .search(v1::SearchRequest {
                    query: "which relay drops large packets".into(),
                    limit: 3,
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner().results.len())
        }
    };
    assert!(ask(&mut client).await.unwrap() > 0);
    use tonic_health::pb::health_check_response::ServingStatus;
    wait_for_health(
        &url,
        ServingStatus::Serving as i32,
        Duration::from_secs(10),
        &query,
    )
    .await;
    nats.kill();
    let killed = Instant::now();
    wait_for_health(
        &url,
        ServingStatus::NotServing as i32,
        Duration::from_secs(30),
        &query,
    )
    .await;
    let noticed = killed.elapsed();
    nats.restart();
    let restarted = Instant::now();
    wait_for_health(
        &url,
        ServingStatus::Serving as i32,
        Duration::from_secs(60),
        &query,
    )
    .await;
    let recovered = restarted.elapsed();
    assert!(ask(&mut client).await.unwrap() > 0);
    assert!(query.running(), "{}", query.log());
    query.stop();

    // The stores hold each expected chunk once (the embedder stopped).
    embedder.stop();
    chunker.stop();
    let stores = weft_wiring::DataDir::new(data.path())
        .open_existing()
        .unwrap();
    let total: u64 = expected.values().map(|&n| u64::from(n)).sum();
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
    assert_eq!(
        stores.vectors.get(&ids).await.unwrap().len() as u64,
        total,
        "every expected chunk, once"
    );
    eprintln!(
        "{FILES} documents, {total} chunks, each once; NATS killed at {} and {} records (down {:.1} s and {:.1} s); no dead letter; the query service went NOT_SERVING {:.1} s after a third kill and SERVING {:.1} s after the restart",
        outages[0].0,
        outages[1].0,
        outages[0].1.as_secs_f64(),
        outages[1].1.as_secs_f64(),
        noticed.as_secs_f64(),
        recovered.as_secs_f64()
    );
}
