//! The distributed deployment's generation stores, for the generations
//! manager of `weft-index` ([`weft_index::GenerationManager`]) that
//! `weft-crawler --rebuild` and `weft-crawler generations
//! list|switch|abort|gc` run.
//!
//! The record is the NATS key-value entry every service follows
//! ([`weft_nats::NatsRegistry`]); a generation's stores are its Qdrant
//! collection and Meilisearch index (`<name>_g<N>`), or its directory
//! under an embedded data directory, and its catalog bucket
//! (`<nats.catalog_bucket>_g<N>`); its documents reach them through the
//! streams, so what is queued and dead-lettered for it is counted too.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use async_trait::async_trait;
use tokio::sync::Mutex;
use weft_config::{Locations, WeftConfig};
use weft_core::generations::{Generation, store_name};
use weft_core::ports::{Catalog, PortError, PortResult};
use weft_index::generations::{Counts, GenerationStores, Removal};
use weft_nats::{Jet, NatsCatalog};
use weft_wiring::{DataDir, IndexStores, StoreAccess};

/// The stores of the distributed deployment's generations: counted,
/// removed and aliased from the crawler. Each generation's catalog and
/// indexes are kept open between counts (a rebuild polls for minutes or
/// hours).
pub struct NatsStores<'a> {
    jet: &'a Jet,
    config: &'a WeftConfig,
    locations: &'a Locations,
    open: Mutex<Open>,
}

/// What [`NatsStores`] holds open, by generation.
#[derive(Default)]
struct Open {
    catalogs: HashMap<u32, NatsCatalog>,
    indexes: HashMap<u32, IndexStores>,
}

impl<'a> NatsStores<'a> {
    /// The stores `config` names, the catalogs and streams of `jet`.
    pub fn new(jet: &'a Jet, config: &'a WeftConfig, locations: &'a Locations) -> Self {
        Self {
            jet,
            config,
            locations,
            open: Mutex::default(),
        }
    }

    /// Documents and chunk batches queued for generation `n`, and its dead
    /// letters.
    async fn queued(&self, n: u32) -> PortResult<((u64, u64), u64)> {
        let c = self.jet.config();
        let mut counts = [0u64; 3];
        for (count, (stream, subjects)) in counts.iter_mut().zip([
            (&c.docs_stream, format!("weft.docs.g{n}.>")),
            (&c.chunks_stream, format!("weft.chunks.g{n}.>")),
            (&c.dead_letter_stream, format!("weft.dead.*.*.g{n}.>")),
        ]) {
            *count = self
                .jet
                .stream_messages_on(stream, &subjects)
                .await
                .map_err(|e| PortError::new(e.kind(), "NATS streams", e))?;
        }
        let [documents, batches, dead] = counts;
        Ok(((documents, batches), dead))
    }

    /// Chunks in generation `n`'s vector and text indexes, where they can
    /// be reached from here: server stores, or embedded ones the embedder
    /// has written in a data directory this process sees.
    async fn indexed(
        &self,
        open: &mut Open,
        n: u32,
        (model, dimension): (&str, usize),
    ) -> PortResult<Option<(u64, u64)>> {
        let embedded = self.config.stores.uses_data_dir();
        let generation = DataDir::new(&self.locations.data_dir).generation(n);
        if embedded && !generation.path().join("weft-data.json").exists() {
            return Ok(None);
        }
        // Embedded stores are opened again each time (read-only views of
        // what the embedder has flushed); server ones once.
        if embedded || !open.indexes.contains_key(&n) {
            let indexes = match weft_wiring::open_index_stores(
                &self.config.stores,
                &generation,
                model,
                dimension,
                StoreAccess::Read,
            )
            .await
            {
                Ok(indexes) => indexes,
                // The embedder recorded the model but has not created the
                // stores yet (it does so right after): nothing to count.
                Err(e) if e.kind() == weft_core::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(PortError::new(e.kind(), "index stores", e)),
            };
            open.indexes.insert(n, indexes);
        }
        let counted = match open.indexes.get(&n) {
            Some(indexes) => Some((indexes.vectors.count().await?, indexes.text.count().await?)),
            None => None,
        };
        if embedded {
            open.indexes.remove(&n);
        }
        Ok(counted)
    }
}

#[async_trait]
impl GenerationStores for NatsStores<'_> {
    async fn count(&self, generation: &Generation) -> PortResult<Counts> {
        let n = generation.number;
        let (queued, dead_letters) = self.queued(n).await?;
        let mut open = self.open.lock().await;
        let catalog = match open.catalogs.entry(n) {
            Entry::Occupied(open) => open.into_mut(),
            Entry::Vacant(slot) => slot.insert(
                self.jet
                    .catalog_of(n)
                    .await
                    .map_err(|e| PortError::new(e.kind(), "catalog", e))?,
            ),
        };
        let records = catalog.documents(None).await?;
        let indexed = match generation.embedding() {
            Some(embedding) => self.indexed(&mut open, n, embedding).await?,
            None => None,
        };
        Ok(Counts {
            documents: records.len() as u64,
            catalog_chunks: records.iter().map(|r| u64::from(r.chunk_count)).sum(),
            indexed,
            queued,
            dead_letters,
        })
    }

    async fn remove(&self, n: u32) -> PortResult<Removal> {
        {
            let mut open = self.open.lock().await;
            open.catalogs.remove(&n);
            open.indexes.remove(&n);
        }
        let data = DataDir::new(&self.locations.data_dir);
        let mut what = weft_wiring::remove_generation_indexes(&self.config.stores, &data, n)
            .await
            .map_err(|e| PortError::new(e.kind(), "index stores", e))?;
        self.jet
            .delete_catalog_of(n)
            .await
            .map_err(|e| PortError::new(e.kind(), "catalog", e))?;
        what.push(format!(
            "catalog bucket {}",
            store_name(&self.jet.config().catalog_bucket, n)
        ));
        Ok(Removal::Removed(what))
    }

    async fn point_live(&self, n: u32) -> PortResult<Option<bool>> {
        weft_wiring::point_live_alias(&self.config.stores, n)
            .await
            .map_err(|e| PortError::new(e.kind(), "the Qdrant alias", e))
    }

    fn published_through_queue(&self) -> bool {
        true
    }

    fn dead_letters_at(&self, n: u32) -> String {
        format!(
            "stream {}, subjects weft.dead.*.*.g{n}.>",
            self.jet.config().dead_letter_stream
        )
    }
}
