//! # weft-vector-qdrant
//!
//! The [`VectorIndex`] port on a Qdrant server, through qdrant-client (gRPC).
//!
//! One collection holds the chunks of every project: a named dense vector
//! (`dense`, cosine) per point, the whole chunk as payload plus
//! `path_scopes` (the uri and each of its directories, for path-prefix
//! filters), and keyword/integer payload indexes on the filtered fields.
//! Point ids are the chunks' UUIDv5 ids, so a hit's neighbours are fetched
//! by computed ids in **one** `GetPoints` call (DESIGN §3, §8). Writes wait
//! for the server to apply them, so `commit` has nothing left to do.

#![warn(missing_docs)]

use std::collections::HashMap;

use async_trait::async_trait;
use qdrant_client::qdrant::{
    Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
    DeletePointsBuilder, Distance, FieldType, Filter, GetPointsBuilder, NamedVectors,
    PayloadIncludeSelector, PointId, PointStruct, Query, QueryPointsBuilder, Range,
    ScrollPointsBuilder, UpsertPointsBuilder, Value as QdrantValue, VectorParamsBuilder,
    VectorsConfigBuilder, point_id, vector_output, vectors_config,
};
use qdrant_client::{Payload, Qdrant};
use serde_json::{Value, json};
use weft_core::ports::{ErrorKind, PortError, PortResult, VectorIndex};
use weft_core::retrieval::{ScoredChunk, SearchFilter, path_scopes};
use weft_core::{Chunk, ChunkId, DocumentId};

/// The name of the dense vector in the collection.
pub const VECTOR_NAME: &str = "dense";
const PATH_SCOPES: &str = "path_scopes";
/// The payload key holding the vector's [`weft_core::embedding_key`] (not a
/// chunk field), by which stored vectors are found again.
const EMBEDDING_KEY: &str = "embedding_key";
/// Points per upsert request, to stay well under gRPC message limits.
const UPSERT_BATCH: usize = 256;

/// What went wrong with Qdrant.
#[derive(Debug, thiserror::Error)]
pub enum QdrantIndexError {
    /// The client could not be built or the server not reached.
    #[error("Qdrant at {url}: {source}")]
    Connect {
        /// The server URL.
        url: String,
        /// What went wrong.
        #[source]
        source: BoxError,
    },
    /// The collection exists with another dimension or vector layout.
    #[error(
        "Qdrant collection {collection} holds {found}, not {expected}-dimensional {VECTOR_NAME:?} vectors: use another collection or re-index"
    )]
    Layout {
        /// The collection.
        collection: String,
        /// The dimension asked for.
        expected: usize,
        /// What the collection has.
        found: String,
    },
    /// A request failed.
    #[error("Qdrant {what} on {collection}: {source}")]
    Request {
        /// What was asked.
        what: &'static str,
        /// The collection.
        collection: String,
        /// What kind of failure it is (from the server's gRPC code).
        kind: ErrorKind,
        /// What the server or client said.
        #[source]
        source: BoxError,
    },
    /// A stored point is not a chunk.
    #[error("Qdrant point {id}: payload is not a weft chunk: {source}")]
    CorruptPayload {
        /// The point id.
        id: String,
        /// What is wrong.
        #[source]
        source: serde_json::Error,
    },
}

impl QdrantIndexError {
    /// What kind of failure it is: a connection that failed is
    /// `Unavailable` (a bad URL `Invalid`), a collection of another layout
    /// `FailedPrecondition`, a corrupt payload `Internal`, a request the
    /// kind the server's answer says.
    pub fn kind(&self) -> ErrorKind {
        match self {
            QdrantIndexError::Connect { source, .. } => kind_of(source.as_ref()),
            QdrantIndexError::Layout { .. } => ErrorKind::FailedPrecondition,
            QdrantIndexError::Request { kind, .. } => *kind,
            QdrantIndexError::CorruptPayload { .. } => ErrorKind::Internal,
        }
    }
}

