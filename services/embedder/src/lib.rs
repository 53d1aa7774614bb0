//! # weft-embedder
//!
//! The embedder stage of the distributed pipeline (DESIGN §6). Workers share
//! one durable consumer on the chunk-batch stream. For each fetched set of
//! batches (several documents at once) a worker:
//!
//! 1. drops batches older than the version the catalog already has (a
//!    document changed twice ends at its last version);
//! 2. reads the stored chunks of every batch in **one** call and skips the
//!    chunks stored unchanged (same content, hash, embedding format and
//!    place) — unchanged content is never embedded twice;
//! 3. embeds the rest in calls bounded by count (`embedding.batch_size`)
//!    and estimated tokens (`embedder.max_batch_tokens`), across documents;
//! 4. upserts vectors and text, deletes each document's chunks at or beyond
//!    its new `total_chunks` (all of them for deleted or unchunkable
//!    documents), records the documents in the catalog, commits;
//! 5. acknowledges. Any store or model failure hands the whole set back for
//!    another delivery: writes are idempotent (ids are computed), so a
//!    retry or a redelivery after a crash duplicates nothing.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use prost::Message as _;
use weft_config::WeftConfig;
use weft_core::ports::{
    Catalog, DocumentRecord, Embedder, PortError, PortResult, TextIndex, VectorIndex,
};
use weft_core::{Chunk, ChunkId, DocumentId, index_tag};
use weft_nats::{Delivery, Handler, Jet, Outcome, WorkerOptions, WorkerStats};
use weft_proto::v1;

/// The durable consumer every embedder worker shares.
pub const DURABLE: &str = "weft-embedders";

