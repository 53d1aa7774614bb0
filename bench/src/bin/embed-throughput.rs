//! Local embedding throughput on real chunks.
//!
//! ```text
//! cargo run --release -p weft-bench --bin embed-throughput -- DIR [--chunks N] [--model-dir D] [--rounds R]
//!     [--precision fp32,int8] [--threads T] [--save-graph DIR] [--json]
//! ```
//!
//! Chunks the files under DIR, embeds the embedded text of the first N
//! chunks with the local model (one `embed` call, as the indexer makes
//! them: the embedder sorts the texts by length and batches them), R times,
//! and prints per round chunks/s, tokens/s (tokens after truncation,
//! padding not counted), the CPU seconds used, and the useful GFLOP/s: the
//! matrix products of the encoder over the real tokens (2 operations per
//! multiply-add; padding and the non-matrix work not counted).
//!
//! `--precision` takes one precision or several (`fp32`, `int8`, `auto`:
//! what `embedding.precision = "auto"` picks on this CPU); default:
//! `embedding.precision` as weft reads it (`weft.toml`,
//! `WEFT__EMBEDDING__PRECISION`). Several are loaded into one
//! process and their rounds interleaved; with fp32 among them, every other
//! precision's vectors are compared with fp32's (cosine mean, 1st
//! percentile, minimum).

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use weft_bench::read_corpus;
use weft_chunking::{Chunker, ChunkingConfig};
use weft_embed_local::{DEFAULT_MAX_TOKENS, LoadOptions, LocalEmbedder, Precision, padded_tokens};

#[derive(Parser)]
#[command(about = "Local embedding throughput (chunks/s, tokens/s, GFLOP/s) on real chunks")]
struct Args {
    /// A corpus directory.
    dir: PathBuf,
    /// How many chunks to embed.
    #[arg(long, default_value_t = 512)]
    chunks: usize,
    /// The model directory (default: WEFT_MODEL_DIR, else ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Texts are truncated at this many tokens.
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS)]
    max_tokens: usize,
    /// How many times to embed the chunks (the first round included).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Precisions to run, comma-separated: fp32, int8, auto (default:
    /// embedding.precision, e.g. from WEFT__EMBEDDING__PRECISION).
    #[arg(long, value_delimiter = ',')]
    precision: Vec<String>,
    /// Threads per forward pass (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Writes the graph ONNX Runtime runs, after its optimizer, to
    /// DIR/PRECISION.onnx.
    #[arg(long)]
    save_graph: Option<PathBuf>,
    /// Writes the embedded texts to this file (a JSON list), for other
    /// implementations to embed the same texts.
    #[arg(long)]
    dump_texts: Option<PathBuf>,
    /// One JSON object per round instead of text.
    #[arg(long)]
    json: bool,
}

/// CPU seconds (user + system, all threads) this process has used so far,
/// from /proc/self/stat; `None` where that is not readable.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
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
    // Without --precision: `embedding.precision` of weft.toml and
    // WEFT__EMBEDDING__PRECISION, as weft resolves it.
    let configured = weft_config::load(None)?.config.embedding;
    let names = if args.precision.is_empty() {
        vec![weft_wiring::local_precision(&configured).name().to_owned()]
    } else {
        args.precision.clone()
    };
    let mut embedders = Vec::new();
    for name in &names {
        let precision = match name.as_str() {
            "auto" => Precision::fastest(),
            other => other
                .parse::<Precision>()
                .map_err(|e| anyhow::anyhow!("--precision: {e}"))?,
        };
        let mut options = LoadOptions::new(args.max_tokens).precision(precision);
        options.threads = args.threads;
        if let Some(dir) = &args.save_graph {
            std::fs::create_dir_all(dir)?;
            options.save_graph = Some(dir.join(format!("{precision}.onnx")));
        }
        embedders.push(LocalEmbedder::load_with(&model_dir, &options)?);
    }
    let embedder = &embedders[0];
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
    if let Some(path) = &args.dump_texts {
        std::fs::write(path, serde_json::to_vec(&texts)?)?;
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let chars: usize = refs.iter().map(|t| t.chars().count()).sum();
    let lengths = embedder.count_tokens(&refs)?;
    let tokens: usize = lengths.iter().sum();
    let spec = embedder.spec();
    let flops: f64 = lengths.iter().map(|&n| spec.flops(1, n)).sum();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let mut fp32_vectors: Option<Vec<Vec<f32>>> = None;
    for round in 1..=args.rounds {
        for embedder in &embedders {
            let (start, cpu_start) = (Instant::now(), cpu_seconds());
            let vectors = embedder.embed(&refs)?;
            let elapsed = start.elapsed().as_secs_f64();
            let cpu = cpu_seconds().zip(cpu_start).map(|(end, start)| end - start);
            let n = vectors.len();
            let precision = embedder.precision();
            let padded = padded_tokens(&lengths, precision);
            if precision == Precision::Fp32 && fp32_vectors.is_none() {
                fp32_vectors = Some(vectors.clone());
            }
            // Cosine of each vector to fp32's (both unit length: the dot product).
            let cosine = fp32_vectors
                .as_ref()
                .filter(|_| precision != Precision::Fp32)
                .map(|reference| {
                    let mut cos: Vec<f64> = reference
                        .iter()
                        .zip(&vectors)
                        .map(|(a, b)| a.iter().zip(b).map(|(x, y)| f64::from(x * y)).sum())
                        .collect();
                    cos.sort_by(f64::total_cmp);
                    let mean = cos.iter().sum::<f64>() / cos.len().max(1) as f64;
                    let p1 = cos.get(cos.len() / 100).copied().unwrap_or(f64::NAN);
                    let min = cos.first().copied().unwrap_or(f64::NAN);
                    (mean, p1, min)
                });
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "round": round,
                        "model": embedder.model_id(),
                        "precision": precision.name(),
                        "threads": threads,
                        "cosine_to_fp32": cosine.map(|(mean, p1, min)| serde_json::json!({"mean": mean, "p1": p1, "min": min})),
                        "chunks": n,
                        "tokens": tokens,
                        "padded_tokens": padded,
                        "seconds": elapsed,
                        "cpu_seconds": cpu,
                        "chunks_per_s": n as f64 / elapsed,
                        "tokens_per_s": tokens as f64 / elapsed,
                        "gflop_per_s": flops / elapsed / 1e9,
                    })
                );
            } else {
                println!(
                    "round {round}: {n} chunks ({:.0} chars, {:.0} tokens avg, padding +{:.1}%) in {elapsed:.2}s ({} CPU-s): \
                 {:.1} chunks/s, {:.0} tokens/s, {:.1} GFLOP/s; dimension {}, model {}, precision {precision}, {threads} threads{}",
                    chars as f64 / n.max(1) as f64,
                    tokens as f64 / n.max(1) as f64,
                    (padded as f64 / tokens.max(1) as f64 - 1.0) * 100.0,
                    cpu.map_or("?".into(), |c| format!("{c:.2}")),
                    n as f64 / elapsed,
                    tokens as f64 / elapsed,
                    flops / elapsed / 1e9,
                    embedder.dimension(),
                    embedder.model_id(),
                    cosine.map_or(String::new(), |(mean, p1, min)| format!(
                        "; cosine to fp32 mean {mean:.4}, p1 {p1:.4}, min {min:.4}"
                    )),
                );
            }
        }
    }
    Ok(())
}
