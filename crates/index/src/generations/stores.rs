//! What differs per deployment in a generation's life: how its stores are
//! counted, made ready, removed, and how readers outside weft are pointed
//! at the live one ([`GenerationStores`]).

use async_trait::async_trait;
use serde::Serialize;
use weft_core::generations::Generation;
use weft_core::ports::PortResult;
use weft_wiring::generations::GenerationCounts;

/// What a generation holds, as far as its deployment can count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
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

impl From<GenerationCounts> for Counts {
    /// The counts of stores a process holds open (nothing queued).
    fn from(c: GenerationCounts) -> Self {
        Self {
            documents: c.documents,
            catalog_chunks: c.catalog_chunks,
            indexed: Some((c.vector_chunks, c.text_chunks)),
            queued: (0, 0),
            dead_letters: 0,
        }
    }
}

/// What removing a generation's stores did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Removed (what, for the operator; empty when nothing was there).
    Removed(Vec<String>),
    /// A process reads it: kept, tried again by a later collection.
    StillRead,
}

/// A deployment's generation stores: the embedded data directory
/// ([`DataDirStores`](super::DataDirStores)) or the distributed one's
/// servers and catalog buckets (`weft-crawler`'s).
#[async_trait]
pub trait GenerationStores: Send + Sync {
    /// Counts `generation`'s catalog and indexes, and what is queued for it.
    async fn count(&self, generation: &Generation) -> PortResult<Counts>;

    /// Removes generation `number`'s stores (an index already gone is not
    /// an error).
    async fn remove(&self, number: u32) -> PortResult<Removal>;

    /// Makes room for the new generation `number` before anything is
    /// written to it (leftovers of a crash removed).
    async fn prepare(&self, _number: u32) -> PortResult<()> {
        Ok(())
    }

    /// Makes generation `number`'s stores durable before the record points
    /// at them.
    async fn prepare_switch(&self, _number: u32) -> PortResult<()> {
        Ok(())
    }

    /// Points the name readers outside weft use (the Qdrant alias) at
    /// generation `number`: `None` when there is no such name, `Some(false)`
    /// while it cannot be made yet.
    async fn point_live(&self, _number: u32) -> PortResult<Option<bool>> {
        Ok(None)
    }

    /// Whether a generation's documents reach its stores through queues
    /// (the distributed deployment): then it is complete only once its
    /// rebuild recorded what it published and all of that is written.
    fn published_through_queue(&self) -> bool {
        false
    }

    /// Where generation `number`'s dead-lettered messages are, for the
    /// operator.
    fn dead_letters_at(&self, number: u32) -> String {
        format!("the dead letters of generation {number}")
    }
}
