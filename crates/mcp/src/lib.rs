//! # weft-mcp
//!
//! weft for assistants, over the Model Context Protocol (DESIGN §10): the
//! tools `search` (context packed under a token budget, with citations),
//! `get_context` (a citation or chunk widened to its section or function),
//! `list_projects` and, when allowed, `index`.
//!
//! [`WeftMcp`] is the server over any [`Backend`] — an index in this
//! process ([`EmbeddedBackend`]) or a remote `weft-query` ([`GrpcBackend`])
//! — built by the caller; [`serve_stdio`] and [`serve_http`] run it over
//! stdio or streamable HTTP. A tool that fails answers with an MCP tool
//! error naming what went wrong; the server keeps running. Nothing but the
//! protocol is written to stdout. Over HTTP, callers are authenticated with
//! the query API's keys ([`Auth`]) and each reads only its key's
//! [`Scope`]; every tool argument is held to the query API's bounds
//! ([`RequestBounds`], checked by the same code as a gRPC search).

#![warn(missing_docs)]

mod backend;
pub mod http;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use globset::{Glob, GlobSet, GlobSetBuilder};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;
use serde_json::json;
pub use weft_auth::{Auth, Scope};
use weft_core::query::{MAX_PATH_PREFIX_BYTES, RequestBounds, SearchMode, SearchRequest};
use weft_core::retrieval::{
    ApproxTokenCounter, Citation, ContextPack, ContextTarget, PackOptions, SearchFilter,
    expand_context, pack,
};
use weft_core::{ChunkId, ContentType, DocumentId};

pub use backend::{
    Backend, BackendError, EmbeddedBackend, EmbeddedParts, GrpcBackend, MAX_DOCUMENT_CHUNKS,
    PartsProvider, ProjectInfo, rfc3339,
};

/// Indexes a source on request (the `index` tool), in the caller's process.
#[async_trait]
pub trait IndexRunner: Send + Sync {
    /// Indexes `source` (a path, git URL or site URL) into `project` (default:
    /// derived from the source), from scratch with `reindex`; returns the
    /// run's summary as JSON.
    async fn index(
        &self,
        source: &str,
        project: Option<&str>,
        reindex: bool,
        caller: Caller,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>>;
}

/// Who asks for an index run, for what the runner may reach on their behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// The user who started `weft mcp` on stdio: their own files and git.
    Local,
    /// A client over HTTP: only directories under configured roots, and
    /// git and sites as `[crawl]` allows (public addresses).
    Remote,
}

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The budget of `search` and `get_context` when a call gives none
    /// (within `bounds.max_tokens`).
    pub default_max_tokens: usize,
    /// What one tool call may ask for: the query API's bounds.
    pub bounds: RequestBounds,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            default_max_tokens: 2000,
            bounds: RequestBounds::default(),
        }
    }
}

/// The MCP server: weft's tools over a [`Backend`].
#[derive(Clone)]
pub struct WeftMcp {
    backend: Arc<dyn Backend>,
    indexer: Option<Arc<dyn IndexRunner>>,
    options: McpOptions,
    tool_router: ToolRouter<Self>,
}

/// A content type, as tools take it.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContentTypeParam {
    /// Source code.
    Code,
    /// Documentation and other prose.
    Prose,
    /// API reference (type declarations, API docs).
    ApiReference,
}

impl From<ContentTypeParam> for ContentType {
    fn from(value: ContentTypeParam) -> Self {
        match value {
            ContentTypeParam::Code => ContentType::Code,
            ContentTypeParam::Prose => ContentType::Prose,
            ContentTypeParam::ApiReference => ContentType::ApiReference,
        }
    }
}

/// Which retrievers a search uses.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModeParam {
    /// Meaning and keywords together (the default; best in general).
    Hybrid,
    /// Meaning only (embeddings).
    Vector,
    /// Keywords only (BM25): exact identifiers, error messages.
    Text,
}

