//! What writing needs, built from a validated [`WeftConfig`]: the embedder
//! (`[embedding]`), the stores to write (`[stores]`) with the model check,
//! the reranker (`[rerank]`), and the error all of wiring reports.

use std::sync::Arc;

use weft_config::{EmbeddingProvider, Locations, RerankConfig, RerankKind, WeftConfig};
use weft_core::ports::{Catalog, Embedder, Reranker};

use crate::data_dir::{DataDir, DataDirError};
use crate::embedding::EmbedBatching;
use crate::embedding::{EmbedderSetupError, LazyEmbedder, embedder_from_config};
use crate::stores::{StoreAccess, Stores, StoresError, open_index_stores};
use weft_embed_local::Purpose;

/// Why weft could not be put together from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    /// A store could not be opened.
    #[error(transparent)]
    Stores(#[from] StoresError),
    /// The data directory could not be read.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// The embedding model or API could not be set up.
    #[error(transparent)]
    Embedder(#[from] EmbedderSetupError),
    /// The index was made with another model than the one configured.
    #[error(
        "{index} was indexed with the model {indexed}, but the configured model is {configured}"
    )]
    ModelMismatch {
        /// The index (its data directory).
        index: String,
        /// The model its vectors were made with.
        indexed: String,
        /// The model `[embedding]` configures.
        configured: String,
    },
    /// The generations registry could not be read.
    #[error("index generations: {0}")]
    Registry(#[source] weft_core::ports::PortError),
    /// The reranker settings cannot work.
    #[error("{key}: {message}")]
    Rerank {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// How embedding calls are cut: `embedding.batch_size` texts and
/// `embedder.max_batch_tokens` estimated tokens at most; an API gets
/// `embedding.max_in_flight` calls at once (one request each), the local
/// model one.
pub fn embed_batching(config: &WeftConfig) -> EmbedBatching {
    EmbedBatching {
        max_texts: config.embedding.batch_size,
        max_tokens: config.embedder.max_batch_tokens,
        concurrent_calls: match config.embedding.provider {
            weft_config::EmbeddingProvider::Http => config.embedding.max_in_flight,
            weft_config::EmbeddingProvider::Local => 1,
        },
    }
}

/// `None` for `rerank.kind = "none"`, else the HTTP reranker at `rerank.url`.
pub fn reranker_from_config(
    config: &RerankConfig,
) -> Result<Option<Arc<dyn Reranker>>, WiringError> {
    use weft_rerank_http::{ApiShape, HttpReranker};
    let shape = match config.kind {
        RerankKind::None => return Ok(None),
        RerankKind::Tei => ApiShape::Tei,
        RerankKind::Cohere => ApiShape::Cohere,
    };
    let url = config.url.as_deref().ok_or(WiringError::Rerank {
        key: "rerank.url",
        message: "is required when rerank.kind is set".into(),
    })?;
    let reranker =
        HttpReranker::new(url, shape, config.model.clone()).map_err(|e| WiringError::Rerank {
            key: "rerank.url",
            message: e.to_string(),
        })?;
    Ok(Some(Arc::new(reranker)))
}

/// When the local model is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// Now (a service that will embed anyway).
    Now,
    /// On first use, when the data directory already records the model's
    /// dimension: a run with nothing to embed never reads the model.
    WhenNeeded,
}

/// The embedder `[embedding]` configures, for writing an index: the local
/// model (read now, or lazily per `load`) or a connected API.
pub async fn embedder(
    config: &WeftConfig,
    locations: &Locations,
    load: Load,
) -> Result<Arc<dyn Embedder>, WiringError> {
    if config.embedding.provider == EmbeddingProvider::Local
        && load == Load::WhenNeeded
        && config.stores.uses_data_dir()
    {
        let model_id = weft_embed_local::LocalEmbedder::model_id_of(&locations.model_dir);
        if let Some(meta) = DataDir::new(&locations.data_dir)
            .meta()?
            .filter(|m| m.model == model_id)
        {
            let dir = locations.model_dir.clone();
            let options = crate::embedding::local_load_options(&config.embedding);
            let lazy = LazyEmbedder::new(model_id, meta.dimension, move || {
                weft_embed_local::LocalEmbedder::load_with(&dir, &options)
                    .map(|m| Arc::new(m) as Arc<dyn Embedder>)
                    .map_err(|e| e.to_string())
            });
            return Ok(Arc::new(lazy));
        }
    }
    Ok(embedder_from_config(&config.embedding, &locations.model_dir, Purpose::All).await?)
}

/// The stores an index run writes — the indexes `[stores]` configures and
/// `catalog` — with the embedder to fill them. Embedded indexes record the
/// model in the data directory on first use; one made by another model is
/// refused.
pub async fn open_for_writing(
    config: &WeftConfig,
    locations: &Locations,
    catalog: Arc<dyn Catalog>,
    load: Load,
) -> Result<(Stores, Arc<dyn Embedder>, String), WiringError> {
    let embedder = embedder(config, locations, load).await?;
    let generation = DataDir::new(&locations.data_dir).in_place()?;
    let indexes = open_index_stores(
        &config.stores,
        &generation,
        embedder.model_id(),
        embedder.dimension(),
        StoreAccess::Write,
    )
    .await
    .map_err(|e| mismatch(e, locations))?;
    let description = indexes.description.clone();
    Ok((Stores::new(indexes, catalog), embedder, description))
}

/// A data directory made by another model, told as the model check says it.
pub(crate) fn mismatch(error: StoresError, locations: &Locations) -> WiringError {
    match error {
        StoresError::DataDir(DataDirError::ModelMismatch {
            expected, found, ..
        }) => WiringError::ModelMismatch {
            index: locations.data_dir.display().to_string(),
            indexed: found,
            configured: expected,
        },
        other => other.into(),
    }
}
