//! # weft-bench
//!
//! Benchmarks that print numbers. See `bench/RESULTS.md` for the latest ones
//! and the commands that produced them.
//!
//! - `chunk-throughput DIR…`: MB/s of the chunkers over a real corpus, next to
//!   tree-sitter parse-only on the same files.
//! - `cargo bench -p weft-bench`: criterion micro-benchmarks over the fixtures.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

/// A file read into memory for a benchmark.
pub struct CorpusFile {
    /// Path relative to the corpus root.
    pub uri: String,
    /// Its text (only UTF-8 files are kept).
    pub text: String,
}

/// Reads every UTF-8 file under `root` (honouring .gitignore), in name order.
pub fn read_corpus(root: &Path) -> Vec<CorpusFile> {
    let mut paths: Vec<PathBuf> = ignore::WalkBuilder::new(root)
        .require_git(false)
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let bytes = std::fs::read(&path).ok()?;
            let text = String::from_utf8(bytes).ok()?;
            let uri = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            Some(CorpusFile { uri, text })
        })
        .collect()
}