/// Arguments of `search`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct SearchParams {
    /// What to find, in plain words or identifiers, e.g. "how are retries
    /// backed off" or "RateLimiter.acquire".
    pub query: String,
    /// Only these projects (see list_projects); default: all.
    #[serde(default)]
    pub projects: Option<Vec<String>>,
    /// Only these content types; default: all.
    #[serde(default)]
    pub content_types: Option<Vec<ContentTypeParam>>,
    /// Only documents whose path matches one of these globs, e.g.
    /// "src/**/*.java" or "docs/" (a plain path is a directory or file prefix).
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// hybrid (default), vector or text.
    #[serde(default)]
    pub mode: Option<ModeParam>,
    /// Token budget of the returned context (default: the server's, 2000).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Matched chunks to retrieve before packing (default 10, at most 100).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Arguments of `get_context`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct GetContextParams {
    /// A citation from search results: "path/to/file#L10-L42" (or a bare
    /// path for the start of a document).
    #[serde(default)]
    pub citation: Option<String>,
    /// Instead of a citation: a chunk as "DOCUMENT_ID:CHUNK_INDEX" (from a
    /// result's document_id and first_chunk) or a chunk's UUID.
    #[serde(default)]
    pub chunk_id: Option<String>,
    /// The citation's project (needed when several projects hold the path).
    #[serde(default)]
    pub project: Option<String>,
    /// Token budget of the returned context (default: the server's, 2000).
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

/// Arguments of `list_projects` (none).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct ListProjectsParams {}

/// Arguments of `index`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct IndexParams {
    /// A directory path, a git URL (…​.git, git@…) or a documentation site URL.
    pub source: String,
    /// The project name (default: derived from the source).
    #[serde(default)]
    pub project: Option<String>,
    /// Drop the project first and index it from scratch.
    #[serde(default)]
    pub reindex: Option<bool>,
}

/// A tool call that cannot be answered, with the message the assistant sees.
#[derive(Debug)]
struct ToolError(String);

impl<E: std::fmt::Display> From<E> for ToolError {
    fn from(e: E) -> Self {
        ToolError(e.to_string())
    }
}

type ToolResult = Result<CallToolResult, ToolError>;

fn answer(result: ToolResult, tool: &str) -> Result<CallToolResult, ErrorData> {
    Ok(result.unwrap_or_else(|ToolError(message)| {
        tracing::warn!(tool, %message, "tool call failed");
        CallToolResult::error(vec![ContentBlock::text(format!("{tool}: {message}"))])
    }))
}

fn pack_result(pack: &ContextPack) -> ToolResult {
    let value = serde_json::to_value(pack)?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(pack.to_markdown())]);
    result.structured_content = Some(value);
    Ok(result)
}

/// The search filter and the post-filter for `paths` globs: a glob's
/// literal directory prefix goes to the stores (when all globs share one),
/// the globs themselves are matched on the results.
fn path_filters(paths: &[String]) -> Result<(Option<String>, Option<GlobSet>), ToolError> {
    if paths.is_empty() {
        return Ok((None, None));
    }
    let mut builder = GlobSetBuilder::new();
    let mut prefixes = Vec::new();
    for p in paths {
        let p = p.trim().trim_start_matches("./");
        if p.is_empty() {
            return Err(ToolError("paths: an empty path".into()));
        }
        let literal = !p.contains(['*', '?', '[', '{']);
        let prefix: String = if literal {
            p.trim_end_matches('/').to_owned()
        } else {
            let cut = p.find(['*', '?', '[', '{']).unwrap_or(p.len());
            p[..cut].rsplit_once('/').map_or("", |(d, _)| d).to_owned()
        };
        prefixes.push(prefix.clone());
        // A plain path matches itself and what is below it.
        let globs = if literal {
            vec![prefix.clone(), format!("{prefix}/**")]
        } else {
            vec![p.to_owned()]
        };
        for g in globs {
            builder.add(
                Glob::new(&g).map_err(|e| ToolError(format!("paths: {p:?} is not a glob: {e}")))?,
            );
        }
    }
    let set = builder
        .build()
        .map_err(|e| ToolError(format!("paths: {e}")))?;
    let shared = prefixes
        .iter()
        .all(|p| p == &prefixes[0])
        .then(|| prefixes[0].clone())
        .filter(|p| !p.is_empty());
    Ok((shared, Some(set)))
}

/// The budget of a call: `requested`, or `default` when it gives none,
/// held to `bounds`.
fn budget(
    requested: Option<u32>,
    default: usize,
    bounds: &RequestBounds,
) -> Result<usize, ToolError> {
    match requested {
        None => Ok(default),
        Some(n) => bounds
            .check_max_tokens(n as usize)
            .map_err(|e| ToolError(e.to_string())),
    }
}

