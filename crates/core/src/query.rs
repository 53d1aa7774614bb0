//! The query pipeline of DESIGN §5 over the ports: embed the query (cached),
//! vector and text search concurrently with the same filter, fusion, boosts,
//! **one** batched fetch of every planned neighbour, spans, optional rerank.
//! What one request may ask for is [`RequestBounds`], checked by
//! [`SearchRequest::checked`] (module `bounds`), the same for every surface.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

mod bounds;

pub use bounds::{
    DEFAULT_LIMIT, MAX_FILTER_VALUE_CHARS, MAX_FILTER_VALUES, MAX_LIMIT, MAX_PACK_TOKENS,
    MAX_PATH_PREFIX_BYTES, MAX_QUERY_CHARS, MAX_RESPONSE_CHUNKS, MAX_WINDOW, RequestBounds,
    RequestError, RequestErrorKind,
};

use crate::chunk::split_camel_case;
use crate::overlays::HiddenDocuments;
use crate::ports::{Embedder, PortResult, Reranker, TextIndex, VectorIndex};
use crate::retrieval::{
    self, AdjacencyConfig, DocumentResult, NeighbourPlan, RetrievalConfig, ScoredChunk,
    SearchFilter,
};

/// Which retrievers a search uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// Vector and text search, fused.
    #[default]
    Hybrid,
    /// Vector search only.
    Vector,
    /// Text (BM25) search only; the model is not needed.
    Text,
}

impl std::str::FromStr for SearchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hybrid" => Ok(Self::Hybrid),
            "vector" => Ok(Self::Vector),
            "text" => Ok(Self::Text),
            other => Err(format!(
                "unknown search mode {other:?}: use hybrid, vector or text"
            )),
        }
    }
}

/// One search.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    /// The question, in plain words.
    pub query: String,
    /// Filters applied by both retrievers.
    pub filter: SearchFilter,
    /// Number of hits (matched chunks) wanted before expansion (twice as
    /// many with `max_tokens`); 0 is unset: [`SearchRequest::checked`] makes
    /// it the default ([`RequestBounds::default_limit`]).
    pub limit: usize,
    /// Retrievers to use.
    pub mode: SearchMode,
    /// Fetch neighbours around the hits (the default).
    pub expand: bool,
    /// Expansion settings for this search; `None`: the engine's configured ones.
    pub adjacency: Option<AdjacencyConfig>,
    /// Rerank the spans; an error ([`QueryError::NoReranker`]) when the
    /// engine has no reranker.
    pub rerank: bool,
    /// Set when the response will be packed into this many tokens
    /// ([`retrieval::pack`]): the response then holds twice `limit` hits
    /// (at most `limit` + 50), and expansion brings every hit's whole split
    /// unit and a window around it ([`AdjacencyConfig::for_packing`]),
    /// whatever the budget; the packer chooses what fits, so the budget, not
    /// the hit count, bounds the context. The engine does not pack.
    pub max_tokens: Option<usize>,
    /// Whose cache of query embeddings the search may read and fill: the
    /// caller's API key (set by `weft_auth::Scope::apply`); `None`, the
    /// partition of callers without a key. A caller never learns from the
    /// cache (`cached_embedding`, `embed_ms`) what another key asked.
    pub cache_partition: Option<String>,
    /// Documents the search must not return: the base's documents a branch
    /// overlay it reads changed or deleted ([`crate::overlays::resolve`],
    /// which every surface calls after its scope). The engine asks the
    /// stores for as many more hits as these hold chunks, so the list is
    /// what a search of the branch alone would keep.
    pub hidden: HiddenDocuments,
}

/// How long each stage took, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Embedding the query (0 on a cache hit).
    pub embed_ms: f64,
    /// Vector and text search, concurrently.
    pub search_ms: f64,
    /// The one batched neighbour fetch.
    pub fetch_ms: f64,
    /// Reranking.
    pub rerank_ms: f64,
    /// Everything.
    pub total_ms: f64,
}

/// The answer to a [`SearchRequest`].
#[derive(Debug, Clone)]
pub struct SearchResponse {
    /// Documents, best first, each with contiguous spans.
    pub results: Vec<DocumentResult>,
    /// Whether the query embedding came from the cache.
    pub cached_embedding: bool,
    /// Number of neighbour ids fetched, in one call.
    pub neighbours_requested: usize,
    /// Stage timings.
    pub timings: Timings,
}

/// Runs searches over a vector index, a text index, an embedder and a reranker.
pub struct QueryEngine {
    vectors: Arc<dyn VectorIndex>,
    text: Arc<dyn TextIndex>,
    embedder: Option<Arc<dyn Embedder>>,
    reranker: Option<Arc<dyn Reranker>>,
    config: RetrievalConfig,
    cache: Mutex<EmbeddingCache>,
}

/// Hits asked of each retriever per requested hit: fusion needs depth.
const CANDIDATES_PER_HIT: usize = 4;

