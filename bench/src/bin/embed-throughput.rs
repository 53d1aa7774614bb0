//! Local embedding throughput on real chunks.
//!
//! ```text
//! cargo run --release -p weft-bench --bin embed-throughput -- DIR [--chunks N] [--model-dir D]
//! ```
//!
//! Chunks the files under DIR, embeds the embedded text of the first N
//! chunks with the local model, and prints chunks/s and tokens truncated.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use weft_bench::read_corpus;
use weft_chunking::{Chunker, ChunkingConfig};
use weft_embed_candle::{DEFAULT_MAX_TOKENS, LocalEmbedder};

#[derive(Parser)]
#[command(about = "Local embedding throughput (chunks/s) on real chunks")]
struct Args {
    /// A corpus directory.
    dir: PathBuf,
    /// How many chunks to embed.
    #[arg(long, default_value_t = 512)]
    chunks: usize,
    /// The model directory (default: WEFT_MODEL_DIR, else ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let model_dir = args
        .model_dir
        .or_else(|| std::env::var_os("WEFT_MODEL_DIR").map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/weft/models/all-MiniLM-L6-v2")
        });
    let embedder = LocalEmbedder::load(&model_dir, DEFAULT_MAX_TOKENS)?;
    let chunker = Chunker::new(ChunkingConfig::default())?;
    let mut texts = Vec::new();
    for file in read_corpus(&args.dir) {
        texts.extend(
            chunker
                .chunk_text("bench", &file.uri, &file.text)
                .chunks
                .iter()
                .map(|c| c.embedding_text()),
        );
        if texts.len() >= args.chunks {
            break;
        }
    }
    texts.truncate(args.chunks);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let chars: usize = refs.iter().map(|t| t.chars().count()).sum();
    let start = Instant::now();
    let vectors = embedder.embed(&refs)?;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{} chunks ({:.0} chars avg) in {elapsed:.2}s: {:.1} chunks/s, dimension {}, model {}",
        vectors.len(),
        chars as f64 / vectors.len().max(1) as f64,
        vectors.len() as f64 / elapsed,
        embedder.dimension(),
        embedder.model_id()
    );
    Ok(())
}
