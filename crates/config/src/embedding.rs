//! `[embedding]`: the embedding model, local or behind an HTTP API.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::bad;

/// `[embedding]`: the local embedding model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// Directory with `model.safetensors`, `config.json` and `tokenizer.json`
    /// of a BERT or MPNet model (`local`). Default: the directory
    /// `tools/fetch-model.sh` puts the model `model` in,
    /// `~/.cache/weft/models/<model>` (all-MiniLM-L6-v2 when `model` is
    /// unset).
    pub model_dir: Option<PathBuf>,
    /// Texts are truncated at this many tokens.
    pub max_tokens: usize,
    /// `local`: the arithmetic of the model's linear layers: `fp32` (the
    /// default), `int8` (about twice the throughput on CPUs with 8-bit
    /// dot-product instructions; retrieval within about .01 nDCG@10 of
    /// fp32, not within the .005 weft asks of a default: bench/RESULTS.md)
    /// or `auto` (`int8` on a CPU with AVX-512 VNNI or AVX-VNNI, else
    /// `fp32`). It enters the index identity: documents embedded in another
    /// precision are embedded again.
    pub precision: EmbeddingPrecision,
    /// `local`: what weft learned about queries (issue 34;
    /// `tools/train/README.md`), applied to query vectors only: `auto` (the
    /// default: weft's adapter for the loaded model, if it has one:
    /// `weft-query-4` for all-MiniLM-L6-v2, none for other models), `none`
    /// (the untouched model) or an adapter's name: the query encoders
    /// `weft-query-4` and `weft-query-3` (the model's top two layers
    /// fine-tuned for queries, taken 0.35 and 0.5 of the way; their own
    /// ONNX session, which a search or the query service builds in place of
    /// the model's own and an index run never builds; a process doing both
    /// holds two, +120 to +240 MB of memory) or the
    /// linear maps `weft-query-2` and `weft-query-1`. `weft-query-4` gains
    /// on all twelve dev corpora; the others lose on one more than a default
    /// may (redux toolkit for `weft-query-3`, rxjs for `weft-query-2`;
    /// bench/RESULTS.md).
    /// Chunks are embedded the same either way, so changing it needs no
    /// re-index.
    pub query_adapter: String,
    /// Chunks embedded per call (per request, for `http`).
    pub batch_size: usize,
    /// `local` (the model in `model_dir`, in-process) or `http` (an
    /// OpenAI-compatible `/v1/embeddings` API at `url`).
    pub provider: EmbeddingProvider,
    /// Base URL of the embeddings API (`http`).
    pub url: Option<String>,
    /// `local`: the model, by name: `all-MiniLM-L6-v2` (the default) or
    /// `all-mpnet-base-v2` (stronger, slower), as fetched by
    /// `tools/fetch-model.sh MODEL`; it names the model directory (so the
    /// model the index records). `http`: the model name sent to the API.
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (`http`); none
    /// sends no key.
    pub api_key_env: Option<String>,
    /// Vector dimension of the API's model; unset: asked of the API at start.
    pub dimension: Option<usize>,
    /// Requests in flight at once (`http`).
    pub max_in_flight: usize,
    /// Seconds allowed per request (`http`).
    pub timeout_secs: u64,
    /// Retries of a request after 429, 5xx or a timeout (`http`).
    pub max_retries: u32,
    /// Put before every query text (`http`), for models trained with
    /// prefixed inputs: e5's `"query: "`, bge's retrieval instruction.
    pub query_prefix: String,
    /// Put before every chunk's text (`http`): e5's `"passage: "`.
    pub document_prefix: String,
    /// Sent as `input_type` with query requests (`http`), for APIs that
    /// take one (`"query"`); unset: not sent.
    pub query_input_type: Option<String>,
    /// Sent as `input_type` with chunk requests (`http`): `"passage"` or
    /// `"document"`, as the API names it; unset: not sent.
    pub document_input_type: Option<String>,
    /// A budget: a `weft index` run that would embed more tokens than this
    /// (after reusing stored vectors; one token per four characters, as
    /// `weft index --dry-run` counts them) is refused before anything is
    /// embedded. Unset: no limit. `weft index --max-embed-tokens` sets it
    /// for one run.
    pub max_embed_tokens: Option<u64>,
    /// What the embedding API charges per million tokens, in any currency:
    /// `weft index --dry-run` then prints the estimated cost. Unset: no
    /// cost is shown.
    pub price_per_million_tokens: Option<f64>,
}