/// The hits a search keeps: `limit`, or for one told its budget twice as
/// many (at most 50 more), for the packer to fill the budget from (and a
/// configured reranker to order). Measured on the eval sets
/// (bench/RESULTS.md): 10 → 20 hits raise answer in context at 2k tokens by
/// 0.4–1.4 points and at 4k by 1.5–4.6 points; deeper lists let small
/// low-ranked hits take the budget from better ones.
fn hits_kept(request: &SearchRequest) -> usize {
    let limit = request.limit.max(1);
    match request.max_tokens {
        Some(_) => limit + limit.min(50),
        None => limit,
    }
}

impl QueryEngine {
    /// An engine over these ports. Without an embedder only text mode works.
    pub fn new(
        vectors: Arc<dyn VectorIndex>,
        text: Arc<dyn TextIndex>,
        embedder: Option<Arc<dyn Embedder>>,
        reranker: Option<Arc<dyn Reranker>>,
        config: RetrievalConfig,
    ) -> Self {
        Self {
            vectors,
            text,
            embedder,
            reranker,
            config,
            cache: Mutex::new(EmbeddingCache::new(256)),
        }
    }

    /// The retrieval settings searches use unless a request overrides them.
    pub fn config(&self) -> &RetrievalConfig {
        &self.config
    }

    /// The model that embeds queries and its dimension, if the engine has one.
    pub fn embedder_model(&self) -> Option<(String, usize)> {
        self.embedder
            .as_ref()
            .map(|e| (e.model_id().to_owned(), e.dimension()))
    }

    /// Whether a reranker is configured.
    pub fn has_reranker(&self) -> bool {
        self.reranker.is_some()
    }

    /// The reranker's name, if the engine has one.
    pub fn reranker_name(&self) -> Option<&str> {
        self.reranker.as_deref().map(|r| r.name())
    }

