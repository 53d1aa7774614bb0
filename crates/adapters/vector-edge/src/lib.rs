//! # weft-vector-edge
//!
//! The embedded vector index: one [qdrant-edge] shard in a directory of the
//! data directory. Points are keyed by [`ChunkId`] (a UUID) and carry the
//! whole chunk as payload, so search hits and neighbour fetches come back as
//! chunks, as they do from a Qdrant server. Payload indexes on `project`,
//! `document_id`, `chunk_index`, `content_type`, `language` and `path_scopes`
//! (every directory of the chunk's uri, and the uri) serve the filters.
//!
//! qdrant-edge is synchronous; [`EdgeVectorIndex`]'s [`VectorIndex`] methods
//! run it on tokio's blocking pool. [`VectorIndex::commit`] flushes;
//! [`VectorIndex::optimize`] runs the optimizers, which build the HNSW index
//! after bulk loads.
//!
//! ```no_run
//! # fn main() -> Result<(), weft_vector_edge::VectorIndexError> {
//! let index = weft_vector_edge::EdgeVectorIndex::open_or_create("data/vectors".as_ref(), 384)?;
//! assert_eq!(index.dimension(), 384);
//! # Ok(()) }
//! ```
//!
//! [qdrant-edge]: https://crates.io/crates/qdrant-edge

#![warn(missing_docs)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use qdrant_edge::{
    CountRequest, DEFAULT_VECTOR_NAME, Distance, EdgeConfigBuilder, EdgeShard,
    EdgeVectorParamsBuilder, FieldIndexOperations, Filter, NamedQuery, PayloadFieldSchema, PointId,
    PointInsertOperations, PointOperations, PointStruct, QueryEnum, ScrollRequest, SearchRequest,
    UpdateOperation, VectorInternal, VectorStructInternal, WithPayloadInterface, WithVector,
};
use serde_json::{Value, json};
use weft_core::ports::{ErrorKind, PortError, PortResult, VectorIndex};
use weft_core::retrieval::{ScoredChunk, SearchFilter, path_scopes};
use weft_core::{Chunk, ChunkId, DocumentId};

/// The payload key holding the chunk's path scopes (not a chunk field).
const PATH_SCOPES: &str = "path_scopes";
/// The payload key holding the vector's [`weft_core::embedding_key`] (not a
/// chunk field).
const EMBEDDING_KEY: &str = "embedding_key";
const COMPONENT: &str = "vector index (qdrant-edge)";
/// qdrant-edge's write-ahead log directory in a shard, locked (`flock`) by
/// the process that opened the shard.
const WAL_DIR: &str = "wal";

/// What went wrong with the vector index.
#[derive(Debug, thiserror::Error)]
pub enum VectorIndexError {
    /// The directory holds no readable shard.
    #[error("vector index {path} cannot be opened ({source}); remove it and index again")]
    Unreadable {
        /// The shard directory.
        path: PathBuf,
        /// What qdrant-edge said.
        #[source]
        source: BoxError,
    },
    /// Another process holds the shard's write-ahead log: a live writer,
    /// not a damaged index.
    #[error(
        "vector index {path} {}",
        weft_file_locks::written_elsewhere(holder.as_ref())
    )]
    Locked {
        /// The shard directory.
        path: PathBuf,
        /// The process holding the lock, when it can be seen.
        holder: Option<weft_file_locks::LockHolder>,
    },
    /// The shard was made for vectors of another length (another model).
    #[error(
        "vector index {path} holds {found}-dimensional vectors but the model makes {expected}: \
         it was made by another model"
    )]
    DimensionMismatch {
        /// The shard directory.
        path: PathBuf,
        /// The dimension the model produces.
        expected: usize,
        /// The dimension the shard was created with.
        found: usize,
    },
    /// An operation failed.
    #[error("qdrant-edge: {0}")]
    Operation(#[source] BoxError),
    /// A stored payload is not a chunk.
    #[error("stored point {id} is not a weft chunk: {source}")]
    CorruptPayload {
        /// The point id.
        id: String,
        /// What failed to decode.
        #[source]
        source: BoxError,
    },
    /// A write to an index opened for reading only.
    #[error("vector index {0} is opened for reading only")]
    ReadOnly(PathBuf),
    /// Vectors and chunks do not pair up.
    #[error("{chunks} chunks but {vectors} vectors, or a vector of the wrong length")]
    Mismatch {
        /// Number of chunks given.
        chunks: usize,
        /// Number of vectors given.
        vectors: usize,
    },
}

