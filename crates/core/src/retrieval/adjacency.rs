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
    /// Bring back the whole unit of an expanded hit that is one part of a
    /// split function or section (`"… (Part i/n)"`): its other parts, up to
    /// `max_unit_parts` of them, whatever the window.
    pub whole_units: bool,
    /// At most this many other parts of one unit are fetched (nearest first).
    pub max_unit_parts: u32,
    /// A unit with more other parts than `max_unit_parts` cannot come back
    /// whole: its hit gets only the parts this near on each side, instead
    /// of `max_unit_parts` chunks that would still be a fragment of it (a
    /// 40-part glossary or option list).
    pub large_unit_window: u32,
}

impl Default for AdjacencyConfig {
    fn default() -> Self {
        // Measured with `weft eval` / `eval-sweep` (bench/RESULTS.md): the
        // seed windows (prose 2, code 3, API 1 around each of 10 hits)
        // tripled the context for no coverage that whole units do not give.
        AdjacencyConfig {
            prose_window: 0,
            code_window: 1,
            api_reference_window: 0,
            expand_hits: 3,
            max_chunks: 60,
            neighbour_factor: 0.5,
            whole_units: true,
            max_unit_parts: 16,
            large_unit_window: 1,
        }
    }
}

impl AdjacencyConfig {
    /// The expansion of a search whose response is packed under a token
    /// budget ([`crate::retrieval::pack`]): every hit, not only the best
    /// `expand_hits`, brings the rest of its split function or section (so
    /// that whatever hit the packer keeps, it keeps whole) and its window,
    /// which is at least one chunk on each side for every content type (so
    /// that the budget the hits leave goes to what lies next to them: the
    /// section before or after a prose hit). Without a budget the response
    /// would grow by all of it (2.8× the tokens on the Node.js docs,
    /// bench/RESULTS.md); with one, the packer puts every hit first and the
    /// context only into what is left.
    pub fn for_packing(&self) -> Self {
        AdjacencyConfig {
            expand_hits: usize::MAX,
            prose_window: self.prose_window.max(1),
            code_window: self.code_window.max(1),
            api_reference_window: self.api_reference_window.max(1),
            ..self.clone()
        }
    }

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
    /// When planned only to complete a split unit: the unit's section
    /// (without the part suffix), which the fetched chunk must have.
    pub unit: Option<String>,
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

    /// The planned score of a fetched chunk, if it was planned and, when it
    /// was planned to complete a unit, really is a part of that unit.
    pub fn accept(&self, chunk: &crate::Chunk) -> Option<f64> {
        let id = chunk.id();
        let planned = self.neighbours.iter().find(|n| n.id == id)?;
        match &planned.unit {
            Some(unit) if unit_of(&chunk.section).0 != unit.as_str() => None,
            _ => Some(planned.score),
        }
    }
}

/// Splits a section into the unit and its part: `"A.run (Part 2/4)"` →
/// `("A.run", Some((2, 4)))`; a section without a well-formed suffix is a
/// whole unit.
pub fn unit_of(section: &str) -> (&str, Option<(u32, u32)>) {
    let part = section
        .strip_suffix(')')
        .and_then(|s| s.rsplit_once("(Part "))
        .and_then(|(base, nums)| {
            let (i, n) = nums.split_once('/')?;
            let (i, n) = (i.parse::<u32>().ok()?, n.parse::<u32>().ok()?);
            (1 <= i && i <= n).then_some((base.trim_end(), (i, n)))
        });
    match part {
        Some((base, part)) => (base, Some(part)),
        None => (section, None),
    }
}