/// The kind of an error of the client or the server: the server's gRPC
/// code when it answered (a missing collection `NotFound`, a refused API
/// key `PermissionDenied`), `Invalid` for what could not be sent,
/// `Internal` for a chunk that does not convert, else `Unavailable`.
fn kind_of(error: &(dyn std::error::Error + Send + Sync + 'static)) -> ErrorKind {
    use qdrant_client::QdrantError;
    if let Some(e) = error.downcast_ref::<QdrantError>() {
        match e {
            QdrantError::ResponseError { status } => kind_of_code(status.code()),
            QdrantError::ResourceExhaustedError { .. } => ErrorKind::ResourceExhausted,
            QdrantError::ConversionError(_)
            | QdrantError::InvalidUri(_)
            | QdrantError::JsonToPayload(_) => ErrorKind::Invalid,
            QdrantError::PayloadDeserialization(_) => ErrorKind::Internal,
            QdrantError::Io(e) => ErrorKind::of_io(e.kind()),
            _ => ErrorKind::Unavailable,
        }
    } else if let Some(status) = error.downcast_ref::<tonic::Status>() {
        kind_of_code(status.code())
    } else if error.is::<serde_json::Error>() {
        ErrorKind::Internal
    } else {
        ErrorKind::Unavailable
    }
}

/// The kind of a gRPC code Qdrant answered with. A refused API key
/// (`UNAUTHENTICATED` or `PERMISSION_DENIED`) is weft's key refused:
/// `PermissionDenied`.
fn kind_of_code(code: tonic::Code) -> ErrorKind {
    use tonic::Code;
    match code {
        Code::NotFound => ErrorKind::NotFound,
        Code::InvalidArgument | Code::OutOfRange => ErrorKind::Invalid,
        Code::Unauthenticated | Code::PermissionDenied => ErrorKind::PermissionDenied,
        Code::ResourceExhausted => ErrorKind::ResourceExhausted,
        Code::FailedPrecondition | Code::AlreadyExists => ErrorKind::FailedPrecondition,
        Code::Internal | Code::DataLoss | Code::Unimplemented => ErrorKind::Internal,
        Code::Ok
        | Code::Cancelled
        | Code::Unknown
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::Unavailable => ErrorKind::Unavailable,
    }
}

/// The client's errors, kept as causes.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A vector index in one Qdrant collection.
#[derive(Clone)]
pub struct QdrantVectorIndex {
    client: std::sync::Arc<Qdrant>,
    collection: String,
    dimension: usize,
}

impl QdrantVectorIndex {
    /// Connects to `url` (the gRPC port, e.g. `http://localhost:6334`) and
    /// opens `collection`, creating it with its payload indexes when missing;
    /// an existing collection must have `dimension`-sized `dense` vectors.
    pub async fn connect(
        url: &str,
        api_key: Option<String>,
        collection: &str,
        dimension: usize,
    ) -> Result<Self, QdrantIndexError> {
        let connect_error = |source: BoxError| QdrantIndexError::Connect {
            url: url.to_owned(),
            source,
        };
        let client = admin_client(url, api_key)?;
        let index = Self {
            client: std::sync::Arc::new(client),
            collection: collection.to_owned(),
            dimension,
        };
        let exists = index
            .client
            .collection_exists(collection)
            .await
            .map_err(|e| connect_error(e.into()))?;
        if exists {
            index.check_layout(Missing::Add).await?;
        } else {
            index.create().await?;
        }
        Ok(index)
    }

    /// Opens `collection` of the server at `url` for searching only, with
    /// a key that may only read (Qdrant's `read_only_api_key`, what the
    /// query service holds): nothing is created or changed. The collection
    /// must exist (else a `NotFound` [`QdrantIndexError::Request`]) with
    /// `dimension`-sized `dense` vectors.
    pub async fn open_for_search(
        url: &str,
        api_key: Option<String>,
        collection: &str,
        dimension: usize,
    ) -> Result<Self, QdrantIndexError> {
        let client = admin_client(url, api_key)?;
        let index = Self {
            client: std::sync::Arc::new(client),
            collection: collection.to_owned(),
            dimension,
        };
        // The collection's info answers both: whether it exists (NotFound)
        // and its layout.
        index.check_layout(Missing::Leave).await?;
        Ok(index)
    }

    /// Removes the collection `collection` of the server at `url` without
    /// creating anything (an index generation no longer served): `false`
    /// when there was none.
    pub async fn drop_collection(
        url: &str,
        api_key: Option<String>,
        collection: &str,
    ) -> Result<bool, QdrantIndexError> {
        let client = admin_client(url, api_key)?;
        let request = |what, e: qdrant_client::QdrantError| QdrantIndexError::Request {
            what,
            collection: collection.to_owned(),
            kind: kind_of(&e),
            source: e.into(),
        };
        if !client
            .collection_exists(collection)
            .await
            .map_err(|e| request("check collection", e))?
        {
            return Ok(false);
        }
        client
            .delete_collection(collection)
            .await
            .map_err(|e| request("delete collection", e))?;
        Ok(true)
    }

    /// Points the collection alias `alias` at `collection` in **one**
    /// `UpdateAliases` call (the alias's old target, if any, is let go in
    /// the same atomic change): what readers that address the collection by
    /// its alias see switch at once. `Ok(false)` when a collection is named
    /// `alias` itself (an index made before generations, generation 0):
    /// the alias can be made once it is removed.
    pub async fn point_alias(
        url: &str,
        api_key: Option<String>,
        alias: &str,
        collection: &str,
    ) -> Result<bool, QdrantIndexError> {
        use qdrant_client::qdrant::{
            AliasOperations, ChangeAliases, CreateAlias, DeleteAlias, alias_operations::Action,
            collections_client::CollectionsClient,
        };
        let request = |what, e: BoxError| QdrantIndexError::Request {
            what,
            collection: collection.to_owned(),
            kind: kind_of(e.as_ref()),
            source: e,
        };
        let client = admin_client(url, api_key.clone())?;
        let aliases = client
            .list_aliases()
            .await
            .map_err(|e| request("list aliases", e.into()))?;
        let exists = aliases.aliases.iter().any(|a| a.alias_name == alias);
        if !exists
            && client
                .collection_exists(alias)
                .await
                .map_err(|e| request("check collection", e.into()))?
        {
            return Ok(false);
        }
        let mut actions = Vec::new();
        if exists {
            actions.push(AliasOperations {
                action: Some(Action::DeleteAlias(DeleteAlias {
                    alias_name: alias.to_owned(),
                })),
            });
        }
        actions.push(AliasOperations {
            action: Some(Action::CreateAlias(CreateAlias {
                collection_name: collection.to_owned(),
                alias_name: alias.to_owned(),
            })),
        });
        // The client's own alias calls send one action each; the generated
        // gRPC client sends both in one atomic request.
        let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
            .map_err(|e| QdrantIndexError::Connect {
                url: url.to_owned(),
                source: e.into(),
            })?
            .connect()
            .await
            .map_err(|e| QdrantIndexError::Connect {
                url: url.to_owned(),
                source: e.into(),
            })?;
        let mut change = tonic::Request::new(ChangeAliases {
            actions,
            timeout: None,
        });
        if let Some(key) = &api_key {
            let value = key.parse().map_err(|_| QdrantIndexError::Request {
                what: "update aliases",
                collection: collection.to_owned(),
                kind: ErrorKind::Invalid,
                source: "the API key is not a valid header value".into(),
            })?;
            change.metadata_mut().insert("api-key", value);
        }
        CollectionsClient::new(channel)
            .update_aliases(change)
            .await
            .map_err(|e| request("update aliases", e.into()))?;
        Ok(true)
    }

    /// The collection's name.
    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// Deletes the whole collection and every point in it (for tests and
    /// for dropping an index generation that is no longer served).
    pub async fn delete_collection(&self) -> Result<(), QdrantIndexError> {
        self.client
            .delete_collection(&self.collection)
            .await
            .map_err(|e| self.request("delete collection", e))?;
        Ok(())
    }

    fn request(&self, what: &'static str, error: impl Into<BoxError>) -> QdrantIndexError {
        let source = error.into();
        QdrantIndexError::Request {
            what,
            collection: self.collection.clone(),
            kind: kind_of(source.as_ref()),
            source,
        }
    }

    /// A request not sent: what was given is not what it takes.
    fn refused(&self, what: &'static str, message: String) -> QdrantIndexError {
        QdrantIndexError::Request {
            what,
            collection: self.collection.clone(),
            kind: ErrorKind::Invalid,
            source: message.into(),
        }
    }

    async fn create(&self) -> Result<(), QdrantIndexError> {
        let mut vectors = VectorsConfigBuilder::default();
        vectors.add_named_vector_params(
            VECTOR_NAME,
            VectorParamsBuilder::new(self.dimension as u64, Distance::Cosine),
        );
        let created = self
            .client
            .create_collection(
                CreateCollectionBuilder::new(&self.collection).vectors_config(vectors),
            )
            .await;
        if let Err(e) = created {
            // Another worker may have created it meanwhile.
            let exists = self
                .client
                .collection_exists(&self.collection)
                .await
                .unwrap_or(false);
            if !exists {
                return Err(self.request("create collection", e));
            }
            return self.check_layout(Missing::Add).await;
        }
        for (field, kind) in [
            ("project", FieldType::Keyword),
            ("document_id", FieldType::Keyword),
            ("content_type", FieldType::Keyword),
            ("language", FieldType::Keyword),
            (PATH_SCOPES, FieldType::Keyword),
            (EMBEDDING_KEY, FieldType::Keyword),
            ("chunk_index", FieldType::Integer),
        ] {
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(&self.collection, field, kind)
                        .wait(true),
                )
                .await
                .map_err(|e| self.request("create payload index", e))?;
        }
        Ok(())
    }

    async fn check_layout(&self, missing: Missing) -> Result<(), QdrantIndexError> {
        let info = self
            .client
            .collection_info(&self.collection)
            .await
            .map_err(|e| self.request("collection info", e))?;
        let info = info.result;
        // A collection made before vectors were looked up by embedding key
        // gets that payload index once.
        let keyed = info
            .as_ref()
            .is_some_and(|r| r.payload_schema.contains_key(EMBEDDING_KEY));
        let config = info
            .and_then(|r| r.config)
            .and_then(|c| c.params)
            .and_then(|p| p.vectors_config)
            .and_then(|v| v.config);
        let found = match config {
            Some(vectors_config::Config::ParamsMap(map)) => {
                match map.map.get(VECTOR_NAME).map(|p| p.size as usize) {
                    Some(size) if size == self.dimension => {
                        if !keyed && missing == Missing::Add {
                            // Not fatal: a key that may not create it
                            // leaves lookups by key scanning.
                            let created = self
                                .client
                                .create_field_index(
                                    CreateFieldIndexCollectionBuilder::new(
                                        &self.collection,
                                        EMBEDDING_KEY,
                                        FieldType::Keyword,
                                    )
                                    .wait(true),
                                )
                                .await;
                            if let Err(e) = created {
                                tracing::warn!(
                                    collection = %self.collection,
                                    "cannot add the {EMBEDDING_KEY} payload index: {e}"
                                );
                            }
                        }
                        return Ok(());
                    }
                    Some(size) => format!("{size}-dimensional {VECTOR_NAME:?} vectors"),
                    None => format!("named vectors {:?}", map.map.keys().collect::<Vec<_>>()),
                }
            }
            Some(vectors_config::Config::Params(p)) => {
                format!("one unnamed {}-dimensional vector", p.size)
            }
            None => "no vector configuration".into(),
        };
        Err(QdrantIndexError::Layout {
            collection: self.collection.clone(),
            expected: self.dimension,
            found,
        })
    }

    fn port(&self, error: QdrantIndexError) -> PortError {
        PortError::new(
            error.kind(),
            format!("vector index (Qdrant {})", self.collection),
            error,
        )
    }

    async fn delete_by(&self, filter: Filter) -> Result<(), QdrantIndexError> {
        self.client
            .delete_points(
                DeletePointsBuilder::new(&self.collection)
                    .points(filter)
                    .wait(true),
            )
            .await
            .map_err(|e| self.request("delete points", e))?;
        Ok(())
    }
}

