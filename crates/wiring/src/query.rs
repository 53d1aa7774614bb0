//! The query side: the engine over the stores of one generation
//! ([`QueryStack`], [`open_query`]), and [`LiveQuery`], which follows the
//! live generation so that every query reads exactly one.

use std::sync::Arc;

use weft_config::{Locations, WeftConfig};
use weft_core::ports::{Catalog, Embedder, TextIndex, VectorIndex};
use weft_core::query::QueryEngine;

use crate::build::{WiringError, mismatch, reranker_from_config};
use crate::data_dir::{DataDir, DataDirError};
use crate::embedding::embedder_from_config;
use crate::stores::{IndexStores, StoreAccess, open_index_stores};
use weft_embed_local::Purpose;

/// Whether a query needs the embedding model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryEmbedder {
    /// Hybrid and vector searches: the model embeds queries.
    Needed,
    /// Text-only searches: no model is read.
    NotNeeded,
}

/// What answers queries: the engine, and the indexes it reads.
#[derive(Clone)]
pub struct QueryStack {
    /// The engine.
    pub engine: Arc<QueryEngine>,
    /// The vector index (whole chunks by id, for `GetChunks`).
    pub vectors: Arc<dyn VectorIndex>,
    /// The text index.
    pub text: Arc<dyn TextIndex>,
    /// The model the index's vectors were made with.
    pub model: String,
    /// Its dimension.
    pub dimension: usize,
    /// Where the indexes are, for logs.
    pub description: String,
    /// The generation read.
    pub generation: u32,
    /// Its catalog, read-only, where it is in the data directory (not for
    /// the services, whose catalog is in NATS).
    pub catalog: Option<Arc<dyn Catalog>>,
    /// Keeps an embedded generation from being removed while it is read.
    pub lease: Option<Arc<crate::ReadLease>>,
}

impl QueryStack {
    /// The catalog of the generation read: the one held open, or (with
    /// server stores, whose catalog is not held so that `weft index` can
    /// write it) the data directory's, opened read-only for this call. Fails
    /// with the catalog's path while an index run writes it.
    pub fn catalog_now(&self, data: &DataDir) -> Result<Arc<dyn Catalog>, WiringError> {
        if let Some(catalog) = &self.catalog {
            return Ok(catalog.clone());
        }
        let generation = data.generation(self.generation);
        if !generation.catalog_path().exists() {
            return Err(DataDirError::Empty(data.path().to_owned()).into());
        }
        Ok(Arc::new(generation.open_catalog_read_only()?))
    }
}

/// Opens the indexes `[stores]` configures for reading and builds the
/// engine over them, with the configured embedder (unless not needed) and
/// reranker. An embedded index must exist (checked before any model is
/// read) and have been made with the configured model.
pub async fn open_query(
    config: &WeftConfig,
    locations: &Locations,
    need: QueryEmbedder,
) -> Result<QueryStack, WiringError> {
    let data = DataDir::new(&locations.data_dir);
    // The live generation, leased; a switch between reading the record and
    // taking the lease (the generation removed meanwhile) is read again.
    for _ in 0..5 {
        let generation = data.live()?.unwrap_or_else(|| data.generation(0));
        match open_query_generation(config, locations, &generation, need).await {
            Err(WiringError::DataDir(DataDirError::Empty(_)))
                if data
                    .live()?
                    .is_some_and(|l| l.number() != generation.number()) =>
            {
                continue;
            }
            other => return other,
        }
    }
    Err(DataDirError::Empty(locations.data_dir.clone()).into())
}

