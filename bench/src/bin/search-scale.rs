//! Query latency at scale, excluding query embedding: builds a data
//! directory of N **synthetic** chunks (clustered random unit vectors, text
//! drawn from a Zipf-distributed vocabulary, documents of 20 chunks), then
//! runs hybrid searches with neighbour expansion through the query pipeline
//! and prints p50/p90/p99 latency, the neighbour-fetch calls per query and
//! peak memory.
//!
//! ```text
//! cargo run --release -p weft-bench --bin search-scale -- --chunks 1000000 --data-dir /tmp/scale-1m [--max-tokens 2000]
//! ```
//!
//! The first run builds the directory (and reports the build); a second run
//! on the same directory only queries, so its peak memory is the query
//! process's. Query vectors come from the same synthetic generator (no
//! model), so the latency excludes query embedding by construction.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use clap::Parser;
use weft_bench::percentile;
use weft_core::ports::{Embedder, PortResult, VectorIndex};
use weft_core::query::{QueryEngine, SearchMode, SearchRequest};
use weft_core::retrieval::{RetrievalConfig, ScoredChunk, SearchFilter};
use weft_core::{Chunk, ChunkId, ContentType, DocumentId, EMBEDDING_FORMAT, content_hash};
use weft_wiring::DataDir;

const DIM: usize = 384;
const CHUNKS_PER_DOC: u32 = 20;
const CLUSTERS: u64 = 2_000;
const VOCABULARY: u64 = 50_000;
const MODEL_ID: &str = "synthetic-clustered-vectors";

#[derive(Parser)]
#[command(about = "Query latency (excluding query embedding) over N synthetic chunks")]
struct Args {
    /// Chunks to build (ignored when the data directory already holds them).
    #[arg(long, default_value_t = 100_000)]
    chunks: u64,
    /// Data directory; built when it does not exist yet.
    #[arg(long)]
    data_dir: PathBuf,
    /// Queries to time (after 20 warm-up queries).
    #[arg(long, default_value_t = 1_000)]
    queries: usize,
    /// hybrid, vector or text.
    #[arg(long, default_value = "hybrid")]
    mode: SearchMode,
    /// Pack each response into this many tokens (as `weft search
    /// --max-tokens` and MCP do); unset: the unpacked response.
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// A Zipf-like draw in 0..n (rank ∝ 1/u²-ish skew).
    fn zipf(&mut self, n: u64) -> u64 {
        let u = self.unit() as f64;
        ((n as f64).powf(u) as u64).saturating_sub(1).min(n - 1)
    }
}

fn centroid(c: u64) -> Vec<f32> {
    let mut rng = Rng(c.wrapping_mul(7919) + 1);
    (0..DIM).map(|_| rng.unit() - 0.5).collect()
}

/// A unit vector near cluster `c`.
fn clustered(c: u64, rng: &mut Rng) -> Vec<f32> {
    let mut v: Vec<f32> = centroid(c)
        .into_iter()
        .map(|x| x + 0.35 * (rng.unit() - 0.5))
        .collect();
    weft_bench::normalize(&mut v);
    v
}

fn word(w: u64) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "do", "fe", "gu", "hi", "ja",
        "wu",
    ];
    let mut w = w + 1;
    let mut out = String::new();
    while w > 0 {
        out.push_str(SYLLABLES[(w % 16) as usize]);
        w /= 16;
    }
    out
}

fn chunk(doc: u64, index: u32, rng: &mut Rng) -> Chunk {
    let uri = format!("pkg{:04}/file{doc}.go", doc % 1000);
    let words: Vec<String> = (0..60).map(|_| word(rng.zipf(VOCABULARY))).collect();
    let content = words
        .chunks(10)
        .map(|line| line.join(" "))
        .collect::<Vec<_>>()
        .join("\n");
    let start_line = index * 6 + 1;
    Chunk {
        document_id: DocumentId::new("scale", &uri),
        chunk_index: index,
        total_chunks: CHUNKS_PER_DOC,
        project: "scale".into(),
        title: format!("file{doc}.go"),
        // A symbol path of vocabulary words, so that query words also hit
        // symbols (the text index weighs those apart).
        section: format!(
            "{}.{}",
            word(rng.zipf(VOCABULARY)),
            word(rng.zipf(VOCABULARY))
        ),
        content_type: ContentType::Code,
        language: "go".into(),
        node_type: "function_declaration".into(),
        node_name: Some(format!("func{index}")),
        start_line,
        end_line: start_line + 5,
        start_byte: u64::from(index) * 400,
        end_byte: u64::from(index) * 400 + content.len() as u64,
        content_hash: content_hash(&content),
        content,
        uri,
        is_index_doc: false,
        embedding_format: EMBEDDING_FORMAT.into(),
        overlap_bytes: 0,
        outline: None,
    }
}