/// The search a `search` call asks for, and the globs its results must
/// match. Every argument is held to the query service's bounds
/// ([`SearchRequest::checked`]: the query's length and characters, the
/// limit, each filter list, the budget), so a tool call cannot ask for more
/// than a gRPC request may; the error names the argument.
fn search_request(
    p: SearchParams,
    max_tokens: usize,
    bounds: &RequestBounds,
) -> Result<(SearchRequest, Option<GlobSet>), ToolError> {
    let paths = p.paths.unwrap_or_default();
    check_paths(&paths, bounds)?;
    let (path_prefix, globs) = path_filters(&paths)?;
    let mode = match p.mode.unwrap_or(ModeParam::Hybrid) {
        ModeParam::Hybrid => SearchMode::Hybrid,
        ModeParam::Vector => SearchMode::Vector,
        ModeParam::Text => SearchMode::Text,
    };
    let request = SearchRequest {
        query: p.query,
        filter: SearchFilter {
            projects: p.projects.unwrap_or_default(),
            content_types: p
                .content_types
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            languages: Vec::new(),
            path_prefix,
        },
        // Unset (0): the default.
        limit: p.limit.map_or(0, |n| n as usize),
        mode,
        expand: true,
        adjacency: None,
        rerank: true,
        max_tokens: Some(max_tokens),
        // Set by the caller's scope (`Scope::apply`).
        cache_partition: None,
        hidden: Default::default(),
    };
    let mut request = request
        .checked(bounds)
        .map_err(|e| ToolError(format!("{}: {}", argument_name(e.field), e.problem)))?;
    // Globs narrow the results after the search: ask for more.
    if globs.is_some() {
        request.limit = (request.limit * 3).min(bounds.max_limit);
    }
    Ok((request, globs))
}

/// The tool argument a field of the request comes from.
fn argument_name(field: &str) -> &str {
    match field {
        "path_prefix" => "paths",
        other => other,
    }
}

/// The longest `citation` argument: a document uri and its line range.
const MAX_CITATION_BYTES: usize = MAX_PATH_PREFIX_BYTES + 32;
/// The longest `chunk_id` argument (a UUID or `DOCUMENT_ID:CHUNK_INDEX`).
const MAX_CHUNK_ID_BYTES: usize = 64;
/// The longest `source` argument of `index` (a path or URL).
const MAX_SOURCE_BYTES: usize = 4096;

/// Checks a text argument: at most `max` bytes, no control characters (an
/// argument is echoed in errors and logs, and looked up in the stores).
fn check_argument(name: &str, value: Option<&str>, max: usize) -> Result<(), ToolError> {
    let Some(value) = value else { return Ok(()) };
    if value.len() > max {
        return Err(ToolError(format!(
            "{name} is {} bytes long, over the maximum {max}",
            value.len()
        )));
    }
    match weft_core::control_character(value) {
        Some(problem) => Err(ToolError(format!("{name} {problem}"))),
        None => Ok(()),
    }
}

/// Checks the `paths` argument as the query API checks a filter list: at
/// most `max_filter_values` globs, each no longer than a path prefix, none
/// with control characters.
fn check_paths(paths: &[String], bounds: &RequestBounds) -> Result<(), ToolError> {
    if paths.len() > bounds.max_filter_values {
        return Err(ToolError(format!(
            "paths: {} globs is over the maximum {}",
            paths.len(),
            bounds.max_filter_values
        )));
    }
    for (i, p) in paths.iter().enumerate() {
        if p.len() > bounds.max_path_prefix_bytes {
            return Err(ToolError(format!(
                "paths: glob {i} is {} bytes long, over the maximum {}",
                p.len(),
                bounds.max_path_prefix_bytes
            )));
        }
        if let Some(problem) = weft_core::control_character(p) {
            return Err(ToolError(format!("paths: glob {i} {problem}")));
        }
    }
    Ok(())
}

