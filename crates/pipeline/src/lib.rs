//! # weft-pipeline
//!
//! The embedded pipeline behind `weft index`: [`sources`] list a project's
//! documents (a directory, a git repository, a documentation site), the
//! [`Indexer`] chunks what changed, embeds it in batches and writes it to
//! the vector index, the text index and the catalog, deleting what is gone.
//! [`DataDir`] opens the three stores in one data directory.
//!
//! Re-running an index over unchanged sources reads every document and
//! compares content hashes with the catalog: nothing is chunked or embedded
//! and the model is never loaded.

#![warn(missing_docs)]

mod data_dir;
mod embedding;
mod index_stores;
mod indexer;
pub mod sources;

pub use data_dir::{
    DataDir, DataDirError, DataMeta, LazyEmbedder, Stores, default_data_dir, default_model_dir,
};
pub use embedding::{EmbedderSetupError, embedder_from_config, embedder_tag};
pub use index_stores::{IndexStores, StoreAccess, open_index_stores};
pub use indexer::{IndexError, IndexOptions, IndexSummary, Indexer};

/// A document that was skipped or failed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Issue {
    /// The document's uri (path or URL).
    pub uri: String,
    /// What happened.
    pub reason: String,
}
