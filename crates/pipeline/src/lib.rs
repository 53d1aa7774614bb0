//! # weft-pipeline
//!
//! The indexing path of weft, written once for both deployments, and the
//! wiring that builds weft from its configuration.
//!
//! ```text
//!  SourceSpec ──► ChangePlanner::plan ──► ChangeSet ──► Chunker ──► IndexWriter ──► vectors, text, catalog
//!  (dir, git,      lists the source,       new/changed/    (weft_chunking)   embeds what changed,
//!   docs site)     diffs git, reads the    unchanged/                        deletes what is stale,
//!                  catalog                 removed                           checkpoints
//! ```
//!
//! | rule | owner | used by |
//! |---|---|---|
//! | list a source, decide what is new, changed, unchanged, removed | [`changes`]: [`ChangePlanner`], [`ChangeSet`] | `weft index` ([`Indexer`]), `weft-crawler` |
//! | cut a document | `weft_chunking::Chunker::chunk_document` | [`Indexer`], `weft-chunker` |
//! | write a document's chunks to both indexes and the catalog | [`writer`]: [`IndexWriter`] | [`Indexer`], `weft-embedder` |
//! | where data and model are; embedder, stores, reranker, query engine from config; the model check | [`wiring`] | every `weft` command, `weft-embedder`, `weft-query` |
//! | the embedded data directory and its marker | [`DataDir`], with its stores opened by `embedded` | [`wiring`], tests, benchmarks |
//!
//! The embedded deployment runs the stages in one process ([`Indexer`]);
//! the distributed one runs them as services joined by NATS, each stage
//! calling the same type. A parity test (`e2e/tests/parity.rs`) holds the
//! two to the same catalog and chunks.
//!
//! Re-running an index over unchanged sources reads every document (or,
//! for a git source, only the files changed since the last indexed commit)
//! and compares content hashes and index identities with the catalog:
//! nothing is chunked or embedded and the model is never loaded.

#![warn(missing_docs)]

pub mod changes;
mod data_dir;
mod embedded;
mod embedding;
pub mod generations;
mod index_run;
mod indexer;
pub mod sources;
mod stores;
pub mod wiring;
pub mod writer;

pub use changes::{
    Change, ChangePlanner, ChangeSet, ChangedDocument, Compare, PlanError, PlanOptions,
};
pub use data_dir::{DataDir, DataDirError, DataMeta, GenerationDir, ReadLease, WriteLock};
pub use embedding::{EmbedderSetupError, LazyEmbedder, embedder_from_config, embedder_tag};
pub use index_run::{
    GenerationOutcome, RunError, RunOptions, RunOutcome, RunSource, index_sources,
};
pub use indexer::{IndexError, IndexOptions, IndexSummary, Indexer, OpenIndexes};
pub use stores::{
    IndexStores, StoreAccess, Stores, StoresError, open_index_stores, point_live_alias,
    remove_generation_indexes,
};
pub use wiring::{Locations, WiringError, default_data_dir, default_model_dir, embed_batching};
pub use writer::{DocumentUpdate, IndexWriter, UpdateContent, WriteStats};

/// A document that was skipped or failed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Issue {
    /// The document's uri (path or URL).
    pub uri: String,
    /// What happened.
    pub reason: String,
}
