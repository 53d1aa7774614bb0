//! The ports: what the pipeline needs from its stores, its embedding model and
//! its reranker. Each has an embedded implementation in `crates/adapters` and
//! (for the distributed deployment) a networked one.
//!
//! Every method is async so that networked adapters fit; embedded adapters
//! run their blocking work on a blocking thread pool.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::generations::{GenerationError, Generations};
use crate::retrieval::{ScoredChunk, SearchFilter};
use crate::{Chunk, ChunkId, DocumentId, IndexIdentity};

/// What kind of failure an error is: what its caller may do about it.
///
/// Adapters say it where they know it (an HTTP 401 from a server is
/// [`PermissionDenied`](ErrorKind::PermissionDenied), a missing collection
/// [`NotFound`](ErrorKind::NotFound), a refused connection or a timeout
/// [`Unavailable`](ErrorKind::Unavailable)); it travels with the error
/// through the ports and [`QueryError`](crate::query::QueryError), and is
/// turned into a gRPC code once (`weft-grpc`) and into an HTTP status once
/// (`weft-mcp`). The pipeline's workers retry every kind but
/// [`Invalid`](ErrorKind::Invalid), which no attempt can fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A service or resource cannot be reached or failed on its side
    /// (connection refused, timeout, 5xx, I/O error, a lock held by another
    /// process): another attempt later may pass.
    Unavailable,
    /// What was asked for does not exist (a collection, an index, a
    /// document, a file).
    NotFound,
    /// The request or its input is invalid: a server refused it as
    /// malformed (400, 422), a text the model cannot take, an argument out
    /// of bounds. Another attempt fails the same way.
    Invalid,
    /// The caller presented no valid credentials (the query API's own
    /// API keys).
    Unauthenticated,
    /// The credentials are valid but do not allow this: a server answered
    /// 401 or 403 to weft's store key, or an API key reads other projects.
    PermissionDenied,
    /// A quota or rate limit is exhausted (HTTP 429, a full disk, out of
    /// memory): another attempt later may pass.
    ResourceExhausted,
    /// The system is not in the state the operation needs, and waiting
    /// does not change that: no embedding model or reranker configured, a
    /// store made for another model or format, a write to a read-only store.
    FailedPrecondition,
    /// Something that should not happen: corrupt stored data, an answer
    /// that breaks its API's contract, a worker thread that panicked.
    Internal,
}

