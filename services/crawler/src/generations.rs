//! Index generations of the distributed deployment, for the operator
//! (`weft-crawler generations list|switch|abort|gc`) and for a rebuild's
//! end: is a generation complete, switch to it, remove what is retired.
//!
//! The record is the NATS key-value entry every service follows
//! ([`weft_nats::NatsRegistry`]); a generation's stores are its Qdrant
//! collection and Meilisearch index (`<name>_g<N>`), or its directory
//! under an embedded data directory, and its catalog bucket
//! (`<nats.catalog_bucket>_g<N>`).

use std::time::Duration;

use serde::Serialize;
use weft_config::Locations;
use weft_config::WeftConfig;
use weft_core::generations::{Generation, GenerationState, Generations, now_secs};
use weft_core::ports::{Catalog, GenerationRegistry};
use weft_nats::{Jet, NatsCatalog};
use weft_wiring::StoreAccess;

use crate::CrawlError;

/// What a generation holds, as far as the crawler can count it.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    /// Documents its catalog records.
    pub documents: u64,
    /// Chunks its catalog records.
    pub catalog_chunks: u64,
    /// Chunks in its vector and text indexes (`None`: not reachable from
    /// here, e.g. embedded stores on the embedder's volume).
    pub indexed: Option<(u64, u64)>,
    /// Documents and chunk batches still queued for it.
    pub queued: (u64, u64),
    /// Its messages in the dead-letter stream.
    pub dead_letters: u64,
}

/// One generation, for `generations list`.
#[derive(Debug, Clone, Serialize)]
pub struct GenerationStatus {
    /// The record's entry.
    #[serde(flatten)]
    pub generation: Generation,
    /// What it holds now.
    pub counts: Option<Counts>,
}

/// Every generation with what it holds: what `generations list` prints.
#[derive(Debug, Clone, Serialize)]
pub struct GenerationList {
    /// The live generation.
    pub live: Option<u32>,
    /// Every generation of the record.
    pub generations: Vec<GenerationStatus>,
}

impl std::fmt::Display for GenerationList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for s in &self.generations {
            let generation = &s.generation;
            let counts = s
                .counts
                .map(|c| {
                    let indexed = c
                        .indexed
                        .map(|(v, t)| format!(", indexes {v}/{t}"))
                        .unwrap_or_default();
                    format!(
                        "; {} documents, {} chunks{indexed}; queued {} documents, {} batches",
                        c.documents, c.catalog_chunks, c.queued.0, c.queued.1
                    )
                })
                .unwrap_or_default();
            let expected = generation
                .expected_documents
                .map(|e| format!(" (of {e} expected)"))
                .unwrap_or_default();
            writeln!(
                f,
                "{:>4}  {:<8} {}{counts}{expected}",
                generation.number,
                generation.state.to_string(),
                generation.model.as_deref().unwrap_or("-"),
            )?;
        }
        if self.generations.is_empty() {
            writeln!(
                f,
                "no generations recorded: generation 0 (the unnumbered stores) is live"
            )?;
        }
        Ok(())
    }
}

/// Counts generations, keeping each generation's indexes open between
/// counts (a rebuild polls for minutes or hours).
pub struct Counter<'a> {
    jet: &'a Jet,
    config: &'a WeftConfig,
    locations: &'a Locations,
    open: std::collections::HashMap<u32, weft_wiring::IndexStores>,
}

impl<'a> Counter<'a> {
    /// A counter over the stores `config` names.
    pub fn new(jet: &'a Jet, config: &'a WeftConfig, locations: &'a Locations) -> Self {
        Self {
            jet,
            config,
            locations,
            open: Default::default(),
        }
    }

