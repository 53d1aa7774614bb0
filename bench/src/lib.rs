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

/// Stands in for the model when a benchmark measures everything *but*
/// embedding: each text gets a deterministic unit vector from a hash of its
/// bytes (no meaning at all). Only for benchmarks that say "embedding
/// excluded"; never a fallback for the real model.
pub struct HashEmbedder {
    dimension: usize,
}

impl HashEmbedder {
    /// Vectors of `dimension` floats.
    pub fn new(dimension: usize) -> Self {
        Self { dimension }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        // FNV-1a of the text seeds a xorshift generator.
        let mut state = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }) | 1;
        let mut v: Vec<f32> = (0..self.dimension)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        normalize(&mut v);
        v
    }
}

#[async_trait::async_trait]
impl weft_core::ports::Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        "hash-embedder-benchmark-only"
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

/// Peak resident memory of this process so far, in MiB (Linux `VmHWM`).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::EPSILON);
    v.iter_mut().for_each(|x| *x /= norm);
}

/// The `p` quantile (0..=1, nearest rank) of ascending `sorted`; 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0.0)
}

/// An embedder whose documents are embedded by `inner` and whose query
/// vectors come from a candidate weft cannot load yet: a learned linear map
/// read from a file (`eval-sweep --query-adapter`), or vectors a query
/// encoder wrote, keyed by the text weft embeds for a query
/// (`split_camel_case(query)`; `eval-sweep --query-vectors`, written by
/// `tools/train/train_query_encoder.py --write-queries`).
pub struct AdaptedEmbedder {
    inner: std::sync::Arc<dyn weft_core::ports::Embedder>,
    queries: QueryVectors,
}

/// Where an [`AdaptedEmbedder`]'s query vectors come from.
enum QueryVectors {
    /// `inner`'s query vectors through the map.
    Adapter(weft_embed_local::QueryAdapter),
    /// Read from `path`. A query missing from it is an error, never a
    /// fallback to `inner`: one measurement never mixes two encoders.
    Precomputed {
        vectors: std::collections::HashMap<String, Vec<f32>>,
        path: PathBuf,
    },
}

impl AdaptedEmbedder {
    /// Wraps `inner` with the matrix in `path`: little-endian f32,
    /// row-major, the model's dimension squared.
    pub fn load(
        inner: std::sync::Arc<dyn weft_core::ports::Embedder>,
        path: &Path,
    ) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("--query-adapter {}: {e}", path.display()))?;
        let adapter = weft_embed_local::QueryAdapter::from_matrix(
            "--query-adapter",
            "any",
            inner.dimension(),
            &bytes,
        )
        .map_err(|e| anyhow::anyhow!("{e} ({})", path.display()))?;
        Ok(Self {
            inner,
            queries: QueryVectors::Adapter(adapter),
        })
    }

    /// Wraps `inner` with the query vectors in `path` ([`read_query_vectors`]).
    pub fn precomputed(
        inner: std::sync::Arc<dyn weft_core::ports::Embedder>,
        path: &Path,
    ) -> anyhow::Result<Self> {
        let vectors = read_query_vectors(path, inner.dimension())?;
        Ok(Self {
            inner,
            queries: QueryVectors::Precomputed {
                vectors,
                path: path.to_owned(),
            },
        })
    }
}

/// Reads query vectors: one JSON object per line, `{"text": …, "vector":
/// […]}`, each of `dimension` values. Errors name the flag, the file and
/// the line.
pub fn read_query_vectors(
    path: &Path,
    dimension: usize,
) -> anyhow::Result<std::collections::HashMap<String, Vec<f32>>> {
    #[derive(serde::Deserialize)]
    struct Row {
        text: String,
        vector: Vec<f32>,
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--query-vectors {}: {e}", path.display()))?;
    let mut vectors = std::collections::HashMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let row: Row = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("--query-vectors {}:{}: {e}", path.display(), i + 1))?;
        anyhow::ensure!(
            row.vector.len() == dimension,
            "--query-vectors {}:{}: {} values, the model has {dimension} dimensions",
            path.display(),
            i + 1,
            row.vector.len(),
        );
        vectors.insert(row.text, row.vector);
    }
    Ok(vectors)
}

#[async_trait::async_trait]
impl weft_core::ports::Embedder for AdaptedEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String]) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        self.inner.embed(texts).await
    }
    async fn embed_queries(
        &self,
        queries: &[String],
    ) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        match &self.queries {
            QueryVectors::Adapter(adapter) => {
                let vectors = self.inner.embed_queries(queries).await?;
                Ok(vectors.iter().map(|v| adapter.apply(v)).collect())
            }
            QueryVectors::Precomputed { vectors, path } => queries
                .iter()
                .map(|q| {
                    vectors.get(q).cloned().ok_or_else(|| {
                        weft_core::ports::PortError::not_found(
                            format!("--query-vectors {}", path.display()),
                            format!("no vector for the query text {q:?}"),
                        )
                    })
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_vectors_are_read_and_bad_lines_are_refused_by_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.jsonl");
        std::fs::write(
            &path,
            "{\"text\": \"parse config\", \"vector\": [0.6, 0.8]}\n\n",
        )
        .unwrap();
        let vectors = read_query_vectors(&path, 2).unwrap();
        assert_eq!(vectors["parse config"], vec![0.6, 0.8]);

        let e = read_query_vectors(&path, 3).unwrap_err().to_string();
        assert!(
            e.contains("q.jsonl:1: 2 values, the model has 3 dimensions"),
            "{e}"
        );
        std::fs::write(&path, "{\"text\": \"a\", \"vector\": [1.0]}\nnot json\n").unwrap();
        let e = read_query_vectors(&path, 1).unwrap_err().to_string();
        assert!(
            e.starts_with("--query-vectors ") && e.contains("q.jsonl:2: "),
            "{e}"
        );
        let e = read_query_vectors(&dir.path().join("missing.jsonl"), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.jsonl"), "{e}");
    }
}
