//! Retrieval logic over plain chunks, with no I/O: the steps of DESIGN §5
//! between the stores' answers and the response.
//!
//! 1. [`fuse`]: fusion of vector and text hits (weighted reciprocal ranks or
//!    normalised scores);
//! 2. [`apply_boosts`]: index documents and query keywords found in the path;
//! 3. [`plan_neighbours`]: which neighbours to fetch, by computed id, in one call;
//! 4. [`assemble`]: documents → contiguous spans → chunks, matched or context;
//! 5. [`pack`]: the spans filled into a token budget, with citations.
//!
//! ```
//! use weft_core::retrieval::{self, RetrievalConfig, ScoredChunk};
//! # let chunks = weft_core::retrieval::example_chunks();
//! let config = RetrievalConfig::default();
//! let vector = vec![ScoredChunk { chunk: chunks[2].clone(), score: 0.9 }];
//! let text = vec![ScoredChunk { chunk: chunks[2].clone(), score: 7.5 }];
//! let mut hits = retrieval::fuse(vector, text, &config.fusion);
//! retrieval::apply_boosts(&mut hits, "parse config", &config.boosts);
//! let plan = retrieval::plan_neighbours(&hits, &config.adjacency);
//! // One batched fetch of `plan.ids()` from the store, then:
//! let fetched: Vec<_> = chunks.iter().filter(|c| plan.ids().contains(&c.id())).cloned().collect();
//! let results = retrieval::assemble(hits, &plan, fetched);
//! assert_eq!(results[0].spans.len(), 1);
//! ```

mod adjacency;
mod boosts;
mod fusion;
mod pack;
mod spans;

pub use adjacency::{AdjacencyConfig, NeighbourPlan, PlannedNeighbour, plan_neighbours, unit_of};
pub use boosts::{BoostConfig, apply_boosts, query_keywords};
pub use fusion::{Component, FusedHit, FusionConfig, FusionMethod, ScoredChunk, fuse};
pub use pack::{
    ApproxTokenCounter, Citation, ContextPack, ContextTarget, PackOptions, PackStrategy,
    PackedSpan, Reference, TokenCounter, citation, expand_context, pack, pack_with, span_tokens,
};
pub use spans::{DocumentResult, ResultChunk, Span, assemble};

use serde::{Deserialize, Serialize};

/// The filters a search applies, the same for vector and text search.
/// Empty lists match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchFilter {
    /// Only these projects.
    pub projects: Vec<String>,
    /// Only these content types.
    pub content_types: Vec<crate::ContentType>,
    /// Only these languages.
    pub languages: Vec<String>,
    /// Only documents at or under this path: `src/config` (or `src/config/`)
    /// matches `src/config` itself and everything below `src/config/`.
    pub path_prefix: Option<String>,
}

impl SearchFilter {
    /// Whether `chunk` passes the filter.
    pub fn matches(&self, chunk: &crate::Chunk) -> bool {
        (self.projects.is_empty() || self.projects.contains(&chunk.project))
            && (self.content_types.is_empty() || self.content_types.contains(&chunk.content_type))
            && (self.languages.is_empty() || self.languages.contains(&chunk.language))
            && self
                .path_scope()
                .is_none_or(|p| in_path_scope(&chunk.uri, p))
    }

    /// The path prefix without trailing slashes; `None` when it selects everything.
    pub fn path_scope(&self) -> Option<&str> {
        self.path_prefix
            .as_deref()
            .map(|p| p.trim_end_matches('/'))
            .filter(|p| !p.is_empty())
    }
}

/// Whether `uri` is `scope` or lies below it (`scope` has no trailing slash).
pub fn in_path_scope(uri: &str, scope: &str) -> bool {
    uri.strip_prefix(scope)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Every path scope that contains `uri`: each directory prefix and the uri
/// itself (`a/b/c.rs` → `a`, `a/b`, `a/b/c.rs`). Stores that cannot match
/// string prefixes index these as keywords.
pub fn path_scopes(uri: &str) -> Vec<String> {
    let mut scopes: Vec<String> = uri
        .match_indices('/')
        .map(|(i, _)| uri[..i].to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    scopes.push(uri.to_owned());
    scopes
}

/// All retrieval settings, with the defaults of DESIGN §5.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrievalConfig {
    /// How vector and text hits are fused.
    pub fusion: FusionConfig,
    /// Score boosts after fusion.
    pub boosts: BoostConfig,
    /// Neighbour expansion.
    pub adjacency: AdjacencyConfig,
}

#[doc(hidden)]
/// Five chunks of one code document, for examples.
pub fn example_chunks() -> Vec<crate::Chunk> {
    use crate::{Chunk, ContentType, DocumentId, EMBEDDING_FORMAT, content_hash};
    let doc = DocumentId::new("p", "src/config/parse.rs");
    (0..5u32)
        .map(|i| {
            let content = format!("fn part{i}() {{}}");
            Chunk {
                document_id: doc.clone(),
                chunk_index: i,
                total_chunks: 5,
                project: "p".into(),
                uri: "src/config/parse.rs".into(),
                title: "parse.rs".into(),
                section: format!("part{i}"),
                content_type: ContentType::Code,
                language: "rust".into(),
                node_type: "function_item".into(),
                node_name: Some(format!("part{i}")),
                start_line: i * 10 + 1,
                end_line: i * 10 + 9,
                start_byte: u64::from(i) * 100,
                end_byte: u64::from(i) * 100 + content.len() as u64,
                content_hash: content_hash(&content),
                content,
                is_index_doc: false,
                embedding_format: EMBEDDING_FORMAT.into(),
                overlap_bytes: 0,
                outline: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ContentType;

    #[test]
    fn filters_match_on_every_field_and_empty_matches_all() {
        let chunk = &example_chunks()[0];
        assert!(SearchFilter::default().matches(chunk));
        let f = |f: SearchFilter| f.matches(chunk);
        assert!(f(SearchFilter {
            projects: vec!["p".into(), "q".into()],
            ..Default::default()
        }));
        assert!(!f(SearchFilter {
            projects: vec!["q".into()],
            ..Default::default()
        }));
        assert!(!f(SearchFilter {
            content_types: vec![ContentType::Prose],
            ..Default::default()
        }));
        assert!(f(SearchFilter {
            languages: vec!["rust".into()],
            ..Default::default()
        }));
        assert!(f(SearchFilter {
            path_prefix: Some("src/config/".into()),
            ..Default::default()
        }));
        assert!(f(SearchFilter {
            path_prefix: Some("src/config".into()),
            ..Default::default()
        }));
        assert!(!f(SearchFilter {
            path_prefix: Some("src/conf".into()),
            ..Default::default()
        }));
        assert!(!f(SearchFilter {
            path_prefix: Some("docs/".into()),
            ..Default::default()
        }));
    }

    #[test]
    fn path_scopes_cover_every_directory_and_the_file() {
        assert_eq!(path_scopes("a/b/c.rs"), ["a", "a/b", "a/b/c.rs"]);
        assert_eq!(path_scopes("README.md"), ["README.md"]);
        for scope in path_scopes("a/b/c.rs") {
            assert!(in_path_scope("a/b/c.rs", &scope));
        }
        assert!(!in_path_scope("a/bc/d.rs", "a/b"));
    }
}
