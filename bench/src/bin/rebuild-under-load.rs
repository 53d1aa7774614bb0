//! A rebuild under a query loop (issue 17's measurement): starts `weft
//! serve` over an indexed data directory, runs labelled queries against it
//! over gRPC without pause, runs `weft index SOURCE --reindex` (a new index
//! generation, switched to when complete), and keeps querying after the
//! switch. Prints, before / during / after the rebuild, the queries served
//! and failed and their p50 / p99 latency, the generations that answered,
//! and the time from the rebuild's end to the first answer from the new
//! generation.
//!
//! ```sh
//! cargo build --release -p weft-cli -p weft-bench --bin weft --bin rebuild-under-load
//! weft index $E/nodoc/guava --project guava-hard --data-dir /tmp/gen-guava
//! target/release/rebuild-under-load --weft target/release/weft --data-dir /tmp/gen-guava \
//!   --source $E/nodoc/guava --project guava-hard \
//!   --queries ../shared/eval/queries/java.jsonl --corpus guava \
//!   --rebuild-env WEFT__CHUNKING__CODE__MAX_CHARS=2000
//! ```
//!
//! (`--rebuild-env` makes the rebuild a chunker change; without it every
//! chunk is found unchanged and the rebuild only copies and switches.)

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use weft_bench::percentile;
use weft_proto::v1;
use weft_proto::v1::query_service_client::QueryServiceClient;

#[derive(Parser)]
struct Args {
    /// The weft binary (a release build).
    #[arg(long)]
    weft: PathBuf,
    /// A data directory `weft index` made.
    #[arg(long)]
    data_dir: PathBuf,
    /// The source to rebuild (as indexed).
    #[arg(long)]
    source: PathBuf,
    /// Its project.
    #[arg(long)]
    project: String,
    /// Labelled queries (JSON lines with `query` and `corpus`).
    #[arg(long)]
    queries: PathBuf,
    /// Only queries of this corpus.
    #[arg(long)]
    corpus: Option<String>,
    /// Seconds of querying before the rebuild and after the switch.
    #[arg(long, default_value_t = 30)]
    settle_secs: u64,
    /// Extra environment for the rebuild (KEY=VALUE), e.g. another chunking setting.
    #[arg(long = "rebuild-env", value_name = "KEY=VALUE")]
    rebuild_env: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Before,
    During,
    After,
}

struct Sample {
    phase: Phase,
    at: Instant,
    ms: f64,
    generation: Option<u32>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let queries: Vec<String> = BufReader::new(
        std::fs::File::open(&args.queries)
            .with_context(|| format!("{}", args.queries.display()))?,
    )
    .lines()
    .map_while(Result::ok)
    .filter_map(|line| serde_json::from_str::<serde_json::Value>(&line).ok())
    .filter(|v| {
        args.corpus
            .as_deref()
            .is_none_or(|c| v["corpus"].as_str() == Some(c))
    })
    .filter_map(|v| v["query"].as_str().map(str::to_owned))
    .collect();
    if queries.is_empty() {
        bail!("no queries in {}", args.queries.display());
    }
    let mut serve = Command::new(&args.weft)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&args.data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("start weft serve")?;
    let mut line = String::new();
    BufReader::new(serve.stdout.take().context("stdout")?).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .with_context(|| format!("weft serve said {line:?}"))?
        .to_owned();

