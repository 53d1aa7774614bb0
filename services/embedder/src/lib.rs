//! # weft-embedder
//!
//! The embedder stage of the distributed pipeline (DESIGN §6). Workers share
//! one durable consumer on the chunk-batch stream. Each fetched set of
//! batches (several documents at once) is decoded into
//! [`DocumentUpdate`]s and handed to the shared [`IndexWriter`] of
//! `weft-pipeline` — the same write step `weft index` uses: stale versions
//! dropped, unchanged chunks not embedded again, the rest embedded in calls
//! bounded by count and tokens, both indexes written, surplus chunks
//! deleted, the catalog recorded after the indexes are committed. Then the
//! messages are acknowledged. Any store or model failure hands the whole
//! set back for another delivery: ids are computed, so a retry or a
//! redelivery after a crash duplicates nothing.

#![warn(missing_docs)]

use std::time::Instant;

use async_trait::async_trait;
use prost::Message as _;
use weft_config::WeftConfig;
use weft_core::ports::Embedder;
use weft_nats::{Delivery, Handler, Jet, Outcome, WorkerOptions, WorkerStats};
use weft_pipeline::wiring::{self, Load, Locations};
use weft_pipeline::{DocumentUpdate, IndexWriter, Stores, UpdateContent};
use weft_proto::v1;

/// The durable consumer every embedder worker shares.
pub const DURABLE: &str = "weft-embedders";

/// Why an embedder could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbedderError {
    /// NATS failed.
    #[error(transparent)]
    Nats(#[from] weft_nats::NatsError),
    /// The stores or the embedding model could not be set up.
    #[error(transparent)]
    Wiring(#[from] weft_pipeline::WiringError),
}

/// Decodes and checks one chunk batch
/// ([`weft_proto::pipeline::check_chunk_batch`], and the subject it came on).
fn decode(delivery: &Delivery) -> Result<DocumentUpdate, String> {
    let wire = v1::ChunkBatch::decode(delivery.payload.as_ref())
        .map_err(|e| format!("{}: not a weft.v1.ChunkBatch: {e}", delivery.subject))?;
    let (document_id, chunks) = weft_proto::pipeline::check_chunk_batch(&wire)
        .map_err(|e| format!("{}: {e}", delivery.subject))?;
    delivery.check_subject(&weft_nats::chunks_subject(&wire.project, &wire.document_id))?;
    Ok(DocumentUpdate {
        document_id,
        project: wire.project,
        uri: wire.uri,
        content_hash: wire.content_hash,
        version: wire.version,
        chunker: wire.chunker,
        content: if wire.deleted {
            UpdateContent::Deleted
        } else {
            UpdateContent::Chunks {
                total: wire.total_chunks,
                chunks,
            }
        },
    })
}

/// Embeds and writes chunk batches through an [`IndexWriter`].
pub struct EmbedderHandler {
    writer: IndexWriter,
    stores: Stores,
    written_since_optimize: bool,
}

impl EmbedderHandler {
    /// A handler writing to `stores` with `embedder`, batching as `config` says.
    pub fn new(
        config: &WeftConfig,
        stores: Stores,
        embedder: std::sync::Arc<dyn Embedder>,
    ) -> Self {
        let tag = weft_pipeline::embedder_tag(&config.embedding, embedder.model_id());
        Self {
            writer: IndexWriter::new(
                stores.clone(),
                embedder,
                tag,
                weft_pipeline::embed_batching(config),
            ),
            stores,
            written_since_optimize: false,
        }
    }
}

#[async_trait]
impl Handler for EmbedderHandler {
    async fn handle(&mut self, deliveries: &[Delivery]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; deliveries.len()];
        let mut updates = Vec::new();
        let mut update_of = Vec::new();
        for (i, delivery) in deliveries.iter().enumerate() {
            match decode(delivery) {
                Ok(u) => {
                    updates.push(u);
                    update_of.push(i);
                }
                Err(reason) => outcomes[i] = Some(Outcome::Fail(reason)),
            }
        }
        let t = Instant::now();
        let written = match self.writer.write(&updates).await {
            Ok(stats) => self.writer.checkpoint().await.map(|()| stats),
            Err(e) => Err(e),
        };
        let verdict = match written {
            Ok(stats) => {
                let metrics = weft_telemetry::metrics();
                if stats.embedding_calls > 0 {
                    metrics.observe_embedding(stats.embedding_time, stats.chunks_embedded);
                }
                for (outcome, n) in [
                    ("indexed", stats.documents_written),
                    ("deleted", stats.documents_deleted),
                    ("stale", stats.documents_stale),
                ] {
                    metrics
                        .documents
                        .with_label_values(&["embedder", outcome])
                        .inc_by(n as u64);
                }
                for (outcome, n) in [
                    ("embedded", stats.chunks_embedded),
                    ("stored_vector", stats.vectors_reused),
                    ("unchanged", stats.chunks_reused),
                ] {
                    metrics
                        .chunks
                        .with_label_values(&["embedder", outcome])
                        .inc_by(n as u64);
                }
                self.written_since_optimize |=
                    stats.documents_written + stats.documents_deleted > 0;
                tracing::info!(
                    documents = updates.len(),
                    embedded = stats.chunks_embedded,
                    stored_vectors = stats.vectors_reused,
                    unchanged = stats.chunks_reused,
                    ms = t.elapsed().as_millis() as u64,
                    "written"
                );
                Outcome::Done
            }
            Err(e) => Outcome::Retry(e.to_string()),
        };
        for i in update_of {
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
            match self.stores.vectors.optimize().await {
                Ok(()) => tracing::info!(
                    ms = t.elapsed().as_millis() as u64,
                    "queue idle: search structures built"
                ),
                Err(e) => tracing::warn!("optimize: {e}"),
            }
        }
    }
}

/// Runs an embedder worker on `jet` until `shutdown` completes, writing to
/// the stores `[stores]` configures (embedded ones in the data directory of
/// `locations`) with the configured embedder and the catalog in NATS.
pub async fn run(
    jet: Jet,
    config: &WeftConfig,
    locations: &Locations,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<WorkerStats, EmbedderError> {
    let catalog = std::sync::Arc::new(jet.catalog().await?);
    let (stores, embedder, description) =
        wiring::open_for_writing(config, locations, catalog, Load::Now).await?;
    tracing::info!(stores = %description, model = embedder.model_id(), "embedder writing");
    let mut handler = EmbedderHandler::new(config, stores, embedder);
    let options = WorkerOptions {
        stage: "embedder",
        stream: jet.config().chunks_stream.clone(),
        durable: DURABLE.into(),
        batch: jet.config().fetch_batch,
        linger: std::time::Duration::from_millis(config.embedder.linger_ms),
    };
    let stats = weft_nats::run_worker(&jet, &options, &mut handler, shutdown).await?;
    // What was written is durable already; build the search structures now.
    handler.idle().await;
    Ok(stats)
}
