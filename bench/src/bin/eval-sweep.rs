//! Compares retrieval settings on labelled queries over an index that
//! `weft eval` built: every setting runs every query (expansion off and on),
//! each query embedded once for all settings.
//!
//! ```text
//! cargo run --release -p weft-bench --bin eval-sweep -- ../shared/eval/queries/java.jsonl \
//!   --corpus guava --data-dir /tmp/eval-hard \
//!   --set "k30:fusion.k=30" --set "text-heavy:fusion.vector_weight=0.4,fusion.text_weight=0.6" \
//!   --set "vector:mode=vector" --set "text:mode=text"
//! ```
//!
//! A setting is `NAME:key=value,…`; keys are the `[retrieval]` keys of
//! weft.toml (`fusion.k`, `boosts.path_keyword`, `adjacency.code_window`, …)
//! plus `mode`. The defaults always run first, as `default`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::Value;
use weft_core::ports::Embedder;
use weft_core::query::{QueryEngine, SearchMode};
use weft_core::retrieval::RetrievalConfig;
use weft_eval::{Aggregate, CachingEmbedder, RunOptions, Variant};
use weft_wiring::DataDir;

/// Hits per query, as in the metric definitions (R@10, nDCG@10).
const LIMIT: usize = 10;

#[derive(Parser)]
#[command(about = "Compare retrieval settings on labelled queries (embedding each query once)")]
struct Args {
    /// Labelled queries (shared/eval format).
    queries: PathBuf,
    /// The corpus to evaluate (its project `<corpus>-<variant>` must be indexed).
    #[arg(long)]
    corpus: String,
    /// The data directory `weft eval` indexed into.
    #[arg(long)]
    data_dir: PathBuf,
    /// hard or docs.
    #[arg(long, default_value = "hard")]
    variant: Variant,
    /// Default mode for settings that do not set one.
    #[arg(long, default_value = "hybrid")]
    mode: SearchMode,
    /// At most N queries, spread evenly.
    #[arg(long)]
    limit_queries: Option<usize>,
    /// A setting to compare: `NAME:key=value,key=value`.
    #[arg(long = "set")]
    settings: Vec<String>,
    /// Model directory (default: ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Write every query's outcome under each setting to this JSONL file
    /// (setting, id, query, target, rank, top chunks, coverage and context
    /// tokens): for reading misses.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Also pack each expanded response into these token budgets
    /// (comma-separated, e.g. `1000,2000,4000,8000`) and report answer in
    /// context and tokens per budget, then unpacked (as `weft eval --pack`).
    #[arg(long, value_delimiter = ',')]
    pack: Vec<usize>,
    /// With --pack: the `limit` of the search told its budget, which keeps
    /// twice as many hits (default 10: 20 hits, as `weft search
    /// --max-tokens`). For sweeps of how deep the packer reads.
    #[arg(long, value_name = "N")]
    pack_limit: Option<usize>,
    /// Write, per setting and query, the expanded response's spans (chunk
    /// index, section, lines, matched, score) and the target, one JSON
    /// object per line: for reading why a hit's target is not in context.
    /// With --pack, the response searched for packing (told the largest
    /// budget), which is what the budgets are packed from.
    #[arg(long)]
    dump_spans: Option<PathBuf>,
    /// A learned query-side map (little-endian f32, dimension × dimension,
    /// row-major) applied to every query vector: settings then run with it.
    /// It maps the model's own query vectors (`embedding.query_adapter` is
    /// then not applied).
    #[arg(long)]
    query_adapter: Option<PathBuf>,
    /// Query vectors made by a query encoder weft cannot load yet (JSON
    /// lines `{"text", "vector"}`, keyed by the text weft embeds for the
    /// query; `tools/train/train_query_encoder.py --write-queries`):
    /// settings then search with them. A query missing from the file fails.
    #[arg(long, conflicts_with = "query_adapter")]
    query_vectors: Option<PathBuf>,
}