    /// Counts generation `n`: its catalog, its indexes where reachable, and
    /// what is queued for it and dead-lettered.
    pub async fn count(
        &mut self,
        catalog: &NatsCatalog,
        n: u32,
        model: Option<(&str, usize)>,
    ) -> Result<Counts, String> {
        let c = self.jet.config();
        let queued = (
            self.jet
                .stream_messages_on(&c.docs_stream, &format!("weft.docs.g{n}.>"))
                .await
                .map_err(|e| e.to_string())?,
            self.jet
                .stream_messages_on(&c.chunks_stream, &format!("weft.chunks.g{n}.>"))
                .await
                .map_err(|e| e.to_string())?,
        );
        let dead_letters = self
            .jet
            .stream_messages_on(&c.dead_letter_stream, &format!("weft.dead.*.*.g{n}.>"))
            .await
            .map_err(|e| e.to_string())?;
        let records = catalog.documents(None).await.map_err(|e| e.to_string())?;
        let mut counts = Counts {
            documents: records.len() as u64,
            catalog_chunks: records.iter().map(|r| u64::from(r.chunk_count)).sum(),
            indexed: None,
            queued,
            dead_letters,
        };
        let generation = weft_wiring::DataDir::new(&self.locations.data_dir).generation(n);
        let reachable = !self.config.stores.uses_data_dir()
            || generation.path().join("weft-data.json").exists();
        if let (Some((model, dimension)), true) = (model, reachable) {
            // Embedded stores are opened again each time (read-only views of
            // what the embedder has flushed); server ones once.
            if self.config.stores.uses_data_dir() {
                self.open.remove(&n);
            }
            if !self.open.contains_key(&n) {
                let indexes = weft_wiring::open_index_stores(
                    &self.config.stores,
                    &generation,
                    model,
                    dimension,
                    StoreAccess::Read,
                )
                .await
                .map_err(|e| e.to_string())?;
                self.open.insert(n, indexes);
            }
            if let Some(indexes) = self.open.get(&n) {
                counts.indexed = Some((
                    indexes.vectors.count().await.map_err(|e| e.to_string())?,
                    indexes.text.count().await.map_err(|e| e.to_string())?,
                ));
            }
            if self.config.stores.uses_data_dir() {
                self.open.remove(&n);
            }
        }
        Ok(counts)
    }
}

/// Why a generation is not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incomplete {
    /// Work is still under way (queued messages, documents not written yet).
    Waiting(String),
    /// It cannot complete by waiting: messages were dead-lettered.
    Stuck(String),
    /// It is no longer building.
    Aborted(String),
}

/// Whether generation `n` is complete: nothing queued for it or
/// dead-lettered, its catalog records the `expected` documents, and its
/// indexes (where reachable) hold the chunks the catalog records.
pub async fn check_complete(
    registry: &dyn GenerationRegistry,
    counter: &mut Counter<'_>,
    catalog: &NatsCatalog,
    n: u32,
    expected: u64,
) -> Result<Option<Counts>, Incomplete> {
    let record = registry
        .load()
        .await
        .map_err(|e| Incomplete::Waiting(e.to_string()))?;
    let generation = record
        .get(n)
        .ok_or_else(|| Incomplete::Aborted("is not recorded (removed?)".to_string()))?;
    if generation.state != GenerationState::Building {
        return Err(Incomplete::Aborted(format!(
            "is {}, not building",
            generation.state
        )));
    }
    let model = match (&generation.model, generation.dimension) {
        (Some(m), Some(d)) => Some((m.as_str(), d)),
        _ => None,
    };
    let counts = counter
        .count(catalog, n, model)
        .await
        .map_err(Incomplete::Waiting)?;
    if counts.dead_letters > 0 {
        return Err(Incomplete::Stuck(format!(
            "{} of its messages were dead-lettered (stream {}, subjects weft.dead.*.*.g{n}.>: the Weft-Error header says why)",
            counts.dead_letters,
            counter.jet.config().dead_letter_stream
        )));
    }
    if counts.queued != (0, 0) {
        return Err(Incomplete::Waiting(format!(
            "{} documents and {} chunk batches queued",
            counts.queued.0, counts.queued.1
        )));
    }
    if counts.documents < expected {
        return Err(Incomplete::Waiting(format!(
            "{} of {expected} documents written",
            counts.documents
        )));
    }
    if expected > 0 && model.is_none() {
        return Err(Incomplete::Waiting("no embedder has written it yet".into()));
    }
    if let Some((vectors, text)) = counts.indexed
        && (vectors != counts.catalog_chunks || text != counts.catalog_chunks)
    {
        return Err(Incomplete::Waiting(format!(
            "the catalog records {} chunks, the vector index holds {vectors}, the text index {text}",
            counts.catalog_chunks
        )));
    }
    Ok(Some(counts))
}

