//! `[rerank]`: the optional reranker.

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::bad;

/// `[rerank]`: the optional reranker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RerankConfig {
    /// `none` (default), `tei` (Hugging Face text-embeddings-inference
    /// `/rerank`) or `cohere` (`/v1/rerank`).
    pub kind: RerankKind,
    /// Base URL of the rerank service.
    pub url: Option<String>,
    /// Model name sent to Cohere-shaped APIs.
    pub model: Option<String>,
}

/// Which reranker is used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerankKind {
    /// Keep the fused order.
    #[default]
    None,
    /// `POST {url}/rerank` with `{"query", "texts"}`.
    Tei,
    /// `POST {url}/v1/rerank` with `{"model", "query", "documents"}`.
    Cohere,
}

impl RerankConfig {
    /// Checks the section: a reranker needs its URL.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.kind != RerankKind::None && self.url.is_none() {
            return bad("rerank.url", "is required when rerank.kind is not none");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::assert_refused;

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_refused(&[("[rerank]\nkind = \"tei\"\n", "rerank.url")]);
    }
}
