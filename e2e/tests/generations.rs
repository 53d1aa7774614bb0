//! Zero-downtime rebuilds in the distributed deployment (DESIGN §6): real
//! nats-server, weft-chunker, weft-embedder and weft-query processes; a
//! query loop runs while `weft-crawler --rebuild` writes a 32-document
//! project into a new index generation cut another way, and after. No
//! query fails, every answer comes from exactly one generation (its chunks
//! are all of that generation's cut), answers after the switch come from
//! the new generation, and the old one is removed after the grace period.
//!
//! The stores are the embedded ones in a shared data directory; with
//! `WEFT_TEST_QDRANT_URL` and `WEFT_TEST_MEILI_URL` set, Qdrant and
//! Meilisearch servers (collections and indexes named for this run).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_e2e::{Service, crawl, model_dir, start_query, wait_for_documents};
use weft_nats::Jet;
use weft_nats::testing::NatsServer;
use weft_proto::v1;

const PROJECT: &str = "gens";
const FILES: usize = 32;

/// Python modules of four ~250-character functions each: cut apart with
/// `code.min_chars` 200, one chunk per file with `code.min_chars = 5000`
/// (`code.max_chars` 6000 for both).
fn write_tree(root: &Path) {
    let topics = [
        ("retry", "waits between attempts with exponential backoff"),
        ("cache", "evicts the least recently used entry"),
        ("parse", "reads a configuration file into settings"),
        ("route", "matches a request path against the routing table"),
    ];
    for i in 0..FILES {
        let mut text = format!("\"\"\"Module {i} of the fixture.\"\"\"\n\n");
        for (name, what) in topics {
            text.push_str(&format!(
                "def {name}_{i}(value, limit=10):\n    \"\"\"The {name} step of module {i}: {what}.\"\"\"\n    total = 0\n    for step in range(limit):\n        total += step * value\n        if total > 1000:\n            break\n    return total + {i}\n\n\n"
            ));
        }
        std::fs::write(root.join(format!("module_{i:02}.py")), text).unwrap();
    }
}

type Cut = HashMap<(String, u32), (u64, u64, String)>;

/// The chunks of the tree cut with `min_chars`.
fn cut(root: &Path, min_chars: usize) -> Cut {
    let mut config = weft_config::ChunkingConfig::default();
    config.code.min_chars = min_chars;
    config.code.max_chars = 6000;
    let chunker = weft_chunking::Chunker::new(config).unwrap();
    let mut out = Cut::new();
    for i in 0..FILES {
        let uri = format!("module_{i:02}.py");
        let bytes = std::fs::read(root.join(&uri)).unwrap();
        for c in chunker.chunk_bytes(PROJECT, &uri, &bytes).unwrap().chunks {
            out.insert(
                (c.document_id.as_str().to_owned(), c.chunk_index),
                (c.start_byte, c.end_byte, c.content_hash.clone()),
            );
        }
    }
    out
}

/// A chunk's key (document id, index) and its (start byte, end byte, hash).
type CutChunk = ((String, u32), (u64, u64, String));

struct Answer {
    generation: u32,
    chunks: Vec<CutChunk>,
    at: Instant,
}

