//! # weft-grpc
//!
//! The gRPC query API of weft (`weft.v1.QueryService`, DESIGN §5): the
//! same [`QueryEngine`] as `weft search`, served with `grpc.health.v1`,
//! server reflection, a per-request deadline and message size limits.
//!
//! Hostile requests get an answer naming what is wrong and cost no more
//! than a good one: every field is checked against bounds
//! ([`RequestBounds`], the check every weft surface makes:
//! `query.max_query_chars`, `query.max_limit`, filter, expansion and budget
//! limits) → `INVALID_ARGUMENT`; a project or document that is not indexed
//! → `NOT_FOUND` (a project named with the indexed ones the caller may read,
//! by [`weft_core::projects::check_projects`]; one outside the caller's
//! scope is answered alike); a chunk range past a document's end →
//! `OUT_OF_RANGE`; a passed deadline → `DEADLINE_EXCEEDED` ([`deadline`]).
//! A store, model or search failure is answered with the code of its kind
//! ([`status::code_of`]: a store that cannot be reached `UNAVAILABLE`, a
//! missing collection `NOT_FOUND`, a refused store key `PERMISSION_DENIED`,
//! no model `FAILED_PRECONDITION`).
//!
//! [`QueryServer`] implements the service over any stores; [`serve`] runs it
//! on a listener until a shutdown future completes; [`run`] is the whole
//! service over the stores `[stores]` configures (built by
//! `weft_wiring::`, as every weft command builds them), as the
//! `weft-query` service and `weft serve` start it.

#![warn(missing_docs)]

pub mod connections;
pub mod deadline;
pub mod status;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::{Request, Response, Status};
use weft_auth::{Auth, AuthDefault, Scope};
use weft_config::WeftConfig;
use weft_core::ports::{Catalog, VectorIndex};
use weft_core::query::{QueryEngine, RequestBounds, RequestError};
use weft_core::retrieval::SearchFilter;
use weft_core::{ChunkId, DocumentId};
use weft_proto::v1;
use weft_proto::v1::query_service_server::QueryServiceServer;
use weft_telemetry::trace::{Kind, TRACEPARENT, TraceContext, TraceSpan, start_span};

/// The most chunks one `GetChunks` call returns.
pub const MAX_GET_CHUNKS: u32 = 1000;