/// What opening an existing collection does about a payload index it
/// lacks (one added by a later weft).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// Adds it (a writer's open).
    Add,
    /// Leaves the collection as it is (an open for searching only).
    Leave,
}

fn point_id(id: &ChunkId) -> PointId {
    PointId::from(id.to_string())
}

fn id_text(id: &Option<PointId>) -> String {
    match id.as_ref().and_then(|p| p.point_id_options.as_ref()) {
        Some(point_id::PointIdOptions::Uuid(u)) => u.clone(),
        Some(point_id::PointIdOptions::Num(n)) => n.to_string(),
        None => "(no id)".into(),
    }
}

/// The chunk stored in a point's payload.
fn decode(
    id: &Option<PointId>,
    payload: HashMap<String, QdrantValue>,
) -> Result<Chunk, QdrantIndexError> {
    let mut map: serde_json::Map<String, Value> = Payload::from(payload).into();
    map.remove(PATH_SCOPES);
    map.remove(EMBEDDING_KEY);
    serde_json::from_value(Value::Object(map)).map_err(|source| QdrantIndexError::CorruptPayload {
        id: id_text(id),
        source,
    })
}

/// A client of the server at `url`. The client's own version check is
/// skipped: it blocks on a health check in a thread of its own at every
/// build and prints to stdout (which is `weft … --json`'s output); an
/// unreachable or refusing server is the first call's error, named.
fn admin_client(url: &str, api_key: Option<String>) -> Result<Qdrant, QdrantIndexError> {
    Qdrant::from_url(url)
        .api_key(api_key)
        .timeout(std::time::Duration::from_secs(60))
        .skip_compatibility_check()
        .build()
        .map_err(|e| QdrantIndexError::Connect {
            url: url.to_owned(),
            source: e.into(),
        })
}