/// The local model used when `embedding.model` is unset.
pub const DEFAULT_LOCAL_MODEL: &str = "all-MiniLM-L6-v2";

impl EmbeddingConfig {
    /// Where `tools/fetch-model.sh` puts the local model `name`:
    /// `~/.cache/weft/models/<name>`.
    pub fn fetched_model_dir(name: &str) -> PathBuf {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        home.join(".cache/weft/models").join(name)
    }

    /// For the local provider with `model` named and no `model_dir`: sets
    /// `model_dir` to where that model is fetched.
    pub(crate) fn resolve_model_dir(&mut self) {
        if self.provider == EmbeddingProvider::Local
            && self.model_dir.is_none()
            && let Some(model) = &self.model
        {
            self.model_dir = Some(Self::fetched_model_dir(model));
        }
    }

    /// Checks the section: sizes and limits, what the provider needs (an
    /// API's URL and model; a local model's name, consistent with
    /// `model_dir`).
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.max_tokens < 8 {
            return bad("embedding.max_tokens", "must be at least 8");
        }
        if self.batch_size == 0 {
            return bad("embedding.batch_size", "must be at least 1");
        }
        if self.query_adapter.trim().is_empty() {
            return bad(
                "embedding.query_adapter",
                "must be none, auto or an adapter's name",
            );
        }
        if self.provider == EmbeddingProvider::Http
            && !matches!(self.query_adapter.trim(), "auto" | "none")
        {
            return bad(
                "embedding.query_adapter",
                "applies to the local model only (embedding.provider is http)",
            );
        }
        if self.provider == EmbeddingProvider::Http && self.precision != EmbeddingPrecision::Fp32 {
            return bad(
                "embedding.precision",
                "applies to the local model only (embedding.provider is http)",
            );
        }
        if self.provider == EmbeddingProvider::Http {
            if self.url.as_deref().is_none_or(|u| u.trim().is_empty()) {
                return bad(
                    "embedding.url",
                    "is required when embedding.provider is http",
                );
            }
            if self.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
                return bad(
                    "embedding.model",
                    "is required when embedding.provider is http",
                );
            }
        }
        if self.provider == EmbeddingProvider::Local
            && let Some(model) = &self.model
        {
            if model.is_empty() || model.contains(['/', '\\']) || model.starts_with('.') {
                return bad(
                    "embedding.model",
                    "must be a model name such as all-MiniLM-L6-v2 or all-mpnet-base-v2 (a directory goes in embedding.model_dir)",
                );
            }
            if let Some(dir) = &self.model_dir
                && dir.file_name() != Some(std::ffi::OsStr::new(model))
            {
                return bad(
                    "embedding.model",
                    "names the model, and embedding.model_dir is a directory of another name: set one of them",
                );
            }
        }
        if self.dimension == Some(0) {
            return bad("embedding.dimension", "must be at least 1");
        }
        if self.max_in_flight == 0 {
            return bad("embedding.max_in_flight", "must be at least 1");
        }
        if self.timeout_secs == 0 {
            return bad("embedding.timeout_secs", "must be at least 1");
        }
        if self.max_embed_tokens == Some(0) {
            return bad(
                "embedding.max_embed_tokens",
                "must be at least 1 (leave it unset for no limit)",
            );
        }
        if self
            .price_per_million_tokens
            .is_some_and(|p| !p.is_finite() || p < 0.0)
        {
            return bad(
                "embedding.price_per_million_tokens",
                "must be a number of at least 0",
            );
        }
        Ok(())
    }
}

