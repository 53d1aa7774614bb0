//! The response: documents, each with contiguous spans of chunks.

use std::collections::{BTreeMap, HashMap};

use super::{Component, FusedHit, NeighbourPlan};
use crate::{Chunk, DocumentId};

/// A chunk in a response.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultChunk {
    /// The chunk.
    pub chunk: Chunk,
    /// Its score (a neighbour's is derived from its hit's).
    pub score: f64,
    /// Whether it matched the query (else it is context).
    pub matched: bool,
    /// Vector rank and score, for `explain`.
    pub vector: Option<Component>,
    /// Text rank and score, for `explain`.
    pub text: Option<Component>,
    /// Boost factor applied, for `explain`.
    pub boost: f64,
}

/// Consecutive chunks of one document, in chunk order.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// First line of the first chunk.
    pub start_line: u32,
    /// Last line of the last chunk.
    pub end_line: u32,
    /// The chunks, by `chunk_index`, each once.
    pub chunks: Vec<ResultChunk>,
    /// The reranker's score for the span's text, when a reranker ran.
    pub rerank_score: Option<f32>,
}

/// One document of a response.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentResult {
    /// Its id.
    pub document_id: DocumentId,
    /// Its path or URL.
    pub uri: String,
    /// Its title.
    pub title: String,
    /// The best score of its matched chunks.
    pub score: f64,
    /// Its spans, in document order.
    pub spans: Vec<Span>,
}

/// Groups hits and fetched neighbours into documents (best first) of
/// contiguous spans. Overlapping or touching windows of one document become
/// one span; no chunk appears twice; fetched chunks that were not planned,
/// or are hits already, are ignored.
pub fn assemble(
    hits: Vec<FusedHit>,
    plan: &NeighbourPlan,
    fetched: Vec<Chunk>,
) -> Vec<DocumentResult> {
    let mut documents: HashMap<DocumentId, BTreeMap<u32, ResultChunk>> = HashMap::new();
    let mut order: Vec<DocumentId> = Vec::new();
    for hit in hits {
        let doc = hit.chunk.document_id.clone();
        let chunks = documents.entry(doc.clone()).or_insert_with(|| {
            order.push(doc);
            BTreeMap::new()
        });
        chunks.entry(hit.chunk.chunk_index).or_insert(ResultChunk {
            score: hit.score,
            matched: true,
            vector: hit.vector,
            text: hit.text,
            boost: hit.boost,
            chunk: hit.chunk,
        });
    }
    for chunk in fetched {
        let Some(score) = plan.accept(&chunk) else {
            continue;
        };
        let Some(chunks) = documents.get_mut(&chunk.document_id) else {
            continue;
        };
        chunks.entry(chunk.chunk_index).or_insert(ResultChunk {
            score,
            matched: false,
            vector: None,
            text: None,
            boost: 1.0,
            chunk,
        });
    }
    let mut results: Vec<(usize, DocumentResult)> = order
        .into_iter()
        .enumerate()
        .filter_map(|(first_seen, id)| {
            let chunks = documents.remove(&id)?;
            let score = chunks
                .values()
                .filter(|c| c.matched)
                .map(|c| c.score)
                .fold(f64::MIN, f64::max);
            let first = chunks.values().next()?;
            let (uri, title) = (first.chunk.uri.clone(), first.chunk.title.clone());
            Some((
                first_seen,
                DocumentResult {
                    document_id: id,
                    uri,
                    title,
                    score,
                    spans: spans(chunks),
                },
            ))
        })
        .collect();
    results.sort_by(|(ia, a), (ib, b)| b.score.total_cmp(&a.score).then(ia.cmp(ib)));
    results.into_iter().map(|(_, r)| r).collect()
}