impl ErrorKind {
    /// Its name in logs: `unavailable`, `not_found`, …
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::ResourceExhausted => "resource_exhausted",
            ErrorKind::FailedPrecondition => "failed_precondition",
            ErrorKind::Internal => "internal",
        }
    }

    /// The kind of an HTTP error status a server answered weft with:
    /// 401 and 403 → [`PermissionDenied`](ErrorKind::PermissionDenied)
    /// (weft's key was refused), 404 and 410 → `NotFound`, 429 →
    /// `ResourceExhausted`, 408 and 5xx → `Unavailable`, 412 →
    /// `FailedPrecondition`, any other 4xx → `Invalid`.
    pub fn of_http_status(status: u16) -> Self {
        match status {
            401 | 403 => ErrorKind::PermissionDenied,
            404 | 410 => ErrorKind::NotFound,
            408 => ErrorKind::Unavailable,
            412 => ErrorKind::FailedPrecondition,
            429 => ErrorKind::ResourceExhausted,
            400..=499 => ErrorKind::Invalid,
            _ => ErrorKind::Unavailable,
        }
    }

    /// The kind of an I/O error: a missing file is `NotFound`, a refused
    /// one `PermissionDenied`, a full disk `ResourceExhausted`, data that
    /// does not read as it should `Internal`; anything else (interrupted,
    /// timed out, refused connection) `Unavailable`.
    pub fn of_io(kind: std::io::ErrorKind) -> Self {
        use std::io::ErrorKind as Io;
        match kind {
            Io::NotFound => ErrorKind::NotFound,
            Io::PermissionDenied | Io::ReadOnlyFilesystem => ErrorKind::PermissionDenied,
            Io::StorageFull | Io::QuotaExceeded | Io::OutOfMemory | Io::FileTooLarge => {
                ErrorKind::ResourceExhausted
            }
            Io::InvalidInput => ErrorKind::Invalid,
            Io::InvalidData | Io::UnexpectedEof => ErrorKind::Internal,
            _ => ErrorKind::Unavailable,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error from an adapter behind a port: which component failed, what
/// kind of failure it is, and why.
#[derive(Debug, thiserror::Error)]
#[error("{component}: {source}")]
pub struct PortError {
    /// The failing component, e.g. "vector index (qdrant-edge)".
    pub component: String,
    /// What kind of failure it is.
    pub kind: ErrorKind,
    /// The underlying error.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl PortError {
    /// Wraps `source` as an error of `kind` of `component`.
    pub fn new(
        kind: ErrorKind,
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            component: component.into(),
            kind,
            source: source.into(),
        }
    }

    /// [`ErrorKind::Unavailable`]: `component` cannot be reached or failed
    /// on its side; another attempt may pass.
    pub fn unavailable(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::new(ErrorKind::Unavailable, component, source)
    }

    /// [`ErrorKind::NotFound`]: what was asked of `component` does not exist.
    pub fn not_found(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::new(ErrorKind::NotFound, component, source)
    }

    /// [`ErrorKind::Invalid`]: `component` refused the request or its input.
    pub fn invalid(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::new(ErrorKind::Invalid, component, source)
    }

    /// [`ErrorKind::PermissionDenied`]: `component` refused weft's credentials.
    pub fn permission_denied(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::new(ErrorKind::PermissionDenied, component, source)
    }

    /// [`ErrorKind::ResourceExhausted`]: a quota or rate limit of `component`.
    pub fn resource_exhausted(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::new(ErrorKind::ResourceExhausted, component, source)
    }

    /// [`ErrorKind::FailedPrecondition`]: `component` is not in the state
    /// the call needs.
    pub fn failed_precondition(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::new(ErrorKind::FailedPrecondition, component, source)
    }

    /// [`ErrorKind::Internal`]: corrupt data or a broken invariant in
    /// `component`.
    pub fn internal(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::new(ErrorKind::Internal, component, source)
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl RegistryError {
    /// What kind of failure it is: a refused transition is
    /// [`ErrorKind::FailedPrecondition`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            RegistryError::Transition(_) => ErrorKind::FailedPrecondition,
            RegistryError::Port(e) => e.kind,
        }
    }
}

/// Result of a port call.
pub type PortResult<T> = Result<T, PortError>;

/// Nearest-neighbour search over chunk embeddings. Points are keyed by
/// [`ChunkId`] and carry the chunk, so hits and neighbours come back whole.
#[async_trait]
pub trait VectorIndex: Send + Sync {
    /// The dimension the index was created with.
    fn dimension(&self) -> usize;
    /// Inserts or replaces `chunks` with their `vectors` and the vectors'
    /// [`embedding_key`](crate::embedding_key)s (same order, same length).
    async fn upsert(
        &self,
        chunks: &[Chunk],
        vectors: &[Vec<f32>],
        keys: &[String],
    ) -> PortResult<()>;
    /// Deletes the chunks of `document` with `chunk_index >= from_index`
    /// (0 deletes the whole document).
    async fn delete_document_from(&self, document: &DocumentId, from_index: u32) -> PortResult<()>;
    /// Deletes every chunk of `project`.
    async fn delete_project(&self, project: &str) -> PortResult<()>;
    /// The `limit` chunks nearest to `vector` that pass `filter`, best first.
    async fn search(
        &self,
        vector: &[f32],
        filter: &SearchFilter,
        limit: usize,
    ) -> PortResult<Vec<ScoredChunk>>;
    /// The chunks with these ids, in one call; missing ids are skipped.
    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>>;
    /// Stored vectors by their [`embedding_key`](crate::embedding_key) (the
    /// embedder and the text they were made from), in one call: one vector
    /// per key found; keys not stored are absent.
    async fn vectors_by_key(&self, keys: &[String]) -> PortResult<HashMap<String, Vec<f32>>>;
    /// Number of chunks stored.
    async fn count(&self) -> PortResult<u64>;
    /// Makes written data durable and searchable. Cheap enough to call at
    /// every checkpoint of a bulk load.
    async fn commit(&self) -> PortResult<()>;
    /// Builds the search structures (e.g. HNSW graphs) after a bulk load,
    /// so that searches are fast; may take a while. The default does nothing.
    async fn optimize(&self) -> PortResult<()> {
        Ok(())
    }
}

/// Full-text (BM25) search over chunks.
#[async_trait]
pub trait TextIndex: Send + Sync {
    /// Inserts or replaces `chunks`.
    async fn upsert(&self, chunks: &[Chunk]) -> PortResult<()>;
    /// Deletes the chunks of `document` with `chunk_index >= from_index`.
    async fn delete_document_from(&self, document: &DocumentId, from_index: u32) -> PortResult<()>;
    /// Deletes every chunk of `project`.
    async fn delete_project(&self, project: &str) -> PortResult<()>;
    /// The `limit` best chunks for the plain-words `query` that pass `filter`.
    async fn search(
        &self,
        query: &str,
        filter: &SearchFilter,
        limit: usize,
    ) -> PortResult<Vec<ScoredChunk>>;
    /// The chunks with these ids, in one call; missing ids are skipped.
    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>>;
    /// Number of chunks stored.
    async fn count(&self) -> PortResult<u64>;
    /// Makes written data durable and searchable.
    async fn commit(&self) -> PortResult<()>;
}

/// What the catalog knows about one indexed document.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DocumentRecord {
    /// The document's id.
    pub document_id: DocumentId,
    /// Its project.
    pub project: String,
    /// Its uri within the project.
    pub uri: String,
    /// sha256 of its content as read.
    pub content_hash: String,
    /// How many chunks it was stored as.
    pub chunk_count: u32,
    /// What produced its chunks and vectors: the embedder, the
    /// embedded-text format and the chunker. A document recorded with
    /// another identity than the current one is indexed again. Stored under
    /// the name `embedding` as [`IndexIdentity::tag`].
    #[serde(rename = "embedding")]
    pub identity: IndexIdentity,
    /// Which version of the document this is, where versions are ordered
    /// (the distributed pipeline: the document's sequence number in the
    /// documents stream); 0 when unknown. An older version never replaces
    /// a newer one.
    #[serde(default)]
    pub version: u64,
}