/// The projects a tool call names (`field`) must be ones the caller can
/// search — indexed, and within its scope — by the one rule of
/// [`weft_core::projects::check_projects`]: a typo is named with the
/// indexed projects the caller may read, and a project outside the scope
/// gets the same answer as one that does not exist.
fn check_named_projects(
    field: &str,
    named: &[String],
    listed: &[ProjectInfo],
    scope: &Scope,
) -> Result<(), ToolError> {
    let known: Vec<&str> = listed
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| scope.allows_project(name))
        .collect();
    weft_core::projects::check_projects(field, named, &known, scope.projects.is_some())
        .map_err(ToolError::from)
}

/// The last indexed commit of each listed project that has one, for citations.
fn revisions_of(projects: Vec<ProjectInfo>) -> HashMap<String, String> {
    projects
        .into_iter()
        .filter_map(|p| Some((p.name, p.revision?)))
        .collect()
}

/// What the caller of a tool call may read. Over HTTP, the scope the
/// authentication layer of [`serve_http`] put on the request (none: nothing,
/// so a request that did not pass it reads nothing); over stdio, whose
/// caller is the process's owner, everything.
fn scope_of(ctx: &RequestContext<RoleServer>) -> Scope {
    caller_of(ctx).0
}

/// The caller's scope ([`scope_of`]) and whether they came over HTTP.
fn caller_of(ctx: &RequestContext<RoleServer>) -> (Scope, Caller) {
    match ctx.extensions.get::<axum::http::request::Parts>() {
        None => (Scope::everything(), Caller::Local),
        Some(parts) => (
            parts
                .extensions
                .get::<Scope>()
                .cloned()
                .unwrap_or_else(Scope::nothing),
            Caller::Remote,
        ),
    }
}

#[tool_router]
impl WeftMcp {
    /// A server over `backend`; with `indexer`, the `index` tool is offered.
    pub fn new(
        backend: Arc<dyn Backend>,
        indexer: Option<Arc<dyn IndexRunner>>,
        options: McpOptions,
    ) -> Self {
        let mut tool_router = Self::tool_router();
        if indexer.is_none() {
            tool_router.remove_route("index");
        }
        Self {
            backend,
            indexer,
            options,
            tool_router,
        }
    }

    /// The revision of each project, for citations (empty when the backend
    /// cannot list projects).
    async fn revisions(&self) -> HashMap<String, String> {
        revisions_of(self.backend.projects().await.unwrap_or_default())
    }

    #[tool(
        description = "Search the indexed code and documentation. Returns the most relevant \
        spans (whole functions, whole sections) packed into a token budget, each under a \
        citation `path#Lstart-Lend` with its project, commit and symbol or heading path, \
        followed by references to further matches that did not fit. Cite those citations; \
        call get_context with one to read more around it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search(
        &self,
        Parameters(p): Parameters<SearchParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(self.search_tool(p, &scope_of(&ctx)).await, "search")
    }

    #[tool(
        description = "Read more around a place in the index: give a citation from search \
        (`path#Lstart-Lend`, plus project when several projects hold that path) or a chunk id. \
        Returns the whole function or section it lies in, widened with neighbouring code or \
        text while it fits max_tokens, with a citation of exactly the lines returned.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_context(
        &self,
        Parameters(p): Parameters<GetContextParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(
            self.get_context_tool(p, &scope_of(&ctx)).await,
            "get_context",
        )
    }

    #[tool(
        description = "List the indexed projects: name, source, last indexed commit (git) and \
        time, documents and chunks. Use the names to restrict search to projects.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_projects(
        &self,
        Parameters(_): Parameters<ListProjectsParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(
            self.list_projects_tool(&scope_of(&ctx)).await,
            "list_projects",
        )
    }

    #[tool(
        description = "Index a directory, git repository URL or documentation site URL (or \
        bring an indexed one up to date: only what changed is re-indexed). May take minutes \
        for a large source.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = true
        )
    )]
    async fn index(
        &self,
        Parameters(p): Parameters<IndexParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (scope, caller) = caller_of(&ctx);
        answer(self.index_tool(p, &scope, caller).await, "index")
    }
}

