//! # weft-embedder
//!
//! The embedder stage of the distributed pipeline (DESIGN §6). Workers share
//! one durable consumer on the chunk-batch stream. Each fetched set of
//! batches (several documents at once) is decoded into
//! [`DocumentUpdate`]s and handed to the shared [`IndexWriter`] of
//! `weft-index` — the same write step `weft index` uses: stale versions
//! dropped, unchanged chunks not embedded again, the rest embedded in calls
//! bounded by count and tokens, both indexes written, surplus chunks
//! deleted, the catalog recorded after the indexes are committed. Then the
//! messages are acknowledged. A failure keeps its kind ([`Failure`]): a
//! batch that does not decode, or input the model or a store refuses as
//! invalid, is dead-lettered at once with the reason; any other store or
//! model failure (unavailable, rate-limited) hands the whole set back for
//! another delivery, with backoff, until `max_deliver`: ids are computed,
//! so a retry or a redelivery after a crash duplicates nothing.
//!
//! Each batch names the index generation it is written into (DESIGN §6):
//! the live one, or the one a rebuild builds beside it. The worker opens a
//! generation's stores (its Qdrant collection and Meilisearch index, or its
//! directory; its catalog bucket) on its first batch, records its model in
//! the generations record — a generation never holds two models' vectors —
//! and, while writing a generation that is not live, reuses vectors the
//! live one stores for the same texts.

#![warn(missing_docs)]

mod program;

pub use program::main;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use prost::Message as _;
use weft_config::Locations;
use weft_config::WeftConfig;
use weft_core::ErrorKind;
use weft_core::generations::{GenerationState, Generations};
use weft_core::ports::{Embedder, GenerationRegistry};
use weft_index::{DocumentUpdate, IndexWriter, UpdateContent};
use weft_nats::{Delivery, Failure, Handler, Jet, Outcome, WorkerOptions, WorkerStats};
use weft_proto::v1;
use weft_wiring::{self as wiring, Load};
use weft_wiring::{StoreAccess, Stores};

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
    Wiring(#[from] weft_wiring::WiringError),
}

/// Decodes and checks one chunk batch
/// ([`weft_proto::pipeline::check_chunk_batch`], and the subject it came
/// on): the generation it is written into, and the update. A batch that
/// does not is [`ErrorKind::Invalid`].
fn decode(delivery: &Delivery) -> Result<(u32, DocumentUpdate), Failure> {
    let wire = v1::ChunkBatch::decode(delivery.payload.as_ref()).map_err(|e| {
        Failure::invalid(format!(
            "{}: not a weft.v1.ChunkBatch: {e}",
            delivery.subject
        ))
    })?;
    let (document_id, chunks) = weft_proto::pipeline::check_chunk_batch(&wire)
        .map_err(|e| Failure::invalid(format!("{}: {e}", delivery.subject)))?;
    delivery.check_subject(&weft_nats::chunks_subject(
        wire.generation,
        &wire.project,
        &wire.document_id,
    ))?;
    let update = DocumentUpdate {
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
    };
    Ok((wire.generation, update))
}

/// One generation's stores and their writer.
struct Target {
    writer: IndexWriter,
    stores: Stores,
    written_since_optimize: bool,
    /// The generation whose vectors the writer reuses, when it is another
    /// target of this worker (its stores are then shared).
    reuses: Option<u32>,
    /// Embedded stores: keeps the generation's directory from being
    /// removed while this worker has it open.
    _lease: Option<weft_wiring::ReadLease>,
}

/// Embeds and writes chunk batches through an [`IndexWriter`] per index
/// generation.
pub struct EmbedderHandler {
    config: WeftConfig,
    locations: Locations,
    jet: Jet,
    registry: Arc<dyn GenerationRegistry>,
    embedder: Arc<dyn Embedder>,
    tag: String,
    targets: HashMap<u32, Target>,
    last_release: Instant,
}

/// Where a batch goes, once its generation is known.
enum Destination {
    /// Written into this generation's stores.
    Write(u32),
    /// The generation is retired, aborted or unknown: nothing to write
    /// (a later incremental crawl catches up with the live one).
    Drop(String),
}

