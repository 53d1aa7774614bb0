//! `weft mcp` driven by a real MCP client: the official Python SDK (PyPI
//! `mcp`, in the venv `tools/test.sh` makes; `WEFT_MCP_PYTHON` names its
//! python) over stdio and over streamable HTTP, on a fixture indexed with
//! the real model. `mcp_client.py` makes the calls and checks every
//! returned citation against the fixture files; `weft search --max-tokens`
//! is checked here too.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use weft_core::{ChunkId, DocumentId};

mod common;
use common::{json, model_dir};

const RETRY: &str = "package net;\n\n/** Retries a failing call with exponential backoff between attempts. */\n\
public class Retry {\n  private final int maxAttempts;\n\n  public Retry(int maxAttempts) {\n    \
this.maxAttempts = maxAttempts;\n  }\n\n  /** Waits twice as long after each failure, up to a cap. */\n  \
public long backoffMillis(int attempt) {\n    return Math.min(100L << attempt, 30_000L);\n  }\n\n  \
/** Runs the call until it succeeds or the attempts are used up. */\n  \
public <T> T run(java.util.concurrent.Callable<T> call) throws Exception {\n    Exception last = null;\n    \
for (int i = 0; i < maxAttempts; i++) {\n      try {\n        return call.call();\n      } catch (Exception e) {\n        \
last = e;\n        Thread.sleep(backoffMillis(i));\n      }\n    }\n    throw last;\n  }\n}\n";

const LOGGING: &str = "# Logging\n\n## Levels\n\nSet the log level with the LOG_LEVEL environment variable: debug, info, warn or error.\n\n\
## Rotation\n\nLog files rotate daily and are kept for two weeks before they are compressed and removed.\n";

/// The python of the venv holding the MCP SDK.
fn python() -> PathBuf {
    std::env::var_os("WEFT_MCP_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            let path = PathBuf::from(home).join(".cache/weft/mcp-venv/bin/python");
            path.exists().then_some(path)
        })
        .unwrap_or_else(|| {
            panic!(
                "these tests need the MCP Python SDK: set WEFT_MCP_PYTHON to a python with \
                 `mcp` installed (tools/test.sh makes ~/.cache/weft/mcp-venv)"
            )
        })
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py")
}

fn weft(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env_remove("WEFT__RERANK__KIND")
        .output()
        .expect("weft runs")
}

/// The fixture, indexed as project `demo`.
fn indexed() -> (tempfile::TempDir, tempfile::TempDir) {
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join("src")).unwrap();
    std::fs::create_dir_all(tree.path().join("docs")).unwrap();
    std::fs::write(tree.path().join("src/Retry.java"), RETRY).unwrap();
    std::fs::write(tree.path().join("docs/logging.md"), LOGGING).unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = json(&weft(
        &[
            "index",
            tree.path().to_str().unwrap(),
            "--project",
            "demo",
            "--json",
        ],
        data.path(),
    ));
    assert_eq!(out["runs"][0]["documents_indexed"], 2, "{out}");
    (tree, data)
}

