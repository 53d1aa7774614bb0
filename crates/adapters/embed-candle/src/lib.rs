//! # weft-embed-candle
//!
//! Sentence embeddings computed in-process with [candle]: a BERT-family
//! model in safetensors (all-MiniLM-L6-v2 by default), mean-pooled over the
//! attention mask and L2-normalised. Batches are padded to their longest
//! text; texts are truncated at `max_tokens`.
//!
//! The model directory holds `config.json`, `tokenizer.json` and
//! `model.safetensors`; `tools/fetch-model.sh` fetches all-MiniLM-L6-v2 and
//! checks its weights.
//!
//! [candle]: https://github.com/huggingface/candle

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The command that fetches the default model, for error messages.
pub const FETCH_HINT: &str = "tools/fetch-model.sh";

/// The default truncation, in tokens.
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Texts embedded per forward pass. On CPU, small batches beat large ones:
/// less padding and no huge attention temporaries (`embed-throughput` on 256
/// guava chunks: unsorted 32 → 5.9 chunks/s, 16 → 6.9, 8 → 7.3, 4 → 7.8;
/// sorted by length, as [`LocalEmbedder::embed`] does: 8 → 10.8, 4 → 10.3).
const BATCH: usize = 8;

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file of the model is missing.
    #[error(
        "no embedding model in {dir}: {file} is missing; fetch all-MiniLM-L6-v2 with `{FETCH_HINT} {dir}`"
    )]
    Missing {
        /// The model directory.
        dir: PathBuf,
        /// The missing file.
        file: &'static str,
    },
    /// A file is there but cannot be used.
    #[error("embedding model in {dir}: {file}: {message}")]
    Invalid {
        /// The model directory.
        dir: PathBuf,
        /// The file at fault.
        file: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(String);

/// A loaded BERT-family sentence-embedding model.
#[derive(Clone)]
pub struct LocalEmbedder {
    model: std::sync::Arc<BertModel>,
    tokenizer: Tokenizer,
    device: Device,
    model_id: String,
    dimension: usize,
    max_tokens: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir`, truncating texts at `max_tokens` (at most
    /// the model's position limit).
    pub fn load(dir: &Path, max_tokens: usize) -> Result<Self, LoadError> {
        let path = |file: &'static str| {
            let p = dir.join(file);
            if p.is_file() {
                Ok(p)
            } else {
                Err(LoadError::Missing {
                    dir: dir.to_owned(),
                    file,
                })
            }
        };
        let invalid = |file: &'static str, message: String| LoadError::Invalid {
            dir: dir.to_owned(),
            file,
            message,
        };
        let (config_path, tokenizer_path, weights_path) = (
            path("config.json")?,
            path("tokenizer.json")?,
            path("model.safetensors")?,
        );

        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|e| invalid("config.json", e.to_string()))?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| invalid("config.json", e.to_string()))?;
        let positions = serde_json::from_str::<serde_json::Value>(&config_text)
            .ok()
            .and_then(|v| v.get("max_position_embeddings")?.as_u64())
            .unwrap_or(512) as usize;
        let hidden = serde_json::from_str::<serde_json::Value>(&config_text)
            .ok()
            .and_then(|v| v.get("hidden_size")?.as_u64())
            .ok_or_else(|| invalid("config.json", "no hidden_size".into()))?
            as usize;
        if max_tokens == 0 || max_tokens > positions {
            return Err(invalid(
                "config.json",
                format!("max_tokens {max_tokens} must be between 1 and {positions}"),
            ));
        }

        let device = Device::Cpu;
        // SAFETY: the weights file is memory-mapped read-only; weft does not
        // modify it while the model is loaded.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights_path], DTYPE, &device) }
            .map_err(|e| invalid("model.safetensors", e.to_string()))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| invalid("model.safetensors", e.to_string()))?;

        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| invalid("tokenizer.json", e.to_string()))?;
        // The shipped tokenizer pads every text to 128 tokens; pad each batch
        // to its longest text instead, and truncate at max_tokens.
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| invalid("tokenizer.json", e.to_string()))?;

        let model_id = Self::model_id_of(dir);
        Ok(LocalEmbedder {
            model: std::sync::Arc::new(model),
            tokenizer,
            device,
            model_id,
            dimension: hidden,
            max_tokens,
        })
    }

    /// The id a model in `dir` gets: the directory's name (known without loading it).
    pub fn model_id_of(dir: &Path) -> String {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        dir.file_name()
            .map_or_else(|| "local".into(), |n| n.to_string_lossy().into_owned())
    }

    /// The model's name (its directory's name).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The length of every embedding.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Texts are truncated at this many tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Embeds `texts`: one unit-length vector of [`Self::dimension`] floats each.
    ///
    /// Texts are batched by length (a batch pads to its longest text), and
    /// the vectors come back in the order of `texts`.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH) {
            let batch_texts: Vec<&str> = batch.iter().map(|&i| texts[i]).collect();
            let vectors = self
                .embed_batch(&batch_texts)
                .map_err(|e| EmbedError(e.to_string()))?;
            for (&i, vector) in batch.iter().zip(vectors) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    fn embed_batch(
        &self,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true)?;
        let rows = |f: &dyn Fn(&tokenizers::Encoding) -> Vec<u32>| -> candle_core::Result<Tensor> {
            let rows: Vec<Tensor> = encodings
                .iter()
                .map(|e| Tensor::new(f(e).as_slice(), &self.device))
                .collect::<candle_core::Result<_>>()?;
            Tensor::stack(&rows, 0)
        };
        let ids = rows(&|e| e.get_ids().to_vec())?;
        let type_ids = rows(&|e| e.get_type_ids().to_vec())?;
        let mask = rows(&|e| e.get_attention_mask().to_vec())?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?;
        // Mean over the tokens the mask keeps, then L2 normalisation.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}

/// The embedder port over [`LocalEmbedder`]: each call runs on tokio's
/// blocking pool.
#[async_trait::async_trait]
impl weft_core::ports::Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        LocalEmbedder::model_id(self)
    }
    fn dimension(&self) -> usize {
        LocalEmbedder::dimension(self)
    }
    async fn embed(&self, texts: &[String]) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        const COMPONENT: &str = "embedder (candle)";
        let (model, texts) = (self.clone(), texts.to_vec());
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            model.embed(&refs)
        })
        .await
        .map_err(|e| weft_core::ports::PortError::new(COMPONENT, e))?
        .map_err(|e| weft_core::ports::PortError::new(COMPONENT, e))
    }
}
