//! Boosts after fusion: index documents, and query keywords in the path.

use serde::{Deserialize, Serialize};

use super::FusedHit;
use super::fusion::sort_hits;

/// Boost factors (DESIGN §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BoostConfig {
    /// Multiplier for README and index documents.
    pub index_doc: f64,
    /// Multiplier per query keyword (stop words removed) found in the path.
    pub path_keyword: f64,
}

impl Default for BoostConfig {
    fn default() -> Self {
        // The path-keyword boost (seed: 1.15) lowered nDCG@10 on every
        // hard eval set (bench/RESULTS.md); it is off unless configured.
        BoostConfig {
            index_doc: 1.25,
            path_keyword: 1.0,
        }
    }
}

/// English stop words and words too common in code questions to say
/// anything about a path.
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
    "get", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "of", "on", "or",
    "set", "that", "the", "their", "then", "there", "these", "this", "to", "use", "used", "using",
    "was", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
];

/// The keywords of a query: lowercase alphanumeric words of 3 or more
/// characters that are not stop words, each once, in query order.
pub fn query_keywords(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        if word.chars().count() >= 3 && !STOP_WORDS.contains(&word.as_str()) && !out.contains(&word)
        {
            out.push(word);
        }
    }
    out
}

/// Multiplies each hit's score by its boosts, records the factor in
/// `boost`, and re-sorts best first.
pub fn apply_boosts(hits: &mut [FusedHit], query: &str, config: &BoostConfig) {
    let keywords = query_keywords(query);
    for hit in hits.iter_mut() {
        let mut factor = 1.0;
        if hit.chunk.is_index_doc {
            factor *= config.index_doc;
        }
        let path = hit.chunk.uri.to_lowercase();
        for keyword in &keywords {
            if path.contains(keyword.as_str()) {
                factor *= config.path_keyword;
            }
        }
        hit.boost *= factor;
        hit.score *= factor;
    }
    sort_hits(hits);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::{FusionConfig, ScoredChunk, example_chunks, fuse};

    #[test]
    fn keywords_drop_stop_words_short_words_and_repeats() {
        assert_eq!(
            query_keywords("How do I parse the Config file? parse!"),
            vec!["parse", "config", "file"]
        );
        assert!(query_keywords("is it a to").is_empty());
    }

    #[test]
    fn path_keywords_and_index_docs_are_boosted() {
        let mut chunks = example_chunks();
        chunks[1].uri = "docs/README.md".into();
        chunks[1].is_index_doc = true;
        let list = |i: usize| ScoredChunk {
            chunk: chunks[i].clone(),
            score: 1.0,
        };
        // The seed fusion (weighted RRF 0.6 / 0.4, k = 60), which the figures below use.
        let seed = FusionConfig {
            method: crate::retrieval::FusionMethod::Rrf,
            vector_weight: 0.6,
            text_weight: 0.4,
            k: 60.0,
            ..FusionConfig::default()
        };
        let mut hits = fuse(vec![list(1), list(0)], Vec::new(), &seed);
        // chunk 0's path "src/config/parse.rs" holds "config" and "parse".
        let config = BoostConfig {
            path_keyword: 1.15,
            ..BoostConfig::default()
        };
        apply_boosts(&mut hits, "parse the config", &config);
        let boost = |i: u32| {
            hits.iter()
                .find(|h| h.chunk.chunk_index == i)
                .map(|h| h.boost)
                .unwrap_or_default()
        };
        assert!((boost(0) - 1.15 * 1.15).abs() < 1e-12);
        assert!((boost(1) - 1.25).abs() < 1e-12);
        assert_eq!(
            hits[0].chunk.chunk_index, 0,
            "1.3225 × (0.6/62) beats 1.25 × (0.6/61)"
        );
    }
}