/// Runs the Python client; returns its report.
fn run_client(args: &[&str], data: &Path) -> Value {
    let out = Command::new(python())
        .arg(client_script())
        .args(args)
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .output()
        .expect("the python client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the MCP client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn check_report(report: &Value) {
    assert_eq!(
        report["tools"],
        serde_json::json!(["get_context", "list_projects", "search"]),
        "{report}"
    );
    let checked = report["citations_checked"].as_array().unwrap();
    assert!(checked.len() >= 4, "{report}");
    assert!(
        checked
            .iter()
            .any(|c| c.as_str().unwrap().starts_with("src/Retry.java#L")),
        "{report}"
    );
    assert_eq!(report["errors"].as_object().unwrap().len(), 10, "{report}");
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_mcp_client_searches_and_expands_citations_over_stdio_and_http() {
    let (tree, data) = indexed();
    let root = tree.path().to_str().unwrap();

    let report = run_client(&["stdio", root, env!("CARGO_BIN_EXE_weft")], data.path());
    check_report(&report);

    let (_server, url) = start_http(data.path(), "127.0.0.1:0", &[]);
    assert!(url.ends_with("/mcp"), "{url}");
    let report = run_client(&["http", root, &url], data.path());
    check_report(&report);
}

/// Starts `weft mcp --http ADDR` with `envs`; returns the server and its URL.
fn start_http(data: &Path, addr: &str, envs: &[(&str, &Path)]) -> (Killed, String) {
    start_http_with(data, addr, &[], envs)
}

/// Starts `weft mcp --http ADDR ARGS…` with `envs`; returns the server and
/// its URL.
fn start_http_with(
    data: &Path,
    addr: &str,
    args: &[&str],
    envs: &[(&str, &Path)],
) -> (Killed, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(["mcp", "--http", addr])
        .args(args)
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env_remove("WEFT__RERANK__KIND")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in envs {
        command.env(k, v);
    }
    let mut server = Killed(command.spawn().expect("weft mcp --http starts"));
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no address announced: {line:?}"))
        .to_owned();
    (server, url)
}

/// The status line of a bare MCP `initialize` POST to `url` with these
/// extra header lines.
fn post_status(url: &str, headers: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn mcp_over_http_needs_a_key_beyond_loopback_and_reads_only_the_keys_projects() {
    let (tree, data) = indexed();
    // Beyond loopback without keys: refused at start, naming the setting.
    let out = weft(&["mcp", "--http", "0.0.0.0:0"], data.path());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("query.api_keys_file"), "{stderr}");

    // Two keys: one bound to demo, one to another project.
    let mut keys = String::new();
    let mut minted = Vec::new();
    for (id, project) in [("demo-reader", "demo"), ("other-reader", "other")] {
        let out = json(&weft(
            &["keys", "new", "--id", id, "--project", project, "--json"],
            data.path(),
        ));
        keys.push_str(out["entry_toml"].as_str().unwrap());
        minted.push(out["key"].as_str().unwrap().to_owned());
    }
    let keys_file = data.path().join("keys.toml");
    std::fs::write(&keys_file, keys).unwrap();
    let (_server, url) = start_http(
        data.path(),
        "127.0.0.1:0",
        &[("WEFT__QUERY__API_KEYS_FILE", &keys_file)],
    );

    // No key, a malformed header, a wrong key: 401 before any MCP message.
    assert!(post_status(&url, "").contains(" 401 "), "no key");
    assert!(
        post_status(&url, "Authorization: Basic abc\r\n").contains(" 401 "),
        "not a bearer key"
    );
    let wrong = format!("Authorization: Bearer {}x\r\n", minted[0]);
    assert!(post_status(&url, &wrong).contains(" 401 "), "a wrong key");
    let right = format!("Authorization: Bearer {}\r\n", minted[0]);
    assert!(post_status(&url, &right).contains(" 200 "), "the demo key");

    // Each key reads its own projects only (the MCP SDK, keyed); a chunk
    // id computed for demo is answered to the other key as one nothing has.
    let chunk_of = |uri: &str| ChunkId::new(&DocumentId::new("demo", uri), 0).to_string();
    let report = run_client(
        &[
            "scoped",
            tree.path().to_str().unwrap(),
            &url,
            &minted[0],
            &minted[1],
            &chunk_of("src/Retry.java"),
            &chunk_of("src/Nope.java"),
        ],
        data.path(),
    );
    assert!(
        report["demo_key"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u == "src/Retry.java"),
        "{report}"
    );
    assert_eq!(report["other_key"], "sees nothing of demo", "{report}");
}

#[test]
fn over_http_only_an_indexing_key_indexes_and_only_under_the_index_roots() {
    let (_tree, data) = indexed();
    let mut keys = String::new();
    let mut minted = Vec::new();
    for (id, index) in [("reader", false), ("indexer", true)] {
        let mut args = vec!["keys", "new", "--id", id, "--project", "*", "--json"];
        if index {
            args.push("--index");
        }
        let out = json(&weft(&args, data.path()));
        keys.push_str(out["entry_toml"].as_str().unwrap());
        minted.push(out["key"].as_str().unwrap().to_owned());
    }
    // An indexing key is for every project: `--index` with one is refused,
    // by the keys file's own rule.
    let refused = weft(
        &["keys", "new", "--id", "x", "--project", "demo", "--index"],
        data.path(),
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("index = true needs projects = [\"*\"]"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let keys_file = data.path().join("keys.toml");
    std::fs::write(&keys_file, keys).unwrap();
    let roots = tempfile::tempdir().unwrap();
    let inside = roots.path().join("allowed");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(
        inside.join("notes.md"),
        "# Notes\n\nThe deploy runs nightly.\n",
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "# Secret\n\nhunter2\n").unwrap();
    // A link inside the root to the outside leads out: refused too.
    std::os::unix::fs::symlink(outside.path(), inside.join("escape")).unwrap();
    let (_server, url) = start_http_with(
        data.path(),
        "127.0.0.1:0",
        &["--allow-index", "--index-root", inside.to_str().unwrap()],
        &[("WEFT__QUERY__API_KEYS_FILE", &keys_file)],
    );
    let report = run_client(
        &[
            "indexing",
            inside.to_str().unwrap(),
            &url,
            &minted[0],
            &minted[1],
            outside.path().to_str().unwrap(),
            inside.join("escape").to_str().unwrap(),
        ],
        data.path(),
    );
    let answers = &report["answers"];
    assert!(
        answers["reader"]
            .as_str()
            .unwrap()
            .contains("may not index"),
        "{report}"
    );
    assert!(
        answers["outside"]
            .as_str()
            .unwrap()
            .contains("outside every --index-root"),
        "{report}"
    );
    assert!(
        answers["escape"]
            .as_str()
            .unwrap()
            .contains("outside every --index-root"),
        "{report}"
    );
    // git from a remote caller obeys [crawl] (its transports, public
    // addresses): refused by the policy, which names its setting, not
    // tried and failed on the connection.
    assert!(
        answers["git"]
            .as_str()
            .unwrap()
            .contains("(crawl.git_protocols)")
            || answers["git"]
                .as_str()
                .unwrap()
                .contains("crawl.allow_private_networks"),
        "{report}"
    );
    assert_eq!(answers["inside"], "indexed", "{report}");
}

#[test]
fn search_packs_into_a_token_budget_as_markdown_or_json() {
    let (_tree, data) = indexed();
    let args = |extra: &[&'static str]| {
        let mut a = vec!["search", "retry backoff", "--max-tokens", "300"];
        a.extend_from_slice(extra);
        a
    };
    let pack = json(&weft(&args(&["--format", "json"]), data.path()));
    assert!(pack["used_tokens"].as_u64().unwrap() <= 300, "{pack}");
    assert_eq!(pack["tokenizer"], "chars/4");
    let span = &pack["spans"][0];
    assert_eq!(span["uri"], "src/Retry.java", "{pack}");
    let (start, end) = (
        span["start_line"].as_u64().unwrap() as usize,
        span["end_line"].as_u64().unwrap() as usize,
    );
    let cited: Vec<&str> = RETRY.split('\n').collect::<Vec<_>>()[start - 1..end].to_vec();
    let got: Vec<&str> = span["content"].as_str().unwrap().split('\n').collect();
    assert_eq!(
        got.iter().map(|l| l.trim()).collect::<Vec<_>>(),
        cited.iter().map(|l| l.trim()).collect::<Vec<_>>()
    );
    // --json alone is the same pack.
    assert_eq!(
        json(&weft(&args(&["--json"]), data.path()))["spans"],
        pack["spans"]
    );
    // Markdown by default: citations as headings, fenced code.
    let md = weft(&args(&[]), data.path());
    assert!(md.status.success());
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(
        md.contains(&format!("### src/Retry.java#L{start}-L{end}")),
        "{md}"
    );
    assert!(md.contains("```java\n"), "{md}");
    // A zero budget is refused, naming the flag.
    let zero = weft(&["search", "retry", "--max-tokens", "0"], data.path());
    assert!(!zero.status.success());
    assert!(String::from_utf8_lossy(&zero.stderr).contains("--max-tokens"));
}

#[test]
fn mcp_refuses_an_empty_data_directory_and_bad_flags() {
    let data = tempfile::tempdir().unwrap();
    let out = weft(&["mcp"], data.path());
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no index"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = weft(
        &["mcp", "--query-url", "http://127.0.0.1:1", "--allow-index"],
        data.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-index"));
}
