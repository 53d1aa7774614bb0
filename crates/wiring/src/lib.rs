//! # weft-wiring
//!
//! weft built from a validated `WeftConfig`, in one place, for every
//! command and service: the embedded data directory and its generations,
//! the stores `[stores]` configures, the embedder (`[embedding]`), the
//! reranker (`[rerank]`) and the query engine. A setting means the same in
//! every command, and the model an index was made with is checked once,
//! here.
//!
//! | module | holds | used by |
//! |---|---|---|
//! | `build` | [`WiringError`], the embedder and the stores for writing ([`embedder`], [`open_for_writing`]), the reranker, [`embed_batching`] | `weft index`, `weft-embedder`, `weft-index` |
//! | `query` | the query side: [`QueryStack`], [`open_query`], [`query_engine`], [`LiveQuery`] following the live generation | `weft search`/`serve`/`mcp`, `weft-query` |
//! | `stores` | the vector and text indexes `[stores]` names, embedded or on servers ([`open_index_stores`], [`Stores`]) | both |
//! | `data_dir` | the embedded data directory: its marker, generations, write lock and read leases ([`DataDir`]) | both |
//! | `disk_usage` | what a data directory takes on disk, per generation and store ([`DataDir::disk_usage`]) | `weft status` |
//! | `embedded` | opening the embedded indexes of a generation | `stores`, `data_dir` |
//! | `embedding` | the embedder from `[embedding]` ([`embedder_from_config`], [`LazyEmbedder`], [`embedder_tag`]) | both |
//! | [`generations`] | the data directory's generation mechanics: its registry ([`generations::FileRegistry`]), copying the live generation into a new one, counting and syncing one, a reader's collection of those it let go of (the lifecycle decisions are `weft_index::generations`') | `weft-index`, [`LiveQuery`] |
//!
//! Where data and model are is `weft_config::Locations`. Listing sources
//! and planning changes are not here (`weft-sources`, `weft-index`): the
//! query service links this crate and no source walker or grammar.

#![warn(missing_docs)]

mod build;
mod data_dir;
mod disk_usage;
mod embedded;
mod embedding;
pub mod generations;
mod query;
mod stores;

pub use build::{
    Load, WiringError, embed_batching, embedder, open_for_writing, reranker_from_config,
};
pub use data_dir::{DataDir, DataDirError, DataMeta, GenerationDir, ReadLease, WriteLock};
pub use disk_usage::{DiskUsage, GenerationUsage, Size};
pub use embedded::text_is_outdated;
pub use embedding::{
    EmbedBatching, EmbedderSetupError, LazyEmbedder, configured_model_id, embedder_from_config,
    embedder_tag, local_load_options, local_precision,
};
pub use query::{
    ANNOUNCE_EVERY, FollowState, LiveQuery, LiveSource, QueryEmbedder, QueryStack, open_query,
    open_query_generation, query_engine,
};
pub use stores::{
    IndexStores, StoreAccess, Stores, StoresError, open_index_stores, point_live_alias,
    remove_generation_indexes,
};