/// Why the service could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The stores, the embedding model or the reranker could not be set up.
    #[error(transparent)]
    Wiring(#[from] weft_wiring::WiringError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// Server reflection could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// Authentication could not be set up (no keys file, a bad one).
    #[error(transparent)]
    Auth(#[from] weft_auth::AuthSetupError),
    /// The record of the live index generation could not be reached.
    #[error("the record of the live index generation cannot be reached")]
    Generations(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The TLS certificate, key or client CA could not be used.
    #[error(transparent)]
    Tls(#[from] tls::TlsSetupError),
}

/// `weft.v1.QueryService` over a [`QueryEngine`] and the vector index it
/// fetches chunks from: fixed, or those of the live index generation,
/// followed (each call reads the generation live when it starts).
#[derive(Clone)]
pub struct QueryServer {
    stacks: Stacks,
    auth: Auth,
    bounds: RequestBounds,
    known_projects: Arc<KnownProjects>,
    /// The data directory whose catalog lists the projects when the
    /// generation read holds none open (server stores).
    data_dir: Option<weft_wiring::DataDir>,
    /// The registry's catalog of the generation last read, for overlays.
    registry_catalog: Arc<tokio::sync::Mutex<Option<GenerationCatalog>>>,
}

#[derive(Clone)]
enum Stacks {
    Fixed {
        engine: Arc<QueryEngine>,
        vectors: Arc<dyn VectorIndex>,
    },
    Live(weft_wiring::LiveQuery),
}

/// A generation's number and its catalog.
type GenerationCatalog = (u32, Arc<dyn Catalog>);

/// What one call reads: one generation's engine and vector index.
struct Pinned {
    engine: Arc<QueryEngine>,
    vectors: Arc<dyn VectorIndex>,
    generation: u32,
    // Keeps the generation's stores (and its lease) for the whole call.
    stack: Option<Arc<weft_wiring::QueryStack>>,
}

/// How long a project seen indexed is believed to be, without looking.
const KNOWN_PROJECT_TTL: Duration = Duration::from_secs(60);

/// Projects seen indexed lately, per index generation: a search naming
/// them needs no lookup.
#[derive(Default)]
struct KnownProjects(std::sync::Mutex<std::collections::HashMap<(u32, String), Instant>>);

impl KnownProjects {
    fn contains(&self, generation: u32, project: &str) -> bool {
        self.0.lock().is_ok_and(|m| {
            m.get(&(generation, project.to_owned()))
                .is_some_and(|t| t.elapsed() < KNOWN_PROJECT_TTL)
        })
    }

    fn insert(&self, generation: u32, project: &str) {
        if let Ok(mut m) = self.0.lock() {
            // Bounded: names come from requests.
            if m.len() >= 10_000 {
                m.retain(|_, t| t.elapsed() < KNOWN_PROJECT_TTL);
                if m.len() >= 10_000 {
                    m.clear();
                }
            }
            m.insert((generation, project.to_owned()), Instant::now());
        }
    }
}

impl QueryServer {
    /// A server answering with `engine`; `GetChunks` reads `vectors`.
    /// Without [`QueryServer::with_auth`] it authenticates nobody.
    pub fn new(engine: Arc<QueryEngine>, vectors: Arc<dyn VectorIndex>) -> Self {
        Self {
            stacks: Stacks::Fixed { engine, vectors },
            auth: Auth::Open,
            bounds: RequestBounds::default(),
            known_projects: Arc::default(),
            data_dir: None,
            registry_catalog: Arc::default(),
        }
    }

    /// A server answering from the live generation `live` follows.
    pub fn live(live: weft_wiring::LiveQuery) -> Self {
        Self {
            stacks: Stacks::Live(live),
            auth: Auth::Open,
            bounds: RequestBounds::default(),
            known_projects: Arc::default(),
            data_dir: None,
            registry_catalog: Arc::default(),
        }
    }

    /// The server with the projects listed from the catalog in `data_dir`
    /// when the generation read holds no catalog open (server stores that
    /// `weft index` writes, with their catalog in the data directory).
    pub fn with_data_dir(self, data_dir: weft_wiring::DataDir) -> Self {
        Self {
            data_dir: Some(data_dir),
            ..self
        }
    }

    fn pin(&self) -> Pinned {
        match &self.stacks {
            Stacks::Fixed { engine, vectors } => Pinned {
                engine: engine.clone(),
                vectors: vectors.clone(),
                generation: 0,
                stack: None,
            },
            Stacks::Live(live) => {
                let stack = live.current();
                Pinned {
                    engine: stack.engine.clone(),
                    vectors: stack.vectors.clone(),
                    generation: stack.generation,
                    stack: Some(stack),
                }
            }
        }
    }

    /// The server with requests bounded by `bounds` (the defaults are those
    /// of `[query]`).
    pub fn with_bounds(self, bounds: RequestBounds) -> Self {
        Self { bounds, ..self }
    }

    /// The server with callers authenticated by `auth` (API keys bound to
    /// projects; see [`weft_auth`]).
    pub fn with_auth(self, auth: Auth) -> Self {
        Self { auth, ..self }
    }

    /// The caller's scope: the one [`serve`]'s interceptor found before
    /// the message was decoded, else (a server called in-process) from the
    /// request's metadata by the same rule, [`authorize`].
    fn authorize<T>(&self, request: &Request<T>) -> Result<Scope, Status> {
        match request.extensions().get::<Scope>() {
            Some(scope) => Ok(scope.clone()),
            None => authorize(&self.auth, request.metadata()),
        }
    }
}

/// The caller's scope under `auth`, from the `authorization` metadata (a
/// value that is not text reads as a malformed one).
fn authorize(auth: &Auth, metadata: &tonic::metadata::MetadataMap) -> Result<Scope, Status> {
    let value = metadata
        .get("authorization")
        .map(|v| v.to_str().unwrap_or(""));
    auth.authorize(value).map_err(|e| status::auth_status(&e))
}

/// A search request out of bounds: `INVALID_ARGUMENT` whatever its kind.
/// gRPC's `OUT_OF_RANGE` is for a value that may become valid as the
/// system changes (reading past a document's end); a bound does not move
/// with the index.
fn status_of_request(error: RequestError) -> Status {
    Status::invalid_argument(format!("weft.v1.SearchRequest.{error}"))
}

/// The server span of one call: a child of the caller's `traceparent`
/// metadata when it sends one, else the root of a new trace.
fn rpc_span<T>(method: &'static str, request: &Request<T>) -> (TraceContext, TraceSpan) {
    let parent = request
        .metadata()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(TraceContext::parse);
    let context = parent
        .as_ref()
        .map(TraceContext::child)
        .unwrap_or_else(TraceContext::new_root);
    let span = start_span(
        format!("weft.v1.QueryService/{method}"),
        Kind::Server,
        &context,
        parent.as_ref(),
        &[
            ("rpc.system", "grpc".into()),
            ("rpc.service", "weft.v1.QueryService".into()),
            ("rpc.method", method.into()),
        ],
    );
    (context, span)
}

/// Ends `span` with the call's outcome and returns the answer with the
/// call's `traceparent` in its metadata, so a caller can find the trace.
fn finish<T>(
    context: &TraceContext,
    mut span: TraceSpan,
    result: Result<T, Status>,
) -> Result<Response<T>, Status> {
    match result {
        Ok(body) => {
            let mut response = Response::new(body);
            if let Ok(value) = context.header_value().parse() {
                response.metadata_mut().insert(TRACEPARENT, value);
            }
            span.end();
            Ok(response)
        }
        Err(status) => {
            span.set("rpc.grpc.status_code", format!("{:?}", status.code()));
            span.fail(status.message());
            span.end();
            Err(status)
        }
    }
}

#[tonic::async_trait]
impl v1::query_service_server::QueryService for QueryServer {
    async fn search(
        &self,
        request: Request<v1::SearchRequest>,
    ) -> Result<Response<v1::SearchResponse>, Status> {
        let (context, mut span) = rpc_span("Search", &request);
        let started = Instant::now();
        let result = async {
            let scope = self.authorize(&request)?;
            let pinned = self.pin();
            let request = request.into_inner();
            let explain = request.explain;
            let mut domain =
                weft_proto::query::search_request(request, &pinned.engine.config().adjacency)
                    .map_err(|e| Status::invalid_argument(e.to_string()))?
                    .checked(&self.bounds)
                    .map_err(status_of_request)?;
            let packing = domain
                .max_tokens
                .map(|max_tokens| weft_core::retrieval::PackOptions { max_tokens });
            // A project asked for that is not indexed (a typo) is named
            // with the indexed ones, not searched as nothing; one outside
            // the key's scope gets the same answer, before the scope is
            // applied, so the answer reveals nothing about the others.
            self.check_projects(&pinned, &scope, &domain.filter.projects)
                .await?;
            scope
                .apply(&mut domain)
                .map_err(|e| status::auth_status(&e))?;
            // A branch overlay reads its base, minus what the branch
            // changed or deleted (the catalog says which).
            if let Some(catalog) = self.overlay_catalog(&pinned).await? {
                domain.hidden = weft_core::overlays::resolve(&*catalog, &mut domain.filter)
                    .await
                    .map_err(|e| status::port_status(&e))?;
            }
            span.set("weft.mode", format!("{:?}", domain.mode));
            span.set("weft.generation", pinned.generation.to_string());
            let result = pinned.engine.search(&domain).await;
            weft_telemetry::metrics().observe_query(started.elapsed(), result.is_ok());
            let mut response = result.map_err(|e| status::query_status(&e))?;
            scope.retain(&mut response.results);
            // The service reads no catalog, so packed spans carry no commit.
            let context = packing.map(|options| {
                weft_core::retrieval::pack(
                    &response.results,
                    &std::collections::HashMap::new(),
                    &options,
                    &weft_core::retrieval::ApproxTokenCounter,
                )
            });
            let mut response = weft_proto::query::search_response(response, explain);
            response.context = context.map(Into::into);
            response.generation = pinned.generation;
            span.set("weft.results", response.results.len().to_string());
            Ok(response)
        }
        .await;
        finish(&context, span, result)
    }

    async fn get_chunks(
        &self,
        request: Request<v1::GetChunksRequest>,
    ) -> Result<Response<v1::GetChunksResponse>, Status> {
        let (context, span) = rpc_span("GetChunks", &request);
        let result = match self.authorize(&request) {
            Ok(scope) => self.get_chunks_of(request.into_inner(), &scope).await,
            Err(status) => Err(status),
        };
        finish(&context, span, result)
    }
}

/// The field a search names its projects in.
const PROJECTS_FIELD: &str = "weft.v1.SearchRequest.projects";

impl QueryServer {
    /// Checks the projects a search names with the one rule of
    /// [`weft_core::projects::check_projects`]: each must be indexed and
    /// within `scope`; else `NOT_FOUND` naming it and listing the indexed
    /// projects `scope` covers (a project outside it is answered as one
    /// that does not exist, and the others are never listed). Projects
    /// seen indexed in the last [`KNOWN_PROJECT_TTL`] need no lookup.
    async fn check_projects(
        &self,
        pinned: &Pinned,
        scope: &Scope,
        named: &[String],
    ) -> Result<(), Status> {
        if named
            .iter()
            .all(|p| scope.allows_project(p) && self.known_projects.contains(pinned.generation, p))
        {
            return Ok(());
        }
        let scoped = scope.projects.is_some();
        let projects = match self.catalog(pinned).await {
            Some(catalog) => catalog
                .projects()
                .await
                .inspect_err(|e| tracing::warn!("cannot list the indexed projects: {e}"))
                .ok(),
            None => None,
        };
        let (mut known, mut listed) = match projects {
            // A catalog that lists nothing is not this generation's record
            // (the distributed pipeline keeps its catalog in NATS).
            Some(projects) if !projects.is_empty() => {
                let known: Vec<String> = projects
                    .into_iter()
                    .map(|(name, _)| name)
                    .filter(|name| scope.allows_project(name))
                    .collect();
                (known, true)
            }
            // No catalog to list: which of the projects asked for are
            // indexed, by one lookup each.
            _ => (self.indexed_of(pinned, scope, named).await?, false),
        };
        if listed {
            // The index, not the catalog, decides: a project the catalog
            // does not list but the index holds is searched, and the list
            // is then not said (it is not the whole truth).
            let missing: Vec<String> = named
                .iter()
                .filter(|p| !known.contains(p))
                .cloned()
                .collect();
            let found = self.indexed_of(pinned, scope, &missing).await?;
            if !found.is_empty() {
                known.extend(found);
                listed = false;
            }
        }
        for project in named.iter().filter(|p| known.contains(p)) {
            self.known_projects.insert(pinned.generation, project);
        }
        weft_core::projects::check_projects(PROJECTS_FIELD, named, &known, scoped).map_err(
            |error| {
                let error = if listed { error } else { error.unlisted() };
                Status::not_found(error.to_string())
            },
        )
    }

    /// The catalog of the generation `pinned` reads, where there is one:
    /// the one its stack holds open, else the data directory's.
    async fn catalog(&self, pinned: &Pinned) -> Option<Arc<dyn Catalog>> {
        let stack = pinned.stack.as_ref()?;
        if let Some(catalog) = &stack.catalog {
            return Some(catalog.clone());
        }
        let data_dir = self.data_dir.as_ref()?;
        match stack.catalog_now(data_dir) {
            Ok(catalog) => Some(catalog),
            Err(e) => {
                tracing::warn!("cannot list the indexed projects: {e}");
                None
            }
        }
    }

    /// The catalog branch overlays are resolved with: the one the live
    /// generation's registry keeps (the services' NATS catalog, opened once
    /// per generation), else the generation's own (held open, or the data
    /// directory's). `None` where there is none: a search then reads no
    /// overlay's base.
    async fn overlay_catalog(&self, pinned: &Pinned) -> Result<Option<Arc<dyn Catalog>>, Status> {
        if let Stacks::Live(live) = &self.stacks {
            let mut cached = self.registry_catalog.lock().await;
            if let Some((generation, catalog)) = cached.as_ref()
                && *generation == pinned.generation
            {
                return Ok(Some(catalog.clone()));
            }
            let catalog = live
                .registry_catalog(pinned.generation)
                .await
                .map_err(|e| status::port_status(&e))?;
            if let Some(catalog) = catalog {
                *cached = Some((pinned.generation, catalog.clone()));
                return Ok(Some(catalog));
            }
        }
        let Some(stack) = &pinned.stack else {
            return Ok(None);
        };
        if let Some(catalog) = &stack.catalog {
            return Ok(Some(catalog.clone()));
        }
        Ok(self
            .data_dir
            .as_ref()
            .and_then(|data| stack.catalog_now(data).ok()))
    }

    /// Those of `projects` within `scope` that have a chunk in the index:
    /// one filtered nearest-neighbour lookup of one point each.
    async fn indexed_of(
        &self,
        pinned: &Pinned,
        scope: &Scope,
        projects: &[String],
    ) -> Result<Vec<String>, Status> {
        let dimension = pinned.vectors.dimension().max(1);
        let mut probe = vec![0.0f32; dimension];
        probe[0] = 1.0;
        let mut indexed = Vec::new();
        for project in projects {
            if indexed.contains(project) || !scope.allows_project(project) {
                continue;
            }
            let filter = SearchFilter {
                projects: vec![project.clone()],
                ..Default::default()
            };
            let hits = pinned
                .vectors
                .search(&probe, &filter, 1)
                .await
                .map_err(|e| status::port_status(&e))?;
            if !hits.is_empty() {
                indexed.push(project.clone());
            }
        }
        Ok(indexed)
    }

    async fn get_chunks_of(
        &self,
        request: v1::GetChunksRequest,
        scope: &Scope,
    ) -> Result<v1::GetChunksResponse, Status> {
        let document = DocumentId::parse(&request.document_id).ok_or_else(|| {
            Status::invalid_argument(format!(
                "weft.v1.GetChunksRequest.document_id: {:?} is not 16 lowercase hex characters",
                request.document_id
            ))
        })?;
        let start = request.start_index;
        let end = match request.end_index {
            Some(end) if end < start => {
                return Err(Status::invalid_argument(format!(
                    "weft.v1.GetChunksRequest.end_index: {end} is before start_index {start}"
                )));
            }
            Some(end) => end,
            None => start.saturating_add(MAX_GET_CHUNKS),
        };
        if end - start > MAX_GET_CHUNKS {
            return Err(Status::invalid_argument(format!(
                "weft.v1.GetChunksRequest.end_index: {} chunks asked, at most {MAX_GET_CHUNKS} per call",
                end - start
            )));
        }
        // Ids are computed, so the whole range is one store call; indices
        // past the document's end are simply not found. Chunk 0 comes too
        // when the range lacks it: it says whether the document exists and
        // how many chunks it has.
        let mut ids: Vec<ChunkId> = (start..end).map(|i| ChunkId::new(&document, i)).collect();
        if start > 0 || end == 0 {
            ids.push(ChunkId::new(&document, 0));
        }
        let pinned = self.pin();
        let mut chunks = pinned
            .vectors
            .get(&ids)
            .await
            .map_err(|e| status::port_status(&e))?;
        // Another project's document is answered as one that does not exist.
        chunks.retain(|c| scope.allows(c) && c.document_id == document);
        let Some(total_chunks) = chunks.iter().map(|c| c.total_chunks).max() else {
            return Err(Status::not_found(format!(
                "weft.v1.GetChunksRequest.document_id: document {document} is not indexed"
            )));
        };
        chunks.retain(|c| (start..end).contains(&c.chunk_index));
        if chunks.is_empty() && start >= total_chunks && end > start {
            return Err(Status::out_of_range(format!(
                "weft.v1.GetChunksRequest.start_index: {start} is past the last chunk of document {document}, which has {total_chunks}"
            )));
        }
        chunks.sort_by_key(|c| c.chunk_index);
        Ok(v1::GetChunksResponse {
            total_chunks,
            chunks: chunks.into_iter().map(Into::into).collect(),
            generation: pinned.generation,
        })
    }
}

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Requests running longer are cancelled with DEADLINE_EXCEEDED (a
    /// caller's shorter `grpc-timeout` wins).
    pub request_timeout: Duration,
    /// Largest response message.
    pub max_message_bytes: usize,
    /// Largest request message: a bigger one is refused before it is read.
    pub max_request_bytes: usize,
    /// Connections open at once; more are closed on arrival ([`connections`]).
    pub max_connections: usize,
    /// Requests in flight on one connection (HTTP/2 streams).
    pub max_streams_per_connection: u32,
    /// How often the API keys file is checked for changes.
    pub keys_reload: Duration,
    /// TLS (and client certificates) of the gRPC port: [`tls::from_config`].
    pub tls: Option<tonic::transport::ServerTlsConfig>,
}

impl ServeOptions {
    /// The options of `[query]`.
    pub fn from_config(config: &weft_config::QueryServiceConfig) -> Self {
        Self {
            request_timeout: Duration::from_secs(config.request_timeout_secs),
            max_message_bytes: config.max_message_bytes,
            max_request_bytes: config.max_request_bytes,
            max_connections: config.max_connections,
            max_streams_per_connection: config.max_streams_per_connection,
            keys_reload: Duration::from_secs(config.api_keys_reload_secs),
            tls: None,
        }
    }
}

/// Binds `addr` ("127.0.0.1:0" picks a free port).
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener, ServiceError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServiceError::Bind {
            addr: addr.to_owned(),
            source,
        })
}

/// Serves `server` (with health and reflection) on `listener` until
/// `shutdown` completes; in-flight requests then finish.
pub async fn serve(
    server: QueryServer,
    listener: tokio::net::TcpListener,
    options: &ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<QueryServiceServer<QueryServer>>()
        .await;
    // NOT_SERVING (for the service and the whole server, "") while the
    // record of the live generation cannot be read (NATS unreachable):
    // answers would come from a generation that may be switched away and
    // removed unseen. SERVING again once it is read.
    let _health = match &server.stacks {
        Stacks::Live(live) => Some(AbortOnDrop(tokio::spawn(report_following(
            live.follow_state(),
            health.clone(),
        )))),
        Stacks::Fixed { .. } => None,
    };
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(weft_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    // Rotation without restart: the keys file is re-read while serving.
    let watch = match &server.auth {
        Auth::Keys(store) => Some(AbortOnDrop(tokio::spawn(
            store.clone().watch(options.keys_reload),
        ))),
        Auth::Open => None,
    };
    // Callers are authenticated from the headers, before their message is
    // read or decoded: an unauthenticated caller costs no decoding and no
    // memory for its message (issue 33). The scope found travels to the
    // handlers in the request's extensions.
    let auth = server.auth.clone();
    let service = tonic::service::interceptor::InterceptedService::new(
        QueryServiceServer::new(server)
            .max_decoding_message_size(options.max_request_bytes)
            .max_encoding_message_size(options.max_message_bytes),
        move |mut request: Request<()>| {
            let scope = authorize(&auth, request.metadata())?;
            request.extensions_mut().insert(scope);
            Ok(request)
        },
    );
    // No Nagle delay: a small answer would otherwise wait ~40 ms for the
    // client's delayed ACK (measured: a 1 ms search answered in 43 ms).
    let incoming = connections::limit(
        tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
        options.max_connections,
    );
    // At most this many requests in flight per connection (HTTP/2
    // streams): one caller's connection cannot take every worker.
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(options.max_streams_per_connection)
        .concurrency_limit_per_connection(options.max_streams_per_connection as usize);
    if let Some(tls) = &options.tls {
        builder = builder.tls_config(tls.clone())?;
    }
    builder
        .layer(deadline::DeadlineLayer::new(options.request_timeout))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    drop(watch);
    Ok(())
}

/// A task aborted when this is dropped (when `serve` returns or fails).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Keeps the health of `live`'s service and of the whole server ("") at
/// whether it follows the live generation ([`weft_wiring::LiveQuery::following`]),
/// checked every [`FOLLOW_EVERY`].
async fn report_following(
    live: weft_wiring::FollowState,
    health: tonic_health::server::HealthReporter,
) {
    let mut serving = true;
    let mut tick = tokio::time::interval(FOLLOW_EVERY);
    loop {
        tick.tick().await;
        let following = live.following();
        if following == serving {
            continue;
        }
        serving = following;
        let status = if serving {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        health
            .set_service_status(
                <QueryServiceServer<QueryServer> as tonic::server::NamedService>::NAME,
                status,
            )
            .await;
        health.set_service_status("", status).await;
        if serving {
            tracing::info!("health: SERVING (the live generation's record is read again)");
        } else {
            tracing::warn!("health: NOT_SERVING (the live generation's record cannot be read)");
        }
    }
}

/// How often a server checks which index generation is live.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// The server over the stores `[stores]` configures (embedded ones in the
/// data directory of `locations`), with the configured embedder and
/// reranker, reading the generation `source` names live
/// ([`weft_wiring::LiveQuery`]). Follow the switches with
/// [`weft_wiring::LiveQuery::follow`] ([`run`] does).
pub async fn open(
    config: &WeftConfig,
    locations: &weft_config::Locations,
    source: weft_wiring::LiveSource,
) -> Result<(QueryServer, weft_wiring::LiveQuery), ServiceError> {
    let in_data_dir = matches!(source, weft_wiring::LiveSource::DataDir);
    let live = weft_wiring::LiveQuery::open(
        config,
        locations,
        weft_wiring::QueryEmbedder::Needed,
        source,
    )
    .await?;
    let stack = live.current();
    tracing::info!(
        stores = %stack.description,
        model = %stack.model,
        generation = stack.generation,
        "query service reading"
    );
    let mut server = QueryServer::live(live.clone());
    if in_data_dir {
        server = server.with_data_dir(weft_wiring::DataDir::new(&locations.data_dir));
    }
    Ok((server, live))
}

/// The whole service: sets up authentication and TLS (`[query]`; `auth`
/// decides when `query.auth` is unset), opens the stores and the model of
/// the live generation `source` (awaited after the settings are checked)
/// names, binds `listen`, serves until
/// `shutdown`, moving to a new generation when it goes live. Returns the
/// bound address through `on_bound` first.
pub async fn run(
    config: &WeftConfig,
    locations: &weft_config::Locations,
    listen: &str,
    auth: AuthDefault,
    source: impl std::future::Future<Output = Result<weft_wiring::LiveSource, ServiceError>>,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    // Settings first: a missing keys file or certificate fails before the
    // stores and the model are opened.
    let auth = weft_auth::from_config(&config.query, listen, auth)?;
    let mut options = ServeOptions::from_config(&config.query);
    options.tls = tls::from_config(&config.query)?;
    if options.tls.is_none()
        && matches!(auth, Auth::Keys(_))
        && !listen
            .parse::<SocketAddr>()
            .is_ok_and(|a| a.ip().is_loopback())
    {
        tracing::warn!(
            listen,
            "API keys travel in clear text: set query.tls_cert_file and query.tls_key_file, or terminate TLS in front of the service"
        );
    }
    // Then where the live generation is recorded (e.g. a connection to
    // NATS), then the stores.
    let (server, live) = open(config, locations, source.await?).await?;
    let server = server
        .with_auth(auth)
        .with_bounds(config.query.request_bounds());
    let _follow = AbortOnDrop(live.follow(FOLLOW_EVERY));
    let listener = bind(listen).await?;
    let addr = listener.local_addr().map_err(|source| ServiceError::Bind {
        addr: listen.to_owned(),
        source,
    })?;
    on_bound(addr);
    serve(server, listener, &options, shutdown).await
}