impl WeftMcp {
    async fn search_tool(&self, p: SearchParams, scope: &Scope) -> ToolResult {
        let bounds = &self.options.bounds;
        let max_tokens = budget(p.max_tokens, self.options.default_max_tokens, bounds)?;
        let (mut request, globs) = search_request(p, max_tokens, bounds)?;
        // The projects, once: for the projects named and for citations.
        let listed = self.backend.projects().await;
        if let Ok(listed) = &listed {
            check_named_projects("projects", &request.filter.projects, listed, scope)?;
        }
        scope
            .apply(&mut request)
            .map_err(|refused| ToolError(refused.message().to_owned()))?;
        let mut results = self.backend.search(&request).await?;
        scope.retain(&mut results);
        if let Some(globs) = &globs {
            results.retain(|d| globs.is_match(&d.uri));
        }
        let revisions = revisions_of(listed.unwrap_or_default());
        let packed = pack(
            &results,
            &revisions,
            &PackOptions { max_tokens },
            &ApproxTokenCounter,
        );
        pack_result(&packed)
    }

    async fn get_context_tool(&self, p: GetContextParams, scope: &Scope) -> ToolResult {
        let bounds = &self.options.bounds;
        let max_tokens = budget(p.max_tokens, self.options.default_max_tokens, bounds)?;
        check_argument("citation", p.citation.as_deref(), MAX_CITATION_BYTES)?;
        check_argument("chunk_id", p.chunk_id.as_deref(), MAX_CHUNK_ID_BYTES)?;
        check_argument(
            "project",
            p.project.as_deref(),
            bounds.max_filter_value_chars,
        )?;
        let (chunks, target) = match (&p.citation, &p.chunk_id) {
            (Some(_), Some(_)) => {
                return Err(ToolError(
                    "give either citation or chunk_id, not both".into(),
                ));
            }
            (None, None) => {
                return Err(ToolError(
                    "give a citation (path#Lstart-Lend) or a chunk_id".into(),
                ));
            }
            (Some(c), None) => {
                let citation: Citation = c.parse().map_err(ToolError)?;
                let chunks = self
                    .document_of(&citation.uri, p.project.as_deref(), scope)
                    .await?;
                let (start, end) = citation.lines.unwrap_or((1, 1));
                let last = chunks.iter().map(|c| c.end_line).max().unwrap_or(0);
                if start > last {
                    return Err(ToolError(format!(
                        "{c}: line {start} is past the end of {} ({last} lines)",
                        citation.uri
                    )));
                }
                (chunks, ContextTarget::Lines(start, end.min(last)))
            }
            (None, Some(id)) => self.chunk_target(id, scope).await?,
        };
        let revision = self
            .revisions()
            .await
            .remove(chunks.first().map_or("", |c| c.project.as_str()));
        let packed = expand_context(
            &chunks,
            target,
            revision.as_deref(),
            max_tokens,
            &ApproxTokenCounter,
        )
        .ok_or_else(|| ToolError("the document has no chunks".into()))?;
        pack_result(&packed)
    }

