//! Zero-downtime rebuilds in the distributed deployment (DESIGN §6): real
//! nats-server, weft-chunker, weft-embedder and weft-query processes; a
//! query loop runs while `weft-crawler --rebuild` writes a 32-document
//! project into a new index generation cut another way (killed once with
//! SIGKILL and run again, which continues that generation), and after. No
//! query fails, every answer comes from exactly one generation (its chunks
//! are all of that generation's cut), answers after the switch come from
//! the new generation, and the old one is removed after the grace period.
//!
//! One test per combination of `[stores]`, one generation rule for all:
//! embedded × embedded (a shared data directory) always runs; Qdrant
//! vectors with the embedded text index runs when `WEFT_TEST_QDRANT_URL` is
//! set, embedded vectors with Meilisearch when `WEFT_TEST_MEILI_URL` is,
//! both servers when both are (collections and indexes named for the run;
//! keys from `WEFT_TEST_QDRANT_API_KEY` / `WEFT_TEST_MEILI_API_KEY`). The
//! query service reads with Qdrant's read-only key
//! (`WEFT_TEST_QDRANT_READ_API_KEY`) and Meilisearch's search-only key
//! (`WEFT_TEST_MEILI_SEARCH_KEY`) when they are given.

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
    took: Duration,
}

/// The combinations of `[stores]` a rebuild is run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stores {
    /// Both indexes embedded in the shared data directory.
    Embedded,
    /// Vectors in Qdrant, the text index embedded.
    QdrantVectors,
    /// Vectors embedded, text in Meilisearch.
    MeiliText,
    /// Both on servers.
    Servers,
}

/// The settings of a run over some stores: for every process, and for the
/// query service alone (its read-only keys); and what it leaves on the
/// servers.
struct StoreEnv {
    all: Vec<(&'static str, String)>,
    query: Vec<(&'static str, String)>,
    names: Vec<String>,
}

fn set(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Stores {
    fn label(self) -> &'static str {
        match self {
            Stores::Embedded => "embedded vectors, embedded text",
            Stores::QdrantVectors => "Qdrant vectors, embedded text",
            Stores::MeiliText => "embedded vectors, Meilisearch text",
            Stores::Servers => "Qdrant vectors, Meilisearch text",
        }
    }

    /// The run's settings, or `None` (and a line saying so) when a server
    /// it needs is not given.
    fn env(self) -> Option<StoreEnv> {
        let (qdrant, meili) = match self {
            Stores::Embedded => (false, false),
            Stores::QdrantVectors => (true, false),
            Stores::MeiliText => (false, true),
            Stores::Servers => (true, true),
        };
        let name = format!("weft-e2e-gens-{}-{}", std::process::id(), self as u8);
        let mut env = StoreEnv {
            all: Vec::new(),
            query: Vec::new(),
            names: Vec::new(),
        };
        if qdrant {
            let Some(url) = set("WEFT_TEST_QDRANT_URL") else {
                eprintln!("skipped ({}): set WEFT_TEST_QDRANT_URL", self.label());
                return None;
            };
            env.all.extend([
                ("WEFT__STORES__VECTOR", "qdrant".to_owned()),
                ("WEFT__STORES__QDRANT_URL", url),
                ("WEFT__STORES__QDRANT_COLLECTION", name.clone()),
            ]);
            if set("WEFT_TEST_QDRANT_API_KEY").is_some() {
                env.all.push((
                    "WEFT__STORES__QDRANT_API_KEY_ENV",
                    "WEFT_TEST_QDRANT_API_KEY".into(),
                ));
            }
            if set("WEFT_TEST_QDRANT_READ_API_KEY").is_some() {
                env.query.push((
                    "WEFT__STORES__QDRANT_API_KEY_ENV",
                    "WEFT_TEST_QDRANT_READ_API_KEY".into(),
                ));
            }
            env.names.push(format!("Qdrant collection {name}_g1"));
        }
        if meili {
            let Some(url) = set("WEFT_TEST_MEILI_URL") else {
                eprintln!("skipped ({}): set WEFT_TEST_MEILI_URL", self.label());
                return None;
            };
            env.all.extend([
                ("WEFT__STORES__TEXT", "meilisearch".to_owned()),
                ("WEFT__STORES__MEILI_URL", url),
                ("WEFT__STORES__MEILI_INDEX", name.clone()),
            ]);
            if set("WEFT_TEST_MEILI_API_KEY").is_some() {
                env.all.push((
                    "WEFT__STORES__MEILI_API_KEY_ENV",
                    "WEFT_TEST_MEILI_API_KEY".into(),
                ));
            }
            if set("WEFT_TEST_MEILI_SEARCH_KEY").is_some() {
                env.query.push((
                    "WEFT__STORES__MEILI_SEARCH_KEY_ENV",
                    "WEFT_TEST_MEILI_SEARCH_KEY".into(),
                ));
            }
            env.names.push(format!("Meilisearch index {name}_g1"));
        }
        Some(env)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_switches_generations_under_a_query_loop() {
    rebuild_under_a_query_loop(Stores::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_switches_generations_with_qdrant_vectors_and_embedded_text() {
    rebuild_under_a_query_loop(Stores::QdrantVectors).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_switches_generations_with_embedded_vectors_and_meilisearch_text() {
    rebuild_under_a_query_loop(Stores::MeiliText).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_switches_generations_with_qdrant_and_meilisearch() {
    rebuild_under_a_query_loop(Stores::Servers).await;
}

/// The `p`-th quantile of `took`, in milliseconds.
fn percentile(took: &mut [Duration], p: f64) -> f64 {
    if took.is_empty() {
        return f64::NAN;
    }
    took.sort();
    let at = ((took.len() as f64 - 1.0) * p).round() as usize;
    took[at].as_secs_f64() * 1000.0
}

async fn rebuild_under_a_query_loop(stores: Stores) {
    let Some(store_env) = stores.env() else {
        return;
    };
    let nats = NatsServer::start();
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    write_tree(tree.path());
    let old_cut = cut(tree.path(), 200);
    let new_cut = cut(tree.path(), 5000);
    assert!(old_cut.len() >= 4 * FILES);
    assert_eq!(new_cut.len(), FILES);

    eprintln!("stores: {}", stores.label());
    let mut common = vec![
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT__NATS__ACK_WAIT_SECS", "10".to_owned()),
        ("WEFT_MODEL_DIR", model_dir().display().to_string()),
        ("WEFT_DATA_DIR", data.path().display().to_string()),
        ("WEFT__GENERATIONS__GRACE_SECS", "2".to_owned()),
        ("WEFT__CHUNKING__CODE__MAX_CHARS", "6000".to_owned()),
    ];
    common.extend(store_env.all.iter().cloned());
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
    let mut query_env = common.clone();
    query_env.extend(store_env.query.iter().cloned());
    let (mut query, mut client) = start_query(&query_env, logs.path()).await;

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
                let started = Instant::now();
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
                            took: started.elapsed(),
                        });
                    }
                    Err(status) => failures.lock().unwrap().push(status.to_string()),
                }
            }
        })
    };

