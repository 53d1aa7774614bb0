//! The reranker chosen by `[rerank]` in the configuration.

use std::sync::Arc;

use weft_config::{RerankConfig, RerankKind};
use weft_core::ports::Reranker;
use weft_rerank_http::{ApiShape, HttpReranker};

/// `None` for `kind = "none"`, else the HTTP reranker at `url`.
pub fn from_config(config: &RerankConfig) -> anyhow::Result<Option<Arc<dyn Reranker>>> {
    let shape = match config.kind {
        RerankKind::None => return Ok(None),
        RerankKind::Tei => ApiShape::Tei,
        RerankKind::Cohere => ApiShape::Cohere,
    };
    let url = config
        .url
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("rerank.url is required when rerank.kind is set"))?;
    Ok(Some(Arc::new(HttpReranker::new(
        url,
        shape,
        config.model.clone(),
    )?)))
}