impl EmbedderHandler {
    /// A handler writing into the generations `registry` records, with
    /// `embedder`, batching as `config` says; stores as `[stores]` and
    /// `locations` say, catalogs in NATS through `jet`.
    pub fn new(
        config: &WeftConfig,
        locations: &Locations,
        jet: Jet,
        registry: Arc<dyn GenerationRegistry>,
        embedder: Arc<dyn Embedder>,
    ) -> Self {
        let tag = weft_wiring::embedder_tag(&config.embedding, embedder.model_id());
        Self {
            config: config.clone(),
            locations: locations.clone(),
            jet,
            registry,
            embedder,
            tag,
            targets: HashMap::new(),
            last_release: Instant::now(),
        }
    }

    /// Closes the stores of generations no longer written (retired,
    /// aborted, removed), so they can be removed.
    async fn release_finished(&mut self) {
        self.last_release = Instant::now();
        if self.targets.is_empty() {
            return;
        }
        if let Ok(record) = self.registry.load().await {
            let finished: Vec<u32> = self
                .targets
                .keys()
                .copied()
                .filter(|&n| {
                    !matches!(
                        record.get(n).map(|g| g.state),
                        Some(GenerationState::Live | GenerationState::Building)
                    )
                })
                .collect();
            // No writer keeps a finished generation's stores open either.
            for target in self.targets.values_mut() {
                if target.reuses.is_some_and(|r| finished.contains(&r)) {
                    target.writer.stop_reusing();
                    target.reuses = None;
                }
            }
            for n in finished {
                self.targets.remove(&n);
                tracing::info!(
                    generation = n,
                    "closed the stores of a finished index generation"
                );
            }
        }
    }

    /// Where batches of `generation` go, per the record.
    fn destination(record: &Generations, generation: u32) -> Destination {
        match record.get(generation).map(|g| g.state) {
            Some(GenerationState::Live | GenerationState::Building) => {
                Destination::Write(generation)
            }
            Some(state) => Destination::Drop(format!("index generation {generation} is {state}")),
            None => Destination::Drop(format!("there is no index generation {generation}")),
        }
    }

    /// Opens generation `n`'s stores and writer, recording the model.
    async fn open_target(&mut self, n: u32, record: &Generations) -> Result<(), Failure> {
        if self.targets.contains_key(&n) {
            return Ok(());
        }
        let (model, dimension) = (
            self.embedder.model_id().to_owned(),
            self.embedder.dimension(),
        );
        weft_index::generations::record_model(&*self.registry, n, &model, dimension)
            .await
            .map_err(|e| Failure::new(e.kind(), e.to_string()))?;
        let catalog = Arc::new(self.jet.catalog_of(n).await?);
        let generation = weft_wiring::DataDir::new(&self.locations.data_dir).generation(n);
        let indexes = weft_wiring::open_index_stores(
            &self.config.stores,
            &generation,
            &model,
            dimension,
            StoreAccess::Write,
        )
        .await
        .map_err(|e| Failure::new(e.kind(), e.to_string()))?;
        tracing::info!(generation = n, stores = %indexes.description, "writing index generation");
        let lease = if self.config.stores.uses_data_dir() {
            Some(
                generation
                    .lease()
                    .map_err(|e| Failure::new(e.kind(), e.to_string()))?,
            )
        } else {
            None
        };
        let stores = Stores::new(indexes, catalog);
        let mut writer = IndexWriter::new(
            stores.clone(),
            self.embedder.clone(),
            self.tag.clone(),
            weft_wiring::embed_batching(&self.config),
        );
        // A generation being built reuses the live one's vectors: open
        // already in this worker, or on servers that serve many clients.
        let mut reuses = None;
        if let Some(live) = record.live_number().filter(|&l| l != n) {
            if let Some(open) = self.targets.get(&live) {
                writer = writer.reusing(open.stores.vectors.clone());
                reuses = Some(live);
            } else if !self.config.stores.uses_data_dir()
                && let Ok(indexes) = weft_wiring::open_index_stores(
                    &self.config.stores,
                    &weft_wiring::DataDir::new(&self.locations.data_dir).generation(live),
                    &model,
                    dimension,
                    StoreAccess::Read,
                )
                .await
            {
                writer = writer.reusing(indexes.vectors);
            }
        }
        self.targets.insert(
            n,
            Target {
                writer,
                stores,
                written_since_optimize: false,
                reuses,
                _lease: lease,
            },
        );
        Ok(())
    }