/// Where a project came from and how far it has been indexed.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProjectState {
    /// The source as given (a path, git URL or start URL).
    pub source: String,
    /// For git sources, the last indexed commit.
    pub revision: Option<String>,
    /// When the project was last indexed, in seconds since the Unix epoch
    /// (absent in catalogs written before it was recorded).
    #[serde(default)]
    pub indexed_at: Option<u64>,
    /// For a branch or worktree indexed as an overlay of another project
    /// (`weft index --branch`): its base and what it hides of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<crate::overlays::Overlay>,
}

impl ProjectState {
    /// Seconds since the Unix epoch now: what [`ProjectState::indexed_at`] records.
    pub fn now() -> Option<u64> {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs())
    }
}

/// What is indexed, by content hash: decides what a re-index skips.
#[async_trait]
pub trait Catalog: Send + Sync {
    /// The record of one document, if indexed.
    async fn document(&self, id: &DocumentId) -> PortResult<Option<DocumentRecord>>;
    /// Inserts or replaces records.
    async fn put_documents(&self, records: &[DocumentRecord]) -> PortResult<()>;
    /// Removes records.
    async fn remove_documents(&self, ids: &[DocumentId]) -> PortResult<()>;
    /// All records, or those of one project.
    async fn documents(&self, project: Option<&str>) -> PortResult<Vec<DocumentRecord>>;
    /// A project's state.
    async fn project(&self, name: &str) -> PortResult<Option<ProjectState>>;
    /// Records a project's state.
    async fn put_project(&self, name: &str, state: &ProjectState) -> PortResult<()>;
    /// All projects with their states.
    async fn projects(&self) -> PortResult<Vec<(String, ProjectState)>>;
    /// Forgets a project (its document records are removed separately).
    async fn remove_project(&self, name: &str) -> PortResult<()>;

    /// The last indexed commit of every project that has one (git sources),
    /// for citations.
    async fn revisions(&self) -> PortResult<std::collections::HashMap<String, String>> {
        Ok(self
            .projects()
            .await?
            .into_iter()
            .filter_map(|(name, state)| Some((name, state.revision?)))
            .collect())
    }
}

