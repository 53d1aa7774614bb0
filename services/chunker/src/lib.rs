//! # weft-chunker
//!
//! The chunker stage of the distributed pipeline (DESIGN §6): workers share
//! one durable consumer on the documents stream, chunk each document with
//! the same chunkers as `weft index`, publish its chunks as one
//! `weft.v1.ChunkBatch` on `weft.chunks.<project>.<document_id>` — split into
//! parts when one message would exceed the server's payload limit — and only
//! then acknowledge the document.
//!
//! A deleted document (no content) becomes a batch marked `deleted`; a
//! document that cannot be chunked (binary, not UTF-8, too large) a batch
//! with no chunks and its reason, so that what was indexed of it goes. A
//! message that is not a valid `weft.v1.Document`, or does not hold together
//! ([`weft_proto::pipeline::check_document`]: uri, project, id, content hash,
//! the subject it came on), goes to the dead-letter stream with the reason.

#![warn(missing_docs)]

mod program;

pub use program::main;

use async_trait::async_trait;
use prost::Message as _;
use weft_chunking::Chunker;
use weft_config::WeftConfig;
use weft_nats::trace::TraceHeaders as _;
use weft_nats::{Delivery, Failure, Handler, Jet, Outcome, WorkerOptions, WorkerStats};
use weft_proto::v1;

/// The durable consumer every chunker worker shares.
pub const DURABLE: &str = "weft-chunkers";

/// Room left in a message for headers and framing.
const PAYLOAD_MARGIN: usize = 4096;

/// Why a chunker could not start.
#[derive(Debug, thiserror::Error)]
pub enum ChunkerError {
    /// A setting cannot work.
    #[error(transparent)]
    Config(#[from] weft_config::InvalidSetting),
    /// NATS failed.
    #[error(transparent)]
    Nats(#[from] weft_nats::NatsError),
}

/// Chunks documents from the documents stream.
pub struct ChunkerHandler {
    chunker: Chunker,
    jet: Jet,
}

impl ChunkerHandler {
    /// A handler publishing through `jet`.
    pub fn new(config: &WeftConfig, jet: Jet) -> Result<Self, ChunkerError> {
        let chunker = Chunker::new(config.chunking.clone())?;
        Ok(Self { chunker, jet })
    }

    /// The batches of one document: its chunks split so that each encoded
    /// batch fits in `max_bytes`.
    fn batches(&self, document: &v1::Document, sequence: u64) -> Vec<v1::ChunkBatch> {
        let base = v1::ChunkBatch {
            project: document.project.clone(),
            document_id: document.document_id.clone(),
            uri: document.uri.clone(),
            content_hash: document.content_hash.clone(),
            version: sequence,
            chunker: self.chunker.fingerprint().to_owned(),
            generation: document.generation,
            part: 1,
            parts: 1,
            ..Default::default()
        };
        let Some(content) = &document.content else {
            return vec![v1::ChunkBatch {
                deleted: true,
                ..base
            }];
        };
        let chunked = match self.chunker.chunk_document(
            &document.project,
            &document.uri,
            &document.media_type,
            content,
        ) {
            Ok(c) => c,
            Err(e) => {
                return vec![v1::ChunkBatch {
                    skipped_reason: e.reason(),
                    ..base
                }];
            }
        };
        for warning in &chunked.warnings {
            tracing::info!(uri = %document.uri, "{warning}");
        }
        let total = chunked.chunks.len() as u32;
        let limit = self
            .jet
            .max_payload()
            .saturating_sub(PAYLOAD_MARGIN)
            .max(1024);
        let mut parts: Vec<v1::ChunkBatch> = Vec::new();
        let mut current = v1::ChunkBatch {
            total_chunks: total,
            ..base.clone()
        };
        let mut size = current.encoded_len();
        for chunk in chunked.chunks {
            let wire: v1::Chunk = chunk.into();
            let chunk_size = wire.encoded_len() + 8;
            if !current.chunks.is_empty() && size + chunk_size > limit {
                parts.push(std::mem::replace(
                    &mut current,
                    v1::ChunkBatch {
                        total_chunks: total,
                        ..base.clone()
                    },
                ));
                size = current.encoded_len();
            }
            size += chunk_size;
            current.chunks.push(wire);
        }
        parts.push(current);
        let count = parts.len() as u32;
        for (i, part) in parts.iter_mut().enumerate() {
            part.part = i as u32 + 1;
            part.parts = count;
        }
        parts
    }

    async fn handle_one(&self, delivery: &Delivery) -> Outcome {
        let document = match v1::Document::decode(delivery.payload.as_ref()) {
            Ok(d) => d,
            Err(e) => {
                return Failure::invalid(format!(
                    "{}: not a weft.v1.Document: {e}",
                    delivery.subject
                ))
                .into();
            }
        };
        if let Err(e) = weft_proto::pipeline::check_document(&document) {
            return Failure::invalid(format!("{}: {e}", delivery.subject)).into();
        }
        let subject = weft_nats::docs_subject(
            document.generation,
            &document.project,
            &document.document_id,
        );
        if let Err(failure) = delivery.check_subject(&subject) {
            return failure.into();
        }
        let batches = self.batches(&document, delivery.stream_sequence);
        let metrics = weft_telemetry::metrics();
        let outcome = if batches[0].deleted {
            "deleted"
        } else if !batches[0].skipped_reason.is_empty() {
            tracing::info!(uri = %document.uri, "skipped: {}", batches[0].skipped_reason);
            "skipped"
        } else {
            "chunked"
        };
        let chunks: usize = batches.iter().map(|b| b.chunks.len()).sum();
        let subject = weft_nats::chunks_subject(
            document.generation,
            &document.project,
            &document.document_id,
        );
        let headers = delivery.trace.headers();
        let mut acks = Vec::new();
        for batch in &batches {
            let payload = batch.encode_to_vec();
            match self
                .jet
                .publish_later(subject.clone(), headers.clone(), payload.into())
                .await
            {
                Ok(ack) => acks.push(ack),
                Err(e) => return Failure::from(e).into(),
            }
        }
        for ack in acks {
            if let Err(e) = ack.await {
                return Failure::from(e).into();
            }
        }
        metrics
            .documents
            .with_label_values(&["chunker", outcome])
            .inc();
        metrics
            .chunks
            .with_label_values(&["chunker", "chunked"])
            .inc_by(chunks as u64);
        tracing::debug!(
            uri = %document.uri,
            trace_id = %delivery.trace.trace_id,
            chunks,
            parts = batches.len(),
            "{outcome}"
        );
        Outcome::Done
    }
}

#[async_trait]
impl Handler for ChunkerHandler {
    async fn handle(&mut self, deliveries: &[Delivery]) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            outcomes.push(self.handle_one(delivery).await);
        }
        outcomes
    }
}

/// Runs a chunker worker on `jet` until `shutdown` completes.
pub async fn run(
    jet: Jet,
    config: &WeftConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<WorkerStats, ChunkerError> {
    let mut handler = ChunkerHandler::new(config, jet.clone())?;
    let options = WorkerOptions {
        stage: "chunker",
        stream: jet.config().docs_stream.clone(),
        durable: DURABLE.into(),
        batch: jet.config().fetch_batch,
        linger: std::time::Duration::from_millis(500),
    };
    Ok(weft_nats::run_worker(&jet, &options, &mut handler, shutdown).await?)
}
