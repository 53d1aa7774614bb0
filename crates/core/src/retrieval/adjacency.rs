//! Which neighbours of the top hits to fetch: ids computed from
//! (document_id, chunk_index), so the store is asked once.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::FusedHit;
use crate::{ChunkId, ContentType, DocumentId};

/// Neighbour expansion settings (DESIGN §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdjacencyConfig {
    /// Neighbours on each side of a prose hit.
    pub prose_window: u32,
    /// Neighbours on each side of a code hit.
    pub code_window: u32,
    /// Neighbours on each side of an API-reference hit.
    pub api_reference_window: u32,
    /// How many of the best hits are expanded.
    pub expand_hits: usize,
    /// At most this many chunks in a response, hits and neighbours together.
    pub max_chunks: usize,
    /// A neighbour scores `hit score × neighbour_factor / distance`.
    pub neighbour_factor: f64,
}

impl Default for AdjacencyConfig {
    fn default() -> Self {
        AdjacencyConfig {
            prose_window: 2,
            code_window: 3,
            api_reference_window: 1,
            expand_hits: 10,
            max_chunks: 60,
            neighbour_factor: 0.5,
        }
    }
}

impl AdjacencyConfig {
    /// The window for a content type.
    pub fn window(&self, content_type: ContentType) -> u32 {
        match content_type {
            ContentType::Prose => self.prose_window,
            ContentType::Code => self.code_window,
            ContentType::ApiReference => self.api_reference_window,
        }
    }
}

/// One neighbour to fetch.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedNeighbour {
    /// Its computed id.
    pub id: ChunkId,
    /// Its document.
    pub document_id: DocumentId,
    /// Its index in the document.
    pub chunk_index: u32,
    /// Its score: the best `hit × factor / distance` over the hits near it.
    pub score: f64,
    /// Its distance from the hit that gave that score.
    pub distance: u32,
}

/// The neighbours to fetch, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NeighbourPlan {
    /// The neighbours, best score first.
    pub neighbours: Vec<PlannedNeighbour>,
}

impl NeighbourPlan {
    /// The ids to fetch, in one batched call.
    pub fn ids(&self) -> Vec<ChunkId> {
        self.neighbours.iter().map(|n| n.id).collect()
    }

    /// The planned score of a neighbour, if it was planned.
    pub fn score_of(&self, id: &ChunkId) -> Option<f64> {
        self.neighbours
            .iter()
            .find(|n| &n.id == id)
            .map(|n| n.score)
    }
}

/// Plans the neighbours of the best `expand_hits` hits: within the window of
/// each hit's content type, not hits themselves, within the document, best
/// first, so that hits plus neighbours stay within `max_chunks`.
pub fn plan_neighbours(hits: &[FusedHit], config: &AdjacencyConfig) -> NeighbourPlan {
    let matched: HashSet<ChunkId> = hits.iter().map(|h| h.chunk.id()).collect();
    let mut best: HashMap<ChunkId, PlannedNeighbour> = HashMap::new();
    for hit in hits.iter().take(config.expand_hits) {
        let c = &hit.chunk;
        let window = config.window(c.content_type);
        for distance in 1..=window {
            let before = c.chunk_index.checked_sub(distance);
            let after = c
                .chunk_index
                .checked_add(distance)
                .filter(|&i| i < c.total_chunks);
            for index in [before, after].into_iter().flatten() {
                let id = ChunkId::new(&c.document_id, index);
                if matched.contains(&id) {
                    continue;
                }
                let score = hit.score * config.neighbour_factor / f64::from(distance);
                let candidate = PlannedNeighbour {
                    id,
                    document_id: c.document_id.clone(),
                    chunk_index: index,
                    score,
                    distance,
                };
                match best.get(&id) {
                    Some(existing) if existing.score >= score => {}
                    _ => {
                        best.insert(id, candidate);
                    }
                }
            }
        }
    }
    let mut neighbours: Vec<PlannedNeighbour> = best.into_values().collect();
    neighbours.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    neighbours.truncate(config.max_chunks.saturating_sub(hits.len()));
    NeighbourPlan { neighbours }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::{FusionConfig, ScoredChunk, example_chunks, fuse};

    fn hits_at(indices: &[usize]) -> Vec<FusedHit> {
        let c = example_chunks();
        let list = indices
            .iter()
            .map(|&i| ScoredChunk {
                chunk: c[i].clone(),
                score: 1.0,
            })
            .collect();
        fuse(list, Vec::new(), &FusionConfig::default())
    }

    #[test]
    fn code_window_is_three_each_side_within_the_document() {
        let hits = hits_at(&[1]);
        let plan = plan_neighbours(&hits, &AdjacencyConfig::default());
        let mut indices: Vec<u32> = plan.neighbours.iter().map(|n| n.chunk_index).collect();
        indices.sort();
        assert_eq!(indices, vec![0, 2, 3, 4], "index 1 ± 3, clipped to 0..5");
        let doc = &hits[0].chunk.document_id;
        assert!(plan.ids().contains(&ChunkId::new(doc, 4)));
    }

    #[test]
    fn neighbour_score_is_half_the_hit_over_distance() {
        let hits = hits_at(&[0]);
        let plan = plan_neighbours(&hits, &AdjacencyConfig::default());
        let hit = hits[0].score;
        for n in &plan.neighbours {
            assert!((n.score - hit * 0.5 / f64::from(n.distance)).abs() < 1e-12);
            assert_eq!(n.distance, n.chunk_index);
        }
        assert_eq!(plan.neighbours[0].chunk_index, 1, "nearest first");
    }

    #[test]
    fn hits_are_not_fetched_again_and_windows_overlap_once() {
        let hits = hits_at(&[1, 3]);
        let plan = plan_neighbours(&hits, &AdjacencyConfig::default());
        let mut indices: Vec<u32> = plan.neighbours.iter().map(|n| n.chunk_index).collect();
        indices.sort();
        assert_eq!(indices, vec![0, 2, 4]);
    }

    #[test]
    fn the_cap_bounds_hits_plus_neighbours() {
        let hits = hits_at(&[2]);
        let config = AdjacencyConfig {
            max_chunks: 3,
            ..AdjacencyConfig::default()
        };
        let plan = plan_neighbours(&hits, &config);
        assert_eq!(plan.neighbours.len(), 2);
        assert!(
            plan.neighbours.iter().all(|n| n.distance == 1),
            "the nearest survive the cap"
        );
    }

    #[test]
    fn prose_and_api_reference_windows_differ() {
        let config = AdjacencyConfig::default();
        assert_eq!(config.window(ContentType::Prose), 2);
        assert_eq!(config.window(ContentType::ApiReference), 1);
        let mut c = example_chunks();
        c[2].content_type = ContentType::ApiReference;
        let hits = fuse(
            vec![ScoredChunk {
                chunk: c[2].clone(),
                score: 1.0,
            }],
            Vec::new(),
            &FusionConfig::default(),
        );
        assert_eq!(plan_neighbours(&hits, &config).neighbours.len(), 2);
    }
}
