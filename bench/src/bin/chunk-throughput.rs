//! Chunking throughput over real corpora, next to tree-sitter parse-only.
//!
//! ```text
//! cargo run --release -p weft-bench --bin chunk-throughput -- DIR… [--rounds N] [--json]
//! ```
//!
//! For each language it reports MB/s of parsing alone (the same thread-local
//! parsers the chunker uses) and of the whole chunker (parse, split, and
//! assembling chunks with their hashes), and their ratio. Each figure is the
//! best of `--rounds` passes over all files, after one warm-up pass.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Parser;
use weft_bench::{CorpusFile, read_corpus};
use weft_chunking::{Chunker, ChunkingConfig, Strategy};

#[derive(Parser)]
#[command(about = "Chunking MB/s over real corpora, next to tree-sitter parse-only")]
struct Args {
    /// Corpus directories (e.g. guava and effect from shared/eval/tools/prepare.sh).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Timed passes per measurement; the best is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Row {
    kind: String,
    files: usize,
    megabytes: f64,
    chunks: usize,
    parse_mb_per_s: Option<f64>,
    chunk_mb_per_s: f64,
    chunk_to_parse_ratio: Option<f64>,
}

fn best_of(rounds: usize, mut pass: impl FnMut()) -> Duration {
    pass(); // warm-up: parsers built, files in cache
    (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            pass();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let chunker = Chunker::new(ChunkingConfig::default())?;
    let mut groups: BTreeMap<String, Vec<CorpusFile>> = BTreeMap::new();
    for dir in &args.dirs {
        if !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
        for file in read_corpus(dir) {
            let kind = chunker.detect(&file.uri);
            let key = match kind.strategy {
                Strategy::Code(language) => format!("{language:?}").to_lowercase(),
                Strategy::Markdown => "markdown".into(),
                _ => continue,
            };
            groups.entry(key).or_default().push(file);
        }
    }
    let mut rows = Vec::new();
    for (key, files) in &groups {
        let bytes: usize = files.iter().map(|f| f.text.len()).sum();
        let megabytes = bytes as f64 / 1e6;
        let mut chunks = 0;
        let chunk_time = best_of(args.rounds, || {
            chunks = files
                .iter()
                .map(|f| chunker.chunk_text("bench", &f.uri, &f.text).chunks.len())
                .sum();
        });
        let parse_time = match chunker.detect(&files[0].uri).strategy {
            Strategy::Code(language) => Some(best_of(args.rounds, || {
                for f in files {
                    std::hint::black_box(weft_chunking::parse(language, &f.text));
                }
            })),
            _ => None,
        };
        let chunk_rate = megabytes / chunk_time.as_secs_f64();
        let parse_rate = parse_time.map(|t| megabytes / t.as_secs_f64());
        rows.push(Row {
            kind: key.clone(),
            files: files.len(),
            megabytes,
            chunks,
            parse_mb_per_s: parse_rate,
            chunk_mb_per_s: chunk_rate,
            chunk_to_parse_ratio: parse_rate.map(|p| chunk_rate / p),
        });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<12} {:>6} {:>8} {:>8} {:>12} {:>12} {:>8}",
        "kind", "files", "MB", "chunks", "parse MB/s", "chunk MB/s", "ratio"
    );
    for r in &rows {
        let opt = |v: Option<f64>, p: usize| v.map_or("-".to_owned(), |v| format!("{v:.p$}"));
        println!(
            "{:<12} {:>6} {:>8.2} {:>8} {:>12} {:>12.1} {:>8}",
            r.kind,
            r.files,
            r.megabytes,
            r.chunks,
            opt(r.parse_mb_per_s, 1),
            r.chunk_mb_per_s,
            opt(r.chunk_to_parse_ratio, 2)
        );
    }
    Ok(())
}