/// Removes the stores of generations retired at least `grace` ago and of
/// aborted ones, and forgets them: what was removed.
pub async fn collect(
    registry: &dyn GenerationRegistry,
    jet: &Jet,
    config: &WeftConfig,
    locations: &Locations,
    grace: Duration,
) -> Result<Vec<u32>, CrawlError> {
    let record = registry.load().await?;
    let read = registry.read_generations().await?;
    let mut removed = Vec::new();
    for n in record.removable(now_secs(), grace.as_secs()) {
        if read.contains(&n) {
            tracing::warn!(
                generation = n,
                "a query replica still reads it (it has not followed the switch): not removed"
            );
            continue;
        }
        match remove(jet, config, locations, n).await {
            Ok(what) => {
                tracing::info!(generation = n, removed = ?what, "removed an old index generation");
                registry
                    .update(&|g: &mut Generations| {
                        let _ = g.forget(n);
                        Ok(())
                    })
                    .await
                    .map_err(|e| CrawlError::Generations(e.to_string()))?;
                removed.push(n);
            }
            Err(e) => tracing::warn!(generation = n, "cannot remove it yet: {e}"),
        }
    }
    // Once generation 0's collection is gone, its name can be the alias.
    if removed.contains(&0)
        && let Some(live) = registry.load().await?.live_number()
        && let Err(e) = weft_wiring::point_live_alias(&config.stores, live).await
    {
        tracing::warn!("the Qdrant alias was not made after removing generation 0: {e}");
    }
    Ok(removed)
}

/// Removes generation `n`'s indexes and catalog bucket.
async fn remove(
    jet: &Jet,
    config: &WeftConfig,
    locations: &Locations,
    n: u32,
) -> Result<Vec<String>, CrawlError> {
    let mut what = weft_wiring::remove_generation_indexes(
        &config.stores,
        &weft_wiring::DataDir::new(&locations.data_dir),
        n,
    )
    .await
    .map_err(|e| CrawlError::Generations(e.to_string()))?;
    jet.delete_catalog_of(n).await?;
    what.push(format!(
        "catalog bucket {}",
        weft_core::generations::store_name(&jet.config().catalog_bucket, n)
    ));
    Ok(what)
}

/// Every generation with its counts.
pub async fn list(
    registry: &dyn GenerationRegistry,
    jet: &Jet,
    config: &WeftConfig,
    locations: &Locations,
) -> Result<(Generations, Vec<GenerationStatus>), CrawlError> {
    let record = registry.load().await?;
    let mut out = Vec::new();
    for g in &record.generations {
        let counts = match g.state {
            GenerationState::Live | GenerationState::Building => {
                let catalog = jet.catalog_of(g.number).await?;
                let model = match (&g.model, g.dimension) {
                    (Some(m), Some(d)) => Some((m.as_str(), d)),
                    _ => None,
                };
                Counter::new(jet, config, locations)
                    .count(&catalog, g.number, model)
                    .await
                    .map_err(|e| tracing::warn!(generation = g.number, "cannot count it: {e}"))
                    .ok()
            }
            _ => None,
        };
        out.push(GenerationStatus {
            generation: g.clone(),
            counts,
        });
    }
    Ok((record, out))
}

/// Switches to the building generation `n` by hand, after the same
/// completeness check a rebuild makes (`force` skips it), and moves the
/// Qdrant alias.
pub async fn switch(
    registry: &dyn GenerationRegistry,
    jet: &Jet,
    config: &WeftConfig,
    locations: &Locations,
    n: u32,
    force: bool,
) -> Result<Generations, CrawlError> {
    let record = registry.load().await?;
    let generation = record.get(n);
    let crawling = generation.and_then(|g| g.note.as_deref()) == Some("crawling");
    let expected = generation.and_then(|g| g.expected_documents);
    if !force {
        let Some(expected) = expected.filter(|_| !crawling) else {
            return Err(CrawlError::Generations(format!(
                "generation {n}'s rebuild has not finished publishing (no document count recorded): nothing says it is complete (--force switches anyway)"
            )));
        };
        let catalog = jet.catalog_of(n).await?;
        let mut counter = Counter::new(jet, config, locations);
        check_complete(registry, &mut counter, &catalog, n, expected)
            .await
            .map_err(|why| {
                CrawlError::Generations(format!(
                    "generation {n} is not complete: {why:?} (--force switches anyway)"
                ))
            })?;
    }
    let now = now_secs();
    let record = registry
        .update(&|g: &mut Generations| g.switch_to(n, now))
        .await
        .map_err(|e| CrawlError::Generations(e.to_string()))?;
    weft_wiring::point_live_alias(&config.stores, n)
        .await
        .map_err(|e| CrawlError::Generations(e.to_string()))?;
    Ok(record)
}

/// Aborts the building generation `n` (the live one stays) and removes it.
pub async fn abort(
    registry: &dyn GenerationRegistry,
    jet: &Jet,
    config: &WeftConfig,
    locations: &Locations,
    n: u32,
) -> Result<Vec<u32>, CrawlError> {
    weft_wiring::generations::abort_generation(registry, n, "aborted by the operator")
        .await
        .map_err(|e| CrawlError::Generations(e.to_string()))?;
    collect(registry, jet, config, locations, Duration::MAX).await
}
