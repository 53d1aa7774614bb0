//! Fusion of the vector and text rankings: weighted reciprocal-rank fusion,
//! or a weighted sum of min-max normalised scores.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{Chunk, ChunkId};

/// A chunk as one retriever returned it, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredChunk {
    /// The chunk.
    pub chunk: Chunk,
    /// The retriever's own score (cosine similarity, BM25…).
    pub score: f32,
}

/// Where a chunk stood in one retriever's list, for `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// 1-based rank.
    pub rank: u32,
    /// The retriever's score.
    pub score: f32,
}

/// A chunk after fusion, with everything `explain` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedHit {
    /// The chunk.
    pub chunk: Chunk,
    /// Its score: fused, then multiplied by `boost`.
    pub score: f64,
    /// Its place among the vector hits, if it was one.
    pub vector: Option<Component>,
    /// Its place among the text hits, if it was one.
    pub text: Option<Component>,
    /// The product of the boosts applied (1.0 for none).
    pub boost: f64,
}

/// How two rankings become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FusionMethod {
    /// Weighted reciprocal-rank fusion: `score = Σ weight / (k + rank)`.
    Rrf,
    /// Weighted sum of each retriever's scores, min-max normalised over its
    /// candidates: `score = Σ weight · (s − min) / (max − min)`. A chunk
    /// one retriever did not return gets nothing from it.
    Score,
}

/// How the vector and text rankings are fused, and their weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FusionConfig {
    /// Rank fusion or score fusion.
    pub method: FusionMethod,
    /// Weight of the vector ranking.
    pub vector_weight: f64,
    /// Weight of the text ranking.
    pub text_weight: f64,
    /// The RRF constant (rank fusion only).
    pub k: f64,
    /// Each retriever returns at least this many candidates for fusion
    /// (more when more hits are asked for: 4 per hit).
    pub min_candidates: usize,
}

impl Default for FusionConfig {
    fn default() -> Self {
        // Measured on the hard eval sets (bench/RESULTS.md): BM25 over path,
        // section and content is the stronger retriever there; summing
        // normalised scores 0.4 / 0.6 beats weighted RRF (best at k = 10,
        // 0.35 / 0.65) on guava and Node.js, and each retriever alone.
        // Deeper candidate lists spread the normalised scores: 40 → 80
        // candidates, guava 0.576 → 0.580, Node.js 0.685 → 0.687, effect
        // 0.531 → 0.537, for ≈ 1 ms at 100k chunks.
        FusionConfig {
            method: FusionMethod::Score,
            vector_weight: 0.4,
            text_weight: 0.6,
            k: 10.0,
            min_candidates: 80,
        }
    }
}

/// Fuses two rankings (each best first) into one, best first, by
/// `config.method`.
///
/// A chunk in both lists gets both contributions. Ties are broken by chunk
/// id, so the order is deterministic. Either list may be empty (vector-only
/// or text-only mode).
pub fn fuse(
    vector: Vec<ScoredChunk>,
    text: Vec<ScoredChunk>,
    config: &FusionConfig,
) -> Vec<FusedHit> {
    let mut by_id: HashMap<ChunkId, FusedHit> = HashMap::new();
    for (list, weight, is_vector) in [
        (vector, config.vector_weight, true),
        (text, config.text_weight, false),
    ] {
        let (low, high) = list
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), h| {
                (lo.min(f64::from(h.score)), hi.max(f64::from(h.score)))
            });
        for (i, hit) in list.into_iter().enumerate() {
            let rank = i as u32 + 1;
            let component = Component {
                rank,
                score: hit.score,
            };
            let contribution = match config.method {
                FusionMethod::Rrf => weight / (config.k + f64::from(rank)),
                FusionMethod::Score if high > low => {
                    weight * (f64::from(hit.score) - low) / (high - low)
                }
                // One candidate, or all scored alike: each gets the full weight.
                FusionMethod::Score => weight,
            };
            let entry = by_id.entry(hit.chunk.id()).or_insert_with(|| FusedHit {
                chunk: hit.chunk,
                score: 0.0,
                vector: None,
                text: None,
                boost: 1.0,
            });
            let slot = if is_vector {
                &mut entry.vector
            } else {
                &mut entry.text
            };
            // A retriever that lists a chunk twice keeps its best rank.
            if slot.is_none() {
                *slot = Some(component);
                entry.score += contribution;
            }
        }
    }
    let mut hits: Vec<FusedHit> = by_id.into_values().collect();
    sort_hits(&mut hits);
    hits
}

