//! The embedder chosen by `[embedding]`: the local model or an HTTP API.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use weft_config::{EmbeddingConfig, EmbeddingPrecision, EmbeddingProvider};
use weft_core::ports::{Embedder, PortError, PortResult};
use weft_embed_local::{LoadOptions, Precision, Purpose};

/// Why the embedder could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EmbedderSetupError {
    /// The local model could not be loaded.
    #[error("cannot load the embedding model from {dir}: {source}")]
    Model {
        /// The model directory.
        dir: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: weft_embed_local::LoadError,
    },
    /// Loading the model was cut short (its thread panicked or was cancelled).
    #[error("loading the embedding model from {dir} stopped: {source}")]
    Interrupted {
        /// The model directory.
        dir: std::path::PathBuf,
        /// What stopped it.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A setting the API needs is missing.
    #[error("{key} is required when embedding.provider is http")]
    Missing {
        /// The setting.
        key: &'static str,
    },
    /// The variable that should hold the API key is not set.
    #[error("embedding.api_key_env: the environment variable {variable} is not set")]
    MissingKey {
        /// The variable's name.
        variable: String,
    },
    /// The API is unusable (unreachable, rejects the key, bad settings).
    #[error("embedding API at embedding.url: {source}")]
    Api {
        /// What went wrong.
        #[source]
        source: weft_embed_http::EmbedApiError,
    },
}

/// The precision the local model runs in: `embedding.precision`, with
/// `auto` resolved for this CPU ([`Precision::fastest`]).
pub fn local_precision(config: &EmbeddingConfig) -> Precision {
    match config.precision {
        EmbeddingPrecision::Auto => Precision::fastest(),
        EmbeddingPrecision::Fp32 => Precision::Fp32,
        EmbeddingPrecision::Int8 => Precision::Int8,
    }
}

/// How the local model is loaded per `[embedding]`.
pub fn local_load_options(config: &EmbeddingConfig) -> LoadOptions {
    LoadOptions::new(config.max_tokens)
        .precision(local_precision(config))
        .query_adapter(weft_embed_local::AdapterChoice::parse(
            &config.query_adapter,
        ))
}

/// The model id of the embedder `config` sets up, known without loading
/// the local model or calling the API: the local model directory's name
/// (`model_dir`), or `http:<embedding.model>`.
pub fn configured_model_id(config: &EmbeddingConfig, model_dir: &Path) -> String {
    match config.provider {
        EmbeddingProvider::Local => weft_embed_local::LocalEmbedder::model_id_of(model_dir),
        EmbeddingProvider::Http => {
            weft_embed_http::model_id(config.model.as_deref().unwrap_or_default())
        }
    }
}

/// How the catalog names the embedder `config` sets up for the model
/// `model_id`, within a document's index tag ([`weft_core::index_tag`]),
/// with what else changes its vectors: where the local model cuts texts
/// and its precision (`all-MiniLM-L6-v2@256`, `all-MiniLM-L6-v2@256+int8.1`;
/// [`weft_embed_local::embedder_tag`]), what an API is told chunks are
/// (`http:e5[passage|passage: ]`).
pub fn embedder_tag(config: &EmbeddingConfig, model_id: &str) -> String {
    match config.provider {
        EmbeddingProvider::Local => {
            weft_embed_local::embedder_tag(model_id, config.max_tokens, local_precision(config))
        }
        EmbeddingProvider::Http => {
            let input_type = config.document_input_type.as_deref().unwrap_or("");
            if input_type.is_empty() && config.document_prefix.is_empty() {
                model_id.to_owned()
            } else {
                format!("{model_id}[{input_type}|{}]", config.document_prefix)
            }
        }
    }
}

/// The local model in `model_dir` (`provider = "local"`), loaded for
/// `purpose` (what it builds at load), or a connected OpenAI-compatible API
/// (`provider = "http"`; its dimension asked at start unless configured).
pub async fn embedder_from_config(
    config: &EmbeddingConfig,
    model_dir: &Path,
    purpose: Purpose,
) -> Result<Arc<dyn Embedder>, EmbedderSetupError> {
    match config.provider {
        EmbeddingProvider::Local => {
            let (dir, options) = (
                model_dir.to_owned(),
                local_load_options(config).purpose(purpose),
            );
            let model = tokio::task::spawn_blocking(move || {
                weft_embed_local::LocalEmbedder::load_with(&dir, &options)
            })
            .await
            .map_err(|source| EmbedderSetupError::Interrupted {
                dir: model_dir.to_owned(),
                source,
            })?
            .map_err(|source| EmbedderSetupError::Model {
                dir: model_dir.to_owned(),
                source,
            })?;
            tracing::info!(
                model = model.model_id(),
                precision = %model.precision(),
                query_adapter = model.query_adapter_name().unwrap_or("none"),
                "local embedding model loaded"
            );
            Ok(Arc::new(model))
        }
        EmbeddingProvider::Http => {
            let missing = |key| EmbedderSetupError::Missing { key };
            let url = config.url.clone().ok_or(missing("embedding.url"))?;
            let model = config.model.clone().ok_or(missing("embedding.model"))?;
            let api_key = match &config.api_key_env {
                Some(var) => {
                    Some(
                        std::env::var(var).map_err(|_| EmbedderSetupError::MissingKey {
                            variable: var.clone(),
                        })?,
                    )
                }
                None => None,
            };
            let options = weft_embed_http::HttpEmbedderOptions {
                api_key,
                dimension: config.dimension,
                batch_size: config.batch_size,
                max_in_flight: config.max_in_flight,
                timeout: Duration::from_secs(config.timeout_secs),
                max_retries: config.max_retries,
                query_prefix: config.query_prefix.clone(),
                document_prefix: config.document_prefix.clone(),
                query_input_type: config.query_input_type.clone(),
                document_input_type: config.document_input_type.clone(),
                ..weft_embed_http::HttpEmbedderOptions::new(url, model)
            };
            let embedder = weft_embed_http::HttpEmbedder::connect(options)
                .await
                .map_err(|source| EmbedderSetupError::Api { source })?;
            Ok(Arc::new(embedder))
        }
    }
}

