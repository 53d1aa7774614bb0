//! # weft-index
//!
//! The indexing path of weft, written once for both deployments: what
//! changed in a source, cutting it, writing it, the embedded index run, and
//! the one manager of index generations both deployments go through.
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
//! | one `weft index` run: plan, write into a new generation, check, switch, collect | [`index_sources`] | `weft index`, `weft mcp`'s `index` tool |
//! | what a run would do, before it runs: documents, chunks, tokens to embed after reuse, time, cost, the token budget | [`estimate`]: [`estimate_sources`] | `weft index --dry-run`, [`index_sources`] (`embedding.max_embed_tokens`) |
//! | a generation's life: begin (or resume), the completeness check, switch, abort, collect | [`generations`]: [`GenerationManager`] over a `GenerationRegistry` and [`GenerationStores`] | [`index_sources`], `weft-crawler --rebuild`, `weft-crawler generations`, `weft-embedder` (the model) |
//!
//! Sources are listed by `weft-sources`; the stores, the embedder and the
//! data directory come from `weft-wiring`.
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
pub mod estimate;
pub mod generations;
mod index_run;
mod indexer;
pub mod writer;

pub use changes::{
    Change, ChangePlanner, ChangeSet, ChangedDocument, Compare, PlanError, PlanOptions,
};
pub use estimate::{EstimateBasis, RunEstimate, SourceEstimate, estimate_sources, estimate_with};
pub use generations::{GenerationManager, GenerationStores, GenerationsError};
pub use index_run::{
    GenerationOutcome, GitTrust, RunError, RunOptions, RunOutcome, RunSource, index_sources,
};
pub use indexer::{IndexError, IndexOptions, IndexSummary, Indexer, OpenIndexes, OverlaySummary};
pub use weft_sources::Issue;
pub use writer::{DocumentUpdate, IndexWriter, UpdateContent, WriteStats};