    /// Answers `request`.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResponse, QueryError> {
        let started = Instant::now();
        let reranker = match (request.rerank, &self.reranker) {
            (false, _) => None,
            (true, Some(reranker)) => Some(reranker),
            (true, None) => return Err(QueryError::NoReranker),
        };
        let mut timings = Timings::default();
        let limit = hits_kept(request);
        let wanted = (limit * CANDIDATES_PER_HIT).max(self.config.fusion.min_candidates);
        let candidates = wanted + request.hidden.chunks;
        let (query_vector, cached) = match request.mode {
            SearchMode::Text => (None, false),
            SearchMode::Hybrid | SearchMode::Vector => {
                let t = Instant::now();
                let (v, cached) = self
                    .embed_query(request.cache_partition.as_deref(), &request.query)
                    .await?;
                timings.embed_ms = ms(t);
                (Some(v), cached)
            }
        };
        let t = Instant::now();
        let vector_search = async {
            match &query_vector {
                Some(v) => self.vectors.search(v, &request.filter, candidates).await,
                None => Ok(Vec::new()),
            }
        };
        let text_search = async {
            match request.mode {
                SearchMode::Vector => Ok(Vec::new()),
                _ => {
                    self.text
                        .search(&request.query, &request.filter, candidates)
                        .await
                }
            }
        };
        let (vector_hits, text_hits): (PortResult<Vec<ScoredChunk>>, PortResult<Vec<ScoredChunk>>) =
            futures::join!(vector_search, text_search);
        timings.search_ms = ms(t);
        let visible = |hits: PortResult<Vec<ScoredChunk>>| {
            hits.map(|mut hits| {
                if !request.hidden.is_empty() {
                    hits.retain(|h| !request.hidden.documents.contains(&h.chunk.document_id));
                    hits.truncate(wanted);
                }
                hits
            })
        };
        let mut hits = retrieval::fuse(
            visible(vector_hits)?,
            visible(text_hits)?,
            &self.config.fusion,
        );
        retrieval::apply_boosts(&mut hits, &request.query, &self.config.boosts);
        hits.truncate(limit);
        let plan = if request.expand {
            let adjacency = request.adjacency.as_ref().unwrap_or(&self.config.adjacency);
            match request.max_tokens {
                Some(_) => retrieval::plan_neighbours(&hits, &adjacency.for_packing()),
                None => retrieval::plan_neighbours(&hits, adjacency),
            }
        } else {
            NeighbourPlan::default()
        };
        let ids = plan.ids();
        let t = Instant::now();
        let fetched = if ids.is_empty() {
            Vec::new()
        } else {
            self.vectors.get(&ids).await?
        };
        timings.fetch_ms = ms(t);
        let mut results = retrieval::assemble(hits, &plan, fetched);
        if let Some(reranker) = reranker {
            let t = Instant::now();
            rerank(reranker.as_ref(), &request.query, &mut results).await?;
            timings.rerank_ms = ms(t);
        }
        timings.total_ms = ms(started);
        Ok(SearchResponse {
            results,
            cached_embedding: cached,
            neighbours_requested: ids.len(),
            timings,
        })
    }

    async fn embed_query(
        &self,
        partition: Option<&str>,
        query: &str,
    ) -> Result<(Vec<f32>, bool), QueryError> {
        // No key holds a NUL (a key id is a printable name), so the
        // partition and the query cannot run into each other.
        let key = format!("{}\0{query}", partition.unwrap_or_default());
        if let Some(v) = self.lock_cache().get(&key) {
            return Ok((v, true));
        }
        let embedder = self.embedder.as_ref().ok_or(QueryError::NoEmbedder)?;
        // Chunks are embedded with identifiers split into words
        // (`Chunk::embedding_text`); the query is read the same way.
        let mut vectors = embedder.embed_queries(&[split_camel_case(query)]).await?;
        let vector = vectors.pop().ok_or(QueryError::NoEmbedder)?;
        self.lock_cache().put(key, vector.clone());
        Ok((vector, false))
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, EmbeddingCache> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Scores each span's text and orders documents by their best span, spans
/// within a document by score.
async fn rerank(
    reranker: &dyn Reranker,
    query: &str,
    results: &mut [DocumentResult],
) -> PortResult<()> {
    let passages: Vec<String> = results
        .iter()
        .flat_map(|d| d.spans.iter())
        .map(|s| {
            s.chunks
                .iter()
                .map(|c| c.chunk.content.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    if passages.is_empty() {
        return Ok(());
    }
    let scores = reranker.rerank(query, &passages).await?;
    let mut scores = scores.into_iter();
    for document in results.iter_mut() {
        for span in &mut document.spans {
            span.rerank_score = scores.next();
        }
    }
    let best = |d: &DocumentResult| {
        d.spans
            .iter()
            .filter_map(|s| s.rerank_score)
            .fold(f32::NEG_INFINITY, f32::max)
    };
    results.sort_by(|a, b| best(b).total_cmp(&best(a)));
    Ok(())
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Vector or hybrid mode without an embedding model.
    #[error(
        "this search needs the embedding model, which is not loaded (use --mode text, or fetch the model)"
    )]
    NoEmbedder,
    /// Reranking was asked for but no reranker is configured.
    #[error("this search asks for reranking, but no reranker is configured (rerank.kind)")]
    NoReranker,
    /// A port failed.
    #[error(transparent)]
    Port(#[from] crate::ports::PortError),
}

impl QueryError {
    /// What kind of failure it is: a port's own kind, or
    /// [`FailedPrecondition`](crate::ports::ErrorKind::FailedPrecondition)
    /// for a search this deployment is not set up for.
    pub fn kind(&self) -> crate::ports::ErrorKind {
        match self {
            QueryError::NoEmbedder | QueryError::NoReranker => {
                crate::ports::ErrorKind::FailedPrecondition
            }
            QueryError::Port(e) => e.kind(),
        }
    }
}

/// A small least-recently-used cache of query embeddings.
struct EmbeddingCache {
    capacity: usize,
    map: HashMap<String, Vec<f32>>,
    order: VecDeque<String>,
}

impl EmbeddingCache {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&mut self, key: &str) -> Option<Vec<f32>> {
        let value = self.map.get(key)?.clone();
        self.touch(key);
        Some(value)
    }

    fn put(&mut self, key: String, value: Vec<f32>) {
        if self.map.insert(key.clone(), value).is_some() {
            self.touch(&key);
            return;
        }
        self.order.push_back(key);
        while self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    fn touch(&mut self, key: &str) {
        if let Some(k) = self
            .order
            .iter()
            .position(|k| k == key)
            .and_then(|pos| self.order.remove(pos))
        {
            self.order.push_back(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_evicts_the_least_recently_used() {
        let mut cache = EmbeddingCache::new(2);
        cache.put("a".into(), vec![1.0]);
        cache.put("b".into(), vec![2.0]);
        assert_eq!(cache.get("a"), Some(vec![1.0]));
        cache.put("c".into(), vec![3.0]);
        assert_eq!(cache.get("b"), None, "b was least recently used");
        assert_eq!(cache.get("a"), Some(vec![1.0]));
        assert_eq!(cache.get("c"), Some(vec![3.0]));
    }

    #[test]
    fn a_search_told_its_budget_keeps_twice_the_hits_at_most_fifty_more() {
        let request = |limit, max_tokens| SearchRequest {
            limit,
            max_tokens,
            ..Default::default()
        };
        assert_eq!(hits_kept(&request(10, None)), 10);
        assert_eq!(hits_kept(&request(0, None)), 1, "at least one hit");
        assert_eq!(hits_kept(&request(10, Some(2000))), 20);
        assert_eq!(hits_kept(&request(100, Some(2000))), 150);
    }

    #[test]
    fn modes_parse_and_unknown_ones_are_named() {
        assert_eq!("text".parse::<SearchMode>(), Ok(SearchMode::Text));
        let err = "fuzzy".parse::<SearchMode>().unwrap_err();
        assert!(err.contains("fuzzy") && err.contains("hybrid"));
    }
}
