//! # weft-core
//!
//! The domain model of weft, shared by every other crate: documents and their
//! stable ids, chunks with the fields DESIGN §3 lists, and the invariants that
//! every chunker must uphold.
//!
//! Nothing here does I/O. Other crates depend on `weft-core`; it depends on
//! nothing heavy.
//!
//! Modules:
//!
//! - ids and chunks (at the root): [`DocumentId`], [`ChunkId`], [`Chunk`],
//!   the uri and project rules;
//! - [`invariants`]: what every chunker's output must satisfy;
//! - [`overlays`]: branches and worktrees indexed as overlays of a project,
//!   and what a search of one reads;
//! - [`ports`]: the traits adapters implement (stores, embedders, rerankers);
//! - [`generations`]: index generations: the live one, rebuilds, removal;
//! - [`query`]: the query engine (DESIGN §5) and [`query::RequestBounds`],
//!   what one search may ask for, checked alike by every surface;
//! - [`retrieval`]: fusion, boosts, neighbour planning, spans, and context
//!   packing (`retrieval/pack/`: token counting, citations, packing into a
//!   budget, `get_context`'s expansion, Markdown rendering).
//!
//! ```
//! use weft_core::{ChunkId, DocumentId};
//!
//! let doc = DocumentId::new("guava", "guava/src/com/google/common/base/Strings.java");
//! assert_eq!(doc.as_str().len(), 16);
//! // Neighbour ids are computable without a lookup:
//! let third = ChunkId::new(&doc, 2);
//! assert_eq!(third, ChunkId::new(&doc, 2));
//! assert_ne!(third, ChunkId::new(&doc, 3));
//! ```

#![warn(missing_docs)]

mod chunk;
mod error_chain;
pub mod generations;
mod ids;
pub mod invariants;
pub mod overlays;
pub mod ports;
pub mod projects;
pub mod query;
pub mod retrieval;

pub use chunk::{
    Chunk, ContentType, EMBEDDING_FORMAT, IndexIdentity, ParseContentTypeError, ParseIdentityError,
    content_hash, embedding_key, embedding_tokens, split_camel_case,
};
pub use error_chain::error_chain;
pub use ids::{
    ChunkId, DocumentId, MAX_PROJECT_CHARS, MAX_URI_BYTES, canonical_uri, control_character,
    project_problem, uri_problem,
};
pub use ports::ErrorKind;
