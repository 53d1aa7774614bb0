//! Embedded indexing throughput over a real corpus: files/s, lines/s and
//! chunks/s of `weft index`'s pipeline (walk, read, hash, chunk, embed,
//! write to qdrant-edge and tantivy, catalog), then a second run with
//! nothing changed, with peak memory.
//!
//! ```text
//! cargo run --release -p weft-bench --bin index-throughput -- DIR [--embedding excluded|model] [--data-dir D] [--json]
//! ```
//!
//! `--embedding excluded` (the default) replaces the model with
//! [`weft_bench::HashEmbedder`] (hash → unit vector, no meaning): what is
//! measured is everything but the model. `--embedding model` uses the local
//! MiniLM model (about 11 chunks/s on 2 cores: use a small directory).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use indicatif::ProgressBar;
use weft_core::ports::Embedder;
use weft_index::{IndexOptions, IndexSummary, Indexer};
use weft_sources::{DirSelection, SourceSpec, walk_dir};
use weft_wiring::DataDir;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum Embedding {
    /// Hash vectors: everything but the model is measured.
    Excluded,
    /// The local all-MiniLM-L6-v2 model.
    Model,
}

#[derive(Parser)]
#[command(
    about = "Embedded indexing throughput (files/s, lines/s, chunks/s), then an unchanged re-index"
)]
struct Args {
    /// The corpus directory.
    dir: PathBuf,
    /// Whether the model runs.
    #[arg(long, value_enum, default_value = "excluded")]
    embedding: Embedding,
    /// Data directory (default: a fresh temporary one). An existing one is
    /// re-indexed incrementally.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The project the corpus is indexed as (`weft eval` names its projects
    /// `<corpus>-<variant>`, so `eval-sweep` can read an index built here).
    #[arg(long, default_value = "bench")]
    project: String,
    /// The model directory (default: WEFT_MODEL_DIR, else ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Phase {
    name: &'static str,
    seconds: f64,
    documents_indexed: usize,
    documents_unchanged: usize,
    chunks_written: usize,
    files_per_s: f64,
    lines_per_s: f64,
    chunks_per_s: f64,
    mb_per_s: f64,
    peak_rss_mib: Option<f64>,
}

fn phase(name: &'static str, s: &IndexSummary, seconds: f64, lines: usize, bytes: u64) -> Phase {
    Phase {
        name,
        seconds,
        documents_indexed: s.documents_indexed,
        documents_unchanged: s.documents_unchanged,
        chunks_written: s.chunks_written,
        files_per_s: s.documents_seen as f64 / seconds,
        lines_per_s: lines as f64 / seconds,
        chunks_per_s: s.chunks_written as f64 / seconds,
        mb_per_s: bytes as f64 / 1e6 / seconds,
        peak_rss_mib: weft_bench::peak_rss_mib(),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = weft_config::WeftConfig::default();
    // What the walk selects, counted once for the rates.
    let selection = DirSelection::new(&config.sources).map_err(anyhow::Error::msg)?;
    let files = walk_dir(&args.dir, &selection).files;
    let (mut lines, mut bytes) = (0usize, 0u64);
    for (_, path) in &files {
        if let Ok(b) = std::fs::read(path) {
            bytes += b.len() as u64;
            lines += b.iter().filter(|&&c| c == b'\n').count();
        }
    }
    let temp = tempfile::tempdir()?;
    let data_dir = DataDir::new(
        args.data_dir
            .clone()
            .unwrap_or_else(|| temp.path().to_owned()),
    );
    let embedder: Arc<dyn Embedder> = match args.embedding {
        Embedding::Excluded => Arc::new(weft_bench::HashEmbedder::new(384)),
        Embedding::Model => {
            let dir = args
                .model_dir
                .clone()
                .unwrap_or_else(weft_config::default_model_dir);
            Arc::new(
                weft_embed_local::LocalEmbedder::load_with(
                    &dir,
                    &weft_wiring::local_load_options(&config.embedding),
                )
                .with_context(|| format!("loading the model from {}", dir.display()))?,
            )
        }
    };
    let stores = data_dir.open_for(embedder.model_id(), embedder.dimension())?;
    let runtime = tokio::runtime::Runtime::new()?;
    let indexer = Indexer::new(stores, embedder, &config, data_dir.sources_dir())?;
    let spec = SourceSpec::Dir(args.dir.clone());
    let mut phases = Vec::new();
    for name in ["index", "re-index, unchanged"] {
        let options = IndexOptions {
            project: Some(args.project.clone()),
            reindex: false,
            progress: if args.json {
                ProgressBar::hidden()
            } else {
                ProgressBar::new(0)
            },
        };
        let start = Instant::now();
        let summary = runtime.block_on(indexer.index(&spec, &options))?;
        let seconds = start.elapsed().as_secs_f64();
        phases.push(phase(name, &summary, seconds, lines, bytes));
    }
    let out = serde_json::json!({
        "dir": args.dir,
        "embedding": args.embedding,
        "files": files.len(),
        "lines": lines,
        "megabytes": bytes as f64 / 1e6,
        "phases": phases,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{}: {} files, {} lines, {:.1} MB; embedding {}",
            args.dir.display(),
            files.len(),
            lines,
            bytes as f64 / 1e6,
            match args.embedding {
                Embedding::Excluded => "excluded (hash vectors)",
                Embedding::Model => "by the local model",
            }
        );
        for p in &phases {
            println!(
                "{:<20} {:>8.2} s  {:>6} indexed {:>6} unchanged {:>8} chunks | {:>8.0} files/s {:>9.0} lines/s {:>8.0} chunks/s {:>6.1} MB/s | peak RSS {:.0} MiB",
                p.name,
                p.seconds,
                p.documents_indexed,
                p.documents_unchanged,
                p.chunks_written,
                p.files_per_s,
                p.lines_per_s,
                p.chunks_per_s,
                p.mb_per_s,
                p.peak_rss_mib.unwrap_or(0.0)
            );
        }
    }
    Ok(())
}
