//! Dumps what weft retrieves for labelled queries, with the stored vectors,
//! as training material for a learned component (issue 34): for each query
//! its embedding, the union of the vector and text retrievers' top
//! candidates (the hard negatives weft itself retrieves) and every chunk of
//! the target that neither found, each with its stored vector, both
//! retrievers' ranks and scores and whether it is a hit.
//!
//! ```text
//! weft eval QUERIES.jsonl --corpus-dir DIR --data-dir D     # indexes <corpus>-hard
//! train-candidates QUERIES.jsonl --data-dir D --out /tmp/train/cands
//! # writes cands.jsonl (one row per query), cands.queries.f32 and
//! # cands.chunks.f32 (little-endian f32 rows of the model's dimension), and
//! # cands.chunks.jsonl (each chunk row's text as the model embedded it)
//! ```

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use weft_core::retrieval::{ScoredChunk, SearchFilter};
use weft_core::{Chunk, ChunkId, DocumentId, embedding_key, split_camel_case};
use weft_eval::Variant;
use weft_wiring::DataDir;

#[derive(Parser)]
#[command(about = "Dump retrieved candidates and their vectors for training")]
struct Args {
    /// Labelled queries (shared/eval format; `corpus` names the project).
    queries: PathBuf,
    /// The data directory `weft eval` indexed the queries' corpora into.
    #[arg(long)]
    data_dir: PathBuf,
    /// hard or docs: the project `<corpus>-<variant>`.
    #[arg(long, default_value = "hard")]
    variant: Variant,
    /// Candidates taken from each retriever.
    #[arg(long, default_value_t = 50)]
    depth: usize,
    /// Output prefix: PREFIX.jsonl, PREFIX.queries.f32, PREFIX.chunks.f32.
    #[arg(long)]
    out: PathBuf,
    /// Model directory (default: ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
}

/// One candidate of one query, as dumped.
#[derive(Default)]
struct Candidate {
    chunk: Option<Chunk>,
    vector_rank: Option<usize>,
    vector_score: Option<f32>,
    text_rank: Option<usize>,
    text_score: Option<f32>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let queries = weft_eval::load_queries(&args.queries)?;
    let stores = DataDir::new(&args.data_dir).open_existing()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let loaded = weft_config::load(None)?.config;
    let model_dir = args
        .model_dir
        .clone()
        .unwrap_or_else(weft_config::default_model_dir);
    // The model's own query vectors: what an adapter is trained over.
    let options = weft_wiring::local_load_options(&loaded.embedding)
        .query_adapter(weft_embed_local::AdapterChoice::Off);
    let model = weft_embed_local::LocalEmbedder::load_with(&model_dir, &options)?;
    let tag = weft_wiring::embedder_tag(&loaded.embedding, model.model_id());
    let dimension = model.dimension();

    let prefix = args.out.display().to_string();
    let mut rows =
        std::io::BufWriter::new(std::fs::File::create(format!("{prefix}.jsonl")).context("--out")?);
    let mut qfile =
        std::io::BufWriter::new(std::fs::File::create(format!("{prefix}.queries.f32"))?);
    let mut cfile = std::io::BufWriter::new(std::fs::File::create(format!("{prefix}.chunks.f32"))?);
    let mut tfile =
        std::io::BufWriter::new(std::fs::File::create(format!("{prefix}.chunks.jsonl"))?);
    let mut chunk_rows: HashMap<String, usize> = HashMap::new();
    let (mut written, mut missing_target, mut missing_vectors) = (0usize, 0usize, 0usize);
    let started = std::time::Instant::now();

