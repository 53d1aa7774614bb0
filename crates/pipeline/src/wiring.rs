//! Building weft from a validated [`WeftConfig`], in one place: where the
//! data and the model are ([`Locations`]), the embedder (`[embedding]`),
//! the stores (`[stores]`), the reranker (`[rerank]`) and the
//! [`QueryEngine`]. `weft index`, `weft search`, `weft serve`, `weft eval`,
//! `weft-embedder` and `weft-query` all build through here, so a setting
//! means the same in every command, and the model an index was made with
//! is checked once, here.

use std::path::PathBuf;
use std::sync::Arc;

use weft_config::{EmbeddingProvider, RerankConfig, RerankKind, WeftConfig};
use weft_core::ports::{Catalog, Embedder, Reranker, TextIndex, VectorIndex};
use weft_core::query::QueryEngine;

use crate::data_dir::{DataDir, DataDirError};
use crate::embedding::{EmbedderSetupError, LazyEmbedder, embedder_from_config};
use crate::stores::{IndexStores, StoreAccess, Stores, StoresError, open_index_stores};
use crate::writer::EmbedBatching;

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
    /// The reranker settings cannot work.
    #[error("{key}: {message}")]
    Rerank {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Where the data directory and the local model are: a flag (or its
/// environment variable, `WEFT_DATA_DIR` / `WEFT_MODEL_DIR`), else
/// `data.dir` / `embedding.model_dir`, else the platform's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locations {
    /// The data directory.
    pub data_dir: PathBuf,
    /// The local embedding model's directory.
    pub model_dir: PathBuf,
}

impl Locations {
    /// Resolves the locations: `data_dir` / `model_dir` given on the command
    /// line win over the configuration, which wins over the defaults.
    pub fn resolve(
        config: &WeftConfig,
        data_dir: Option<PathBuf>,
        model_dir: Option<PathBuf>,
    ) -> Self {
        if let (EmbeddingProvider::Local, Some(name), Some(dir)) = (
            config.embedding.provider,
            &config.embedding.model,
            &model_dir,
        ) && dir.file_name() != Some(std::ffi::OsStr::new(name))
        {
            tracing::warn!(
                model = %name,
                model_dir = %dir.display(),
                "embedding.model names one model, but --model-dir or WEFT_MODEL_DIR gives another directory: the directory is used"
            );
        }
        Self {
            data_dir: data_dir
                .or_else(|| config.data.dir.clone())
                .unwrap_or_else(default_data_dir),
            model_dir: model_dir
                .or_else(|| config.embedding.model_dir.clone())
                .unwrap_or_else(default_model_dir),
        }
    }

    /// The data directory.
    pub fn data(&self) -> DataDir {
        DataDir::new(&self.data_dir)
    }
}

/// The platform's data directory for weft: `$XDG_DATA_HOME/weft`, else
/// `~/Library/Application Support/weft` on macOS, `%APPDATA%\weft` on
/// Windows, `~/.local/share/weft` elsewhere.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("weft");
    }
    if let Some(appdata) = std::env::var_os("APPDATA").filter(|_| cfg!(windows)) {
        return PathBuf::from(appdata).join("weft");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    if cfg!(target_os = "macos") {
        home.join("Library/Application Support/weft")
    } else {
        home.join(".local/share/weft")
    }
}

/// Where `tools/fetch-model.sh` puts the default model:
/// `~/.cache/weft/models/all-MiniLM-L6-v2`.
pub fn default_model_dir() -> PathBuf {
    weft_config::EmbeddingConfig::fetched_model_dir(weft_config::DEFAULT_LOCAL_MODEL)
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
        let model_id = weft_embed_candle::LocalEmbedder::model_id_of(&locations.model_dir);
        if let Some(meta) = locations.data().meta()?.filter(|m| m.model == model_id) {
            let (dir, max_tokens) = (locations.model_dir.clone(), config.embedding.max_tokens);
            let lazy = LazyEmbedder::new(model_id, meta.dimension, move || {
                weft_embed_candle::LocalEmbedder::load(&dir, max_tokens)
                    .map(|m| Arc::new(m) as Arc<dyn Embedder>)
                    .map_err(|e| e.to_string())
            });
            return Ok(Arc::new(lazy));
        }
    }
    Ok(embedder_from_config(&config.embedding, &locations.model_dir).await?)
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
    let indexes = open_index_stores(
        &config.stores,
        &locations.data_dir,
        embedder.model_id(),
        embedder.dimension(),
        StoreAccess::Write,
    )
    .await
    .map_err(|e| mismatch(e, locations))?;
    let description = indexes.description.clone();
    Ok((Stores::new(indexes, catalog), embedder, description))
}

