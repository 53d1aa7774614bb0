//! Where the MCP tools get their answers: an embedded index in this process
//! ([`EmbeddedBackend`]) or a remote `weft-query` over gRPC ([`GrpcBackend`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use serde::Serialize;
use tonic::metadata::{Ascii, MetadataValue};
use weft_core::ports::{Catalog, PortError, VectorIndex};
use weft_core::query::{QueryEngine, QueryError, SearchRequest};
use weft_core::retrieval::DocumentResult;
use weft_core::{Chunk, ChunkId, DocumentId};
use weft_proto::v1;
use weft_proto::v1::query_service_client::QueryServiceClient;

/// The most chunks of one document `get_context` reads.
pub const MAX_DOCUMENT_CHUNKS: u32 = 1000;

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The search failed.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A store failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// The remote query service answered with an error.
    #[error("the query service at {url}: {status}")]
    Remote {
        /// Its address.
        url: String,
        /// Its answer.
        #[source]
        status: tonic::Status,
    },
    /// The remote query service sent something that does not convert.
    #[error("the query service sent an unreadable answer: {0}")]
    Conversion(#[from] weft_proto::ConversionError),
    /// The remote query service cannot be reached.
    #[error("cannot reach the query service at {url}: {source}")]
    Connect {
        /// Its address.
        url: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// This backend cannot do that.
    #[error("{0}")]
    Unsupported(String),
}

/// A project and what is indexed of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectInfo {
    /// Its name.
    pub name: String,
    /// The source it was indexed from (path, git URL or site URL).
    pub source: String,
    /// For git sources, the last indexed commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// When it was last indexed (seconds since the Unix epoch), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed_at: Option<u64>,
    /// The same time in RFC 3339 (UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed_at_utc: Option<String>,
    /// Documents indexed.
    pub documents: usize,
    /// Chunks indexed.
    pub chunks: u64,
}

/// What the MCP tools need from an index.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Where the answers come from, for logs and errors.
    fn describe(&self) -> String;
    /// Runs a search (fused, expanded, reranked as configured).
    async fn search(&self, request: &SearchRequest) -> Result<Vec<DocumentResult>, BackendError>;
    /// The chunks of one document (at most [`MAX_DOCUMENT_CHUNKS`]), in
    /// order; empty when the document is not indexed.
    async fn document_chunks(&self, document: &DocumentId) -> Result<Vec<Chunk>, BackendError>;
    /// One chunk by its id (the UUID), if stored.
    async fn chunk(&self, id: ChunkId) -> Result<Option<Chunk>, BackendError>;
    /// The indexed projects.
    async fn projects(&self) -> Result<Vec<ProjectInfo>, BackendError>;
}

/// The index in this process: the query engine, the vector index it reads
/// chunks from, and the catalog.
pub struct EmbeddedBackend {
    parts: PartsSource,
    description: String,
}

/// What one call reads: an engine, the vector index its chunks come from
/// and the catalog, all of one index generation.
#[derive(Clone)]
pub struct EmbeddedParts {
    /// The engine.
    pub engine: Arc<QueryEngine>,
    /// The vector index.
    pub vectors: Arc<dyn VectorIndex>,
    /// The catalog.
    pub catalog: Arc<dyn Catalog>,
    /// Whatever must live while they are used (e.g. a lease on the generation).
    pub keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// The parts of the generation live now.
pub type PartsProvider = Arc<dyn Fn() -> Result<EmbeddedParts, BackendError> + Send + Sync>;

enum PartsSource {
    Fixed(EmbeddedParts),
    Live(PartsProvider),
}

impl EmbeddedBackend {
    /// A backend over an engine built elsewhere, the vector index its chunks
    /// are read from and the catalog; `description` says where they are.
    pub fn new(
        engine: Arc<QueryEngine>,
        vectors: Arc<dyn VectorIndex>,
        catalog: Arc<dyn Catalog>,
        description: impl Into<String>,
    ) -> Self {
        Self {
            parts: PartsSource::Fixed(EmbeddedParts {
                engine,
                vectors,
                catalog,
                keep: None,
            }),
            description: description.into(),
        }
    }

    /// A backend asking `provider` for the parts at each call: the live
    /// index generation's, so a new generation is read as soon as it is
    /// live, and each call reads one generation.
    pub fn following(provider: PartsProvider, description: impl Into<String>) -> Self {
        Self {
            parts: PartsSource::Live(provider),
            description: description.into(),
        }
    }

    fn parts(&self) -> Result<EmbeddedParts, BackendError> {
        match &self.parts {
            PartsSource::Fixed(parts) => Ok(parts.clone()),
            PartsSource::Live(provider) => provider(),
        }
    }
}

#[async_trait]
impl Backend for EmbeddedBackend {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<DocumentResult>, BackendError> {
        let parts = self.parts()?;
        let mut request = SearchRequest {
            rerank: request.rerank && parts.engine.has_reranker(),
            ..request.clone()
        };
        // A branch overlay reads its base, minus what the branch changed.
        request.hidden = weft_core::overlays::resolve(&*parts.catalog, &mut request.filter).await?;
        Ok(parts.engine.search(&request).await?.results)
    }