impl VectorIndexError {
    /// What kind of failure it is: a shard that does not open, or a stored
    /// payload that is not a chunk, `Internal`; a shard of another
    /// dimension or a write to a read-only one `FailedPrecondition`;
    /// vectors that do not pair with their chunks `Invalid`; an operation
    /// the kind qdrant-edge's error says.
    pub fn kind(&self) -> ErrorKind {
        match self {
            VectorIndexError::Unreadable { .. } | VectorIndexError::CorruptPayload { .. } => {
                ErrorKind::Internal
            }
            VectorIndexError::DimensionMismatch { .. } | VectorIndexError::ReadOnly(_) => {
                ErrorKind::FailedPrecondition
            }
            VectorIndexError::Mismatch { .. } => ErrorKind::Invalid,
            VectorIndexError::Locked { .. } => ErrorKind::Unavailable,
            VectorIndexError::Operation(source) => kind_of_operation(source.as_ref()),
        }
    }
}

/// The kind of a failed qdrant-edge operation: input it refuses
/// (a wrong dimension, a payload of another type) `Invalid`, a missing
/// point `NotFound`, memory `ResourceExhausted`, a cancelled or timed-out
/// operation `Unavailable`; storage failures and anything else `Internal`.
fn kind_of_operation(error: &(dyn std::error::Error + Send + Sync + 'static)) -> ErrorKind {
    use qdrant_edge::OperationError as E;
    let Some(e) = error.downcast_ref::<E>() else {
        return ErrorKind::Internal;
    };
    match e {
        E::WrongVectorDimension { .. }
        | E::VectorNameNotExists { .. }
        | E::TypeError { .. }
        | E::TypeInferenceError { .. }
        | E::ValidationError { .. }
        | E::WrongSparse
        | E::WrongMulti
        | E::VariableTypeError { .. }
        | E::NonFiniteNumber { .. } => ErrorKind::Invalid,
        E::PointIdError { .. } => ErrorKind::NotFound,
        E::OutOfMemory { .. } => ErrorKind::ResourceExhausted,
        E::Cancelled { .. } | E::Timeout { .. } => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

/// The errors of qdrant-edge and serde, kept as causes.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn op(e: impl Into<BoxError>) -> VectorIndexError {
    VectorIndexError::Operation(e.into())
}

/// A qdrant-edge shard of chunk embeddings. Cloning is cheap and shares the shard.
#[derive(Clone)]
pub struct EdgeVectorIndex {
    shard: Arc<EdgeShard>,
    dimension: usize,
    path: PathBuf,
    /// Opened for reading only: the private directory the shard was
    /// loaded through (removed when the last clone is dropped).
    reader: Option<Arc<ReaderDir>>,
}

/// The write-ahead log segment size of a reader, which writes nothing.
const READER_LOG_BYTES: usize = 64 * 1024;

/// A reader's private view of a shard: its own empty write-ahead log and
/// links to the shard's segments.
struct ReaderDir(PathBuf);

impl Drop for ReaderDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::fmt::Debug for EdgeVectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeVectorIndex")
            .field("path", &self.path)
            .field("dimension", &self.dimension)
            .finish()
    }
}