    async fn write(&mut self, generation: u32, updates: &[DocumentUpdate]) -> Outcome {
        let Some(target) = self.targets.get_mut(&generation) else {
            return Failure::new(
                ErrorKind::Internal,
                format!("index generation {generation} is not open"),
            )
            .into();
        };
        let t = Instant::now();
        let written = match target.writer.write(updates).await {
            Ok(stats) => target.writer.checkpoint().await.map(|()| stats),
            Err(e) => Err(e),
        };
        match written {
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
                target.written_since_optimize |=
                    stats.documents_written + stats.documents_deleted > 0;
                tracing::info!(
                    generation,
                    documents = updates.len(),
                    embedded = stats.chunks_embedded,
                    stored_vectors = stats.vectors_reused,
                    unchanged = stats.chunks_reused,
                    ms = t.elapsed().as_millis() as u64,
                    "written"
                );
                Outcome::Done
            }
            // The kind decides: a text the model refuses is dead-lettered,
            // a store or model that is down retried.
            Err(e) => Failure::from(e).into(),
        }
    }
}

#[async_trait]
impl Handler for EmbedderHandler {
    async fn handle(&mut self, deliveries: &[Delivery]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; deliveries.len()];
        // Updates by generation, in delivery order within each.
        let mut groups: BTreeMap<u32, (Vec<DocumentUpdate>, Vec<usize>)> = BTreeMap::new();
        for (i, delivery) in deliveries.iter().enumerate() {
            match decode(delivery) {
                Ok((generation, update)) => {
                    let group = groups.entry(generation).or_default();
                    group.0.push(update);
                    group.1.push(i);
                }
                Err(failure) => outcomes[i] = Some(failure.into()),
            }
        }
        if !groups.is_empty() {
            let record = match self.registry.load().await {
                Ok(record) => Some(record),
                Err(e) => {
                    let failure = Failure::from(e);
                    for (_, indices) in groups.values() {
                        for &i in indices {
                            outcomes[i] = Some(failure.clone().into());
                        }
                    }
                    None
                }
            };
            if let Some(record) = record {
                for (generation, (updates, indices)) in groups {
                    let verdict = match Self::destination(&record, generation) {
                        Destination::Drop(why) => {
                            tracing::info!(
                                documents = updates.len(),
                                "{why}: its batches are not written"
                            );
                            Outcome::Done
                        }
                        Destination::Write(n) => match self.open_target(n, &record).await {
                            Ok(()) => self.write(n, &updates).await,
                            Err(failure) => {
                                failure.context(format_args!("index generation {n}")).into()
                            }
                        },
                    };
                    for i in indices {
                        outcomes[i] = Some(verdict.clone());
                    }
                }
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Outcome::Done))
            .collect()
    }

    async fn idle(&mut self) {
        for (generation, target) in &mut self.targets {
            if std::mem::take(&mut target.written_since_optimize) {
                let t = Instant::now();
                match target.stores.vectors.optimize().await {
                    Ok(()) => tracing::info!(
                        generation,
                        ms = t.elapsed().as_millis() as u64,
                        "queue idle: search structures built"
                    ),
                    Err(e) => tracing::warn!(generation, "optimize: {e}"),
                }
            }
        }
        // Let go of generations no longer written (retired, aborted).
        self.release_finished().await;
    }

    async fn tick(&mut self) {
        if self.last_release.elapsed() >= std::time::Duration::from_secs(2) {
            self.release_finished().await;
        }
    }
}

/// Runs an embedder worker on `jet` until `shutdown` completes, writing to
/// the stores `[stores]` configures (embedded ones in the data directory of
/// `locations`) of the index generation each batch names, with the
/// configured embedder and the catalogs in NATS.
pub async fn run(
    jet: Jet,
    config: &WeftConfig,
    locations: &Locations,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<WorkerStats, EmbedderError> {
    let registry: Arc<dyn GenerationRegistry> = Arc::new(jet.registry().await?);
    let embedder = wiring::embedder(config, locations, Load::Now).await?;
    tracing::info!(model = embedder.model_id(), "embedder writing");
    let mut handler = EmbedderHandler::new(config, locations, jet.clone(), registry, embedder);
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
