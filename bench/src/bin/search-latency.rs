//! Search latency over an existing data directory: runs N labelled queries
//! (DESIGN's eval format, one JSON object per line with `query`, `corpus`,
//! `path`) through the query pipeline and prints p50/p90/p99 latency, split
//! into stages, plus how often the labelled file is the top document.
//!
//! ```sh
//! cargo run --release -p weft-bench --bin search-latency -- \
//!   --data-dir /tmp/guava-data --queries ../shared/eval/queries/java.jsonl --corpus guava -n 100
//! ```
//!
//! With `--max-tokens N` each search is told its budget, as `weft search
//! --max-tokens`, gRPC `max_tokens` and MCP `search` do (every hit's unit
//! and window fetched), and its response is packed into N tokens; the
//! packing time is reported apart and included in the total.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use weft_bench::percentile;
use weft_core::ports::Embedder;
use weft_core::query::{QueryEngine, SearchMode, SearchRequest};
use weft_core::retrieval::{ApproxTokenCounter, PackOptions, RetrievalConfig, SearchFilter, pack};
use weft_wiring::DataDir;

#[derive(Parser)]
struct Args {
    /// A data directory made by `weft index`.
    #[arg(long)]
    data_dir: PathBuf,
    /// Labelled queries (JSON lines).
    #[arg(long)]
    queries: PathBuf,
    /// Only queries of this corpus.
    #[arg(long)]
    corpus: Option<String>,
    /// Number of queries.
    #[arg(short, default_value_t = 100)]
    n: usize,
    /// hybrid, vector or text.
    #[arg(long, default_value = "hybrid")]
    mode: SearchMode,
    /// Model directory (default: ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Tell each search its token budget and pack the response into it.
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let file = std::fs::File::open(&args.queries)
        .with_context(|| format!("{}", args.queries.display()))?;
    let mut queries: Vec<(String, String)> = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        if args
            .corpus
            .as_deref()
            .is_some_and(|c| v["corpus"].as_str() != Some(c))
        {
            continue;
        }
        if let (Some(q), Some(p)) = (v["query"].as_str(), v["path"].as_str()) {
            queries.push((q.to_owned(), p.to_owned()));
        }
        if queries.len() >= args.n {
            break;
        }
    }
    anyhow::ensure!(!queries.is_empty(), "no queries selected");
    let stores = DataDir::new(&args.data_dir).open_existing()?;
    let model_dir = args
        .model_dir
        .clone()
        .unwrap_or_else(weft_config::default_model_dir);
    let embedder: Option<Arc<dyn Embedder>> = match args.mode {
        SearchMode::Text => None,
        _ => Some(Arc::new(weft_embed_local::LocalEmbedder::load_with(
            &model_dir,
            &weft_wiring::local_load_options(&weft_config::load(None)?.config.embedding)
                .purpose(weft_embed_local::Purpose::Queries),
        )?)),
    };
    let engine = QueryEngine::new(
        stores.vectors.clone(),
        stores.text.clone(),
        embedder,
        None,
        RetrievalConfig::default(),
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let mut total = Vec::new();
    let (mut embed, mut search, mut fetch) = (Vec::new(), Vec::new(), Vec::new());
    let (mut packing, mut chunks, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
    let revisions = std::collections::HashMap::new();
    let mut top1 = 0;
    // One warm-up query (loads the index pages, runs the model once).
    runtime.block_on(engine.search(&SearchRequest {
        query: "warm up".into(),
        filter: SearchFilter::default(),
        limit: 10,
        mode: args.mode,
        expand: true,
        ..Default::default()
    }))?;
    for (query, path) in &queries {
        let response = runtime.block_on(engine.search(&SearchRequest {
            query: query.clone(),
            filter: SearchFilter::default(),
            limit: 10,
            mode: args.mode,
            expand: true,
            max_tokens: args.max_tokens,
            ..Default::default()
        }))?;
        let t = &response.timings;
        let mut total_ms = t.total_ms;
        if let Some(max_tokens) = args.max_tokens {
            let start = std::time::Instant::now();
            let packed = pack(
                &response.results,
                &revisions,
                &PackOptions { max_tokens },
                &ApproxTokenCounter,
            );
            let ms = start.elapsed().as_secs_f64() * 1e3;
            packing.push(ms);
            total_ms += ms;
            tokens.push(packed.used_tokens as f64);
            chunks.push(
                response
                    .results
                    .iter()
                    .flat_map(|d| &d.spans)
                    .map(|s| s.chunks.len())
                    .sum::<usize>() as f64,
            );
        }
        total.push(total_ms);
        embed.push(t.embed_ms);
        search.push(t.search_ms);
        fetch.push(t.fetch_ms);
        if response
            .results
            .first()
            .is_some_and(|d| d.uri.ends_with(path.as_str()))
        {
            top1 += 1;
        }
    }
    // Percentiles need sorted samples; chunks and tokens are only averaged.
    for v in [
        &mut total,
        &mut embed,
        &mut search,
        &mut fetch,
        &mut packing,
    ] {
        v.sort_by(f64::total_cmp);
    }
    let stats = |v: &[f64]| serde_json::json!({"p50": percentile(v, 0.5), "p90": percentile(v, 0.9), "p99": percentile(v, 0.99), "max": percentile(v, 1.0)});
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let out = serde_json::json!({
        "queries": queries.len(),
        "mode": args.mode,
        "max_tokens": args.max_tokens,
        "packing_ms": args.max_tokens.map(|_| stats(&packing)),
        "response_chunks_mean": args.max_tokens.map(|_| mean(&chunks)),
        "packed_tokens_mean": args.max_tokens.map(|_| mean(&tokens)),
        "total_ms": stats(&total),
        "embed_ms": stats(&embed),
        "search_ms": stats(&search),
        "neighbour_fetch_ms": stats(&fetch),
        "top1_file": top1 as f64 / queries.len() as f64,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} queries ({:?}): total p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms (embed p50 {:.1}, search p50 {:.1}, neighbour fetch p50 {:.1}); labelled file first in {:.0}%",
            queries.len(),
            args.mode,
            percentile(&total, 0.5),
            percentile(&total, 0.9),
            percentile(&total, 0.99),
            percentile(&embed, 0.5),
            percentile(&search, 0.5),
            percentile(&fetch, 0.5),
            100.0 * top1 as f64 / queries.len() as f64
        );
        if args.max_tokens.is_some() {
            println!(
                "packing p50 {:.2} ms, p99 {:.2} ms; {:.1} chunks per response, {:.0} tokens packed (means)",
                percentile(&packing, 0.5),
                percentile(&packing, 0.99),
                mean(&chunks),
                mean(&tokens)
            );
        }
    }
    Ok(())
}
