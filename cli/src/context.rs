//! What every index/search/status command needs: configuration, the data
//! directory and the embedding model, resolved flag → environment → weft.toml
//! → default.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use weft_config::{EmbeddingProvider, WeftConfig};
use weft_core::ports::Embedder;
use weft_embed_candle::LocalEmbedder;
use weft_pipeline::{
    DataDir, LazyEmbedder, Stores, default_data_dir, default_model_dir, embedder_from_config,
};

/// Where the index and the model are.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The data directory (default: `data.dir` in weft.toml, else the
    /// platform's data directory, e.g. ~/.local/share/weft).
    #[arg(long, env = "WEFT_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// A BERT-family sentence-embedding model directory (model.safetensors,
    /// config.json, tokenizer.json). Default: `embedding.model_dir`, else
    /// ~/.cache/weft/models/all-MiniLM-L6-v2 (fetched by tools/fetch-model.sh).
    #[arg(long, env = "WEFT_MODEL_DIR", value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
}

/// Resolved settings.
pub struct Context {
    pub config: WeftConfig,
    pub data_dir: DataDir,
    pub model_dir: PathBuf,
}

impl Context {
    pub fn load(config_file: Option<&Path>, args: &StoreArgs) -> anyhow::Result<Self> {
        let config = weft_config::load(config_file)?.config;
        let data_dir = args
            .data_dir
            .clone()
            .or_else(|| config.data.dir.clone())
            .unwrap_or_else(default_data_dir);
        let model_dir = args
            .model_dir
            .clone()
            .or_else(|| config.embedding.model_dir.clone())
            .unwrap_or_else(default_model_dir);
        Ok(Self {
            config,
            data_dir: DataDir::new(data_dir),
            model_dir,
        })
    }

    /// The model's id: its directory's name.
    pub fn model_id(&self) -> String {
        LocalEmbedder::model_id_of(&self.model_dir)
    }

    /// Loads the model now.
    pub fn load_model(&self) -> anyhow::Result<Arc<dyn Embedder>> {
        let model = LocalEmbedder::load(&self.model_dir, self.config.embedding.max_tokens)
            .with_context(|| "cannot load the embedding model")?;
        Ok(Arc::new(model))
    }

    /// Whether embeddings come from an API (`embedding.provider = "http"`)
    /// rather than the local model.
    pub fn uses_api(&self) -> bool {
        self.config.embedding.provider == EmbeddingProvider::Http
    }

    /// The embedding API `[embedding]` configures, connected (its dimension
    /// known).
    pub async fn connect_api(&self) -> anyhow::Result<Arc<dyn Embedder>> {
        Ok(embedder_from_config(&self.config.embedding, &self.model_dir).await?)
    }

    /// Opens (or creates) the stores for indexing, with the configured
    /// embedder. With data already there the local model is loaded only
    /// when something must be embedded.
    pub async fn open_for_indexing(&self) -> anyhow::Result<(Stores, Arc<dyn Embedder>)> {
        if self.uses_api() {
            let api = self.connect_api().await?;
            let stores = self.data_dir.open_for(api.model_id(), api.dimension())?;
            return Ok((stores, api));
        }
        Ok(match self.data_dir.meta()? {
            Some(meta) => {
                let stores = self.data_dir.open_for(&self.model_id(), meta.dimension)?;
                let (dir, max_tokens) = (self.model_dir.clone(), self.config.embedding.max_tokens);
                let lazy = LazyEmbedder::new(self.model_id(), meta.dimension, move || {
                    LocalEmbedder::load(&dir, max_tokens)
                        .map(|m| Arc::new(m) as Arc<dyn Embedder>)
                        .map_err(|e| e.to_string())
                });
                (stores, Arc::new(lazy))
            }
            None => {
                let model = self.load_model()?;
                let stores = self
                    .data_dir
                    .open_for(model.model_id(), model.dimension())?;
                (stores, model)
            }
        })
    }
}
