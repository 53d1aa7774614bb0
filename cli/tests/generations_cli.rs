//! Index generations in the embedded data directory (DESIGN §6), end to
//! end with the real binary and model: `weft serve` answers a query loop
//! throughout a `weft index --reindex` that cuts every document another
//! way; no query fails, every answer comes from exactly one generation,
//! answers after the switch come from the new one, and the old one is
//! removed once the server has moved.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{json, model_dir};
use serde_json::Value;
use weft_proto::v1;
use weft_proto::v1::query_service_client::QueryServiceClient;

/// Source files of the fixture: each holds four functions of about 250
/// characters, so `code.min_chars` 200 cuts each function apart, and
/// `code.min_chars = 5000` merges each file into one (`code.max_chars`
/// 6000 for both).
const FILES: usize = 32;
/// Both cuts allow definitions this large (a whole file fits).
const MAX_CHARS: &str = "6000";

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
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
        std::fs::write(dir.path().join(format!("module_{i:02}.py")), text).unwrap();
    }
    dir
}

fn weft(data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env("WEFT__CHUNKING__CODE__MAX_CHARS", MAX_CHARS)
        .env_remove("WEFT__RERANK__KIND");
    command
}

/// The chunks `weft chunk` makes of `tree` with `min_chars`, as
/// (document id, chunk index) → (start byte, end byte, content hash).
fn cut(tree: &Path, data: &Path, min_chars: &str) -> HashMap<(String, u64), (u64, u64, String)> {
    let out = json(
        &weft(data)
            .args([
                "chunk",
                tree.to_str().unwrap(),
                "--json",
                "--project",
                "fixture",
            ])
            .env("WEFT__CHUNKING__CODE__MIN_CHARS", min_chars)
            .output()
            .unwrap(),
    );
    let files = out["files"]
        .as_array()
        .unwrap_or_else(|| panic!("chunk output: {out:#}"));
    files
        .iter()
        .flat_map(|f| f["chunks"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            (
                (
                    c["document_id"].as_str().unwrap().to_owned(),
                    c["chunk_index"].as_u64().unwrap(),
                ),
                (
                    c["start_byte"].as_u64().unwrap(),
                    c["end_byte"].as_u64().unwrap(),
                    c["content_hash"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A chunk's key (document id, index) and its (start byte, end byte, hash).
type CutChunk = ((String, u64), (u64, u64, String));

/// One answered query: its generation and chunks.
struct Answer {
    generation: u32,
    chunks: Vec<CutChunk>,
    at: Instant,
}

#[test]
fn a_rebuild_never_shows_a_query_an_empty_or_mixed_index() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let old_cut = cut(tree.path(), scratch.path(), "200");
    let new_cut = cut(tree.path(), scratch.path(), "5000");
    assert!(old_cut.len() >= 4 * FILES, "{} chunks", old_cut.len());
    assert_eq!(new_cut.len(), FILES);
    // Every document is cut differently: a mix would show.
    assert!(
        old_cut
            .keys()
            .filter(|k| k.1 == 0)
            .all(|k| old_cut[k] != new_cut[k])
    );

    let first = json(
        &weft(data.path())
            .args([
                "index",
                tree.path().to_str().unwrap(),
                "--project",
                "fixture",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(first["generation"]["live"], 1, "{first:#}");
    assert_eq!(first["runs"][0]["documents_indexed"], FILES, "{first:#}");

    let mut child = weft(data.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("WEFT_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Server(child);
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("weft serve said {line:?}"))
        .to_owned();

    // The query loop, on its own thread, until told to stop.
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let looper = {
        let (answers, failures, stop) = (answers.clone(), failures.clone(), stop.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let mut client = QueryServiceClient::connect(format!("http://{addr}"))
                    .await
                    .unwrap();
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
                                        (c.document_id.clone(), u64::from(c.chunk_index)),
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
        })
    };
    // Queries are answered before the rebuild starts.
    let deadline = Instant::now() + Duration::from_secs(60);
    while answers.lock().unwrap().len() < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }

    let rebuild = json(
        &weft(data.path())
            .args([
                "index",
                tree.path().to_str().unwrap(),
                "--project",
                "fixture",
                "--reindex",
                "--json",
            ])
            .env("WEFT__CHUNKING__CODE__MIN_CHARS", "5000")
            .output()
            .unwrap(),
    );
    let switched_at = Instant::now();
    assert_eq!(rebuild["generation"]["switched"], true, "{rebuild:#}");
    assert_eq!(rebuild["generation"]["live"], 2, "{rebuild:#}");
    let counts = &rebuild["generation"]["counts"];
    assert_eq!(counts["vector_chunks"], FILES, "{rebuild:#}");
    assert_eq!(counts["text_chunks"], FILES, "{rebuild:#}");

    // The server moves within its follow period; then the old generation
    // is removed.
    let g1 = data.path().join("generations/g1");
    let deadline = Instant::now() + Duration::from_secs(30);
    while g1.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after_removal = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    looper.join().unwrap();
    drop(server);

    let failures = failures.lock().unwrap();
    assert!(failures.is_empty(), "failed queries: {failures:?}");
    assert!(
        !g1.exists(),
        "generation 1 was not removed after the server moved"
    );
    let answers = answers.lock().unwrap();
    let mut seen = HashSet::new();
    for (n, answer) in answers.iter().enumerate() {
        let expected = match answer.generation {
            1 => &old_cut,
            2 => &new_cut,
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
        if answer.at > after_removal {
            assert_eq!(answer.generation, 2, "answer {n} after the switch");
        }
    }
    assert_eq!(seen, HashSet::from([1, 2]), "{} answers", answers.len());
    let after = answers.iter().filter(|a| a.at > switched_at).count();
    eprintln!(
        "{} answers, {after} after the switch, none failed; generation 1 removed {:.1} s after the switch",
        answers.len(),
        (after_removal - switched_at).as_secs_f64()
    );
    let status: Value = json(
        &weft(data.path())
            .args(["status", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(status["generation"], 2, "{status:#}");
}