/// `embedding.precision`: the local model's arithmetic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingPrecision {
    /// `int8` where the CPU multiplies 8-bit integers fast, else `fp32`.
    Auto,
    /// 32-bit floats: the model's weights as published (the default).
    #[default]
    Fp32,
    /// 8-bit integer products (weights per channel, activations per pass).
    Int8,
}

/// Where embeddings come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingProvider {
    /// The local model, in-process (ONNX Runtime, `weft-embed-local`).
    #[default]
    Local,
    /// An OpenAI-compatible embeddings API.
    Http,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        Self {
            model_dir: None,
            max_tokens: 256,
            precision: EmbeddingPrecision::Fp32,
            query_adapter: "auto".to_owned(),
            batch_size: 64,
            provider: EmbeddingProvider::Local,
            url: None,
            model: None,
            api_key_env: None,
            dimension: None,
            max_in_flight: 4,
            timeout_secs: 60,
            max_retries: 5,
            query_prefix: String::new(),
            document_prefix: String::new(),
            query_input_type: None,
            document_input_type: None,
            max_embed_tokens: None,
            price_per_million_tokens: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_refused, load_toml};

    #[test]
    fn the_query_adapter_is_automatic_and_local_only() {
        let config = load_toml("").unwrap();
        assert_eq!(config.embedding.query_adapter, "auto");
        let config = load_toml("[embedding]\nquery_adapter = \"none\"\n").unwrap();
        assert_eq!(config.embedding.query_adapter, "none");
        assert_refused(&[
            (
                "[embedding]\nquery_adapter = \" \"\n",
                "embedding.query_adapter",
            ),
            (
                "[embedding]\nprovider = \"http\"\nurl = \"http://x\"\nmodel = \"e5\"\nquery_adapter = \"weft-query-1\"\n",
                "embedding.query_adapter",
            ),
        ]);
        // `auto` with an API model is no adapter: nothing to refuse.
        assert!(
            load_toml(
                "[embedding]\nprovider = \"http\"\nurl = \"http://x\"\nmodel = \"e5\"\nquery_adapter = \"auto\"\n"
            )
            .is_ok()
        );
    }

    #[test]
    fn the_local_model_is_chosen_by_name() {
        let config = load_toml("[embedding]\nmodel = \"all-mpnet-base-v2\"\n").unwrap();
        let model_dir = config.embedding.model_dir.expect("resolved");
        assert!(
            model_dir.ends_with(".cache/weft/models/all-mpnet-base-v2"),
            "{}",
            model_dir.display()
        );
        assert_eq!(config.embedding.model.as_deref(), Some("all-mpnet-base-v2"));

        assert_refused(&[
            ("[embedding]\nmodel = \"../x\"\n", "embedding.model"),
            (
                "[embedding]\nmodel = \"all-mpnet-base-v2\"\nmodel_dir = \"/m/all-MiniLM-L6-v2\"\n",
                "embedding.model",
            ),
        ]);
        // The same name in both is consistent; an http model name is no directory.
        assert!(load_toml("[embedding]\nmodel = \"m\"\nmodel_dir = \"/models/m\"\n").is_ok());
        let config =
            load_toml("[embedding]\nprovider = \"http\"\nurl = \"http://x\"\nmodel = \"org/e5\"\n")
                .unwrap();
        assert_eq!(config.embedding.model_dir, None);
    }

    #[test]
    fn a_token_budget_and_a_price_are_checked() {
        let config =
            load_toml("[embedding]\nmax_embed_tokens = 2000000\nprice_per_million_tokens = 0.02\n")
                .unwrap();
        assert_eq!(config.embedding.max_embed_tokens, Some(2_000_000));
        assert_eq!(config.embedding.price_per_million_tokens, Some(0.02));
        assert_refused(&[
            (
                "[embedding]\nmax_embed_tokens = 0\n",
                "embedding.max_embed_tokens",
            ),
            (
                "[embedding]\nprice_per_million_tokens = -1.0\n",
                "embedding.price_per_million_tokens",
            ),
            (
                "[embedding]\nmax_embed_tokens = -5\n",
                "embedding.max_embed_tokens",
            ),
        ]);
    }
}