type Loader = dyn Fn() -> Result<Arc<dyn Embedder>, String> + Send + Sync;

/// An embedder loaded on first use, so that a run with nothing to embed
/// never reads the model.
pub struct LazyEmbedder {
    model_id: String,
    dimension: usize,
    loader: Box<Loader>,
    loaded: OnceLock<Result<Arc<dyn Embedder>, String>>,
}

impl LazyEmbedder {
    /// An embedder for `model_id` of `dimension`, loaded by `loader` when
    /// first asked to embed.
    pub fn new(
        model_id: impl Into<String>,
        dimension: usize,
        loader: impl Fn() -> Result<Arc<dyn Embedder>, String> + Send + Sync + 'static,
    ) -> Self {
        Self {
            model_id: model_id.into(),
            dimension,
            loader: Box::new(loader),
            loaded: OnceLock::new(),
        }
    }

    /// An embedder that is already loaded.
    pub fn loaded(embedder: Arc<dyn Embedder>) -> Self {
        let (model_id, dimension) = (embedder.model_id().to_owned(), embedder.dimension());
        let me = Self::new(model_id, dimension, || Err("unreachable".into()));
        let _ = me.loaded.set(Ok(embedder));
        me
    }

    /// Whether the model has been loaded.
    pub fn is_loaded(&self) -> bool {
        matches!(self.loaded.get(), Some(Ok(_)))
    }

    fn get(&self) -> PortResult<Arc<dyn Embedder>> {
        self.loaded
            .get_or_init(|| (self.loader)())
            .clone()
            // The model is not there, or does not load: nothing waiting fixes.
            .map_err(|e| PortError::failed_precondition("embedding model", e))
    }

    /// The loaded model, once its dimension is known to be the index's.
    fn checked(&self) -> PortResult<Arc<dyn Embedder>> {
        let embedder = self.get()?;
        if embedder.dimension() != self.dimension {
            return Err(PortError::failed_precondition(
                "embedding model",
                format!(
                    "{} makes {}-dimensional vectors, the index holds {}",
                    embedder.model_id(),
                    embedder.dimension(),
                    self.dimension
                ),
            ));
        }
        Ok(embedder)
    }
}

#[async_trait::async_trait]
impl Embedder for LazyEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    async fn embed(&self, texts: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.checked()?.embed(texts).await
    }
    async fn embed_queries(&self, queries: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.checked()?.embed_queries(queries).await
    }
}

/// Limits of one embedding call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedBatching {
    /// Texts per call at most.
    pub max_texts: usize,
    /// Estimated tokens (bytes / 4) per call at most; one text over it goes
    /// alone.
    pub max_tokens: usize,
    /// Calls running at once (an API keeps several requests in flight; the
    /// local model takes one call at a time).
    pub concurrent_calls: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedder_tag_changes_with_what_changes_the_vectors() {
        let local = EmbeddingConfig {
            precision: EmbeddingPrecision::Fp32,
            ..EmbeddingConfig::default()
        };
        assert_eq!(embedder_tag(&local, "m"), "m@256");
        let int8 = EmbeddingConfig {
            precision: EmbeddingPrecision::Int8,
            ..EmbeddingConfig::default()
        };
        assert_eq!(embedder_tag(&int8, "m"), "m@256+int8.1");
        assert_eq!(embedder_tag(&EmbeddingConfig::default(), "m"), "m@256");
        // auto is one of the two, as this CPU decides.
        let auto = embedder_tag(
            &EmbeddingConfig {
                precision: EmbeddingPrecision::Auto,
                ..EmbeddingConfig::default()
            },
            "m",
        );
        let expected = if Precision::int8_is_fast() {
            "m@256+int8.1"
        } else {
            "m@256"
        };
        assert_eq!(auto, expected);
        let shorter = EmbeddingConfig {
            max_tokens: 128,
            ..EmbeddingConfig::default()
        };
        assert_ne!(embedder_tag(&shorter, "m"), embedder_tag(&local, "m"));

        let http = EmbeddingConfig {
            provider: EmbeddingProvider::Http,
            ..EmbeddingConfig::default()
        };
        assert_eq!(embedder_tag(&http, "http:e5"), "http:e5");
        let passages = EmbeddingConfig {
            document_prefix: "passage: ".into(),
            ..http.clone()
        };
        let typed = EmbeddingConfig {
            document_input_type: Some("passage".into()),
            ..http.clone()
        };
        let queries_only = EmbeddingConfig {
            query_prefix: "query: ".into(),
            ..http.clone()
        };
        assert_ne!(embedder_tag(&passages, "http:e5"), "http:e5");
        assert_ne!(embedder_tag(&typed, "http:e5"), "http:e5");
        assert_ne!(
            embedder_tag(&typed, "http:e5"),
            embedder_tag(&passages, "http:e5")
        );
        assert_eq!(
            embedder_tag(&queries_only, "http:e5"),
            "http:e5",
            "queries are not stored"
        );
    }
}