    // Queries before the rebuild, for the latency it is compared with.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rebuild_started = Instant::now();

    // The rebuild cuts the other way: the chunkers are restarted with the
    // crawler's new chunking settings, as an operator rolls them out.
    chunker.stop();
    let mut chunker = Service::start("chunker-2", "weft-chunker", &[], &new_cut_env, logs.path());
    let rebuild_args = [
        tree_arg.as_str(),
        "--project",
        PROJECT,
        "--rebuild",
        "--wait-secs",
        "600",
    ];
    // The first rebuild is killed (SIGKILL) once its generation exists; run
    // again, as a Job retries its pod, it continues that generation.
    let mut killed = std::process::Command::new(weft_e2e::bin("weft-crawler"));
    killed
        .args(rebuild_args)
        .arg("--json")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (k, v) in &new_cut_env {
        killed.env(k, v);
    }
    let mut killed = killed.spawn().expect("start weft-crawler --rebuild");
    let registry = jet.registry().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        use weft_core::ports::GenerationRegistry as _;
        if registry
            .load()
            .await
            .is_ok_and(|r| r.building().is_some_and(|g| g.number == 1))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rebuild made no generation 1 in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    killed.kill().unwrap();
    killed.wait().unwrap();
    let rebuild = crawl(&rebuild_args, &new_cut_env);
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
    if stores != Stores::Servers {
        // Embedded stores live in generation directories: generation 0's
        // went with it, generation 1's are in its own.
        let gone = match stores {
            Stores::QdrantVectors => "text",
            _ => "vectors",
        };
        assert!(
            !data.path().join(gone).exists(),
            "generation 0's {gone} directory"
        );
        assert!(data.path().join("generations/g1").join(gone).exists());
    }
    if stores == Stores::Embedded {
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
        "{}: {} answers ({} after the switch), none failed; weft-query moved {:.1} s after the crawler switched",
        stores.label(),
        answers.len(),
        answers.iter().filter(|a| a.at > switched_at).count(),
        (moved_at - switched_at).as_secs_f64()
    );
    for (phase, range) in [
        ("before the rebuild", (None, Some(rebuild_started))),
        (
            "during the rebuild",
            (Some(rebuild_started), Some(switched_at)),
        ),
        ("after the switch", (Some(switched_at), None)),
    ] {
        let mut took: Vec<Duration> = answers
            .iter()
            .filter(|a| range.0.is_none_or(|from| a.at > from))
            .filter(|a| range.1.is_none_or(|to| a.at <= to))
            .map(|a| a.took)
            .collect();
        eprintln!(
            "  {phase}: {} queries, p50 {:.1} ms, p99 {:.1} ms",
            took.len(),
            percentile(&mut took, 0.5),
            percentile(&mut took, 0.99)
        );
    }
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
    if !store_env.names.is_empty() {
        // Leave the test servers as found.
        let mut cleanup = std::process::Command::new(weft_e2e::bin("weft-crawler"));
        cleanup.args(["generations", "gc", "--grace-secs", "0"]);
        for (k, v) in &common {
            cleanup.env(k, v);
        }
        let _ = cleanup.output();
        eprintln!(
            "left {} on the test servers (the live generation)",
            store_env.names.join(" and ")
        );
    }
}