/// Plans the neighbours of the best `expand_hits` hits: the other parts of
/// a hit's split unit (with `whole_units`), and the chunks within the window
/// of each hit's content type; never hits themselves, always within the
/// document, best first, so that hits plus neighbours stay within
/// `max_chunks`.
pub fn plan_neighbours(hits: &[FusedHit], config: &AdjacencyConfig) -> NeighbourPlan {
    let matched: HashSet<ChunkId> = hits.iter().map(|h| h.chunk.id()).collect();
    let mut best: HashMap<ChunkId, PlannedNeighbour> = HashMap::new();
    let mut offer = |candidate: PlannedNeighbour| {
        if matched.contains(&candidate.id) {
            return;
        }
        match best.get_mut(&candidate.id) {
            Some(existing) => {
                // A window neighbour needs no unit check, whoever scores best.
                let unit = if existing.unit.is_none() || candidate.unit.is_none() {
                    None
                } else {
                    existing.unit.clone()
                };
                if candidate.score > existing.score {
                    *existing = candidate;
                }
                existing.unit = unit;
            }
            None => {
                best.insert(candidate.id, candidate);
            }
        }
    };
    for hit in hits.iter().take(config.expand_hits) {
        let c = &hit.chunk;
        let score_at = |distance: u32| hit.score * config.neighbour_factor / f64::from(distance);
        let neighbour = |index: u32, distance: u32, unit: Option<String>| PlannedNeighbour {
            id: ChunkId::new(&c.document_id, index),
            document_id: c.document_id.clone(),
            chunk_index: index,
            score: score_at(distance),
            distance,
            unit,
        };
        if config.whole_units
            && let (unit, Some((part, parts))) = unit_of(&c.section)
        {
            let mut before = (part - 1).min(c.chunk_index);
            let mut after = parts - part;
            if parts - 1 > config.max_unit_parts {
                // Too large to complete: only the nearest parts.
                before = before.min(config.large_unit_window);
                after = after.min(config.large_unit_window);
            }
            // Nearest parts first, alternating sides, up to the cap.
            let mut taken = 0;
            for distance in 1..=before.max(after) {
                for index in [
                    (distance <= before).then(|| c.chunk_index - distance),
                    (distance <= after)
                        .then(|| c.chunk_index.saturating_add(distance))
                        .filter(|&i| i < c.total_chunks),
                ]
                .into_iter()
                .flatten()
                {
                    if taken < config.max_unit_parts {
                        offer(neighbour(index, distance, Some(unit.to_owned())));
                        taken += 1;
                    }
                }
            }
        }
        // No document has neighbours further away than its length: a huge
        // window costs no more than the document.
        for distance in 1..=config.window(c.content_type).min(c.total_chunks) {
            let before = c.chunk_index.checked_sub(distance);
            let after = c
                .chunk_index
                .checked_add(distance)
                .filter(|&i| i < c.total_chunks);
            for index in [before, after].into_iter().flatten() {
                offer(neighbour(index, distance, None));
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

    /// The seed windows of DESIGN §5, which the window tests exercise.
    fn seed() -> AdjacencyConfig {
        AdjacencyConfig {
            prose_window: 2,
            code_window: 3,
            api_reference_window: 1,
            expand_hits: 10,
            ..AdjacencyConfig::default()
        }
    }

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
    fn a_huge_window_costs_no_more_than_the_document() {
        let hits = hits_at(&[1]);
        let config = AdjacencyConfig {
            code_window: u32::MAX,
            ..seed()
        };
        // Without the bound this walks four billion distances (minutes).
        let plan = plan_neighbours(&hits, &config);
        let mut indices: Vec<u32> = plan.neighbours.iter().map(|n| n.chunk_index).collect();
        indices.sort();
        assert_eq!(indices, vec![0, 2, 3, 4]);
    }

    #[test]
    fn code_window_is_three_each_side_within_the_document() {
        let hits = hits_at(&[1]);
        let plan = plan_neighbours(&hits, &seed());
        let mut indices: Vec<u32> = plan.neighbours.iter().map(|n| n.chunk_index).collect();
        indices.sort();
        assert_eq!(indices, vec![0, 2, 3, 4], "index 1 ± 3, clipped to 0..5");
        let doc = &hits[0].chunk.document_id;
        assert!(plan.ids().contains(&ChunkId::new(doc, 4)));
    }

    #[test]
    fn neighbour_score_is_half_the_hit_over_distance() {
        let hits = hits_at(&[0]);
        let plan = plan_neighbours(&hits, &seed());
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
        let plan = plan_neighbours(&hits, &seed());
        let mut indices: Vec<u32> = plan.neighbours.iter().map(|n| n.chunk_index).collect();
        indices.sort();
        assert_eq!(indices, vec![0, 2, 4]);
    }

    #[test]
    fn the_cap_bounds_hits_plus_neighbours() {
        let hits = hits_at(&[2]);
        let config = AdjacencyConfig {
            max_chunks: 3,
            ..seed()
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
        let config = seed();
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

    #[test]
    fn unit_of_reads_only_well_formed_part_suffixes() {
        assert_eq!(unit_of("A.run (Part 2/4)"), ("A.run", Some((2, 4))));
        assert_eq!(
            unit_of("Guide > Install (Part 1/1)"),
            ("Guide > Install", Some((1, 1)))
        );
        assert_eq!(unit_of("A.run"), ("A.run", None));
        assert_eq!(unit_of("A.run (Part 5/4)"), ("A.run (Part 5/4)", None));
        assert_eq!(unit_of("A.run (Part x/4)"), ("A.run (Part x/4)", None));
    }

    /// Five chunks: 0 is a whole function, 1..=4 are parts 1/4..4/4 of `big`.
    fn split_unit() -> Vec<crate::Chunk> {
        let mut c = example_chunks();
        c[0].section = "small".into();
        for (i, chunk) in c.iter_mut().enumerate().skip(1) {
            chunk.section = format!("big (Part {i}/4)");
        }
        c
    }

    fn hit(chunk: &crate::Chunk) -> Vec<FusedHit> {
        fuse(
            vec![ScoredChunk {
                chunk: chunk.clone(),
                score: 1.0,
            }],
            Vec::new(),
            &FusionConfig::default(),
        )
    }

    #[test]
    fn a_split_hit_brings_its_whole_unit_beyond_the_window() {
        let c = split_unit();
        let config = AdjacencyConfig {
            code_window: 0,
            ..AdjacencyConfig::default()
        };
        let plan = plan_neighbours(&hit(&c[2]), &config);
        let mut indices: Vec<u32> = plan.neighbours.iter().map(|n| n.chunk_index).collect();
        indices.sort();
        assert_eq!(
            indices,
            vec![1, 3, 4],
            "parts 1, 3 and 4; not the function before"
        );
        assert!(
            plan.neighbours
                .iter()
                .all(|n| n.unit.as_deref() == Some("big"))
        );
        // A fetched chunk that turns out not to be a part of the unit is refused.
        let mut stranger = c[4].clone();
        stranger.section = "other".into();
        assert_eq!(plan.accept(&stranger), None);
        assert!(plan.accept(&c[4]).is_some());
        // Without whole units, the window alone decides.
        let none = AdjacencyConfig {
            whole_units: false,
            ..config.clone()
        };
        assert!(plan_neighbours(&hit(&c[2]), &none).neighbours.is_empty());
        // The cap on parts keeps the nearest.
        let capped = AdjacencyConfig {
            max_unit_parts: 2,
            ..config
        };
        let mut near: Vec<u32> = plan_neighbours(&hit(&c[2]), &capped)
            .neighbours
            .iter()
            .map(|n| n.chunk_index)
            .collect();
        near.sort();
        assert_eq!(near, vec![1, 3]);
    }

    #[test]
    fn a_unit_too_large_to_complete_brings_only_its_nearest_parts() {
        let c = split_unit();
        // Hit on part 1/4: three other parts, but only two may be fetched,
        // so the unit cannot come back whole.
        let config = AdjacencyConfig {
            code_window: 0,
            max_unit_parts: 2,
            ..AdjacencyConfig::default()
        };
        let indices = |config: &AdjacencyConfig| {
            let mut i: Vec<u32> = plan_neighbours(&hit(&c[1]), config)
                .neighbours
                .iter()
                .map(|n| n.chunk_index)
                .collect();
            i.sort();
            i
        };
        assert_eq!(
            indices(&config),
            vec![2],
            "the next part, not parts 2 and 3"
        );
        let wider = AdjacencyConfig {
            large_unit_window: 2,
            ..config.clone()
        };
        assert_eq!(indices(&wider), vec![2, 3]);
        let none = AdjacencyConfig {
            large_unit_window: 0,
            ..config.clone()
        };
        assert!(indices(&none).is_empty());
        // A unit that fits the cap still comes back whole.
        let fits = AdjacencyConfig {
            max_unit_parts: 3,
            ..config
        };
        assert_eq!(indices(&fits), vec![2, 3, 4]);
    }

    #[test]
    fn a_packed_search_expands_every_hit_with_a_window_of_at_least_one() {
        // Chunk 0 is a whole function and the best hit; chunk 2 (part 2/4
        // of `big`) is the second hit, past expand_hits = 1.
        let c = split_unit();
        let hits = fuse(
            vec![
                ScoredChunk {
                    chunk: c[0].clone(),
                    score: 1.0,
                },
                ScoredChunk {
                    chunk: c[2].clone(),
                    score: 0.5,
                },
            ],
            Vec::new(),
            &FusionConfig::default(),
        );
        let config = AdjacencyConfig {
            expand_hits: 1,
            code_window: 0,
            ..AdjacencyConfig::default()
        };
        let indices = |config: &AdjacencyConfig| {
            let mut i: Vec<u32> = plan_neighbours(&hits, config)
                .neighbours
                .iter()
                .map(|n| n.chunk_index)
                .collect();
            i.sort();
            i
        };
        assert!(
            indices(&config).is_empty(),
            "the best hit is whole, no window"
        );
        let packing = config.for_packing();
        assert_eq!(packing.code_window, 1);
        assert_eq!((packing.prose_window, packing.api_reference_window), (1, 1));
        assert_eq!(
            indices(&packing),
            vec![1, 3, 4],
            "the second hit's whole unit, and the best hit's window"
        );
        let plan = plan_neighbours(&hits, &packing);
        let part4 = plan.neighbours.iter().find(|n| n.chunk_index == 4).unwrap();
        assert_eq!(part4.unit.as_deref(), Some("big"), "checked on fetch");
        // Without whole units: each hit's window only.
        let no_units = AdjacencyConfig {
            whole_units: false,
            ..config
        };
        assert_eq!(indices(&no_units.for_packing()), vec![1, 3]);
        // Wider windows are kept.
        let wide = AdjacencyConfig {
            prose_window: 3,
            ..config
        };
        assert_eq!(wide.for_packing().prose_window, 3);
    }

    #[test]
    fn a_window_neighbour_is_never_refused_for_its_section() {
        let c = split_unit();
        // Hit on part 1/4 with window 1: chunk 0 comes by window, 2..4 by unit.
        let config = AdjacencyConfig {
            code_window: 1,
            ..AdjacencyConfig::default()
        };
        let plan = plan_neighbours(&hit(&c[1]), &config);
        assert!(plan.accept(&c[0]).is_some(), "window neighbour");
        let by_window_and_unit = plan.neighbours.iter().find(|n| n.chunk_index == 2).unwrap();
        assert_eq!(by_window_and_unit.unit, None);
    }
}