    let phase = Arc::new(Mutex::new(Phase::Before));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let failures: Arc<Mutex<Vec<(Phase, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Runtime::new()?;
    let looper = {
        let (phase, samples, failures, stop) = (
            phase.clone(),
            samples.clone(),
            failures.clone(),
            stop.clone(),
        );
        runtime.spawn(async move {
            let mut client = QueryServiceClient::connect(format!("http://{addr}")).await?;
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let request = v1::SearchRequest {
                    query: queries[i % queries.len()].clone(),
                    limit: 10,
                    ..Default::default()
                };
                i += 1;
                let started = Instant::now();
                let result = client.search(request).await;
                let now_phase = *phase.lock().unwrap_or_else(|p| p.into_inner());
                match result {
                    Ok(response) => {
                        samples
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(Sample {
                                phase: now_phase,
                                at: Instant::now(),
                                ms: started.elapsed().as_secs_f64() * 1e3,
                                generation: Some(response.into_inner().generation),
                            })
                    }
                    Err(status) => failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((now_phase, status.to_string())),
                }
            }
            anyhow::Ok(())
        })
    };
    std::thread::sleep(Duration::from_secs(args.settle_secs));
    *phase.lock().unwrap_or_else(|p| p.into_inner()) = Phase::During;
    let rebuild_started = Instant::now();
    let mut rebuild = Command::new(&args.weft);
    rebuild
        .args([
            "index",
            "--reindex",
            "--json",
            "--project",
            &args.project,
            "--data-dir",
        ])
        .arg(&args.data_dir)
        .arg(&args.source);
    for kv in &args.rebuild_env {
        let (k, v) = kv
            .split_once('=')
            .context("--rebuild-env takes KEY=VALUE")?;
        rebuild.env(k, v);
    }
    let out = rebuild.output().context("run weft index --reindex")?;
    let rebuild_ended = Instant::now();
    *phase.lock().unwrap_or_else(|p| p.into_inner()) = Phase::After;
    if !out.status.success() {
        bail!(
            "the rebuild failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let new_generation = report["generation"]["live"].as_u64().map(|n| n as u32);
    std::thread::sleep(Duration::from_secs(args.settle_secs));
    stop.store(true, Ordering::Relaxed);
    runtime.block_on(looper)??;
    let _ = serve.kill();
    let _ = serve.wait();

    let samples = samples.lock().unwrap_or_else(|p| p.into_inner());
    let failures = failures.lock().unwrap_or_else(|p| p.into_inner());
    let first_new = samples
        .iter()
        .find(|s| s.generation == new_generation && s.at >= rebuild_started)
        .map(|s| s.at.saturating_duration_since(rebuild_ended).as_secs_f64());
    let mut rows = Vec::new();
    for p in [Phase::Before, Phase::During, Phase::After] {
        let mut ms: Vec<f64> = samples
            .iter()
            .filter(|s| s.phase == p)
            .map(|s| s.ms)
            .collect();
        ms.sort_by(f64::total_cmp);
        let mut generations: Vec<u32> = samples
            .iter()
            .filter(|s| s.phase == p)
            .filter_map(|s| s.generation)
            .collect();
        generations.dedup();
        generations.sort_unstable();
        generations.dedup();
        rows.push(serde_json::json!({
            "phase": format!("{p:?}").to_lowercase(),
            "queries": ms.len(),
            "failed": failures.iter().filter(|(fp, _)| *fp == p).count(),
            "p50_ms": percentile(&ms, 0.50),
            "p99_ms": percentile(&ms, 0.99),
            "generations": generations,
        }));
    }
    let out = serde_json::json!({
        "rebuild_secs": (rebuild_ended - rebuild_started).as_secs_f64(),
        "rebuild": report["generation"],
        "chunks_written": report["runs"][0]["chunks_written"],
        "vectors_reused": report["runs"][0]["vectors_reused"],
        "first_answer_from_new_generation_after_secs": first_new,
        "phases": rows,
        "failures": failures.iter().take(5).map(|(_, e)| e.clone()).collect::<Vec<_>>(),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "rebuild {:.1} s (generation {} -> {}), {} chunks written ({} with stored vectors)",
            out["rebuild_secs"].as_f64().unwrap_or_default(),
            report["generation"]["previous"],
            report["generation"]["live"],
            out["chunks_written"],
            out["vectors_reused"],
        );
        println!("| phase | queries | failed | p50 ms | p99 ms | generations |");
        println!("|---|---|---|---|---|---|");
        for r in &rows {
            println!(
                "| {} | {} | {} | {:.1} | {:.1} | {} |",
                r["phase"].as_str().unwrap_or_default(),
                r["queries"],
                r["failed"],
                r["p50_ms"].as_f64().unwrap_or_default(),
                r["p99_ms"].as_f64().unwrap_or_default(),
                r["generations"]
            );
        }
        match first_new {
            Some(s) => {
                println!("first answer from the new generation {s:.2} s after the rebuild ended")
            }
            None => println!("no answer from the new generation"),
        }
    }
    Ok(())
}