/// Best score first; ties by chunk id.
pub(crate) fn sort_hits(hits: &mut [FusedHit]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.chunk.id().cmp(&b.chunk.id()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::example_chunks;

    fn scored(chunks: &[Chunk], indices: &[usize]) -> Vec<ScoredChunk> {
        indices
            .iter()
            .map(|&i| ScoredChunk {
                chunk: chunks[i].clone(),
                score: 1.0 / (i as f32 + 1.0),
            })
            .collect()
    }

    /// The seed weighted RRF of DESIGN §5 (0.6 / 0.4, k = 60): the formula tests use it.
    fn seed() -> FusionConfig {
        FusionConfig {
            method: FusionMethod::Rrf,
            vector_weight: 0.6,
            text_weight: 0.4,
            k: 60.0,
            ..FusionConfig::default()
        }
    }

    #[test]
    fn weighted_rrf_adds_both_contributions() {
        let c = example_chunks();
        let hits = fuse(scored(&c, &[0, 1]), scored(&c, &[1, 2]), &seed());
        let score = |i: u32| {
            hits.iter()
                .find(|h| h.chunk.chunk_index == i)
                .map(|h| h.score)
                .unwrap_or_default()
        };
        assert!((score(1) - (0.6 / 62.0 + 0.4 / 61.0)).abs() < 1e-12);
        assert!((score(0) - 0.6 / 61.0).abs() < 1e-12);
        assert!((score(2) - 0.4 / 62.0).abs() < 1e-12);
        assert_eq!(hits[0].chunk.chunk_index, 1, "in both lists, it wins");
        assert_eq!(
            hits[0].vector,
            Some(Component {
                rank: 2,
                score: 0.5
            })
        );
        assert_eq!(hits[0].text.map(|t| t.rank), Some(1));
    }

    #[test]
    fn vector_outweighs_text_at_equal_rank() {
        let c = example_chunks();
        let hits = fuse(scored(&c, &[3]), scored(&c, &[4]), &seed());
        assert_eq!(hits[0].chunk.chunk_index, 3);
        assert!(hits[1].vector.is_none() && hits[1].text.is_some());
    }

    #[test]
    fn one_list_alone_keeps_its_order() {
        let c = example_chunks();
        let hits = fuse(Vec::new(), scored(&c, &[4, 2, 0]), &seed());
        let order: Vec<u32> = hits.iter().map(|h| h.chunk.chunk_index).collect();
        assert_eq!(order, vec![4, 2, 0]);
    }

    #[test]
    fn score_fusion_sums_normalised_scores() {
        let c = example_chunks();
        let config = FusionConfig {
            method: FusionMethod::Score,
            vector_weight: 0.4,
            text_weight: 0.6,
            ..FusionConfig::default()
        };
        let with = |indices: &[usize], scores: &[f32]| -> Vec<ScoredChunk> {
            indices
                .iter()
                .zip(scores)
                .map(|(&i, &score)| ScoredChunk {
                    chunk: c[i].clone(),
                    score,
                })
                .collect()
        };
        // Vector 0.9, 0.7, 0.5 → 1, 0.5, 0; text 12, 3 → 1, 0.
        let hits = fuse(
            with(&[0, 1, 2], &[0.9, 0.7, 0.5]),
            with(&[2, 1], &[12.0, 3.0]),
            &config,
        );
        let score = |i: u32| {
            hits.iter()
                .find(|h| h.chunk.chunk_index == i)
                .map(|h| h.score)
                .unwrap_or_default()
        };
        assert!((score(0) - 0.4).abs() < 1e-9);
        assert!((score(1) - 0.4 * 0.5).abs() < 1e-9);
        assert!((score(2) - 0.6).abs() < 1e-9);
        assert_eq!(hits[0].chunk.chunk_index, 2, "the best text hit wins");
        // A single candidate gets the retriever's whole weight.
        let one = fuse(with(&[3], &[0.2]), Vec::new(), &config);
        assert!((one[0].score - 0.4).abs() < 1e-9);
    }

    #[test]
    fn duplicates_in_one_list_count_once() {
        let c = example_chunks();
        let hits = fuse(scored(&c, &[1, 1]), Vec::new(), &seed());
        assert_eq!(hits.len(), 1);
        assert!((hits[0].score - 0.6 / 61.0).abs() < 1e-12);
    }
}