/// [`open_query`] over one generation: the one the caller pinned (the
/// live one of a registry it follows).
pub async fn open_query_generation(
    config: &WeftConfig,
    locations: &Locations,
    generation: &crate::GenerationDir,
    need: QueryEmbedder,
) -> Result<QueryStack, WiringError> {
    // Taken first: the generation is not removed while it is read.
    let lease = if config.stores.uses_data_dir() && generation.path().exists() {
        Some(Arc::new(generation.lease()?))
    } else {
        None
    };
    let recorded = if config.stores.uses_data_dir() {
        Some(
            generation
                .meta()?
                .ok_or_else(|| DataDirError::Empty(locations.data_dir.clone()))?,
        )
    } else {
        None
    };
    let embedder = match (need, &recorded) {
        (QueryEmbedder::NotNeeded, Some(_)) => None,
        // Loaded for queries: a query encoder is built now, the model's
        // own session only if queries use it.
        _ => Some(
            embedder_from_config(&config.embedding, &locations.model_dir, Purpose::Queries).await?,
        ),
    };
    // The one model check: the index's recorded model against the configured one.
    if let (Some(meta), Some(e)) = (&recorded, &embedder)
        && (meta.model != e.model_id() || meta.dimension != e.dimension())
    {
        return Err(WiringError::ModelMismatch {
            index: locations.data_dir.display().to_string(),
            indexed: meta.model.clone(),
            configured: e.model_id().to_owned(),
        });
    }
    let (model, dimension) = match (&recorded, &embedder) {
        (Some(meta), _) => (meta.model.clone(), meta.dimension),
        (None, Some(e)) => (e.model_id().to_owned(), e.dimension()),
        (None, None) => unreachable!("an embedder is built when nothing is recorded"),
    };
    let indexes: IndexStores = open_index_stores(
        &config.stores,
        generation,
        &model,
        dimension,
        StoreAccess::Read,
    )
    .await
    .map_err(|e| mismatch(e, locations))?;
    let embedder = match need {
        QueryEmbedder::Needed => embedder,
        QueryEmbedder::NotNeeded => None,
    };
    let engine = query_engine(
        config,
        indexes.vectors.clone(),
        indexes.text.clone(),
        embedder,
    )?;
    // Searching does not need the catalog: one that cannot be read is left
    // out (commands that need it open it and name the problem). With server
    // stores the catalog is written in place by `weft index`, so it is not
    // held open here.
    let catalog: Option<Arc<dyn Catalog>> =
        if config.stores.uses_data_dir() && generation.catalog_path().exists() {
            match generation.open_catalog_read_only() {
                Ok(catalog) => Some(Arc::new(catalog)),
                Err(e) => {
                    tracing::warn!("{e}");
                    None
                }
            }
        } else {
            None
        };
    Ok(QueryStack {
        catalog,
        engine: Arc::new(engine),
        vectors: indexes.vectors,
        text: indexes.text,
        model,
        dimension,
        description: indexes.description,
        generation: generation.number(),
        lease,
    })
}

/// The engine over these indexes, with `[retrieval]` and the `[rerank]`
/// reranker: the only place a [`QueryEngine`] is configured.
pub fn query_engine(
    config: &WeftConfig,
    vectors: Arc<dyn VectorIndex>,
    text: Arc<dyn TextIndex>,
    embedder: Option<Arc<dyn Embedder>>,
) -> Result<QueryEngine, WiringError> {
    Ok(QueryEngine::new(
        vectors,
        text,
        embedder,
        reranker_from_config(&config.rerank)?,
        config.retrieval.clone(),
    ))
}

/// Whether a [`LiveQuery`] follows the live generation's record
/// ([`LiveQuery::follow_state`]).
#[derive(Clone, Debug)]
pub struct FollowState(Arc<std::sync::atomic::AtomicBool>);

