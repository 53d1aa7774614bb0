//! `[retrieval]`: fusion, boosts and neighbour expansion (DESIGN §5). The
//! section's type is [`weft_core::retrieval::RetrievalConfig`], which the
//! query engine reads; its checks live here, with the other sections'.

use weft_core::retrieval::RetrievalConfig;

use crate::InvalidSetting;
use crate::error::bad;

/// Checks `[retrieval]`: a positive fusion constant, at least one candidate
/// and one neighbour chunk, weights of zero or more.
pub(crate) fn validate(r: &RetrievalConfig) -> Result<(), InvalidSetting> {
    if r.fusion.k.is_nan() || r.fusion.k <= 0.0 {
        return bad("retrieval.fusion.k", "must be positive");
    }
    if r.adjacency.max_chunks == 0 {
        return bad("retrieval.adjacency.max_chunks", "must be at least 1");
    }
    if r.fusion.min_candidates == 0 {
        return bad("retrieval.fusion.min_candidates", "must be at least 1");
    }
    for (key, weight) in [
        ("retrieval.fusion.vector_weight", r.fusion.vector_weight),
        ("retrieval.fusion.text_weight", r.fusion.text_weight),
    ] {
        if weight.is_nan() || weight < 0.0 {
            return bad(key, "must be zero or more");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_refused;

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_eq!(validate(&RetrievalConfig::default()), Ok(()));
        assert_refused(&[
            ("[retrieval.fusion]\nk = 0.0\n", "retrieval.fusion.k"),
            (
                "[retrieval.fusion]\nmin_candidates = 0\n",
                "retrieval.fusion.min_candidates",
            ),
            (
                "[retrieval.fusion]\ntext_weight = -1.0\n",
                "retrieval.fusion.text_weight",
            ),
            ("[retrieval.fusion]\nmethod = \"borda\"\n", "borda"),
        ]);
    }
}
