//! Helpers of weft's end-to-end tests: the service binaries started as real
//! processes, with their logs kept for failure messages.

#![warn(missing_docs)]

pub mod otlp;
pub mod tei;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The directory holding the service binaries: `WEFT_E2E_BIN_DIR` when set
/// (deploy/smoke-containers.sh points it at wrappers that run each binary
/// in the runtime image), else the workspace's target/debug, found from the
/// test executable (target/debug/deps/…).
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WEFT_E2E_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test's path");
    let deps = exe.parent().expect("deps");
    deps.parent().expect("target/debug").to_owned()
}

/// The path of a service binary; panics with what to run when it is missing.
pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` (cargo test --workspace builds it)",
        path.display()
    );
    path
}

/// What the default chunkers make of the tree at `root` indexed as
/// `project`: chunk count per document id (0 for a file they skip), the
/// exact count the stores must hold once it is indexed.
pub fn expected_chunks(
    root: &Path,
    project: &str,
) -> std::collections::BTreeMap<weft_core::DocumentId, u32> {
    let chunker = weft_chunking::Chunker::new(Default::default()).expect("default chunkers");
    let selection = weft_sources::DirSelection::new(&weft_config::SourcesConfig::default())
        .expect("default selection");
    weft_sources::walk_dir(root, &selection)
        .files
        .into_iter()
        .map(|(uri, path)| {
            let bytes = std::fs::read(path).expect("a listed file");
            let n = chunker
                .chunk_bytes(project, &uri, &bytes)
                .map(|d| d.chunks.len() as u32)
                .unwrap_or(0);
            (weft_core::DocumentId::new(project, &uri), n)
        })
        .collect()
}

/// The embedding model directory: `WEFT_MODEL_DIR`, else where tools/fetch-model.sh puts it.
pub fn model_dir() -> PathBuf {
    std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(weft_config::default_model_dir)
}

/// A running service process, killed when dropped.
pub struct Service {
    /// Its name, for messages.
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl Service {
    /// Starts `binary` with `args` and `env`, logging to `logs/<name>.log`.
    pub fn start(
        name: &str,
        binary: &str,
        args: &[&str],
        env: &[(&str, String)],
        logs: &Path,
    ) -> Self {
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(bin(binary));
        command
            .args(args)
            .env("WEFT_LOG", "info,qdrant_edge=error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(file);
        for (k, v) in env {
            command.env(k, v);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {binary}: {e}"));
        Self {
            name: name.to_owned(),
            child,
            log,
        }
    }

    /// Reads stdout until a line starting with `prefix`; returns the rest of it.
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> String {
        let stdout = self.child.stdout.take().expect("stdout piped");
        let (tx, rx) = std::sync::mpsc::channel();
        let prefix = prefix.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix(&prefix) {
                    let _ = tx.send(rest.trim().to_owned());
                    return;
                }
            }
        });
        rx.recv_timeout(timeout).unwrap_or_else(|_| {
            panic!(
                "{} did not print {:?} in {timeout:?}; its log:\n{}",
                self.name,
                "listening on",
                self.log()
            )
        })
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL: no chance to finish anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for a clean exit; returns its log.
    pub fn stop(&mut self) -> String {
        // SAFETY-free: `kill -TERM` through the command line keeps the tests
        // free of libc bindings.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    assert!(
                        status.success(),
                        "{} exited with {status} after SIGTERM; its log:\n{}",
                        self.name,
                        self.log()
                    );
                    return self.log();
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => panic!("{} did not stop after SIGTERM:\n{}", self.name, self.log()),
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the crawler to completion with `--json`; returns its summary.
pub fn crawl(args: &[&str], env: &[(&str, String)]) -> serde_json::Value {
    let mut command = Command::new(bin("weft-crawler"));
    command.args(args).arg("--json");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("run weft-crawler");
    assert!(
        out.status.success(),
        "weft-crawler failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "weft-crawler printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Writes `files` (relative path, text) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create the fixture's directory");
        }
        std::fs::write(&path, text).expect("write a fixture file");
    }
}

/// Waits until the catalog records `count` documents of `project`; panics
/// with the embedder's log when it dies or `timeout` passes.
pub async fn wait_for_documents(
    catalog: &dyn weft_core::ports::Catalog,
    project: &str,
    count: usize,
    embedder: &mut Service,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    while catalog
        .documents(Some(project))
        .await
        .expect("read the catalog")
        .len()
        < count
    {
        assert!(embedder.running(), "embedder died:\n{}", embedder.log());
        assert!(
            Instant::now() < deadline,
            "{project}: not indexed in {timeout:?}:\n{}",
            embedder.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A gRPC client of the query service.
pub type QueryClient =
    weft_proto::v1::query_service_client::QueryServiceClient<tonic::transport::Channel>;

/// Starts `weft-query` on a free loopback port with `env`, waits until it
/// listens and connects a client to it. Without API keys: `env` gets
/// `WEFT__QUERY__AUTH=none` unless it configures `WEFT__QUERY__AUTH` itself
/// (weft-query requires keys by default).
pub async fn start_query(env: &[(&str, String)], logs: &Path) -> (Service, QueryClient) {
    let (query, client, _) = start_query_at(env, logs).await;
    (query, client)
}

/// [`start_query`], also returning the address it listens on.
pub async fn start_query_at(env: &[(&str, String)], logs: &Path) -> (Service, QueryClient, String) {
    let mut env = env.to_vec();
    if !env.iter().any(|(k, _)| *k == "WEFT__QUERY__AUTH") {
        env.push(("WEFT__QUERY__AUTH", "none".to_owned()));
    }
    let mut query = Service::start(
        "query",
        "weft-query",
        &["--listen", "127.0.0.1:0"],
        &env,
        logs,
    );
    let addr = query.wait_for_line("listening on ", Duration::from_secs(120));
    let client = QueryClient::connect(format!("http://{addr}"))
        .await
        .unwrap_or_else(|e| panic!("connect to weft-query at {addr}: {e}\n{}", query.log()));
    (query, client, addr)
}