/// Why an embedder could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbedderError {
    /// NATS failed.
    #[error(transparent)]
    Nats(#[from] weft_nats::NatsError),
    /// The data directory could not be opened.
    #[error(transparent)]
    DataDir(#[from] weft_pipeline::DataDirError),
    /// The embedding model or API could not be set up.
    #[error(transparent)]
    Embedder(#[from] weft_pipeline::EmbedderSetupError),
}

/// Where an embedder writes and what it embeds with.
pub struct Sinks {
    /// The vector index.
    pub vectors: Arc<dyn VectorIndex>,
    /// The text index.
    pub text: Arc<dyn TextIndex>,
    /// The catalog shared with the crawler.
    pub catalog: Arc<dyn Catalog>,
    /// The embedding model or API.
    pub embedder: Arc<dyn Embedder>,
}

/// A batch decoded and checked.
struct Batch {
    document_id: DocumentId,
    project: String,
    uri: String,
    content_hash: String,
    version: u64,
    total_chunks: u32,
    deleted: bool,
    /// The fingerprint of the chunker that cut it; empty from a chunker
    /// older than fingerprints.
    chunker: String,
    chunks: Vec<Chunk>,
}

fn decode(delivery: &Delivery) -> Result<Batch, String> {
    let wire = v1::ChunkBatch::decode(delivery.payload.as_ref())
        .map_err(|e| format!("{}: not a weft.v1.ChunkBatch: {e}", delivery.subject))?;
    let document_id = DocumentId::parse(&wire.document_id).ok_or_else(|| {
        format!(
            "{}: weft.v1.ChunkBatch.document_id {:?} is not 16 lowercase hex characters",
            delivery.subject, wire.document_id
        )
    })?;
    let mut chunks = Vec::with_capacity(wire.chunks.len());
    for chunk in wire.chunks {
        let chunk = Chunk::try_from(chunk).map_err(|e| format!("{}: {e}", wire.uri))?;
        if chunk.document_id != document_id || chunk.total_chunks != wire.total_chunks {
            return Err(format!(
                "{}: chunk {} belongs to {} of {} chunks, not to this batch's {} of {}",
                wire.uri,
                chunk.chunk_index,
                chunk.document_id,
                chunk.total_chunks,
                document_id,
                wire.total_chunks
            ));
        }
        chunks.push(chunk);
    }
    Ok(Batch {
        document_id,
        project: wire.project,
        uri: wire.uri,
        content_hash: wire.content_hash,
        version: wire.version,
        total_chunks: wire.total_chunks,
        deleted: wire.deleted,
        chunker: wire.chunker,
        chunks,
    })
}

/// Embeds and writes chunk batches.
pub struct EmbedderHandler {
    /// The embedder's part of the index tag recorded per document.
    embedder_tag: String,
    sinks: Sinks,
    batch_size: usize,
    max_batch_tokens: usize,
    written_since_optimize: bool,
}

impl EmbedderHandler {
    /// A handler writing to `sinks`, batching as `config` says.
    pub fn new(config: &WeftConfig, sinks: Sinks) -> Self {
        Self {
            embedder_tag: weft_pipeline::embedder_tag(&config.embedding, sinks.embedder.model_id()),
            sinks,
            batch_size: config.embedding.batch_size,
            max_batch_tokens: config.embedder.max_batch_tokens,
            written_since_optimize: false,
        }
    }

    /// Embeds `chunks` in calls bounded by count and estimated tokens.
    async fn embed(&self, chunks: &[Chunk]) -> PortResult<Vec<Vec<f32>>> {
        let metrics = weft_telemetry::metrics();
        let mut vectors = Vec::with_capacity(chunks.len());
        let mut start = 0;
        while start < chunks.len() {
            let mut end = start;
            let mut tokens = 0;
            let mut texts = Vec::new();
            while end < chunks.len() && texts.len() < self.batch_size {
                let text = chunks[end].embedding_text();
                let estimate = text.len() / 4 + 1;
                if !texts.is_empty() && tokens + estimate > self.max_batch_tokens {
                    break;
                }
                tokens += estimate;
                texts.push(text);
                end += 1;
            }
            let t = Instant::now();
            let batch = self.sinks.embedder.embed(&texts).await?;
            metrics.observe_embedding(t.elapsed(), texts.len());
            if batch.len() != texts.len() {
                return Err(PortError::new(
                    "embedder",
                    format!("{} vectors for {} texts", batch.len(), texts.len()),
                ));
            }
            vectors.extend(batch);
            start = end;
        }
        Ok(vectors)
    }

    /// Writes the batches; the counts of embedded and unchanged chunks.
    async fn write(&mut self, batches: &[Batch]) -> PortResult<(usize, usize)> {
        let s = &self.sinks;
        let metrics = weft_telemetry::metrics();
        // Stale versions go; of several versions in one fetch, the newest wins.
        let mut newest: HashMap<&DocumentId, u64> = HashMap::new();
        for b in batches {
            let v = newest.entry(&b.document_id).or_insert(0);
            *v = (*v).max(b.version);
        }
        let mut current: Vec<&Batch> = Vec::new();
        for b in batches {
            if newest.get(&b.document_id).is_some_and(|&v| v > b.version) {
                continue;
            }
            let recorded = s.catalog.document(&b.document_id).await?;
            if recorded.is_some_and(|r| r.version > b.version) {
                tracing::info!(uri = %b.uri, version = b.version, "an older version: skipped");
                metrics
                    .documents
                    .with_label_values(&["embedder", "stale"])
                    .inc();
                continue;
            }
            current.push(b);
        }
        // One read of everything stored under these ids.
        let ids: Vec<ChunkId> = current
            .iter()
            .flat_map(|b| b.chunks.iter().map(|c| c.id()))
            .collect();
        let stored: HashMap<ChunkId, Chunk> = if ids.is_empty() {
            HashMap::new()
        } else {
            s.vectors
                .get(&ids)
                .await?
                .into_iter()
                .map(|c| (c.id(), c))
                .collect()
        };
        let changed: Vec<Chunk> = current
            .iter()
            .flat_map(|b| b.chunks.iter())
            .filter(|c| stored.get(&c.id()) != Some(*c))
            .cloned()
            .collect();
        let unchanged = ids.len() - changed.len();
        if !changed.is_empty() {
            let vectors = self.embed(&changed).await?;
            s.vectors.upsert(&changed, &vectors).await?;
            s.text.upsert(&changed).await?;
        }
        let mut records = Vec::new();
        let mut removed = Vec::new();
        for b in &current {
            let keep = if b.deleted { 0 } else { b.total_chunks };
            s.vectors.delete_document_from(&b.document_id, keep).await?;
            s.text.delete_document_from(&b.document_id, keep).await?;
            if b.deleted {
                removed.push(b.document_id.clone());
                metrics
                    .documents
                    .with_label_values(&["embedder", "deleted"])
                    .inc();
            } else {
                records.push(DocumentRecord {
                    document_id: b.document_id.clone(),
                    project: b.project.clone(),
                    uri: b.uri.clone(),
                    content_hash: b.content_hash.clone(),
                    chunk_count: b.total_chunks,
                    embedding: index_tag(&self.embedder_tag, &b.chunker),
                    version: b.version,
                });
                metrics
                    .documents
                    .with_label_values(&["embedder", "indexed"])
                    .inc();
            }
        }
        s.vectors.commit().await?;
        s.text.commit().await?;
        s.catalog.put_documents(&records).await?;
        s.catalog.remove_documents(&removed).await?;
        metrics
            .chunks
            .with_label_values(&["embedder", "embedded"])
            .inc_by(changed.len() as u64);
        metrics
            .chunks
            .with_label_values(&["embedder", "unchanged"])
            .inc_by(unchanged as u64);
        self.written_since_optimize |= !changed.is_empty() || !current.is_empty();
        Ok((changed.len(), unchanged))
    }
}

#[async_trait]
impl Handler for EmbedderHandler {
    async fn handle(&mut self, deliveries: &[Delivery]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; deliveries.len()];
        let mut batches = Vec::new();
        let mut batch_of = Vec::new();
        for (i, delivery) in deliveries.iter().enumerate() {
            match decode(delivery) {
                Ok(b) => {
                    batches.push(b);
                    batch_of.push(i);
                }
                Err(reason) => outcomes[i] = Some(Outcome::Fail(reason)),
            }
        }
        let t = Instant::now();
        let result = self.write(&batches).await;
        let verdict = match result {
            Ok((embedded, unchanged)) => {
                tracing::info!(
                    documents = batches.len(),
                    embedded,
                    unchanged,
                    ms = t.elapsed().as_millis() as u64,
                    "written"
                );
                Outcome::Done
            }
            Err(e) => Outcome::Retry(e.to_string()),
        };
        for i in batch_of {
            outcomes[i] = Some(verdict.clone());
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Outcome::Done))
            .collect()
    }

    async fn idle(&mut self) {
        if std::mem::take(&mut self.written_since_optimize) {
            let t = Instant::now();
            match self.sinks.vectors.optimize().await {
                Ok(()) => tracing::info!(
                    ms = t.elapsed().as_millis() as u64,
                    "queue idle: search structures built"
                ),
                Err(e) => tracing::warn!("optimize: {e}"),
            }
        }
    }
}