/// Server stores named for this run, when the test servers are given.
fn server_stores() -> Vec<(&'static str, String)> {
    match (
        std::env::var("WEFT_TEST_QDRANT_URL"),
        std::env::var("WEFT_TEST_MEILI_URL"),
    ) {
        (Ok(qdrant), Ok(meili)) => {
            let name = format!("weft-e2e-gens-{}", std::process::id());
            let mut env = vec![
                ("WEFT__STORES__VECTOR", "qdrant".to_owned()),
                ("WEFT__STORES__TEXT", "meilisearch".to_owned()),
                ("WEFT__STORES__QDRANT_URL", qdrant),
                ("WEFT__STORES__MEILI_URL", meili),
                ("WEFT__STORES__QDRANT_COLLECTION", name.clone()),
                ("WEFT__STORES__MEILI_INDEX", name),
            ];
            if std::env::var("WEFT_TEST_QDRANT_API_KEY").is_ok() {
                env.push((
                    "WEFT__STORES__QDRANT_API_KEY_ENV",
                    "WEFT_TEST_QDRANT_API_KEY".into(),
                ));
            }
            if std::env::var("WEFT_TEST_MEILI_API_KEY").is_ok() {
                env.push((
                    "WEFT__STORES__MEILI_API_KEY_ENV",
                    "WEFT_TEST_MEILI_API_KEY".into(),
                ));
            }
            env
        }
        _ => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_switches_generations_under_a_query_loop() {
    let nats = NatsServer::start();
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    write_tree(tree.path());
    let old_cut = cut(tree.path(), 200);
    let new_cut = cut(tree.path(), 5000);
    assert!(old_cut.len() >= 4 * FILES);
    assert_eq!(new_cut.len(), FILES);

    let servers = server_stores();
    eprintln!(
        "stores: {}",
        if servers.is_empty() {
            "embedded".to_owned()
        } else {
            format!("{servers:?}")
        }
    );
    let mut common = vec![
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT__NATS__ACK_WAIT_SECS", "10".to_owned()),
        ("WEFT_MODEL_DIR", model_dir().display().to_string()),
        ("WEFT_DATA_DIR", data.path().display().to_string()),
        ("WEFT__GENERATIONS__GRACE_SECS", "2".to_owned()),
        ("WEFT__CHUNKING__CODE__MAX_CHARS", "6000".to_owned()),
    ];
    common.extend(servers.iter().cloned());
    let with = |extra: &[(&'static str, &str)]| {
        let mut env = common.clone();
        env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        env
    };
    let new_cut_env = with(&[
        ("WEFT__CHUNKING__CODE__MIN_CHARS", "5000"),
        ("WEFT__CHUNKING__CODE__MAX_CHARS", "6000"),
    ]);
    let jet = Jet::connect(&nats.config()).await.unwrap();

    let mut chunker = Service::start("chunker", "weft-chunker", &[], &common, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &common, logs.path());
    let tree_arg = tree.path().display().to_string();
    let first = crawl(&[&tree_arg, "--project", PROJECT], &common);
    assert_eq!(first["generation"], 0, "{first:#}");
    wait_for_documents(
        &jet.catalog().await.unwrap(),
        PROJECT,
        FILES,
        &mut embedder,
        Duration::from_secs(600),
    )
    .await;
    let (mut query, mut client) = start_query(&common, logs.path()).await;

    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let looper = {
        let (answers, failures, stop) = (answers.clone(), failures.clone(), stop.clone());
        let mut client = client.clone();
        tokio::spawn(async move {
            let queries = [
                "exponential backoff between attempts",
                "least recently used eviction",
                "read configuration settings",
                "match request path routing",
            ];
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let request = v1::SearchRequest {
                    query: queries[i % queries.len()].into(),
                    limit: 5,
                    ..Default::default()
                };
                i += 1;
                match client.search(request).await {
                    Ok(response) => {
                        let response = response.into_inner();
                        let chunks = response
                            .results
                            .iter()
                            .flat_map(|d| d.spans.iter())
                            .flat_map(|s| s.chunks.iter())
                            .filter_map(|c| c.chunk.as_ref())
                            .map(|c| {
                                (
                                    (c.document_id.clone(), c.chunk_index),
                                    (c.start_byte, c.end_byte, c.content_hash.clone()),
                                )
                            })
                            .collect();
                        answers.lock().unwrap().push(Answer {
                            generation: response.generation,
                            chunks,
                            at: Instant::now(),
                        });
                    }
                    Err(status) => failures.lock().unwrap().push(status.to_string()),
                }
            }
        })
    };

    // The rebuild cuts the other way: the chunkers are restarted with the
    // crawler's new chunking settings, as an operator rolls them out.
    chunker.stop();
    let mut chunker = Service::start("chunker-2", "weft-chunker", &[], &new_cut_env, logs.path());
    let rebuild = crawl(
        &[
            &tree_arg,
            "--project",
            PROJECT,
            "--rebuild",
            "--wait-secs",
            "600",
        ],
        &new_cut_env,
    );
    let switched_at = Instant::now();
    assert_eq!(rebuild["generation"], 1, "{rebuild:#}");
    let switch = &rebuild["switch"];
    assert_eq!(switch["to"], 1, "{rebuild:#}");
    assert_eq!(switch["from"], 0, "{rebuild:#}");
    assert_eq!(switch["documents"], FILES, "{rebuild:#}");
    assert_eq!(switch["chunks"], FILES, "{rebuild:#}");

    // The query service follows within a second or two.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let latest = answers.lock().unwrap().last().map(|a| a.generation);
        if latest == Some(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "weft-query did not move:\n{}",
            query.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let moved_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    looper.await.unwrap();

    // After the grace period, and once no process has it open (the
    // embedder closes a retired generation's stores within seconds), the
    // old generation goes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let record = loop {
        let mut gc = std::process::Command::new(weft_e2e::bin("weft-crawler"));
        gc.args(["generations", "gc", "--json"]);
        for (k, v) in &common {
            gc.env(k, v);
        }
        let out = gc.output().unwrap();
        assert!(
            out.status.success(),
            "generations gc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if record["generations"]
            .as_array()
            .is_some_and(|g| g.len() == 1)
            || Instant::now() > deadline
        {
            break record;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(record["live"], 1, "{record:#}");
    let numbers: Vec<u64> = record["generations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1], "generation 0 is gone: {record:#}");
    if servers.is_empty() {
        assert!(
            !data.path().join("vectors").exists(),
            "generation 0's directory"
        );
        assert!(data.path().join("generations/g1/vectors").exists());
    }

    let failures = failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "failed queries: {failures:?}\n{}",
        query.log()
    );
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let mut seen = HashSet::new();
    for (n, answer) in answers.iter().enumerate() {
        let expected = match answer.generation {
            0 => &old_cut,
            1 => &new_cut,
            other => panic!("answer {n} from generation {other}"),
        };
        seen.insert(answer.generation);
        assert!(!answer.chunks.is_empty(), "answer {n} is empty");
        for (key, value) in &answer.chunks {
            assert_eq!(
                expected.get(key),
                Some(value),
                "answer {n} (generation {}) holds a chunk of the other cut: {key:?}",
                answer.generation
            );
        }
        if answer.at > moved_at {
            assert_eq!(answer.generation, 1, "answer {n} after the move");
        }
    }
    assert_eq!(seen, HashSet::from([0, 1]), "{} answers", answers.len());
    eprintln!(
        "{} answers ({} after the switch), none failed; weft-query moved {:.1} s after the crawler switched",
        answers.len(),
        answers.iter().filter(|a| a.at > switched_at).count(),
        (moved_at - switched_at).as_secs_f64()
    );
    // GetChunks reads the live generation too.
    let (doc, _) = new_cut.keys().next().unwrap().clone();
    let got = client
        .get_chunks(v1::GetChunksRequest {
            document_id: doc,
            start_index: 0,
            end_index: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.generation, 1);
    assert_eq!(got.chunks.len(), 1);
    query.stop();
    embedder.stop();
    chunker.stop();
    if !servers.is_empty() {
        // Leave the test servers as found.
        let mut cleanup = std::process::Command::new(weft_e2e::bin("weft-crawler"));
        cleanup.args(["generations", "gc", "--grace-secs", "0"]);
        for (k, v) in &common {
            cleanup.env(k, v);
        }
        let _ = cleanup.output();
        let live_name = format!("weft-e2e-gens-{}_g1", std::process::id());
        eprintln!("left {live_name} on the test servers (the live generation)");
    }
}