/// That the shard loaded from `dir` stores vectors of `dimension` floats.
fn check_dimension(
    shard: &EdgeShard,
    dir: &Path,
    dimension: usize,
) -> Result<(), VectorIndexError> {
    let found = shard
        .config()
        .vectors
        .get(DEFAULT_VECTOR_NAME)
        .map(|v| v.size)
        .ok_or_else(|| VectorIndexError::Unreadable {
            path: dir.to_owned(),
            source: "it has no default dense vector".into(),
        })?;
    if found != dimension {
        return Err(VectorIndexError::DimensionMismatch {
            path: dir.to_owned(),
            expected: dimension,
            found,
        });
    }
    Ok(())
}

impl EdgeVectorIndex {
    /// Opens the shard in `dir`, or creates it (with its payload indexes) for
    /// vectors of `dimension` floats. An existing shard of another dimension
    /// is an error, not silently replaced.
    pub fn open_or_create(dir: &Path, dimension: usize) -> Result<Self, VectorIndexError> {
        let unreadable = |source: BoxError| VectorIndexError::Unreadable {
            path: dir.to_owned(),
            source,
        };
        let exists = dir.join("edge_config.json").exists() || dir.join("segments").exists();
        if exists {
            let shard = EdgeShard::load(dir, None).map_err(|e| {
                // The write-ahead log is locked for the process that opened
                // the shard: a refusal while another holds it says who.
                match weft_file_locks::holder_of(&dir.join(WAL_DIR)) {
                    Some(holder) => VectorIndexError::Locked {
                        path: dir.to_owned(),
                        holder: Some(holder),
                    },
                    None => unreadable(e.into()),
                }
            })?;
            check_dimension(&shard, dir, dimension)?;
            // A shard made before vectors were looked up by embedding key
            // gets that payload index once, so lookups never scan.
            let keyed = shard
                .info()
                .payload_schema
                .keys()
                .any(|k| k.to_string() == EMBEDDING_KEY);
            if !keyed {
                create_payload_index(&shard, EMBEDDING_KEY, embedding_key_schema())?;
            }
            return Ok(Self {
                shard: Arc::new(shard),
                dimension,
                path: dir.to_owned(),
                reader: None,
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| unreadable(e.into()))?;
        let config = EdgeConfigBuilder::new()
            .vector(
                DEFAULT_VECTOR_NAME,
                EdgeVectorParamsBuilder::new(dimension, Distance::Cosine).build(),
            )
            .on_disk_payload(true)
            .build();
        let shard = EdgeShard::new(dir, config).map_err(|e| unreadable(e.into()))?;
        // The document id and the embedding key are looked up only while
        // indexing (deletes, stored vectors by text), and each has a value
        // per document or per chunk: their indexes stay on disk, read
        // through the page cache, instead of being built in memory at every
        // open (at 1M chunks about half of an open's time, bench/RESULTS.md).
        // No extra HNSW links per payload value ("payload-aware"
        // sub-graphs): they cost more than the main graph to build (every
        // directory in `path_scopes` is a value, and one project is all
        // points), while a filter is either selective enough for an exact
        // scan of the payload index's matches or broad enough for the main
        // graph.
        for (field, schema) in [
            ("project", json!({"type": "keyword", "enable_hnsw": false})),
            (
                "document_id",
                json!({"type": "keyword", "enable_hnsw": false, "on_disk": true}),
            ),
            (
                "content_type",
                json!({"type": "keyword", "enable_hnsw": false}),
            ),
            ("language", json!({"type": "keyword", "enable_hnsw": false})),
            (
                PATH_SCOPES,
                json!({"type": "keyword", "enable_hnsw": false}),
            ),
            (EMBEDDING_KEY, embedding_key_schema()),
            (
                "chunk_index",
                json!({"type": "integer", "lookup": true, "range": true, "enable_hnsw": false}),
            ),
        ] {
            create_payload_index(&shard, field, schema)?;
        }
        Ok(Self {
            shard: Arc::new(shard),
            dimension,
            path: dir.to_owned(),
            reader: None,
        })
    }

    /// Opens the shard in `dir` for searching only, beside any number of
    /// other readers. qdrant-edge locks a shard's write-ahead log for the
    /// process that opens it; a reader instead loads the shard through a
    /// private directory under `dir`'s parent (`<dir>.readers/`) holding an
    /// empty log of its own and links to the shard's segments. The shard
    /// must be complete (flushed) and written by no one while it is read:
    /// what an index generation is once live. Writes fail.
    pub fn open_read_only(dir: &Path, dimension: usize) -> Result<Self, VectorIndexError> {
        let unreadable = |source: BoxError| VectorIndexError::Unreadable {
            path: dir.to_owned(),
            source,
        };
        let segments = dir.join("segments");
        if !dir.join("edge_config.json").exists() || !segments.is_dir() {
            return Err(unreadable("no vector index here".into()));
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "vectors".into());
        let readers = dir.with_file_name(format!("{name}.readers"));
        std::fs::create_dir_all(&readers).map_err(|e| unreadable(e.into()))?;
        let private = readers.join(format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let view = ReaderDir(private.clone());
        let private_segments = private.join("segments");
        std::fs::create_dir_all(&private_segments).map_err(|e| unreadable(e.into()))?;
        for entry in std::fs::read_dir(dir).map_err(|e| unreadable(e.into()))? {
            let entry = entry.map_err(|e| unreadable(e.into()))?;
            let kind = entry.file_type().map_err(|e| unreadable(e.into()))?;
            if kind.is_file() {
                std::fs::copy(entry.path(), private.join(entry.file_name()))
                    .map_err(|e| unreadable(e.into()))?;
            }
        }
        for entry in std::fs::read_dir(&segments).map_err(|e| unreadable(e.into()))? {
            let entry = entry.map_err(|e| unreadable(e.into()))?;
            let target = std::fs::canonicalize(entry.path()).map_err(|e| unreadable(e.into()))?;
            std::os::unix::fs::symlink(&target, private_segments.join(entry.file_name()))
                .map_err(|e| unreadable(e.into()))?;
        }
        // A reader writes no log: a small one, not qdrant's 2 × 32 MiB.
        let mut config = match qdrant_edge::EdgeConfig::load(&private) {
            Some(config) => config.map_err(|e| unreadable(e.into()))?,
            None => return Err(unreadable("no edge_config.json".into())),
        };
        config.wal_options = Some(qdrant_edge::WalOptions {
            segment_capacity: READER_LOG_BYTES,
            ..Default::default()
        });
        let shard = EdgeShard::load(&private, Some(config)).map_err(|e| unreadable(e.into()))?;
        check_dimension(&shard, dir, dimension)?;
        Ok(Self {
            shard: Arc::new(shard),
            dimension,
            path: dir.to_owned(),
            reader: Some(Arc::new(view)),
        })
    }

    fn writable(&self) -> Result<(), VectorIndexError> {
        match self.reader {
            Some(_) => Err(VectorIndexError::ReadOnly(self.path.clone())),
            None => Ok(()),
        }
    }

    /// The length of the stored vectors.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Inserts or replaces `chunks` with their vectors and the vectors'
    /// [`weft_core::embedding_key`]s.
    pub fn upsert_blocking(
        &self,
        chunks: &[Chunk],
        vectors: &[Vec<f32>],
        keys: &[String],
    ) -> Result<(), VectorIndexError> {
        self.writable()?;
        if chunks.len() != vectors.len()
            || keys.len() != chunks.len()
            || vectors.iter().any(|v| v.len() != self.dimension)
        {
            return Err(VectorIndexError::Mismatch {
                chunks: chunks.len(),
                vectors: vectors.len(),
            });
        }
        if chunks.is_empty() {
            return Ok(());
        }
        let mut points = Vec::with_capacity(chunks.len());
        for ((chunk, vector), key) in chunks.iter().zip(vectors).zip(keys) {
            let mut payload = serde_json::to_value(chunk).map_err(op)?;
            if let Value::Object(map) = &mut payload {
                map.insert(PATH_SCOPES.into(), json!(path_scopes(&chunk.uri)));
                map.insert(EMBEDDING_KEY.into(), json!(key));
            }
            points.push(
                PointStruct::new(PointId::Uuid(chunk.id().as_uuid()), vector.clone(), payload)
                    .into(),
            );
        }
        self.shard
            .update(UpdateOperation::PointOperation(
                PointOperations::UpsertPoints(PointInsertOperations::PointsList(points)),
            ))
            .map_err(op)
    }

    /// Deletes the chunks of `document` with `chunk_index >= from`.
    pub fn delete_document_from_blocking(
        &self,
        document: &DocumentId,
        from: u32,
    ) -> Result<(), VectorIndexError> {
        let filter = json!({"must": [
            {"key": "document_id", "match": {"value": document.as_str()}},
            {"key": "chunk_index", "range": {"gte": from}},
        ]});
        self.delete_by(filter)
    }

    /// Deletes every chunk of `project`.
    pub fn delete_project_blocking(&self, project: &str) -> Result<(), VectorIndexError> {
        self.delete_by(json!({"must": [{"key": "project", "match": {"value": project}}]}))
    }

    fn delete_by(&self, filter: Value) -> Result<(), VectorIndexError> {
        self.writable()?;
        let filter: Filter = serde_json::from_value(filter).map_err(op)?;
        self.shard
            .update(UpdateOperation::PointOperation(
                PointOperations::DeletePointsByFilter(filter),
            ))
            .map_err(op)
    }

    /// The `limit` chunks nearest `vector` (cosine) that pass `filter`, best first.
    pub fn search_blocking(
        &self,
        vector: &[f32],
        filter: &SearchFilter,
        limit: usize,
    ) -> Result<Vec<ScoredChunk>, VectorIndexError> {
        if vector.len() != self.dimension {
            return Err(VectorIndexError::Mismatch {
                chunks: 1,
                vectors: 1,
            });
        }
        let points = self
            .shard
            .search(SearchRequest {
                query: QueryEnum::Nearest(NamedQuery {
                    query: vector.to_vec().into(),
                    using: None,
                }),
                filter: to_filter(filter)?,
                params: None,
                limit,
                offset: 0,
                with_payload: Some(WithPayloadInterface::Bool(true)),
                with_vector: Some(WithVector::Bool(false)),
                score_threshold: None,
            })
            .map_err(op)?;
        points
            .into_iter()
            .map(|p| {
                Ok(ScoredChunk {
                    chunk: decode(&p.id, p.payload)?,
                    score: p.score,
                })
            })
            .collect()
    }

    /// The chunks with these ids, in one call; missing ids are skipped.
    pub fn get_blocking(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>, VectorIndexError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<PointId> = ids.iter().map(|id| PointId::Uuid(id.as_uuid())).collect();
        let records = self
            .shard
            .retrieve(
                &ids,
                Some(WithPayloadInterface::Bool(true)),
                Some(WithVector::Bool(false)),
            )
            .map_err(op)?;
        records
            .into_iter()
            .map(|r| decode(&r.id, r.payload))
            .collect()
    }

    /// Stored vectors by the embedding key of their text; see
    /// [`VectorIndex::vectors_by_key`].
    pub fn vectors_by_key_blocking(
        &self,
        keys: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, VectorIndexError> {
        let mut found = HashMap::new();
        if keys.is_empty() {
            return Ok(found);
        }
        let filter: Filter = serde_json::from_value(
            json!({"must": [{"key": EMBEDDING_KEY, "match": {"any": keys}}]}),
        )
        .map_err(op)?;
        let mut offset = None;
        loop {
            let (records, next) = self
                .shard
                .scroll(ScrollRequest {
                    offset,
                    limit: Some(keys.len()),
                    filter: Some(filter.clone()),
                    with_payload: Some(WithPayloadInterface::Fields(vec![
                        EMBEDDING_KEY
                            .try_into()
                            .map_err(|()| op("payload field name"))?,
                    ])),
                    with_vector: WithVector::Bool(true),
                    order_by: None,
                })
                .map_err(op)?;
            for record in records {
                let key = record
                    .payload
                    .as_ref()
                    .and_then(|p| p.0.get(EMBEDDING_KEY))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let vector = match record.vector {
                    Some(VectorStructInternal::Single(v)) => Some(v),
                    Some(VectorStructInternal::Named(mut named)) => {
                        match named.remove(DEFAULT_VECTOR_NAME) {
                            Some(VectorInternal::Dense(v)) => Some(v),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                if let (Some(key), Some(vector)) = (key, vector)
                    && vector.len() == self.dimension
                {
                    found.entry(key).or_insert(vector);
                }
            }
            // Several chunks may share a text: scroll on until every key
            // is found or nothing is left.
            match next {
                Some(id) if found.len() < keys.len() => offset = Some(id),
                _ => return Ok(found),
            }
        }
    }

    /// Calls `each` with every stored chunk, `batch` at a time (in point id
    /// order, not document order): for rebuilding another index from the
    /// chunks this one holds. Stops at the first error `each` returns.
    pub fn for_each_chunk_blocking<E: From<VectorIndexError>>(
        &self,
        batch: usize,
        mut each: impl FnMut(Vec<Chunk>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut offset = None;
        loop {
            let (records, next) = self
                .shard
                .scroll(ScrollRequest {
                    offset,
                    limit: Some(batch.max(1)),
                    filter: None,
                    with_payload: Some(WithPayloadInterface::Bool(true)),
                    with_vector: WithVector::Bool(false),
                    order_by: None,
                })
                .map_err(op)?;
            let chunks = records
                .into_iter()
                .map(|r| decode(&r.id, r.payload))
                .collect::<Result<Vec<_>, _>>()?;
            if !chunks.is_empty() {
                each(chunks)?;
            }
            match next {
                Some(id) => offset = Some(id),
                None => return Ok(()),
            }
        }
    }

    /// Number of stored chunks.
    pub fn count_blocking(&self) -> Result<u64, VectorIndexError> {
        let n = self
            .shard
            .count(CountRequest {
                filter: None,
                exact: true,
            })
            .map_err(op)?;
        Ok(n as u64)
    }

    /// Flushes to disk: what was written is durable (and searchable).
    pub fn commit_blocking(&self) -> Result<(), VectorIndexError> {
        if self.reader.is_some() {
            return Ok(()); // nothing written; the shard is not ours to flush
        }
        self.shard.flush();
        Ok(())
    }

    /// Runs the optimizers (HNSW building, vacuum) and flushes. Call it once
    /// after a bulk load, not per batch: each run revisits grown segments.
    pub fn optimize_blocking(&self) -> Result<(), VectorIndexError> {
        self.writable()?;
        self.shard.optimize().map_err(op)?;
        self.shard.flush();
        Ok(())
    }
}

/// The embedding key's payload index: on disk (see `open_or_create`).
fn embedding_key_schema() -> Value {
    json!({"type": "keyword", "enable_hnsw": false, "on_disk": true})
}

/// Creates the payload index of `field` described by `schema` (Qdrant's
/// JSON form).
fn create_payload_index(
    shard: &EdgeShard,
    field: &str,
    schema: Value,
) -> Result<(), VectorIndexError> {
    let field_name = field
        .try_into()
        .map_err(|()| op(format!("invalid payload field name {field}")))?;
    let field_schema: PayloadFieldSchema = serde_json::from_value(schema)
        .map_err(|e| op(format!("payload index schema of {field}: {e}")))?;
    shard
        .update(UpdateOperation::FieldIndexOperation(
            FieldIndexOperations::CreateIndex(qdrant_edge::CreateIndex {
                field_name,
                field_schema: Some(field_schema),
            }),
        ))
        .map_err(op)
}

/// The filter of a [`SearchFilter`] in Qdrant's JSON filter language.
fn to_filter(filter: &SearchFilter) -> Result<Option<Filter>, VectorIndexError> {
    let mut must = Vec::new();
    if !filter.projects.is_empty() {
        must.push(json!({"key": "project", "match": {"any": filter.projects}}));
    }
    if !filter.content_types.is_empty() {
        let types: Vec<&str> = filter.content_types.iter().map(|t| t.as_str()).collect();
        must.push(json!({"key": "content_type", "match": {"any": types}}));
    }
    if !filter.languages.is_empty() {
        must.push(json!({"key": "language", "match": {"any": filter.languages}}));
    }
    if let Some(scope) = filter.path_scope() {
        must.push(json!({"key": PATH_SCOPES, "match": {"value": scope}}));
    }
    if must.is_empty() {
        return Ok(None);
    }
    serde_json::from_value(json!({ "must": must }))
        .map(Some)
        .map_err(op)
}

fn decode(id: &PointId, payload: Option<qdrant_edge::Payload>) -> Result<Chunk, VectorIndexError> {
    let corrupt = |source: BoxError| VectorIndexError::CorruptPayload {
        id: id.to_string(),
        source,
    };
    let mut map = payload.ok_or_else(|| corrupt("no payload".into()))?.0;
    map.remove(PATH_SCOPES);
    map.remove(EMBEDDING_KEY);
    serde_json::from_value(Value::Object(map.into_iter().collect())).map_err(|e| corrupt(e.into()))
}

async fn blocking<T: Send + 'static>(
    index: &EdgeVectorIndex,
    f: impl FnOnce(&EdgeVectorIndex) -> Result<T, VectorIndexError> + Send + 'static,
) -> PortResult<T> {
    let index = index.clone();
    tokio::task::spawn_blocking(move || f(&index))
        .await
        // The thread panicked.
        .map_err(|e| PortError::internal(COMPONENT, e))?
        .map_err(|e| PortError::new(e.kind(), COMPONENT, e))
}

#[async_trait::async_trait]
impl VectorIndex for EdgeVectorIndex {
    fn dimension(&self) -> usize {
        self.dimension
    }
    async fn upsert(
        &self,
        chunks: &[Chunk],
        vectors: &[Vec<f32>],
        keys: &[String],
    ) -> PortResult<()> {
        let (chunks, vectors, keys) = (chunks.to_vec(), vectors.to_vec(), keys.to_vec());
        blocking(self, move |i| i.upsert_blocking(&chunks, &vectors, &keys)).await
    }
    async fn delete_document_from(&self, document: &DocumentId, from_index: u32) -> PortResult<()> {
        let document = document.clone();
        blocking(self, move |i| {
            i.delete_document_from_blocking(&document, from_index)
        })
        .await
    }
    async fn delete_project(&self, project: &str) -> PortResult<()> {
        let project = project.to_owned();
        blocking(self, move |i| i.delete_project_blocking(&project)).await
    }
    async fn search(
        &self,
        vector: &[f32],
        filter: &SearchFilter,
        limit: usize,
    ) -> PortResult<Vec<ScoredChunk>> {
        let (vector, filter) = (vector.to_vec(), filter.clone());
        blocking(self, move |i| i.search_blocking(&vector, &filter, limit)).await
    }
    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>> {
        let ids = ids.to_vec();
        blocking(self, move |i| i.get_blocking(&ids)).await
    }
    async fn vectors_by_key(&self, keys: &[String]) -> PortResult<HashMap<String, Vec<f32>>> {
        let keys = keys.to_vec();
        blocking(self, move |i| i.vectors_by_key_blocking(&keys)).await
    }
    async fn count(&self) -> PortResult<u64> {
        blocking(self, |i| i.count_blocking()).await
    }
    async fn commit(&self) -> PortResult<()> {
        blocking(self, |i| i.commit_blocking()).await
    }

    async fn optimize(&self) -> PortResult<()> {
        blocking(self, |i| i.optimize_blocking()).await
    }
}
