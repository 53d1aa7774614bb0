//! Running labelled queries through the query pipeline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use weft_core::ports::{Embedder, PortResult};
use weft_core::query::{QueryEngine, QueryError, SearchMode, SearchRequest};
use weft_core::retrieval::{PackStrategy, SearchFilter};

use crate::metrics::{Judgement, PackJudgement, judge, judge_packs};
use crate::queries::EvalQuery;

/// What one query scored, with expansion off and/or on.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueryOutcome {
    /// The query's id.
    pub id: String,
    /// Whether its target is long (the adjacency subset).
    pub long: bool,
    /// The search without expansion, when run.
    pub off: Option<Judgement>,
    /// The search with expansion, when run.
    pub on: Option<Judgement>,
    /// The expanded search's spans packed into each budget of
    /// [`RunOptions::pack_budgets`], then unpacked (every span), when asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub packed: Vec<PackJudgement>,
}

impl QueryOutcome {
    /// The judgement ranks are read from: expansion on when run, else off.
    pub fn main(&self) -> &Judgement {
        const NONE: &Judgement = &Judgement {
            rank: None,
            coverage: None,
            context_tokens: 0.0,
            top: Vec::new(),
        };
        self.on.as_ref().or(self.off.as_ref()).unwrap_or(NONE)
    }
}

/// How to run a set of queries.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The project holding the corpus.
    pub project: String,
    /// Retrievers.
    pub mode: SearchMode,
    /// Hits per query (10 in the metric definitions).
    pub limit: usize,
    /// Run each query without expansion.
    pub expansion_off: bool,
    /// Run each query with expansion.
    pub expansion_on: bool,
    /// Pack each expanded response into these token budgets (empty: no
    /// packing measured). Needs `expansion_on`.
    pub pack_budgets: Vec<usize>,
    /// The `limit` of the search told its budget (which keeps twice as many
    /// hits); `None`: `limit`. For sweeps of the packer's depth.
    pub pack_limit: Option<usize>,
    /// How to pack.
    pub pack_strategy: PackStrategy,
}

/// Runs `queries` against `engine` within `options.project`, calling
/// `progress` after each query.
pub async fn run_queries(
    engine: &QueryEngine,
    queries: &[EvalQuery],
    options: &RunOptions,
    mut progress: impl FnMut(),
) -> Result<Vec<QueryOutcome>, QueryError> {
    let filter = SearchFilter {
        projects: vec![options.project.clone()],
        ..SearchFilter::default()
    };
    let mut out = Vec::with_capacity(queries.len());
    for query in queries {
        let targets = query.targets();
        let search = async |expand: bool, max_tokens: Option<usize>| {
            engine
                .search(&SearchRequest {
                    query: query.query.clone(),
                    filter: filter.clone(),
                    limit: match max_tokens {
                        Some(_) => options.pack_limit.unwrap_or(options.limit),
                        None => options.limit,
                    },
                    mode: options.mode,
                    expand,
                    // A configured reranker is part of what is measured.
                    rerank: engine.has_reranker(),
                    max_tokens,
                    ..Default::default()
                })
                .await
        };
        let mut packed = Vec::new();
        let on = if options.expansion_on {
            let response = search(true, None).await?;
            if let Some(&largest) = options.pack_budgets.iter().max() {
                // Packed as `weft search --max-tokens` packs: from a search
                // told its budget (every hit's unit at hand); "unpacked" is
                // this response, as returned without a budget.
                let for_packing = search(true, Some(largest)).await?;
                packed = judge_packs(
                    &targets,
                    &for_packing.results,
                    &response.results,
                    &options.pack_budgets,
                    options.pack_strategy,
                );
            }
            Some(judge(&targets, &response.results, options.limit))
        } else {
            None
        };
        let off = if options.expansion_off {
            Some(judge(
                &targets,
                &search(false, None).await?.results,
                options.limit,
            ))
        } else {
            None
        };
        out.push(QueryOutcome {
            id: query.id.clone(),
            long: query.is_long(),
            off,
            on,
            packed,
        });
        progress();
    }
    Ok(out)
}

/// An embedder that remembers every text it embedded, so that comparing
/// several settings over the same queries embeds each query once.
pub struct CachingEmbedder {
    inner: Arc<dyn Embedder>,
    /// Vectors of texts embedded as documents, and as queries: a model may
    /// embed the same text differently as a query.
    cache: Mutex<[HashMap<String, Vec<f32>>; 2]>,
}

impl CachingEmbedder {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Self {
            inner,
            cache: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, [HashMap<String, Vec<f32>>; 2]> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `texts` embedded as queries or as documents, each once.
    async fn cached(&self, texts: &[String], queries: bool) -> PortResult<Vec<Vec<f32>>> {
        let role = usize::from(queries);
        let missing: Vec<String> = {
            let cache = &self.lock()[role];
            let mut missing: Vec<String> = Vec::new();
            for text in texts {
                if !cache.contains_key(text) && !missing.contains(text) {
                    missing.push(text.clone());
                }
            }
            missing
        };
        if !missing.is_empty() {
            let vectors = if queries {
                self.inner.embed_queries(&missing).await?
            } else {
                self.inner.embed(&missing).await?
            };
            let cache = &mut self.lock()[role];
            for (text, vector) in missing.into_iter().zip(vectors) {
                cache.insert(text, vector);
            }
        }
        let cache = &self.lock()[role];
        texts
            .iter()
            .map(|t| {
                cache.get(t).cloned().ok_or_else(|| {
                    weft_core::ports::PortError::internal(
                        "embedding cache",
                        format!("the model returned no vector for {t:?}"),
                    )
                })
            })
            .collect()
    }
}

#[async_trait]
impl Embedder for CachingEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    async fn embed(&self, texts: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.cached(texts, false).await
    }

    async fn embed_queries(&self, queries: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.cached(queries, true).await
    }
}