    for (batch_no, batch) in queries.chunks(64).enumerate() {
        let texts: Vec<String> = batch.iter().map(|q| split_camel_case(&q.query)).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let qvectors = model.embed_queries(&refs)?;
        for (query, qv) in batch.iter().zip(qvectors) {
            let project = format!("{}-{}", query.corpus, args.variant.name());
            let filter = SearchFilter {
                projects: vec![project.clone()],
                ..SearchFilter::default()
            };
            let (vhits, thits): (Vec<ScoredChunk>, Vec<ScoredChunk>) = runtime.block_on(async {
                let v = stores.vectors.search(&qv, &filter, args.depth).await?;
                let t = stores
                    .text
                    .search(&query.query, &filter, args.depth)
                    .await?;
                anyhow::Ok((v, t))
            })?;
            let mut cands: Vec<Candidate> = Vec::new();
            let mut at: HashMap<ChunkId, usize> = HashMap::new();
            let mut slot = |chunk: Chunk, cands: &mut Vec<Candidate>| -> usize {
                *at.entry(chunk.id()).or_insert_with(|| {
                    cands.push(Candidate {
                        chunk: Some(chunk),
                        ..Candidate::default()
                    });
                    cands.len() - 1
                })
            };
            for (rank, hit) in vhits.into_iter().enumerate() {
                let i = slot(hit.chunk, &mut cands);
                cands[i].vector_rank = Some(rank);
                cands[i].vector_score = Some(hit.score);
            }
            for (rank, hit) in thits.into_iter().enumerate() {
                let i = slot(hit.chunk, &mut cands);
                cands[i].text_rank = Some(rank);
                cands[i].text_score = Some(hit.score);
            }
            // Every chunk of the target(s) that neither retriever found.
            let targets = query.targets();
            let target_chunks = runtime.block_on(async {
                let mut out = Vec::new();
                for target in &targets {
                    let id = DocumentId::new(&project, &target.path);
                    let Some(record) = stores.catalog.document(&id).await? else {
                        continue;
                    };
                    let ids: Vec<ChunkId> = (0..record.chunk_count)
                        .map(|i| ChunkId::new(&id, i))
                        .collect();
                    out.extend(
                        stores
                            .vectors
                            .get(&ids)
                            .await?
                            .into_iter()
                            .filter(|c| target.overlaps(&c.uri, c.start_line, c.end_line)),
                    );
                }
                anyhow::Ok(out)
            })?;
            if target_chunks.is_empty() {
                missing_target += 1;
                continue;
            }
            for chunk in target_chunks {
                slot(chunk, &mut cands);
            }
            // The stored vectors, by the key they were embedded under.
            let keys: Vec<String> = cands
                .iter()
                .filter_map(|c| c.chunk.as_ref())
                .map(|c| embedding_key(&tag, &c.embedding_text()))
                .collect();
            let vectors = runtime.block_on(stores.vectors.vectors_by_key(&keys))?;
            let mut out = Vec::new();
            for (cand, key) in cands.iter().zip(&keys) {
                let Some(chunk) = cand.chunk.as_ref() else {
                    continue;
                };
                let row = match chunk_rows.get(key) {
                    Some(&row) => row,
                    None => {
                        let Some(v) = vectors.get(key) else {
                            missing_vectors += 1;
                            continue;
                        };
                        for x in v {
                            cfile.write_all(&x.to_le_bytes())?;
                        }
                        // What a trainer of the chunk side embeds again.
                        serde_json::to_writer(
                            &mut tfile,
                            &serde_json::json!({ "text": chunk.embedding_text() }),
                        )?;
                        tfile.write_all(b"\n")?;
                        let row = chunk_rows.len();
                        chunk_rows.insert(key.clone(), row);
                        row
                    }
                };
                let hit = targets
                    .iter()
                    .any(|t| t.overlaps(&chunk.uri, chunk.start_line, chunk.end_line));
                out.push(serde_json::json!({
                    "row": row,
                    "hit": hit,
                    "vrank": cand.vector_rank,
                    "vscore": cand.vector_score,
                    "trank": cand.text_rank,
                    "tscore": cand.text_score,
                    "uri": chunk.uri,
                    "chunk_index": chunk.chunk_index,
                    "total_chunks": chunk.total_chunks,
                    "lines": [chunk.start_line, chunk.end_line],
                    "content_type": chunk.content_type,
                    "language": chunk.language,
                    "section": chunk.section,
                    "node_type": chunk.node_type,
                    "node_name": chunk.node_name,
                    "tokens": weft_core::embedding_tokens(&chunk.content),
                }));
            }
            for x in &qv {
                qfile.write_all(&x.to_le_bytes())?;
            }
            let line = serde_json::json!({
                "qrow": written,
                "id": query.id,
                "corpus": query.corpus,
                "path": query.path,
                "query": query.query,
                "prose": query.is_prose(),
                "candidates": out,
            });
            writeln!(rows, "{line}")?;
            written += 1;
        }
        if batch_no % 10 == 9 {
            eprintln!(
                "train-candidates: {written} queries, {} chunks, {:.0}s",
                chunk_rows.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    rows.flush()?;
    qfile.flush()?;
    cfile.flush()?;
    tfile.flush()?;
    eprintln!(
        "train-candidates: {written} of {} queries written ({missing_target} without an indexed target chunk, {missing_vectors} chunk vectors not found), {} distinct chunks, dimension {dimension}, {:.0}s",
        queries.len(),
        chunk_rows.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