fn spans(chunks: BTreeMap<u32, ResultChunk>) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut last_index: Option<u32> = None;
    for (index, chunk) in chunks {
        let touching = last_index.is_some_and(|last| index == last + 1);
        match spans.last_mut() {
            Some(span) if touching => {
                span.end_line = span.end_line.max(chunk.chunk.end_line);
                span.chunks.push(chunk);
            }
            _ => spans.push(Span {
                rerank_score: None,
                start_line: chunk.chunk.start_line,
                end_line: chunk.chunk.end_line,
                chunks: vec![chunk],
            }),
        }
        last_index = Some(index);
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::{
        AdjacencyConfig, FusionConfig, ScoredChunk, example_chunks, fuse, plan_neighbours,
    };

    fn run(hit_indices: &[usize], config: &AdjacencyConfig) -> Vec<DocumentResult> {
        let c = example_chunks();
        let list = hit_indices
            .iter()
            .map(|&i| ScoredChunk {
                chunk: c[i].clone(),
                score: 1.0,
            })
            .collect();
        let hits = fuse(list, Vec::new(), &FusionConfig::default());
        let plan = plan_neighbours(&hits, config);
        let ids = plan.ids();
        let fetched = c
            .iter()
            .filter(|x| ids.contains(&x.id()))
            .cloned()
            .collect();
        assemble(hits, &plan, fetched)
    }

    #[test]
    fn overlapping_windows_become_one_span_without_repeats() {
        let results = run(
            &[0, 4],
            &AdjacencyConfig {
                code_window: 2,
                expand_hits: 10,
                ..AdjacencyConfig::default()
            },
        );
        assert_eq!(results.len(), 1);
        let spans = &results[0].spans;
        assert_eq!(spans.len(), 1, "windows 0..2 and 2..4 touch");
        let indices: Vec<u32> = spans[0]
            .chunks
            .iter()
            .map(|c| c.chunk.chunk_index)
            .collect();
        assert_eq!(indices, vec![0, 1, 2, 3, 4]);
        let matched: Vec<bool> = spans[0].chunks.iter().map(|c| c.matched).collect();
        assert_eq!(matched, vec![true, false, false, false, true]);
        assert_eq!((spans[0].start_line, spans[0].end_line), (1, 49));
    }

    #[test]
    fn separate_windows_are_separate_spans() {
        let results = run(
            &[0, 4],
            &AdjacencyConfig {
                code_window: 1,
                expand_hits: 10,
                ..AdjacencyConfig::default()
            },
        );
        let spans: Vec<Vec<u32>> = results[0]
            .spans
            .iter()
            .map(|s| s.chunks.iter().map(|c| c.chunk.chunk_index).collect())
            .collect();
        assert_eq!(spans, vec![vec![0, 1], vec![3, 4]]);
    }

    #[test]
    fn without_expansion_only_hits_come_back() {
        let c = example_chunks();
        let hits = fuse(
            vec![ScoredChunk {
                chunk: c[2].clone(),
                score: 1.0,
            }],
            Vec::new(),
            &FusionConfig::default(),
        );
        let results = assemble(hits, &NeighbourPlan::default(), c.clone());
        assert_eq!(results[0].spans.len(), 1);
        assert_eq!(
            results[0].spans[0].chunks.len(),
            1,
            "unplanned chunks are ignored"
        );
        assert!(results[0].spans[0].chunks[0].matched);
    }

    #[test]
    fn documents_are_ordered_by_their_best_hit() {
        let mut c = example_chunks();
        let other = DocumentId::new("p", "b.rs");
        c[3].document_id = other.clone();
        c[3].uri = "b.rs".into();
        let hits = fuse(
            vec![
                ScoredChunk {
                    chunk: c[3].clone(),
                    score: 1.0,
                },
                ScoredChunk {
                    chunk: c[0].clone(),
                    score: 0.5,
                },
            ],
            vec![ScoredChunk {
                chunk: c[0].clone(),
                score: 3.0,
            }],
            &FusionConfig::default(),
        );
        let results = assemble(hits, &NeighbourPlan::default(), Vec::new());
        assert_eq!(
            results[0].document_id, c[0].document_id,
            "in both lists, so best"
        );
        assert_eq!(results[1].document_id, other);
    }
}
