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
use weft_config::WeftConfig;
use weft_core::generations::{Generation, GenerationState, Generations, now_secs};
use weft_core::ports::{Catalog, GenerationRegistry};
use weft_nats::{Jet, NatsCatalog};
use weft_pipeline::{Locations, StoreAccess};

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

/// Counts generation `n`: its catalog, its indexes where reachable, and
/// what is queued for it.
pub async fn count(
    jet: &Jet,
    catalog: &NatsCatalog,
    n: u32,
    model: Option<(&str, usize)>,
    config: &WeftConfig,
    locations: &Locations,
) -> Result<Counts, String> {
    let c = jet.config();
    let queued = (
        jet.stream_messages_on(&c.docs_stream, &format!("weft.docs.g{n}.>"))
            .await
            .map_err(|e| e.to_string())?,
        jet.stream_messages_on(&c.chunks_stream, &format!("weft.chunks.g{n}.>"))
            .await
            .map_err(|e| e.to_string())?,
    );
    let records = catalog.documents(None).await.map_err(|e| e.to_string())?;
    let mut counts = Counts {
        documents: records.len() as u64,
        catalog_chunks: records.iter().map(|r| u64::from(r.chunk_count)).sum(),
        indexed: None,
        queued,
    };
    let generation = locations.data().generation(n);
    let reachable =
        !config.stores.uses_data_dir() || generation.path().join("weft-data.json").exists();
    if let (Some((model, dimension)), true) = (model, reachable) {
        let indexes = weft_pipeline::open_index_stores(
            &config.stores,
            &generation,
            model,
            dimension,
            StoreAccess::Read,
        )
        .await
        .map_err(|e| e.to_string())?;
        counts.indexed = Some((
            indexes.vectors.count().await.map_err(|e| e.to_string())?,
            indexes.text.count().await.map_err(|e| e.to_string())?,
        ));
    }
    Ok(counts)
}

/// Whether generation `n` is complete: nothing queued for it, its catalog
/// records the `expected` documents, and its indexes (where reachable)
/// hold the chunks the catalog records. `Ok(Some)` when complete; `Err`
/// says what is missing.
pub async fn check_complete(
    registry: &dyn GenerationRegistry,
    jet: &Jet,
    catalog: &NatsCatalog,
    n: u32,
    expected: u64,
    config: &WeftConfig,
    locations: &Locations,
) -> Result<Option<Counts>, String> {
    let record = registry.load().await.map_err(|e| e.to_string())?;
    let generation = record
        .get(n)
        .ok_or_else(|| format!("generation {n} is not recorded"))?;
    if generation.state != GenerationState::Building {
        return Err(format!(
            "generation {n} is {}, not building",
            generation.state
        ));
    }
    let model = match (&generation.model, generation.dimension) {
        (Some(m), Some(d)) => Some((m.as_str(), d)),
        _ => None,
    };
    let counts = count(jet, catalog, n, model, config, locations).await?;
    if counts.queued != (0, 0) {
        return Err(format!(
            "{} documents and {} chunk batches queued",
            counts.queued.0, counts.queued.1
        ));
    }
    if counts.documents < expected {
        return Err(format!(
            "{} of {expected} documents written",
            counts.documents
        ));
    }
    if expected > 0 && model.is_none() {
        return Err("no embedder has written it yet".into());
    }
    if let Some((vectors, text)) = counts.indexed
        && (vectors != counts.catalog_chunks || text != counts.catalog_chunks)
    {
        return Err(format!(
            "the catalog records {} chunks, the vector index holds {vectors}, the text index {text}",
            counts.catalog_chunks
        ));
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
    let mut removed = Vec::new();
    for n in record.removable(now_secs(), grace.as_secs()) {
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
    {
        let _ = weft_pipeline::point_live_alias(&config.stores, live).await;
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
    let mut what = weft_pipeline::remove_generation_indexes(&config.stores, &locations.data(), n)
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
                count(jet, &catalog, g.number, model, config, locations)
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
    let expected = record
        .get(n)
        .and_then(|g| g.expected_documents)
        .unwrap_or(0);
    if !force {
        let catalog = jet.catalog_of(n).await?;
        check_complete(registry, jet, &catalog, n, expected, config, locations)
            .await
            .map_err(|why| {
                CrawlError::Generations(format!(
                    "generation {n} is not complete: {why} (--force switches anyway)"
                ))
            })?;
    }
    let now = now_secs();
    let record = registry
        .update(&|g: &mut Generations| g.switch_to(n, now))
        .await
        .map_err(|e| CrawlError::Generations(e.to_string()))?;
    weft_pipeline::point_live_alias(&config.stores, n)
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
    weft_pipeline::generations::abort_generation(registry, n, "aborted by the operator")
        .await
        .map_err(|e| CrawlError::Generations(e.to_string()))?;
    collect(registry, jet, config, locations, Duration::MAX).await
}