/// The filter of a [`SearchFilter`].
pub fn to_filter(filter: &SearchFilter) -> Option<Filter> {
    let mut must = Vec::new();
    if !filter.projects.is_empty() {
        must.push(Condition::matches("project", filter.projects.clone()));
    }
    if !filter.content_types.is_empty() {
        let types: Vec<String> = filter
            .content_types
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect();
        must.push(Condition::matches("content_type", types));
    }
    if !filter.languages.is_empty() {
        must.push(Condition::matches("language", filter.languages.clone()));
    }
    if let Some(scope) = filter.path_scope() {
        must.push(Condition::matches(PATH_SCOPES, scope.to_owned()));
    }
    (!must.is_empty()).then(|| Filter::must(must))
}

#[async_trait]
impl VectorIndex for QdrantVectorIndex {
    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn upsert(
        &self,
        chunks: &[Chunk],
        vectors: &[Vec<f32>],
        keys: &[String],
    ) -> PortResult<()> {
        if chunks.len() != vectors.len() || chunks.len() != keys.len() {
            return Err(self.port(self.refused(
                "upsert",
                format!(
                    "{} chunks but {} vectors and {} keys",
                    chunks.len(),
                    vectors.len(),
                    keys.len()
                ),
            )));
        }
        for (start, batch) in chunks.chunks(UPSERT_BATCH).enumerate() {
            let mut points = Vec::with_capacity(batch.len());
            for (i, chunk) in batch.iter().enumerate() {
                let vector = &vectors[start * UPSERT_BATCH + i];
                let key = &keys[start * UPSERT_BATCH + i];
                if vector.len() != self.dimension {
                    return Err(self.port(self.refused(
                        "upsert",
                        format!(
                            "a {}-dimensional vector for a {}-dimensional collection",
                            vector.len(),
                            self.dimension
                        ),
                    )));
                }
                let mut payload = serde_json::to_value(chunk)
                    .map_err(|e| self.port(self.request("upsert", e)))?;
                if let Value::Object(map) = &mut payload {
                    map.insert(PATH_SCOPES.into(), json!(path_scopes(&chunk.uri)));
                    map.insert(EMBEDDING_KEY.into(), json!(key));
                }
                let payload =
                    Payload::try_from(payload).map_err(|e| self.port(self.request("upsert", e)))?;
                points.push(PointStruct::new(
                    point_id(&chunk.id()),
                    NamedVectors::default().add_vector(VECTOR_NAME, vector.clone()),
                    payload,
                ));
            }
            self.client
                .upsert_points(UpsertPointsBuilder::new(&self.collection, points).wait(true))
                .await
                .map_err(|e| self.port(self.request("upsert", e)))?;
        }
        Ok(())
    }

