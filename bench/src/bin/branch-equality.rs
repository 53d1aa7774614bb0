//! Does a branch overlay rank as a full index of the branch does? Runs the
//! same labelled queries against `P@B` in one data directory (the overlay,
//! resolved from its catalog as every surface does) and against a project
//! holding the whole branch in another, and prints how many top-10 lists
//! are identical (same documents and lines, same order), the mean overlap
//! of the two top-10 sets, and Recall@10/MRR@10 of each against the labels.
//!
//! ```sh
//! cargo run --release -p weft-bench --bin branch-equality -- \
//!   --overlay-dir /tmp/b/overlay --overlay-project commons-io@feature \
//!   --full-dir /tmp/b/full --full-project commons-io-feature \
//!   --queries ../shared/eval/queries/java.jsonl --corpus commons-io --mode hybrid
//! ```

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use weft_core::ports::Embedder;
use weft_core::query::{QueryEngine, SearchMode, SearchRequest};
use weft_core::retrieval::{RetrievalConfig, SearchFilter};
use weft_wiring::DataDir;

#[derive(Parser)]
struct Args {
    /// The data directory holding the base project and its overlay.
    #[arg(long)]
    overlay_dir: PathBuf,
    /// The overlay, `P@B`.
    #[arg(long)]
    overlay_project: String,
    /// The data directory holding the whole branch as one project.
    #[arg(long)]
    full_dir: PathBuf,
    /// That project.
    #[arg(long)]
    full_project: String,
    /// Labelled queries (JSON lines with `query`, `corpus`, `path`,
    /// `start_line`, `end_line`).
    #[arg(long)]
    queries: PathBuf,
    /// Only queries of this corpus.
    #[arg(long)]
    corpus: Option<String>,
    /// At most this many queries.
    #[arg(short, default_value_t = usize::MAX)]
    n: usize,
    /// hybrid, vector or text.
    #[arg(long, default_value = "hybrid")]
    mode: SearchMode,
    /// Model directory (default: ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

struct Query {
    text: String,
    path: String,
    lines: (u32, u32),
}

/// A top-10 list: (uri, start line, end line) of each matched chunk, best first.
type Ranking = Vec<(String, u32, u32)>;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let file = std::fs::File::open(&args.queries)
        .with_context(|| format!("{}", args.queries.display()))?;
    let mut queries = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        if args
            .corpus
            .as_deref()
            .is_some_and(|c| v["corpus"].as_str() != Some(c))
        {
            continue;
        }
        if let (Some(q), Some(p), Some(s), Some(e)) = (
            v["query"].as_str(),
            v["path"].as_str(),
            v["start_line"].as_u64(),
            v["end_line"].as_u64(),
        ) {
            queries.push(Query {
                text: q.to_owned(),
                path: p.to_owned(),
                lines: (s as u32, e as u32),
            });
        }
        if queries.len() >= args.n {
            break;
        }
    }
    anyhow::ensure!(!queries.is_empty(), "no queries selected");
    let embedder: Option<Arc<dyn Embedder>> = match args.mode {
        SearchMode::Text => None,
        _ => {
            let model_dir = args
                .model_dir
                .clone()
                .unwrap_or_else(weft_config::default_model_dir);
            Some(Arc::new(weft_embed_local::LocalEmbedder::load_with(
                &model_dir,
                &weft_wiring::local_load_options(&weft_config::load(None)?.config.embedding),
            )?))
        }
    };
    let overlay = DataDir::new(&args.overlay_dir).open_existing()?;
    let full = DataDir::new(&args.full_dir).open_existing()?;
    let engine = |stores: &weft_wiring::Stores| {
        QueryEngine::new(
            stores.vectors.clone(),
            stores.text.clone(),
            embedder.clone(),
            None,
            RetrievalConfig::default(),
        )
    };
    let (overlay_engine, full_engine) = (engine(&overlay), engine(&full));
    let runtime = tokio::runtime::Runtime::new()?;
    let request = |query: &str, project: &str| SearchRequest {
        query: query.to_owned(),
        filter: SearchFilter {
            projects: vec![project.to_owned()],
            ..Default::default()
        },
        limit: 10,
        mode: args.mode,
        expand: false,
        ..Default::default()
    };
    let ranking = |response: weft_core::query::SearchResponse| -> Ranking {
        response
            .results
            .iter()
            .flat_map(|d| d.spans.iter())
            .flat_map(|s| s.chunks.iter())
            .filter(|c| c.matched)
            .map(|c| (c.chunk.uri.clone(), c.chunk.start_line, c.chunk.end_line))
            .collect()
    };
    let (mut identical, mut overlap, mut hidden_seen) = (0usize, 0.0f64, 0usize);
    let (mut recall, mut mrr) = ([0usize; 2], [0.0f64; 2]);
    runtime.block_on(async {
        for q in &queries {
            let mut over = request(&q.text, &args.overlay_project);
            over.hidden = weft_core::overlays::resolve(&*overlay.catalog, &mut over.filter).await?;
            let response = overlay_engine.search(&over).await?;
            // What the overlay hides must never come back.
            hidden_seen += usize::from(
                response
                    .results
                    .iter()
                    .flat_map(|d| d.spans.iter())
                    .flat_map(|s| s.chunks.iter())
                    .any(|c| over.hidden.documents.contains(&c.chunk.document_id)),
            );
            let a = ranking(response);
            let b = ranking(
                full_engine
                    .search(&request(&q.text, &args.full_project))
                    .await?,
            );
            identical += usize::from(a == b);
            let common = a.iter().filter(|x| b.contains(x)).count();
            overlap += common as f64 / a.len().max(b.len()).max(1) as f64;
            for (i, list) in [&a, &b].into_iter().enumerate() {
                if let Some(rank) = list
                    .iter()
                    .position(|(uri, s, e)| *uri == q.path && *s <= q.lines.1 && *e >= q.lines.0)
                {
                    recall[i] += 1;
                    mrr[i] += 1.0 / (rank + 1) as f64;
                }
            }
        }
        anyhow::Ok(())
    })?;
    let n = queries.len() as f64;
    let out = serde_json::json!({
        "queries": queries.len(),
        "mode": format!("{:?}", args.mode).to_lowercase(),
        "identical_top10": identical as f64 / n,
        "mean_top10_overlap": overlap / n,
        "hidden_returned": hidden_seen,
        "overlay": {"recall@10": recall[0] as f64 / n, "mrr@10": mrr[0] / n},
        "full": {"recall@10": recall[1] as f64 / n, "mrr@10": mrr[1] / n},
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} queries, {} mode: identical top-10 {:.1}%, mean top-10 overlap {:.3}, hidden documents returned {}; \
             overlay R@10 {:.3} MRR@10 {:.3}, full index R@10 {:.3} MRR@10 {:.3}",
            queries.len(),
            out["mode"].as_str().unwrap_or_default(),
            100.0 * identical as f64 / n,
            overlap / n,
            hidden_seen,
            recall[0] as f64 / n,
            mrr[0] / n,
            recall[1] as f64 / n,
            mrr[1] / n
        );
    }
    Ok(())
}
