//! Context packing under a token budget (DESIGN §10): what an assistant is
//! handed. The spans of a search response are deduplicated, merged per
//! document, ordered by relevance and filled into `max_tokens`; every packed
//! span carries a stable citation `uri#L<start>-L<end>` with its project
//! (and commit, for git sources) and its heading path or symbol. Spans that
//! do not fit are listed as further references.
//!
//! The budget goes first to the hits, each on its own with the rest of the
//! split function or section it belongs to (a search told its budget
//! fetches every hit's whole unit and a window around it,
//! [`super::AdjacencyConfig::for_packing`]), by relevance discounted by
//! cost ([`COST_EXPONENT`](packing::COST_EXPONENT)), each whole or not at
//! all; then to the context chunks around them, by relevance
//! ([`PackStrategy::HitsFirst`]): as many relevant places as fit, then
//! their surroundings. Hits of one document that meet become one span. A
//! span is cut only between chunks, and only when no hit fits whole is the
//! best one cut between lines, never inside one.
//!
//! Tokens are counted by a [`TokenCounter`]; [`ApproxTokenCounter`] (one
//! token per four characters, rounded up) is the one weft uses everywhere,
//! because the tokenizer that matters is the assistant's, which weft does
//! not know, and an estimate independent of the embedding model packs the
//! same way whichever model or API embedded the index, in the CLI and in
//! the query service alike.
//!
//! The jobs, one module each: counting tokens ([`TokenCounter`], `tokens`),
//! citations (`uri#L<start>-L<end>`, [`Citation`], `citation`), packing a
//! response ([`pack`], `packing`), context around one place for
//! `get_context` ([`expand_context`], `context`) and the Markdown of a pack
//! ([`ContextPack::to_markdown`], `render`); `runs` holds what packing and
//! `get_context` share: runs of consecutive chunks, their lines, and the
//! largest part of a run that fits a budget.
//!
//! ```
//! use std::collections::HashMap;
//! use weft_core::retrieval::{self, ApproxTokenCounter, PackOptions, RetrievalConfig, ScoredChunk};
//! # let chunks = weft_core::retrieval::example_chunks();
//! let hits = retrieval::fuse(
//!     vec![ScoredChunk { chunk: chunks[2].clone(), score: 0.9 }],
//!     Vec::new(),
//!     &RetrievalConfig::default().fusion,
//! );
//! let results = retrieval::assemble(hits, &Default::default(), Vec::new());
//! let pack = retrieval::pack(&results, &HashMap::new(), &PackOptions { max_tokens: 500 }, &ApproxTokenCounter);
//! assert_eq!(pack.spans[0].citation, "src/config/parse.rs#L21-L29");
//! assert!(pack.used_tokens <= 500);
//! assert!(pack.to_markdown().contains("fn part2() {}"));
//! ```

mod citation;
mod context;
#[cfg(test)]
mod fixtures;
mod packing;
mod render;
mod runs;
mod tokens;

use serde::{Deserialize, Serialize};

use crate::ContentType;

pub use citation::{Citation, citation};
pub use context::{ContextTarget, expand_context};
pub use packing::{pack, pack_with};
pub use tokens::{ApproxTokenCounter, TokenCounter, span_tokens};

/// How to pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackOptions {
    /// The budget: packed spans, with their headers, cost at most this many tokens.
    pub max_tokens: usize,
}

/// In what order the budget is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PackStrategy {
    /// First every span's hits (with the rest of their split function or
    /// section), by relevance; then the context around them, by relevance,
    /// while it fits. As many relevant places as the budget holds.
    #[default]
    HitsFirst,
    /// Each span whole (or as much of it as fits) by relevance, before the
    /// next one.
    SpansInOrder,
}

/// One span of a document in a [`ContextPack`]: whole lines, with a citation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackedSpan {
    /// `uri#L<start>-L<end>`: where the content is, stable across runs.
    pub citation: String,
    /// The project the document belongs to.
    pub project: String,
    /// For git sources, the indexed commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The document's id (16 hex characters).
    pub document_id: String,
    /// The document's path or URL.
    pub uri: String,
    /// The document's title.
    pub title: String,
    /// Heading path (`Guide > Install`) or symbol path (`Outer.method`) of
    /// the best chunk in the span, without a part suffix.
    pub section: String,
    /// The name of the best chunk's definition, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Language of the content (`java`, `markdown`…).
    pub language: String,
    /// Prose, code or API reference.
    pub content_type: ContentType,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, inclusive.
    pub end_line: u32,
    /// Index of the first chunk the span draws on.
    pub first_chunk: u32,
    /// Index of the last chunk the span draws on.
    pub last_chunk: u32,
    /// Relevance: the reranker's score when one ran, else the best fused score.
    pub score: f64,
    /// What the span costs, with its header.
    pub tokens: usize,
    /// When only part of the retrieved span fit: the whole span's citation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimmed_from: Option<String>,
    /// Lines `start_line..=end_line` of the document.
    pub content: String,
}

/// A retrieved span that was not packed: where to look for more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// `uri#L<start>-L<end>`.
    pub citation: String,
    /// The project.
    pub project: String,
    /// For git sources, the indexed commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The document's id.
    pub document_id: String,
    /// The document's path or URL.
    pub uri: String,
    /// Heading path or symbol path of its best chunk.
    pub section: String,
    /// First line.
    pub start_line: u32,
    /// Last line.
    pub end_line: u32,
    /// Relevance, as for packed spans.
    pub score: f64,
    /// What packing it would have cost.
    pub tokens: usize,
}

/// Spans filled into a token budget, by document (best first), each
/// document's spans in line order, plus references to what did not fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextPack {
    /// The budget.
    pub max_tokens: usize,
    /// What the packed spans cost, headers included.
    pub used_tokens: usize,
    /// How tokens were counted ([`TokenCounter::name`]).
    pub tokenizer: String,
    /// The packed spans.
    pub spans: Vec<PackedSpan>,
    /// Retrieved spans left out, best first.
    pub references: Vec<Reference>,
}

impl ContextPack {
    /// Whether lines `start..=end` of `uri` lie inside one packed span.
    pub fn contains(&self, uri: &str, start: u32, end: u32) -> bool {
        self.spans
            .iter()
            .any(|s| s.uri == uri && s.start_line <= start && end <= s.end_line)
    }
}