/// Runs an embedder worker until `shutdown` completes, writing to the
/// stores `[stores]` configures (embedded ones under `data_dir`) with the configured embedder (the local
/// model of `model_dir`, or an HTTP API) and the catalog in NATS.
pub async fn run(
    config: &WeftConfig,
    data_dir: &std::path::Path,
    model_dir: &std::path::Path,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<WorkerStats, EmbedderError> {
    let jet = Jet::connect(&config.nats).await?;
    let catalog = Arc::new(jet.catalog().await?);
    let model = weft_pipeline::embedder_from_config(&config.embedding, model_dir).await?;
    let stores = weft_pipeline::open_index_stores(
        &config.stores,
        data_dir,
        model.model_id(),
        model.dimension(),
        weft_pipeline::StoreAccess::Write,
    )
    .await?;
    tracing::info!(stores = %stores.description, model = model.model_id(), "embedder writing");
    let sinks = Sinks {
        vectors: stores.vectors,
        text: stores.text,
        catalog,
        embedder: model,
    };
    let mut handler = EmbedderHandler::new(config, sinks);
    let options = WorkerOptions {
        stage: "embedder",
        stream: config.nats.chunks_stream.clone(),
        durable: DURABLE.into(),
        batch: config.nats.fetch_batch,
        linger: std::time::Duration::from_millis(config.embedder.linger_ms),
    };
    let stats = weft_nats::run_worker(&jet, &options, &mut handler, shutdown).await?;
    // What was written is durable already; build the search structures now.
    handler.idle().await;
    Ok(stats)
}