    /// The chunks of the document at `uri`, in `project` or in whichever
    /// project holds it, of the projects and content types `scope` covers.
    async fn document_of(
        &self,
        uri: &str,
        project: Option<&str>,
        scope: &Scope,
    ) -> Result<Vec<weft_core::Chunk>, ToolError> {
        let projects: Vec<String> = match project {
            Some(p) => {
                let named = [p.to_owned()];
                match self.backend.projects().await {
                    Ok(listed) => check_named_projects("project", &named, &listed, scope)?,
                    // A backend that cannot list projects: one outside
                    // the scope is not indexed, as far as this caller may
                    // know; one within it is looked for.
                    Err(_) => {
                        let in_scope: &[&str] = if scope.allows_project(p) { &[p] } else { &[] };
                        weft_core::projects::check_projects(
                            "project",
                            &named,
                            in_scope,
                            scope.projects.is_some(),
                        )
                        .map_err(|e| ToolError(e.unlisted().to_string()))?;
                    }
                }
                named.to_vec()
            }
            None => self
                .backend
                .projects()
                .await
                .map_err(|e| ToolError(format!("{e}; pass project with the citation")))?
                .into_iter()
                .map(|p| p.name)
                .filter(|name| scope.allows_project(name))
                .collect(),
        };
        let mut found = Vec::new();
        for name in &projects {
            let chunks = self
                .backend
                .document_chunks(&DocumentId::new(name, uri))
                .await?;
            // A document of a content type outside the scope is not there.
            if !chunks.is_empty() && chunks.iter().all(|c| scope.allows(c)) {
                found.push((name.clone(), chunks));
            }
        }
        match found.len() {
            0 => Err(ToolError(format!(
                "no indexed document {uri:?} in {}",
                if projects.is_empty() {
                    "any project (nothing is indexed)".to_owned()
                } else {
                    format!("project(s) {}", projects.join(", "))
                }
            ))),
            1 => Ok(found.remove(0).1),
            _ => Err(ToolError(format!(
                "{uri:?} is in several projects ({}): pass project",
                found
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    async fn chunk_target(
        &self,
        id: &str,
        scope: &Scope,
    ) -> Result<(Vec<weft_core::Chunk>, ContextTarget), ToolError> {
        let id = id.trim();
        let (document, index) = if let Some((doc, index)) = id.split_once(':') {
            let document = DocumentId::parse(doc).ok_or_else(|| {
                ToolError(format!(
                    "chunk_id {id:?}: {doc:?} is not a document id (16 hex characters)"
                ))
            })?;
            let index: u32 = index.parse().map_err(|_| {
                ToolError(format!("chunk_id {id:?}: {index:?} is not a chunk index"))
            })?;
            (document, index)
        } else {
            let chunk_id = id.parse::<ChunkId>().map_err(|_| {
                ToolError(format!(
                    "chunk_id {id:?} is neither DOCUMENT_ID:CHUNK_INDEX nor a chunk UUID"
                ))
            })?;
            // Outside the scope, a chunk is not there: the same answer as
            // for an id nothing has.
            let chunk = self
                .backend
                .chunk(chunk_id)
                .await?
                .filter(|chunk| scope.allows(chunk))
                .ok_or_else(|| ToolError(format!("no chunk with id {id}")))?;
            (chunk.document_id.clone(), chunk.chunk_index)
        };
        let mut chunks = self.backend.document_chunks(&document).await?;
        // Outside the scope, a chunk is not there: the same answer as for
        // one that does not exist.
        if !chunks.iter().all(|c| scope.allows(c)) {
            chunks.clear();
        }
        if !chunks.iter().any(|c| c.chunk_index == index) {
            return Err(ToolError(format!(
                "no chunk {index} of document {document} ({} chunks indexed)",
                chunks.len()
            )));
        }
        Ok((chunks, ContextTarget::Chunk(index)))
    }

    async fn list_projects_tool(&self, scope: &Scope) -> ToolResult {
        let mut projects = self.backend.projects().await?;
        projects.retain(|p| scope.allows_project(&p.name));
        let mut text = String::new();
        if projects.is_empty() {
            text.push_str("No project is indexed.\n");
        }
        for p in &projects {
            text.push_str(&format!(
                "- {}: {} documents, {} chunks, from {}{}{}\n",
                p.name,
                p.documents,
                p.chunks,
                p.source,
                p.revision
                    .as_deref()
                    .map(|r| format!(" @ {}", &r[..r.len().min(12)]))
                    .unwrap_or_default(),
                p.indexed_at_utc
                    .as_deref()
                    .map(|t| format!(", indexed {t}"))
                    .unwrap_or_default()
            ));
        }
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(json!({ "projects": projects }));
        Ok(result)
    }

    async fn index_tool(&self, p: IndexParams, scope: &Scope, caller: Caller) -> ToolResult {
        let indexer = self.indexer.as_ref().ok_or_else(|| {
            ToolError("indexing is off: start weft mcp with --allow-index".into())
        })?;
        // Reading is not writing: a key indexes only with `index = true`
        // (`weft keys new --index`), which the keys file allows only with
        // every project.
        if !scope.may_index {
            return Err(ToolError(
                "this API key may not index (its entry needs index = true: weft keys new --index)"
                    .into(),
            ));
        }
        if p.source.trim().is_empty() {
            return Err(ToolError("source is empty".into()));
        }
        check_argument("source", Some(&p.source), MAX_SOURCE_BYTES)?;
        let max_project = self.options.bounds.max_filter_value_chars;
        check_argument("project", p.project.as_deref(), max_project)?;
        let summary = indexer
            .index(
                p.source.trim(),
                p.project.as_deref(),
                p.reindex.unwrap_or(false),
                caller,
            )
            .await
            .map_err(|e| {
                // The whole cause: what refused the source, not only that
                // it could not be read.
                let cause = weft_core::error_chain(&*e);
                ToolError(format!("{}: {cause}", p.source))
            })?;
        let text = format!(
            "Indexed {}.\n{}",
            p.source,
            serde_json::to_string_pretty(&summary)?
        );
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(json!({ "summary": summary }));
        Ok(result)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for WeftMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("weft", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "weft searches {} (code and documentation). Use search to find relevant \
                 code or docs (packed into max_tokens, with citations path#Lstart-Lend), \
                 get_context to read more around a citation, list_projects to see what \
                 is indexed.",
                self.backend.describe()
            ))
    }
}

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The MCP session failed to start or broke.
    #[error("MCP over stdio: {0}")]
    Stdio(String),
    /// The HTTP address could not be bound or served.
    #[error("MCP over HTTP on {addr}: {source}")]
    Http {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Serves `server` over stdin/stdout until the client closes the stream.
pub async fn serve_stdio(server: WeftMcp) -> Result<(), ServeError> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError::Stdio(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Stdio(e.to_string()))?;
    Ok(())
}

/// Serves `server` over streamable HTTP at `/mcp` on `listener` until
/// `shutdown` completes. `allowed_hosts` extends the loopback names the
/// `Host` header may carry (DNS-rebinding protection). Every request is
/// authenticated by `auth` as the query API's are (`Authorization: Bearer
/// KEY`, the keys of `query.api_keys_file`, re-read when the file changes):
/// without a valid key the answer is 401, over the key's rate 429, and the
/// tools read only the key's projects and content types. The keys file is
/// re-read every `keys_reload` while serving.
pub async fn serve_http(
    server: WeftMcp,
    listener: tokio::net::TcpListener,
    allowed_hosts: &[String],
    auth: Auth,
    keys_reload: std::time::Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let watch = match &auth {
        Auth::Keys(store) => Some(tokio::spawn(store.clone().watch(keys_reload))),
        Auth::Open => None,
    };
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let addr = listener
        .local_addr()
        .map(|a: SocketAddr| a.to_string())
        .unwrap_or_default();
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts.extend(allowed_hosts.iter().cloned());
    // Cancelled at shutdown: every session ends.
    let cancel = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |mut request: axum::extract::Request, next: axum::middleware::Next| {
                    // A value that is not text reads as a malformed one.
                    let verdict = auth.authorize(
                        request
                            .headers()
                            .get(axum::http::header::AUTHORIZATION)
                            .map(|v| v.to_str().unwrap_or("")),
                    );
                    async move {
                        match verdict {
                            Ok(scope) => {
                                request.extensions_mut().insert(scope);
                                next.run(request).await
                            }
                            Err(refused) => http::refusal(&refused),
                        }
                    }
                },
            ));
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            cancel.cancel();
        })
        .await
        .map_err(|source| ServeError::Http { addr, source });
    if let Some(watch) = watch {
        watch.abort();
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::query::{MAX_FILTER_VALUE_CHARS, MAX_FILTER_VALUES, MAX_QUERY_CHARS};

    #[test]
    fn path_globs_give_a_store_prefix_and_a_result_filter() {
        let (prefix, set) = path_filters(&["src/main/**/*.java".into()]).unwrap();
        assert_eq!(prefix.as_deref(), Some("src/main"));
        let set = set.unwrap();
        assert!(set.is_match("src/main/a/B.java"));
        assert!(!set.is_match("src/test/B.java"));
        let (prefix, set) = path_filters(&["docs/".into()]).unwrap();
        assert_eq!(prefix.as_deref(), Some("docs"));
        let set = set.unwrap();
        assert!(set.is_match("docs/a.md") && set.is_match("docs") && !set.is_match("docsx/a"));
        let (prefix, _) = path_filters(&["a/*.md".into(), "b/*.md".into()]).unwrap();
        assert_eq!(prefix, None, "no shared prefix");
        assert!(path_filters(&["a/[".into()]).is_err());
        assert_eq!(path_filters(&[]).unwrap().0, None);
    }

    fn params(query: &str) -> SearchParams {
        SearchParams {
            query: query.into(),
            projects: None,
            content_types: None,
            paths: None,
            mode: None,
            max_tokens: None,
            limit: None,
        }
    }

    fn refusal(p: SearchParams) -> String {
        match search_request(p, 2000, &RequestBounds::default()) {
            Ok(r) => panic!("accepted: {r:?}"),
            Err(ToolError(message)) => message,
        }
    }

    #[test]
    fn search_arguments_are_held_to_the_query_services_bounds() {
        let (request, globs) = search_request(
            params("RateLimiter acquire"),
            2000,
            &RequestBounds::default(),
        )
        .unwrap();
        assert_eq!(request.limit, 10);
        assert_eq!(request.max_tokens, Some(2000));
        assert!(globs.is_none());

        let long = "q".repeat(MAX_QUERY_CHARS + 1);
        assert!(refusal(params(&long)).starts_with("query: is longer than"));
        assert!(refusal(params("a\u{0}b")).contains("control character"));
        assert_eq!(refusal(params("  ")), "query: is empty");
        let too_many = SearchParams {
            projects: Some(vec!["p".into(); MAX_FILTER_VALUES + 1]),
            ..params("q")
        };
        assert!(refusal(too_many).starts_with("projects: 101 values"));
        let long_project = SearchParams {
            projects: Some(vec!["p".repeat(MAX_FILTER_VALUE_CHARS + 1)]),
            ..params("q")
        };
        assert!(refusal(long_project).starts_with("projects: value 0 is 257 characters"));
        let globs = SearchParams {
            paths: Some(vec!["src/**/*.rs".into(); MAX_FILTER_VALUES + 1]),
            ..params("q")
        };
        assert!(refusal(globs).starts_with("paths: 101 globs"));
        let long_glob = SearchParams {
            paths: Some(vec![format!("{}/*.rs", "d".repeat(MAX_PATH_PREFIX_BYTES))]),
            ..params("q")
        };
        assert!(refusal(long_glob).starts_with("paths: glob 0 is"));
        let escaping = SearchParams {
            paths: Some(vec!["../secret/*.md".into()]),
            ..params("q")
        };
        assert!(refusal(escaping).starts_with("paths: "));
        assert_eq!(
            refusal(SearchParams {
                limit: Some(101),
                ..params("q")
            }),
            "limit: 101 is over the maximum 100 (query.max_limit)"
        );
        let (request, _) = search_request(
            SearchParams {
                limit: Some(0),
                ..params("q")
            },
            2000,
            &RequestBounds::default(),
        )
        .unwrap();
        assert_eq!(request.limit, 10, "0 is unset: the default");

        let (request, globs) = search_request(
            SearchParams {
                paths: Some(vec!["src/main/**/*.java".into()]),
                limit: Some(50),
                ..params("q")
            },
            2000,
            &RequestBounds::default(),
        )
        .unwrap();
        assert_eq!(request.filter.path_prefix.as_deref(), Some("src/main"));
        assert_eq!(request.limit, 100, "globs ask for more, up to the bound");
        assert!(globs.is_some());
    }

    #[test]
    fn text_arguments_are_bounded() {
        assert!(check_argument("citation", None, 10).is_ok());
        assert!(check_argument("citation", Some("a.md#L1-L2"), 10).is_ok());
        let ToolError(m) = check_argument("citation", Some("a.md#L1-L20"), 10).unwrap_err();
        assert_eq!(m, "citation is 11 bytes long, over the maximum 10");
        let ToolError(m) = check_argument("project", Some("a\nb"), 10).unwrap_err();
        assert!(m.starts_with("project holds a control character"), "{m}");
    }

    #[test]
    fn budgets_are_checked() {
        let bounds = RequestBounds::default();
        assert_eq!(budget(None, 2000, &bounds).unwrap(), 2000);
        assert_eq!(budget(Some(10), 2000, &bounds).unwrap(), 10);
        let ToolError(m) = budget(Some(0), 2000, &bounds).unwrap_err();
        assert_eq!(m, "max_tokens: must be at least 1");
        let over = bounds.max_tokens as u32 + 1;
        let ToolError(m) = budget(Some(over), 2000, &bounds).unwrap_err();
        assert_eq!(m, format!("max_tokens: {over} is over the maximum 1000000"));
        let tight = RequestBounds {
            max_tokens: 5000,
            ..bounds
        };
        assert!(budget(Some(5001), 2000, &tight).is_err());
    }
}
