//! The embedded deployment's generation stores: a generation is a
//! directory of the data directory (`generations/g<N>/`: catalog, vector
//! and text index), kept while a process holds a read lease on it.

use async_trait::async_trait;
use weft_config::StoresConfig;
use weft_core::generations::Generation;
use weft_core::ports::{PortError, PortResult};
use weft_wiring::generations::{GenerationCounts, sync_tree};
use weft_wiring::{DataDir, DataDirError, StoreAccess};

use super::{Counts, GenerationStores, Removal};

/// The generations of an embedded data directory (what `weft index`
/// writes): counted by opening them for reading, removed once no process
/// holds a lease on them, synced to disk before the switch.
#[derive(Debug, Clone)]
pub struct DataDirStores {
    dir: DataDir,
    stores: StoresConfig,
}

impl DataDirStores {
    /// The generations of `dir`, whose indexes `stores` configures
    /// (embedded ones).
    pub fn new(dir: DataDir, stores: &StoresConfig) -> Self {
        Self {
            dir,
            stores: stores.clone(),
        }
    }
}

fn port(e: DataDirError) -> PortError {
    PortError::new(e.kind(), "data directory", e)
}

fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> PortError + '_ {
    move |source| {
        port(DataDirError::Io {
            path: path.to_owned(),
            source,
        })
    }
}

#[async_trait]
impl GenerationStores for DataDirStores {
    async fn count(&self, generation: &Generation) -> PortResult<Counts> {
        let dir = self.dir.generation(generation.number);
        let _lease = dir.lease().map_err(port)?;
        let catalog = dir.open_catalog_read_only().map_err(port)?;
        let Some((model, dimension)) = generation.embedding() else {
            let records = weft_core::ports::Catalog::documents(&catalog, None).await?;
            return Ok(Counts {
                documents: records.len() as u64,
                catalog_chunks: records.iter().map(|r| u64::from(r.chunk_count)).sum(),
                ..Counts::default()
            });
        };
        let indexes =
            weft_wiring::open_index_stores(&self.stores, &dir, model, dimension, StoreAccess::Read)
                .await
                .map_err(|e| PortError::new(e.kind(), "index stores", e))?;
        let counts =
            GenerationCounts::of_parts(&catalog, &*indexes.vectors, &*indexes.text).await?;
        Ok(counts.into())
    }

    async fn remove(&self, number: u32) -> PortResult<Removal> {
        let dir = self.dir.generation(number);
        Ok(if dir.remove_if_unread().map_err(port)? {
            Removal::Removed(vec![dir.path().display().to_string()])
        } else {
            Removal::StillRead
        })
    }

    async fn prepare(&self, number: u32) -> PortResult<()> {
        let target = self.dir.generation(number);
        let path = target.path();
        if path.exists() {
            // Left by a crash between the record and the first write.
            std::fs::remove_dir_all(path).map_err(io(path))?;
        }
        std::fs::create_dir_all(path).map_err(io(path))
    }

    async fn prepare_switch(&self, number: u32) -> PortResult<()> {
        // What the record will point at is on disk before the record is.
        sync_tree(self.dir.generation(number).path()).map_err(port)
    }
}