impl FollowState {
    /// [`LiveQuery::following`].
    pub fn following(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Where the live generation is recorded, for a reader that follows it.
#[derive(Clone)]
pub enum LiveSource {
    /// `generations.json` of the data directory (`weft serve`, `weft mcp`).
    DataDir,
    /// A shared registry (the services: a NATS key-value entry).
    Registry(Arc<dyn weft_core::ports::GenerationRegistry>),
}

/// The query stack of the live generation, followed: when the record names
/// another live generation, its stores are opened and replace the old ones
/// for the queries that start afterwards; a query in flight keeps the stack
/// it started with, so every query reads exactly one generation.
#[derive(Clone)]
pub struct LiveQuery {
    current: Arc<std::sync::RwLock<Arc<QueryStack>>>,
    /// Whether the last check of the record succeeded (see
    /// [`LiveQuery::following`]).
    following: Arc<std::sync::atomic::AtomicBool>,
    config: Arc<WeftConfig>,
    locations: Locations,
    need: QueryEmbedder,
    source: LiveSource,
}

impl LiveQuery {
    /// Opens the live generation's stack.
    pub async fn open(
        config: &WeftConfig,
        locations: &Locations,
        need: QueryEmbedder,
        source: LiveSource,
    ) -> Result<Self, WiringError> {
        let number = Self::live_number(config, locations, &source).await?;
        let data = DataDir::new(&locations.data_dir);
        let stack =
            open_query_generation(config, locations, &data.generation(number), need).await?;
        Ok(Self {
            current: Arc::new(std::sync::RwLock::new(Arc::new(stack))),
            following: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            config: Arc::new(config.clone()),
            locations: locations.clone(),
            need,
            source,
        })
    }

    async fn live_number(
        config: &WeftConfig,
        locations: &Locations,
        source: &LiveSource,
    ) -> Result<u32, WiringError> {
        match source {
            LiveSource::DataDir => {
                let data = DataDir::new(&locations.data_dir);
                match data.generations()?.live_number() {
                    Some(n) => Ok(n),
                    // Server stores that `weft index` wrote in place.
                    None if !config.stores.uses_data_dir() => Ok(0),
                    None => Err(DataDirError::Empty(data.path().to_owned()).into()),
                }
            }
            LiveSource::Registry(registry) => Ok(registry
                .load()
                .await
                .map_err(WiringError::Registry)?
                .live_number()
                .unwrap_or(0)),
        }
    }

    /// Whether the record of the live generation could be read at the last
    /// check of [`LiveQuery::follow`]: `false` while the registry (NATS) is
    /// unreachable, when a switch would go unnoticed and the generation read
    /// may be removed (the reader cannot say it reads it). A health check
    /// reports it, so that traffic goes to replicas that follow.
    pub fn following(&self) -> bool {
        self.following.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// [`LiveQuery::following`], readable without holding the stores open
    /// (for a health reporter that may outlive the server).
    pub fn follow_state(&self) -> FollowState {
        FollowState(self.following.clone())
    }

    /// The catalog of `generation` kept beside the registry of the live
    /// generation (the services' NATS catalog), if the registry keeps one;
    /// `None` for the data directory's (see [`QueryStack::catalog_now`]).
    pub async fn registry_catalog(
        &self,
        generation: u32,
    ) -> Result<Option<Arc<dyn Catalog>>, weft_core::ports::PortError> {
        match &self.source {
            LiveSource::Registry(registry) => registry.catalog_of(generation).await,
            LiveSource::DataDir => Ok(None),
        }
    }

    /// The stack queries starting now read.
    pub fn current(&self) -> Arc<QueryStack> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Checks the record once: when another generation is live, opens it
    /// and makes it current (then, in a data directory, removes
    /// generations no longer read). `Ok(Some(n))` when it moved to `n`.
    pub async fn refresh(&self) -> Result<Option<u32>, WiringError> {
        let moved = self.refresh_or_reopen(false).await?;
        if moved.is_some() {
            self.collect_unread();
        }
        Ok(moved)
    }

    /// [`LiveQuery::refresh`]; with `reopen`, the live generation's stores
    /// are opened again even when it did not change (embedded stores that
    /// another process writes in place: the distributed embedder's).
    async fn refresh_or_reopen(&self, reopen: bool) -> Result<Option<u32>, WiringError> {
        let live = Self::live_number(&self.config, &self.locations, &self.source).await?;
        if live == self.current().generation && !reopen {
            return Ok(None);
        }
        // A generation whose vectors another model made is not followed:
        // its queries would be embedded with the wrong model.
        if let LiveSource::Registry(registry) = &self.source
            && let Some(g) = registry
                .load()
                .await
                .map_err(WiringError::Registry)?
                .get(live)
            && let (Some(model), Some(dimension), Some(embedder)) = (
                &g.model,
                g.dimension,
                self.current().engine.embedder_model(),
            )
            && (model != &embedder.0 || dimension != embedder.1)
        {
            return Err(WiringError::ModelMismatch {
                index: format!("index generation {live}"),
                indexed: model.clone(),
                configured: embedder.0,
            });
        }
        let generation = DataDir::new(&self.locations.data_dir).generation(live);
        let stack =
            open_query_generation(&self.config, &self.locations, &generation, self.need).await?;
        let previous = {
            let mut current = self
                .current
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            std::mem::replace(&mut *current, Arc::new(stack))
        };
        tracing::info!(
            from = previous.generation,
            to = live,
            "the live index generation changed: new queries read generation {live}"
        );
        drop(previous);
        Ok(Some(live))
    }

    /// With a data directory's own record: removes the old generations no
    /// process reads any more. `true` when some are still read (a query in
    /// flight, another process), so that it is tried again.
    fn collect_unread(&self) -> bool {
        if !(matches!(self.source, LiveSource::DataDir) && self.config.stores.uses_data_dir()) {
            return false;
        }
        match crate::generations::collect_garbage(&DataDir::new(&self.locations.data_dir)) {
            Ok(c) => {
                if !c.removed.is_empty() {
                    tracing::info!(removed = ?c.removed, "removed index generations no longer read");
                }
                !c.still_read.is_empty()
            }
            Err(e) => {
                tracing::warn!("cannot remove old index generations: {e}");
                true
            }
        }
    }

    /// Follows the record, checking it every `every`, until dropped with
    /// the returned task's handle aborted. A failed check is logged and
    /// retried; queries keep reading the generation they have.
    ///
    /// With a shared registry it also tells the registry, every
    /// [`ANNOUNCE_EVERY`], which generation this process reads, so that
    /// generation is not removed under it; and with embedded stores (which
    /// the distributed embedder writes in place) it opens the live
    /// generation again every [`ANNOUNCE_EVERY`] to see what was written.
    pub fn follow(&self, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        let reader = reader_id();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut announced: Option<(u32, std::time::Instant)> = None;
            // Old generations still read when last tried (by a query in
            // flight at the switch, or another process): tried again each
            // tick until removed.
            let mut unread_pending = false;
            let shared_embedded = matches!(this.source, LiveSource::Registry(_))
                && this.config.stores.uses_data_dir();
            loop {
                tick.tick().await;
                let due = announced.is_none_or(|(_, at)| at.elapsed() >= ANNOUNCE_EVERY);
                let reopen = shared_embedded && announced.is_some() && due;
                let checked = this.refresh_or_reopen(reopen).await;
                let was_following = this.following();
                // A model this service cannot embed for is logged, not
                // unhealthy: the generation it reads still answers.
                let following = !matches!(
                    checked,
                    Err(ref e) if !matches!(e, WiringError::ModelMismatch { .. })
                );
                this.following
                    .store(following, std::sync::atomic::Ordering::Relaxed);
                match checked {
                    Err(e @ WiringError::ModelMismatch { .. }) => {
                        tracing::error!("not following the live index generation: {e}")
                    }
                    Err(e) => tracing::warn!("cannot follow the live index generation: {e}"),
                    Ok(Some(_)) => unread_pending = true,
                    Ok(None) => {}
                }
                if following && !was_following {
                    tracing::info!("following the live index generation again");
                }
                if unread_pending {
                    // Blocking file work (locks, removal): off the runtime.
                    let that = this.clone();
                    unread_pending = tokio::task::spawn_blocking(move || that.collect_unread())
                        .await
                        .unwrap_or(true);
                }
                if let LiveSource::Registry(registry) = &this.source {
                    let generation = this.current().generation;
                    if due || announced.is_some_and(|(g, _)| g != generation) {
                        match registry.reading(&reader, generation).await {
                            Ok(()) => announced = Some((generation, std::time::Instant::now())),
                            Err(e) => tracing::warn!("cannot announce the generation read: {e}"),
                        }
                    }
                }
            }
        })
    }
}

/// How often a reader following a shared registry says which generation it
/// reads (the registry forgets a reader silent for a few times as long).
pub const ANNOUNCE_EVERY: std::time::Duration = std::time::Duration::from_secs(20);

/// This process, for the registry's list of readers.
fn reader_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{host}-{}", std::process::id())
}