    async fn document_chunks(&self, document: &DocumentId) -> Result<Vec<Chunk>, BackendError> {
        // Ids are computed: the first chunk says how many there are, then
        // one call fetches them all.
        let parts = self.parts()?;
        let Some(first) = parts
            .vectors
            .get(&[ChunkId::new(document, 0)])
            .await?
            .into_iter()
            .next()
        else {
            return Ok(Vec::new());
        };
        let total = first.total_chunks.min(MAX_DOCUMENT_CHUNKS);
        let ids: Vec<ChunkId> = (1..total).map(|i| ChunkId::new(document, i)).collect();
        let mut chunks = if ids.is_empty() {
            Vec::new()
        } else {
            parts.vectors.get(&ids).await?
        };
        chunks.push(first);
        chunks.sort_by_key(|c| c.chunk_index);
        Ok(chunks)
    }

    async fn chunk(&self, id: ChunkId) -> Result<Option<Chunk>, BackendError> {
        Ok(self.parts()?.vectors.get(&[id]).await?.into_iter().next())
    }

    async fn projects(&self) -> Result<Vec<ProjectInfo>, BackendError> {
        let parts = self.parts()?;
        let projects = parts.catalog.projects().await?;
        let documents = parts.catalog.documents(None).await?;
        let mut counts: HashMap<&str, (usize, u64)> = HashMap::new();
        for d in &documents {
            let c = counts.entry(d.project.as_str()).or_default();
            c.0 += 1;
            c.1 += u64::from(d.chunk_count);
        }
        Ok(projects
            .into_iter()
            .map(|(name, state)| {
                let (documents, chunks) = counts.get(name.as_str()).copied().unwrap_or_default();
                ProjectInfo {
                    source: state.source,
                    revision: state.revision,
                    indexed_at: state.indexed_at,
                    indexed_at_utc: state.indexed_at.map(rfc3339),
                    documents,
                    chunks,
                    name,
                }
            })
            .collect())
    }
}

/// A remote `weft-query` (`weft.v1.QueryService`) over gRPC.
pub struct GrpcBackend {
    url: String,
    client: QueryServiceClient<tonic::transport::Channel>,
    authorization: Option<MetadataValue<Ascii>>,
    /// Cleared once the service said it has no reranker.
    rerank: std::sync::atomic::AtomicBool,
}

impl GrpcBackend {
    /// Connects to the query service at `url` (`http://host:50051`).
    pub async fn connect(url: &str) -> Result<Self, BackendError> {
        let connect_error = |source| BackendError::Connect {
            url: url.to_owned(),
            source,
        };
        let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
            .map_err(connect_error)?
            .connect()
            .await
            .map_err(connect_error)?;
        Ok(Self {
            url: url.to_owned(),
            client: QueryServiceClient::new(channel),
            authorization: None,
            rerank: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Sends `authorization: Bearer <token>` with every call (for a query
    /// service that requires an API key).
    pub fn with_bearer_token(mut self, token: &str) -> Result<Self, BackendError> {
        let mut value: MetadataValue<Ascii> = format!("Bearer {token}").parse().map_err(|_| {
            BackendError::Unsupported(
                "the API key holds characters an HTTP header cannot carry".into(),
            )
        })?;
        // Never shown by Debug, and kept out of HPACK's dynamic table.
        value.set_sensitive(true);
        self.authorization = Some(value);
        Ok(self)
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(value) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        request
    }

    fn remote(&self, status: tonic::Status) -> BackendError {
        BackendError::Remote {
            url: self.url.clone(),
            status,
        }
    }
}

#[async_trait]
impl Backend for GrpcBackend {
    fn describe(&self) -> String {
        format!("the query service at {}", self.url)
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<DocumentResult>, BackendError> {
        // The service reranks when asked, and refuses when it has no
        // reranker: then ask again without, and from then on. It expands
        // for packing when told the budget (it packs too; that context is
        // not used: globs filter first).
        let wire = v1::SearchRequest {
            rerank: request.rerank && self.rerank.load(Ordering::Relaxed),
            ..v1::SearchRequest::from(request)
        };
        let result = self.client.clone().search(self.request(wire.clone())).await;
        let response = match result {
            Err(status)
                if wire.rerank
                    && status.code() == tonic::Code::FailedPrecondition
                    && status.message().contains("reranker") =>
            {
                self.rerank.store(false, Ordering::Relaxed);
                let wire = v1::SearchRequest {
                    rerank: false,
                    ..wire
                };
                self.client.clone().search(self.request(wire)).await
            }
            other => other,
        };
        let response = response.map_err(|s| self.remote(s))?.into_inner();
        Ok(weft_proto::query::document_results(response)?)
    }

    async fn document_chunks(&self, document: &DocumentId) -> Result<Vec<Chunk>, BackendError> {
        let response = match self
            .client
            .clone()
            .get_chunks(self.request(v1::GetChunksRequest {
                document_id: document.as_str().to_owned(),
                start_index: 0,
                end_index: None,
            }))
            .await
        {
            Ok(r) => r.into_inner(),
            // The service answers a document it does not hold (or the key
            // may not read) as NOT_FOUND: none of its chunks.
            Err(s) if s.code() == tonic::Code::NotFound => return Ok(Vec::new()),
            Err(s) => return Err(self.remote(s)),
        };
        response
            .chunks
            .into_iter()
            .map(|c| Chunk::try_from(c).map_err(BackendError::from))
            .collect()
    }

    async fn chunk(&self, _id: ChunkId) -> Result<Option<Chunk>, BackendError> {
        Err(BackendError::Unsupported(
            "a remote query service finds chunks by document: give the chunk as \
             DOCUMENT_ID:CHUNK_INDEX, or a citation"
                .into(),
        ))
    }

    async fn projects(&self) -> Result<Vec<ProjectInfo>, BackendError> {
        Err(BackendError::Unsupported(format!(
            "{} has no project listing in its API (weft.v1.QueryService); \
             name projects explicitly",
            self.describe()
        )))
    }
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