/// Query vectors from the synthetic generator: the query text picks a cluster.
struct SyntheticQueryEmbedder;

#[async_trait]
impl Embedder for SyntheticQueryEmbedder {
    fn model_id(&self) -> &str {
        MODEL_ID
    }
    fn dimension(&self) -> usize {
        DIM
    }
    async fn embed(&self, texts: &[String]) -> PortResult<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let seed = t
                    .bytes()
                    .fold(17u64, |h, b| h.wrapping_mul(31) + u64::from(b));
                let mut rng = Rng(seed);
                clustered(seed % CLUSTERS, &mut rng)
            })
            .collect())
    }
}

/// The keys of synthetic chunks' vectors (made by no model).
fn keys_of(chunks: &[Chunk]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| weft_core::embedding_key("search-scale", &c.content))
        .collect()
}

/// Counts the calls a search makes to the vector index.
struct Counting {
    inner: Arc<dyn VectorIndex>,
    gets: AtomicUsize,
}

#[async_trait]
impl VectorIndex for Counting {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn upsert(
        &self,
        chunks: &[Chunk],
        vectors: &[Vec<f32>],
        keys: &[String],
    ) -> PortResult<()> {
        self.inner.upsert(chunks, vectors, keys).await
    }
    async fn delete_document_from(&self, document: &DocumentId, from: u32) -> PortResult<()> {
        self.inner.delete_document_from(document, from).await
    }
    async fn delete_project(&self, project: &str) -> PortResult<()> {
        self.inner.delete_project(project).await
    }
    async fn search(
        &self,
        vector: &[f32],
        filter: &SearchFilter,
        limit: usize,
    ) -> PortResult<Vec<ScoredChunk>> {
        self.inner.search(vector, filter, limit).await
    }
    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(ids).await
    }
    async fn vectors_by_key(
        &self,
        keys: &[String],
    ) -> PortResult<std::collections::HashMap<String, Vec<f32>>> {
        self.inner.vectors_by_key(keys).await
    }
    async fn count(&self) -> PortResult<u64> {
        self.inner.count().await
    }
    async fn commit(&self) -> PortResult<()> {
        self.inner.commit().await
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new()?;
    let data_dir = DataDir::new(&args.data_dir);
    let existed = data_dir.meta()?.is_some();
    let opening = Instant::now();
    let stores = data_dir.open_for(MODEL_ID, DIM)?;
    let open_s = opening.elapsed().as_secs_f64();
    let mut build = serde_json::Value::Null;
    if !existed {
        let start = Instant::now();
        let mut rng = Rng(42);
        let docs = args.chunks.div_ceil(u64::from(CHUNKS_PER_DOC));
        let mut batch: Vec<Chunk> = Vec::new();
        let mut vectors: Vec<Vec<f32>> = Vec::new();
        let mut written = 0u64;
        runtime.block_on(async {
            for doc in 0..docs {
                // A document's chunks share a cluster, as a file's do.
                let cluster = rng.next() % CLUSTERS;
                for index in 0..CHUNKS_PER_DOC {
                    if written >= args.chunks {
                        break;
                    }
                    batch.push(chunk(doc, index, &mut rng));
                    vectors.push(clustered(cluster, &mut rng));
                    written += 1;
                }
                if batch.len() >= 2_000 {
                    stores
                        .vectors
                        .upsert(&batch, &vectors, &keys_of(&batch))
                        .await?;
                    stores.text.upsert(&batch).await?;
                    batch.clear();
                    vectors.clear();
                    if written % 100_000 < 2_000 {
                        stores.vectors.commit().await?;
                        stores.text.commit().await?;
                        eprintln!(
                            "{written} chunks written, {:.0}s",
                            start.elapsed().as_secs_f64()
                        );
                    }
                }
            }
            stores
                .vectors
                .upsert(&batch, &vectors, &keys_of(&batch))
                .await?;
            stores.text.upsert(&batch).await?;
            stores.vectors.commit().await?;
            stores.text.commit().await?;
            let written_s = start.elapsed().as_secs_f64();
            eprintln!("{written} chunks written in {written_s:.0}s; building the HNSW index");
            stores.vectors.optimize().await?;
            build = serde_json::json!({
                "chunks": written,
                "write_s": written_s,
                "total_s": start.elapsed().as_secs_f64(),
                "peak_rss_mib": weft_bench::peak_rss_mib(),
            });
            anyhow::Ok(())
        })?;
    }
    let counting = Arc::new(Counting {
        inner: stores.vectors.clone(),
        gets: AtomicUsize::new(0),
    });
    let stored = runtime.block_on(counting.count())?;
    let engine = QueryEngine::new(
        counting.clone(),
        stores.text.clone(),
        Some(Arc::new(SyntheticQueryEmbedder)),
        None,
        RetrievalConfig::default(),
    );
    let mut rng = Rng(7);
    let query = |rng: &mut Rng| {
        (0..4)
            .map(|_| word(rng.zipf(VOCABULARY / 10)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let filter = SearchFilter {
        projects: vec!["scale".into()],
        ..SearchFilter::default()
    };
    let mut latencies = Vec::new();
    // Where the time goes: both searches (concurrent), the neighbour fetch,
    // and the rest (fusion, planning, assembly).
    let (mut searches, mut fetches, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    let (mut max_gets, mut hits) = (0usize, 0usize);
    for i in 0..args.queries + 20 {
        let before = counting.gets.load(Ordering::Relaxed);
        let response = runtime.block_on(engine.search(&SearchRequest {
            query: query(&mut rng),
            filter: filter.clone(),
            limit: 10,
            mode: args.mode,
            expand: true,
            max_tokens: args.max_tokens,
            ..Default::default()
        }))?;
        let gets = counting.gets.load(Ordering::Relaxed) - before;
        max_gets = max_gets.max(gets);
        if i >= 20 {
            let t = &response.timings;
            latencies.push(t.total_ms - t.embed_ms);
            searches.push(t.search_ms);
            fetches.push(t.fetch_ms);
            rest.push(t.total_ms - t.embed_ms - t.search_ms - t.fetch_ms);
            hits += response
                .results
                .iter()
                .flat_map(|d| d.spans.iter())
                .flat_map(|s| s.chunks.iter())
                .filter(|c| c.matched)
                .count();
        }
    }
    for samples in [&mut latencies, &mut searches, &mut fetches, &mut rest] {
        samples.sort_by(f64::total_cmp);
    }
    let stage = |samples: &[f64]| {
        serde_json::json!({
            "p50": percentile(samples, 0.5),
            "p99": percentile(samples, 0.99),
        })
    };
    let out = serde_json::json!({
        "chunks": stored,
        "synthetic": true,
        "mode": args.mode,
        "max_tokens": args.max_tokens,
        "open_s": open_s,
        "queries": latencies.len(),
        "build": build,
        "latency_ms_excluding_embedding": {
            "p50": percentile(&latencies, 0.5),
            "p90": percentile(&latencies, 0.9),
            "p99": percentile(&latencies, 0.99),
            "max": percentile(&latencies, 1.0),
        },
        "stages_ms": {
            "search": stage(&searches),
            "neighbour_fetch": stage(&fetches),
            "rest": stage(&rest),
        },
        "mean_hits": hits as f64 / latencies.len().max(1) as f64,
        "neighbour_fetch_calls_per_query_max": max_gets,
        "peak_rss_mib": weft_bench::peak_rss_mib(),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if !build.is_null() {
            println!(
                "built {} synthetic chunks in {:.0} s (writes {:.0} s, then HNSW), peak RSS {:.0} MiB",
                build["chunks"],
                build["total_s"].as_f64().unwrap_or(0.0),
                build["write_s"].as_f64().unwrap_or(0.0),
                build["peak_rss_mib"].as_f64().unwrap_or(0.0)
            );
        }
        println!(
            "opened the data directory in {open_s:.2} s{}",
            args.max_tokens.map_or(String::new(), |n| format!(
                "; responses packed into {n} tokens"
            ))
        );
        println!(
            "{stored} chunks, {} {:?} queries with expansion, excluding query embedding: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms; {:.1} hits per query; neighbour fetch calls per query: at most {max_gets}; peak RSS {:.0} MiB",
            latencies.len(),
            args.mode,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.9),
            percentile(&latencies, 0.99),
            hits as f64 / latencies.len().max(1) as f64,
            weft_bench::peak_rss_mib().unwrap_or(0.0)
        );
        println!(
            "stages p50/p99: search {:.2}/{:.2} ms, neighbour fetch {:.2}/{:.2} ms, the rest {:.2}/{:.2} ms",
            percentile(&searches, 0.5),
            percentile(&searches, 0.99),
            percentile(&fetches, 0.5),
            percentile(&fetches, 0.99),
            percentile(&rest, 0.5),
            percentile(&rest, 0.99),
        );
    }
    Ok(())
}
