//! The embedder chosen by `[embedding]`: the local model or an HTTP API.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use weft_config::{EmbeddingConfig, EmbeddingProvider};
use weft_core::ports::Embedder;

/// Why the embedder could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EmbedderSetupError {
    /// The local model could not be loaded.
    #[error("cannot load the embedding model from {dir}: {message}")]
    Model {
        /// The model directory.
        dir: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The API is unusable (unreachable, rejects the key, bad settings).
    #[error("embedding API ({key}): {message}")]
    Api {
        /// The setting to look at.
        key: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// How the catalog names the embedder `config` sets up for the model
/// `model_id`, within a document's index tag ([`weft_core::index_tag`]): the
/// local model's vectors also depend on where texts are cut
/// (`embedding.max_tokens`), so that goes in (`all-MiniLM-L6-v2@256`).
pub fn embedder_tag(config: &EmbeddingConfig, model_id: &str) -> String {
    match config.provider {
        EmbeddingProvider::Local => format!("{model_id}@{}", config.max_tokens),
        EmbeddingProvider::Http => model_id.to_owned(),
    }
}

/// The local model in `model_dir` (`provider = "local"`), or a connected
/// OpenAI-compatible API (`provider = "http"`; its dimension asked at start
/// unless configured).
pub async fn embedder_from_config(
    config: &EmbeddingConfig,
    model_dir: &Path,
) -> Result<Arc<dyn Embedder>, EmbedderSetupError> {
    match config.provider {
        EmbeddingProvider::Local => {
            let (dir, max_tokens) = (model_dir.to_owned(), config.max_tokens);
            let model = tokio::task::spawn_blocking(move || {
                weft_embed_candle::LocalEmbedder::load(&dir, max_tokens)
            })
            .await
            .map_err(|e| EmbedderSetupError::Model {
                dir: model_dir.to_owned(),
                message: e.to_string(),
            })?
            .map_err(|e| EmbedderSetupError::Model {
                dir: model_dir.to_owned(),
                message: e.to_string(),
            })?;
            Ok(Arc::new(model))
        }
        EmbeddingProvider::Http => {
            let missing = |key| EmbedderSetupError::Api {
                key,
                message: "is required when embedding.provider is http".into(),
            };
            let url = config.url.clone().ok_or(missing("embedding.url"))?;
            let model = config.model.clone().ok_or(missing("embedding.model"))?;
            let api_key = match &config.api_key_env {
                Some(var) => Some(std::env::var(var).map_err(|_| EmbedderSetupError::Api {
                    key: "embedding.api_key_env",
                    message: format!("the environment variable {var} is not set"),
                })?),
                None => None,
            };
            let options = weft_embed_http::HttpEmbedderOptions {
                api_key,
                dimension: config.dimension,
                batch_size: config.batch_size,
                max_in_flight: config.max_in_flight,
                timeout: Duration::from_secs(config.timeout_secs),
                max_retries: config.max_retries,
                ..weft_embed_http::HttpEmbedderOptions::new(url, model)
            };
            let embedder = weft_embed_http::HttpEmbedder::connect(options)
                .await
                .map_err(|e| EmbedderSetupError::Api {
                    key: "embedding.url",
                    message: e.to_string(),
                })?;
            Ok(Arc::new(embedder))
        }
    }
}