/// Whether a query needs the embedding model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryEmbedder {
    /// Hybrid and vector searches: the model embeds queries.
    Needed,
    /// Text-only searches: no model is read.
    NotNeeded,
}

/// What answers queries: the engine, and the indexes it reads.
#[derive(Clone)]
pub struct QueryStack {
    /// The engine.
    pub engine: Arc<QueryEngine>,
    /// The vector index (whole chunks by id, for `GetChunks`).
    pub vectors: Arc<dyn VectorIndex>,
    /// The text index.
    pub text: Arc<dyn TextIndex>,
    /// The model the index's vectors were made with.
    pub model: String,
    /// Its dimension.
    pub dimension: usize,
    /// Where the indexes are, for logs.
    pub description: String,
}

/// Opens the indexes `[stores]` configures for reading and builds the
/// engine over them, with the configured embedder (unless not needed) and
/// reranker. An embedded index must exist (checked before any model is
/// read) and have been made with the configured model.
pub async fn open_query(
    config: &WeftConfig,
    locations: &Locations,
    need: QueryEmbedder,
) -> Result<QueryStack, WiringError> {
    let recorded = if config.stores.uses_data_dir() {
        Some(locations.data().existing_meta()?)
    } else {
        None
    };
    let embedder = match (need, &recorded) {
        (QueryEmbedder::NotNeeded, Some(_)) => None,
        _ => Some(embedder_from_config(&config.embedding, &locations.model_dir).await?),
    };
    // The one model check: the index's recorded model against the configured one.
    if let (Some(meta), Some(e)) = (&recorded, &embedder)
        && (meta.model != e.model_id() || meta.dimension != e.dimension())
    {
        return Err(WiringError::ModelMismatch {
            index: locations.data_dir.display().to_string(),
            indexed: meta.model.clone(),
            configured: e.model_id().to_owned(),
        });
    }
    let (model, dimension) = match (&recorded, &embedder) {
        (Some(meta), _) => (meta.model.clone(), meta.dimension),
        (None, Some(e)) => (e.model_id().to_owned(), e.dimension()),
        (None, None) => unreachable!("an embedder is built when nothing is recorded"),
    };
    let indexes: IndexStores = open_index_stores(
        &config.stores,
        &locations.data_dir,
        &model,
        dimension,
        StoreAccess::Read,
    )
    .await
    .map_err(|e| mismatch(e, locations))?;
    let embedder = match need {
        QueryEmbedder::Needed => embedder,
        QueryEmbedder::NotNeeded => None,
    };
    let engine = query_engine(
        config,
        indexes.vectors.clone(),
        indexes.text.clone(),
        embedder,
    )?;
    Ok(QueryStack {
        engine: Arc::new(engine),
        vectors: indexes.vectors,
        text: indexes.text,
        model,
        dimension,
        description: indexes.description,
    })
}

/// The engine over these indexes, with `[retrieval]` and the `[rerank]`
/// reranker: the only place a [`QueryEngine`] is configured.
pub fn query_engine(
    config: &WeftConfig,
    vectors: Arc<dyn VectorIndex>,
    text: Arc<dyn TextIndex>,
    embedder: Option<Arc<dyn Embedder>>,
) -> Result<QueryEngine, WiringError> {
    Ok(QueryEngine::new(
        vectors,
        text,
        embedder,
        reranker_from_config(&config.rerank)?,
        config.retrieval.clone(),
    ))
}

/// A data directory made by another model, told as the model check says it.
fn mismatch(error: StoresError, locations: &Locations) -> WiringError {
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