/// Applies `key=value` pairs (dotted keys) to the retrieval config; `mode` is returned apart.
fn apply(
    base: &RetrievalConfig,
    default_mode: SearchMode,
    pairs: &str,
) -> anyhow::Result<(RetrievalConfig, SearchMode)> {
    let mut value = serde_json::to_value(base)?;
    let mut mode = default_mode;
    for pair in pairs.split(',').filter(|p| !p.trim().is_empty()) {
        let (key, raw) = pair
            .split_once('=')
            .with_context(|| format!("{pair:?} is not key=value"))?;
        let (key, raw) = (key.trim(), raw.trim());
        if key == "mode" {
            mode = raw.parse().map_err(anyhow::Error::msg)?;
            continue;
        }
        let parsed: Value = serde_json::from_str(raw).unwrap_or(Value::String(raw.to_owned()));
        let mut slot = &mut value;
        for part in key.split('.') {
            slot = slot
                .get_mut(part)
                .with_context(|| format!("unknown retrieval key {key:?}"))?;
        }
        *slot = parsed;
    }
    let config = serde_json::from_value(value).context("invalid setting")?;
    Ok((config, mode))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let queries = weft_eval::load_queries(&args.queries)?;
    let selected = weft_eval::select_queries(
        queries,
        std::slice::from_ref(&args.corpus),
        args.limit_queries,
    );
    let Some(queries) = selected.get(&args.corpus) else {
        bail!(
            "no query of {} is about {}",
            args.queries.display(),
            args.corpus
        );
    };
    let project = format!("{}-{}", args.corpus, args.variant.name());
    let stores = DataDir::new(&args.data_dir).open_existing()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let documents = runtime.block_on(stores.catalog.documents(Some(&project)))?;
    if documents.is_empty() {
        bail!(
            "project {project} is not indexed in {} (run weft eval first)",
            args.data_dir.display()
        );
    }
    let model_dir = args
        .model_dir
        .clone()
        .unwrap_or_else(weft_config::default_model_dir);
    // The precision `weft eval` indexed in: embedding.precision as weft reads it.
    // Loaded for queries, as weft's query stack loads it.
    let mut options = weft_wiring::local_load_options(&weft_config::load(None)?.config.embedding)
        .purpose(weft_embed_local::Purpose::Queries);
    if args.query_adapter.is_some() {
        // The candidate map applies to the model's own query vectors.
        options = options.query_adapter(weft_embed_local::AdapterChoice::Off);
    }
    let model = weft_embed_local::LocalEmbedder::load_with(&model_dir, &options)?;
    let mut model: Arc<dyn Embedder> = Arc::new(model);
    if let Some(path) = &args.query_adapter {
        model = Arc::new(weft_bench::AdaptedEmbedder::load(model, path)?);
    }
    if let Some(path) = &args.query_vectors {
        model = Arc::new(weft_bench::AdaptedEmbedder::precomputed(model, path)?);
    }
    let embedder: Arc<dyn Embedder> = Arc::new(CachingEmbedder::new(model));

    let base = RetrievalConfig::default();
    let mut settings = vec![("default".to_owned(), base.clone(), args.mode)];
    for s in &args.settings {
        let (name, pairs) = s.split_once(':').unwrap_or((s.as_str(), s.as_str()));
        let (config, mode) =
            apply(&base, args.mode, pairs).with_context(|| format!("--set {s}"))?;
        settings.push((name.to_owned(), config, mode));
    }
    let mut rows = Vec::new();
    let mut dump = match &args.dump {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("--dump {}", path.display()))?,
        )),
        None => None,
    };
    for (name, config, mode) in &settings {
        let engine = QueryEngine::new(
            stores.vectors.clone(),
            stores.text.clone(),
            Some(embedder.clone()),
            None,
            config.clone(),
        );
        let options = RunOptions {
            project: project.clone(),
            mode: *mode,
            limit: LIMIT,
            expansion_off: true,
            expansion_on: true,
            pack_budgets: args.pack.clone(),
            pack_limit: args.pack_limit,
            pack_strategy: Default::default(),
        };
        let started = std::time::Instant::now();
        let outcomes =
            runtime.block_on(weft_eval::run_queries(&engine, queries, &options, || {}))?;
        let a = Aggregate::of(&outcomes);
        if let Some(out) = dump.as_mut() {
            for (query, outcome) in queries.iter().zip(&outcomes) {
                let line = serde_json::json!({
                    "setting": name,
                    "id": outcome.id,
                    "query": query.query,
                    "target": format!("{}:{}-{}", query.path, query.start_line, query.end_line),
                    "rank": outcome.main().rank,
                    "long": outcome.long,
                    "coverage": outcome.main().coverage,
                    "tokens_off": outcome.off.as_ref().map(|j| j.context_tokens),
                    "tokens_on": outcome.on.as_ref().map(|j| j.context_tokens),
                    "top": outcome.main().top,
                    "packed": outcome.packed,
                });
                writeln!(out, "{line}")?;
            }
        }
        dump_spans(&args, name, &runtime, &engine, &project, queries)?;
        eprintln!("{name}: {:.1}s", started.elapsed().as_secs_f64());
        rows.push((name.clone(), *mode, a));
    }
    if args.json {
        let out: Vec<Value> = rows
            .iter()
            .map(|(name, mode, a)| serde_json::json!({"setting": name, "mode": mode, "figures": a}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{} — {} ({} queries, {} variant)",
        args.queries.display(),
        args.corpus,
        queries.len(),
        args.variant.name()
    );
    println!(
        "{:<24} {:>7} {:>6} {:>6} {:>7} {:>8} | {:>5} {:>5} {:>7} {:>8} {:>7} {:>7} {:>6}",
        "setting",
        "mode",
        "R@1",
        "R@10",
        "MRR@10",
        "nDCG@10",
        "long",
        "top1",
        "cov on",
        "complete",
        "tok off",
        "tok on",
        "ratio"
    );
    for (name, mode, a) in &rows {
        let (off, on) = (a.long_expansion_off.as_ref(), a.long_expansion_on.as_ref());
        let tok_off = off.map_or(0.0, |s| s.context_tokens_mean);
        let tok_on = on.map_or(0.0, |s| s.context_tokens_mean);
        println!(
            "{:<24} {:>7} {:>6.3} {:>6.3} {:>7.3} {:>8.3} | {:>5} {:>5} {:>7.3} {:>7.1}% {:>7.0} {:>7.0} {:>6.2}",
            name,
            format!("{mode:?}").to_lowercase(),
            a.recall_at_1,
            a.recall_at_10,
            a.mrr_at_10,
            a.ndcg_at_10,
            a.long_queries,
            on.map_or(0, |s| s.top1_hits),
            on.map_or(0.0, |s| s.coverage_mean),
            100.0 * on.map_or(0.0, |s| s.complete_share),
            tok_off,
            tok_on,
            if tok_off > 0.0 { tok_on / tok_off } else { 0.0 }
        );
    }
    if !args.pack.is_empty() {
        println!("\nanswer in context / mean tokens per budget (then unpacked):");
        for (name, _, a) in &rows {
            let cells: Vec<String> = a
                .packing
                .iter()
                .map(|p| {
                    let budget = p.budget.map_or("unpacked".to_owned(), |b| b.to_string());
                    format!(
                        "{budget}: {:.3} / {:.0}",
                        p.answer_in_context, p.tokens_mean
                    )
                })
                .collect();
            println!("{:<24} {}", name, cells.join(" | "));
        }
    }
    Ok(())
}

/// Writes every query's expanded response as spans of chunks, with its
/// target (`--dump-spans`), appending to `path` after the first setting.
fn dump_spans(
    args: &Args,
    setting: &str,
    runtime: &tokio::runtime::Runtime,
    engine: &QueryEngine,
    project: &str,
    queries: &[weft_eval::EvalQuery],
) -> anyhow::Result<()> {
    use weft_core::query::SearchRequest;
    use weft_core::retrieval::SearchFilter;
    let Some(path) = args.dump_spans.as_deref() else {
        return Ok(());
    };
    let (budgets, limit) = (&args.pack, args.pack_limit.unwrap_or(LIMIT));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("--dump-spans {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for query in queries {
        let response = runtime.block_on(engine.search(&SearchRequest {
            query: query.query.clone(),
            filter: SearchFilter {
                projects: vec![project.to_owned()],
                ..SearchFilter::default()
            },
            limit,
            expand: true,
            max_tokens: budgets.iter().max().copied(),
            ..Default::default()
        }))?;
        // What each budget packs: citations and tokens.
        let packs: Vec<Value> = budgets
            .iter()
            .map(|&max_tokens| {
                let pack = weft_core::retrieval::pack(
                    &response.results,
                    &Default::default(),
                    &weft_core::retrieval::PackOptions { max_tokens },
                    &weft_core::retrieval::ApproxTokenCounter,
                );
                let spans: Vec<Value> = pack
                    .spans
                    .iter()
                    .map(|s| serde_json::json!([s.citation, s.tokens]))
                    .collect();
                serde_json::json!({"budget": max_tokens, "used": pack.used_tokens, "spans": spans})
            })
            .collect();
        let documents: Vec<Value> = response
            .results
            .iter()
            .map(|d| {
                let spans: Vec<Value> = d
                    .spans
                    .iter()
                    .map(|s| {
                        let chunks: Vec<Value> = s
                            .chunks
                            .iter()
                            .map(|c| {
                                serde_json::json!({
                                    "i": c.chunk.chunk_index,
                                    "n": c.chunk.total_chunks,
                                    "section": c.chunk.section,
                                    "lines": [c.chunk.start_line, c.chunk.end_line],
                                    "chars": c.chunk.content.chars().count(),
                                    "matched": c.matched,
                                    "score": c.score,
                                })
                            })
                            .collect();
                        serde_json::json!({"lines": [s.start_line, s.end_line], "chunks": chunks})
                    })
                    .collect();
                serde_json::json!({"uri": d.uri, "score": d.score, "spans": spans})
            })
            .collect();
        let targets: Vec<Value> = query
            .targets()
            .iter()
            .map(|t| serde_json::json!([t.path, t.start_line, t.end_line]))
            .collect();
        let line = serde_json::json!({
            "setting": setting,
            "id": query.id,
            "query": query.query,
            "targets": targets,
            "documents": documents,
            "packs": packs,
        });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