/// Why a change of the [`Generations`] record did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The change is not allowed (e.g. a rebuild is already running).
    #[error(transparent)]
    Transition(#[from] GenerationError),
    /// The record could not be read or written.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// A change of the [`Generations`] record: applied to the current record,
/// perhaps more than once when another writer changed it meanwhile.
pub type GenerationChange<'a> =
    dyn Fn(&mut Generations) -> Result<(), GenerationError> + Send + Sync + 'a;

/// Where a deployment's [`Generations`] record lives: the embedded data
/// directory's `generations.json`, or a NATS key-value entry shared by the
/// services. Its one atomic write is the switch of the live generation.
#[async_trait]
pub trait GenerationRegistry: Send + Sync {
    /// The record. A deployment that never recorded one reads as its
    /// unnumbered stores live as generation 0 (or, with nothing indexed at
    /// all, as no generation).
    async fn load(&self) -> PortResult<Generations>;
    /// Applies `change` to the current record and writes it atomically (a
    /// compare-and-swap: a concurrent writer's change is never lost); the
    /// record as written.
    async fn update(&self, change: &GenerationChange<'_>) -> Result<Generations, RegistryError>;
    /// Says that `reader` (a process) reads `generation` now, so it is not
    /// removed under it; a registry that needs no such word (the data
    /// directory's: readers hold a lease there) ignores it.
    async fn reading(&self, _reader: &str, _generation: u32) -> PortResult<()> {
        Ok(())
    }
    /// The generations readers said they read recently.
    async fn read_generations(&self) -> PortResult<Vec<u32>> {
        Ok(Vec::new())
    }
    /// The catalog of `generation`, where the registry's deployment keeps
    /// its catalogs beside the record (the services' NATS buckets), for a
    /// reader that holds none: the query service resolves branch overlays
    /// with it ([`crate::overlays::resolve`]). `None` (the default) where
    /// the catalog is the data directory's, which readers open themselves.
    async fn catalog_of(
        &self,
        _generation: u32,
    ) -> PortResult<Option<std::sync::Arc<dyn Catalog>>> {
        Ok(None)
    }
}

/// Turns texts into unit vectors.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Identifies the model, e.g. "all-MiniLM-L6-v2"; recorded with every document.
    fn model_id(&self) -> &str;
    /// Vector dimension.
    fn dimension(&self) -> usize;
    /// One vector per text, in order: texts to be found (chunks).
    async fn embed(&self, texts: &[String]) -> PortResult<Vec<Vec<f32>>>;
    /// One vector per search query, in order. Models trained with distinct
    /// query and document inputs (e5's `query: ` / `passage: `, APIs with an
    /// `input_type`) embed queries differently; by default a query is
    /// embedded like any text. Wrappers must forward this, not fall back.
    async fn embed_queries(&self, queries: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.embed(queries).await
    }
}

/// Scores (query, passage) pairs; higher is more relevant.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// Identifies the reranker, for status and explain output.
    fn name(&self) -> &str;
    /// One score per passage, in order.
    async fn rerank(&self, query: &str, passages: &[String]) -> PortResult<Vec<f32>>;
}

/// The reranker that keeps the fused order: every passage scores the same.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRerank;

#[async_trait]
impl Reranker for NoRerank {
    fn name(&self) -> &str {
        "none"
    }
    async fn rerank(&self, _query: &str, passages: &[String]) -> PortResult<Vec<f32>> {
        Ok(vec![0.0; passages.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_state_written_before_indexed_at_still_reads() {
        let old: ProjectState =
            serde_json::from_str(r#"{"source":"https://x/r.git","revision":"abc"}"#).unwrap();
        assert_eq!(old.indexed_at, None);
        assert_eq!(old.revision.as_deref(), Some("abc"));
        let now = ProjectState::now().unwrap();
        assert!(now > 1_700_000_000);
    }

    #[test]
    fn a_port_error_keeps_its_kind_and_its_message() {
        let e = PortError::not_found("vector index (Qdrant c)", "collection c does not exist");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(
            e.to_string(),
            "vector index (Qdrant c): collection c does not exist"
        );
        assert_eq!(ErrorKind::of_http_status(401), ErrorKind::PermissionDenied);
        assert_eq!(ErrorKind::of_http_status(403), ErrorKind::PermissionDenied);
        assert_eq!(ErrorKind::of_http_status(404), ErrorKind::NotFound);
        assert_eq!(ErrorKind::of_http_status(422), ErrorKind::Invalid);
        assert_eq!(ErrorKind::of_http_status(429), ErrorKind::ResourceExhausted);
        assert_eq!(ErrorKind::of_http_status(503), ErrorKind::Unavailable);
        assert_eq!(
            ErrorKind::of_io(std::io::ErrorKind::ConnectionRefused),
            ErrorKind::Unavailable
        );
        assert_eq!(ErrorKind::Unavailable.to_string(), "unavailable");
    }
}