    async fn delete_document_from(&self, document: &DocumentId, from_index: u32) -> PortResult<()> {
        let filter = Filter::must([
            Condition::matches("document_id", document.as_str().to_owned()),
            Condition::range(
                "chunk_index",
                Range {
                    gte: Some(from_index as f64),
                    ..Default::default()
                },
            ),
        ]);
        self.delete_by(filter).await.map_err(|e| self.port(e))
    }

    async fn delete_project(&self, project: &str) -> PortResult<()> {
        let filter = Filter::must([Condition::matches("project", project.to_owned())]);
        self.delete_by(filter).await.map_err(|e| self.port(e))
    }

    async fn search(
        &self,
        vector: &[f32],
        filter: &SearchFilter,
        limit: usize,
    ) -> PortResult<Vec<ScoredChunk>> {
        let mut request = QueryPointsBuilder::new(&self.collection)
            .query(Query::new_nearest(vector.to_vec()))
            .using(VECTOR_NAME)
            .limit(limit as u64)
            .with_payload(true);
        if let Some(filter) = to_filter(filter) {
            request = request.filter(filter);
        }
        let response = self
            .client
            .query(request)
            .await
            .map_err(|e| self.port(self.request("query", e)))?;
        response
            .result
            .into_iter()
            .map(|point| {
                let chunk = decode(&point.id, point.payload).map_err(|e| self.port(e))?;
                Ok(ScoredChunk {
                    chunk,
                    score: point.score,
                })
            })
            .collect()
    }

    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<PointId> = ids.iter().map(point_id).collect();
        let response = self
            .client
            .get_points(GetPointsBuilder::new(&self.collection, ids).with_payload(true))
            .await
            .map_err(|e| self.port(self.request("get points", e)))?;
        response
            .result
            .into_iter()
            .map(|point| decode(&point.id, point.payload).map_err(|e| self.port(e)))
            .collect()
    }

    async fn vectors_by_key(&self, keys: &[String]) -> PortResult<HashMap<String, Vec<f32>>> {
        let mut found = HashMap::new();
        if keys.is_empty() {
            return Ok(found);
        }
        let filter = Filter::must([Condition::matches(EMBEDDING_KEY, keys.to_vec())]);
        let mut offset: Option<PointId> = None;
        loop {
            let mut request = ScrollPointsBuilder::new(&self.collection)
                .filter(filter.clone())
                .limit(u32::try_from(keys.len()).unwrap_or(u32::MAX))
                .with_payload(PayloadIncludeSelector {
                    fields: vec![EMBEDDING_KEY.to_owned()],
                })
                .with_vectors(true);
            if let Some(offset) = offset.take() {
                request = request.offset(offset);
            }
            let response = self
                .client
                .scroll(request)
                .await
                .map_err(|e| self.port(self.request("scroll by embedding key", e)))?;
            for point in response.result {
                let key = point
                    .payload
                    .get(EMBEDDING_KEY)
                    .and_then(|v| match &v.kind {
                        Some(qdrant_client::qdrant::value::Kind::StringValue(s)) => Some(s.clone()),
                        _ => None,
                    });
                let vector = point
                    .vectors
                    .as_ref()
                    .and_then(|v| v.get_vector_by_name(VECTOR_NAME))
                    .and_then(|v| match v {
                        vector_output::Vector::Dense(dense) => Some(dense.data),
                        _ => None,
                    });
                if let (Some(key), Some(vector)) = (key, vector)
                    && vector.len() == self.dimension
                {
                    found.entry(key).or_insert(vector);
                }
            }
            // Several chunks may share a text: scroll on until every key
            // is found or nothing is left.
            match response.next_page_offset {
                Some(next) if found.len() < keys.len() => offset = Some(next),
                _ => return Ok(found),
            }
        }
    }

    async fn count(&self) -> PortResult<u64> {
        let response = self
            .client
            .count(CountPointsBuilder::new(&self.collection).exact(true))
            .await
            .map_err(|e| self.port(self.request("count", e)))?;
        Ok(response.result.map(|r| r.count).unwrap_or(0))
    }

    async fn commit(&self) -> PortResult<()> {
        // Every write waited for the server to apply it.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdrant_client::QdrantError;

    #[test]
    fn errors_have_the_kind_the_server_answers() {
        let answered = |status| kind_of(&QdrantError::ResponseError { status });
        assert_eq!(
            answered(tonic::Status::not_found("Collection `c` doesn't exist!")),
            ErrorKind::NotFound
        );
        assert_eq!(
            answered(tonic::Status::unauthenticated("Invalid api-key")),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            answered(tonic::Status::permission_denied("read-only key")),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            answered(tonic::Status::invalid_argument("bad filter")),
            ErrorKind::Invalid
        );
        assert_eq!(
            answered(tonic::Status::unavailable("connection refused")),
            ErrorKind::Unavailable
        );
        assert_eq!(
            answered(tonic::Status::deadline_exceeded("timeout")),
            ErrorKind::Unavailable
        );
        let layout = QdrantIndexError::Layout {
            collection: "c".into(),
            expected: 384,
            found: "768-dimensional".into(),
        };
        assert_eq!(layout.kind(), ErrorKind::FailedPrecondition);
    }
}
