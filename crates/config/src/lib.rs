//! # weft-config
//!
//! weft's configuration, from three layers, later ones winning:
//!
//! 1. built-in defaults;
//! 2. a TOML file: the one given (`--config`), else `weft.toml` in the
//!    current directory when there is one;
//! 3. environment variables `WEFT__<SECTION>__<KEY>`, e.g.
//!    `WEFT__CHUNKING__CODE__MAX_CHARS=1500`. Lists are comma-separated.
//!
//! The result is validated; errors name the file and the key.
//!
//! ```toml
//! # weft.toml
//! [chunking.code]
//! max_chars = 1500
//! min_chars = 300
//!
//! [chunking]
//! api_reference_paths = ["docs/api/**"]
//! ```
//!
//! One module per section of `weft.toml`, each with its type (or types)
//! and the checks of its own settings (`validate`, naming the key):
//!
//! | section          | module          | type                       |
//! |------------------|-----------------|----------------------------|
//! | `[chunking]`     | `chunking`      | [`ChunkingConfig`]         |
//! | `[data]`         | `data`          | [`DataConfig`]             |
//! | `[sources]`      | `sources`       | [`SourcesConfig`]          |
//! | `[crawl]`        | `crawl`, `cidr`, `site_credentials` | [`CrawlConfig`], [`Cidr`], [`SiteCredential`] |
//! | `[embedding]`    | `embedding`     | [`EmbeddingConfig`]        |
//! | `[retrieval]`    | `retrieval`     | [`weft_core::retrieval::RetrievalConfig`] (checks only) |
//! | `[rerank]`       | `rerank`        | [`RerankConfig`]           |
//! | `[nats]`         | `nats`          | [`NatsConfig`]             |
//! | `[query]`        | `query`         | [`QueryServiceConfig`]     |
//! | `[embedder]`     | `embedder`      | [`EmbedderServiceConfig`]  |
//! | `[telemetry]`    | `telemetry`     | [`TelemetryConfig`]        |
//! | `[stores]`       | `stores`        | [`StoresConfig`]           |
//! | `[generations]`  | `generations`   | [`GenerationsConfig`]      |
//!
//! This file holds the whole ([`WeftConfig`]) and the layering ([`load`]);
//! `error` the two error types.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod chunking;
mod cidr;
mod crawl;
mod data;
mod embedder;
mod embedding;
mod error;
mod generations;
mod locations;
mod nats;
mod query;
mod rerank;
mod retrieval;
mod site_credentials;
mod sources;
mod stores;
mod telemetry;
#[cfg(test)]
mod test_support;

pub use chunking::{ChunkingConfig, CodeConfig, LinesConfig, MarkdownConfig, TextConfig};
pub use cidr::Cidr;
pub use crawl::{CrawlConfig, GIT_PROTOCOLS};
pub use data::DataConfig;
pub use embedder::EmbedderServiceConfig;
pub use embedding::{DEFAULT_LOCAL_MODEL, EmbeddingConfig, EmbeddingPrecision, EmbeddingProvider};
pub use error::{ConfigError, InvalidSetting};
pub use generations::{GenerationRegistryKind, GenerationsConfig};
pub use locations::{Locations, default_data_dir, default_model_dir};
pub use nats::NatsConfig;
pub use query::{QueryAuth, QueryServiceConfig};
pub use rerank::{RerankConfig, RerankKind};
pub use site_credentials::{Secret, SiteAuth, SiteCredential};
pub use sources::SourcesConfig;
pub use stores::{StoresConfig, TextStoreKind, VectorStoreKind};
pub use telemetry::TelemetryConfig;

/// The file looked for in the current directory when none is given.
pub const DEFAULT_FILE: &str = "weft.toml";

/// The prefix of environment variables (`WEFT__CHUNKING__CODE__MAX_CHARS`).
pub const ENV_PREFIX: &str = "WEFT";

/// All of weft's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WeftConfig {
    /// How documents are split into chunks.
    pub chunking: ChunkingConfig,
    /// Where the index lives.
    pub data: DataConfig,
    /// Which files of a directory or repository are indexed.
    pub sources: SourcesConfig,
    /// How a documentation site is crawled.
    pub crawl: CrawlConfig,
    /// The embedding model.
    pub embedding: EmbeddingConfig,
    /// Fusion, boosts and neighbour expansion (DESIGN §5).
    pub retrieval: weft_core::retrieval::RetrievalConfig,
    /// The optional reranker.
    pub rerank: RerankConfig,
    /// NATS JetStream, for the distributed services.
    pub nats: NatsConfig,
    /// The gRPC query service (`weft-query`, `weft serve`).
    pub query: QueryServiceConfig,
    /// The embedder service's batching across documents.
    pub embedder: EmbedderServiceConfig,
    /// Metrics endpoint of the services.
    pub telemetry: TelemetryConfig,
    /// Which vector and text stores hold the index.
    pub stores: StoresConfig,
    /// Index generations: where the live one is recorded, how long a
    /// retired one is kept.
    pub generations: GenerationsConfig,
}

impl WeftConfig {
    /// Checks every setting; the first bad one is named in the error.
    ///
    /// Each section checks its own settings. A check that relates two
    /// sections would go in `validate_across_sections`; there
    /// is none today.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        self.chunking.validate()?;
        self.data.validate()?;
        self.crawl.validate()?;
        self.embedding.validate()?;
        self.rerank.validate()?;
        self.nats.validate()?;
        self.query.validate()?;
        self.telemetry.validate()?;
        self.embedder.validate()?;
        self.stores.validate()?;
        retrieval::validate(&self.retrieval)?;
        self.sources.validate()?;
        self.generations.validate()?;
        self.validate_across_sections()
    }

    /// The checks that need settings of more than one section, run after
    /// every section passed its own. None yet: every rule so far concerns
    /// one section (`query.auth` and `query.api_keys_file`, `stores.vector`
    /// and `stores.qdrant_url`, `embedding.model` and
    /// `embedding.model_dir` …). A new one goes here, so that the sections
    /// stay independent of each other.
    fn validate_across_sections(&self) -> Result<(), InvalidSetting> {
        Ok(())
    }
}

/// Where the configuration came from, for messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The configuration.
    pub config: WeftConfig,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
}

/// Loads the configuration: defaults, then `file` (or `./weft.toml` when it
/// exists), then the process environment.
pub fn load(file: Option<&Path>) -> Result<Loaded, ConfigError> {
    load_with_env(file, std::env::vars())
}

/// Like [`load`], with the environment given explicitly (for tests).
pub fn load_with_env(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Loaded, ConfigError> {
    let file = match file {
        Some(path) if !path.exists() => return Err(ConfigError::MissingFile(path.to_owned())),
        Some(path) => Some(path.to_owned()),
        None => Some(PathBuf::from(DEFAULT_FILE)).filter(|p| p.exists()),
    };
    let source_name = match &file {
        Some(path) => format!("{} (with WEFT__ environment variables)", path.display()),
        None => "configuration (defaults and WEFT__ environment variables)".to_owned(),
    };
    let env: config::Map<String, String> = env
        .into_iter()
        .filter(|(k, _)| k.starts_with(&format!("{ENV_PREFIX}__")))
        .collect();
    let mut builder = config::Config::builder();
    if let Some(path) = &file {
        builder =
            builder.add_source(config::File::from(path.as_path()).format(config::FileFormat::Toml));
    }
    builder = builder.add_source(
        config::Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true)
            .list_separator(",")
            .with_list_parse_key("chunking.api_reference_paths")
            .with_list_parse_key("sources.include")
            .with_list_parse_key("sources.exclude")
            .with_list_parse_key("sources.skip_dirs")
            .with_list_parse_key("crawl.allow_private_networks")
            .with_list_parse_key("crawl.content_types")
            .with_list_parse_key("crawl.git_protocols")
            .source(Some(env)),
    );
    let malformed = |e: config::ConfigError| ConfigError::Malformed {
        source_name: source_name.clone(),
        message: e.to_string(),
    };
    let config: WeftConfig = builder
        .build()
        .map_err(malformed)?
        .try_deserialize()
        .map_err(malformed)?;
    config.validate().map_err(|setting| ConfigError::Invalid {
        source_name: source_name.clone(),
        setting,
    })?;
    let mut config = config;
    config.embedding.resolve_model_dir();
    Ok(Loaded { config, file })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
        let path = dir.path().join("weft.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn no_env() -> Vec<(String, String)> {
        Vec::new()
    }

    #[test]
    fn defaults_without_file_or_env() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "");
        let loaded = load_with_env(Some(&path), no_env()).unwrap();
        assert_eq!(loaded.config, WeftConfig::default());
    }

    #[test]
    fn file_then_env_override_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            "[chunking.code]\nmax_chars = 2000\nmin_chars = 100\n[chunking]\napi_reference_paths = [\"doc/api/**\"]\n",
        );
        let env = vec![
            (
                "WEFT__CHUNKING__CODE__MAX_CHARS".to_owned(),
                "3000".to_owned(),
            ),
            (
                "WEFT__CHUNKING__LINES__WINDOW_LINES".to_owned(),
                "80".to_owned(),
            ),
            ("UNRELATED".to_owned(), "x".to_owned()),
        ];
        let config = load_with_env(Some(&path), env).unwrap().config;
        assert_eq!(config.chunking.code.max_chars, 3000);
        assert_eq!(config.chunking.code.min_chars, 100);
        assert_eq!(config.chunking.lines.window_lines, 80);
        assert_eq!(
            config.chunking.api_reference_paths,
            vec!["doc/api/**".to_owned()]
        );
    }

    #[test]
    fn env_lists_are_comma_separated() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "");
        let env = vec![(
            "WEFT__CHUNKING__API_REFERENCE_PATHS".to_owned(),
            "a/**,b/**".to_owned(),
        )];
        let config = load_with_env(Some(&path), env).unwrap().config;
        assert_eq!(
            config.chunking.api_reference_paths,
            vec!["a/**".to_owned(), "b/**".to_owned()]
        );
    }

    #[test]
    fn malformed_values_name_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "[chunking.code]\nmax_chars = \"big\"\n");
        let err = load_with_env(Some(&path), no_env())
            .unwrap_err()
            .to_string();
        assert!(err.contains("weft.toml"), "{err}");
        assert!(err.contains("max_chars"), "{err}");

        let path = write(&dir, "[chunking.code]\nmax_char = 10\n");
        let err = load_with_env(Some(&path), no_env())
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_char"), "{err}");

        let path = write(&dir, "[chunking\n");
        let err = load_with_env(Some(&path), no_env())
            .unwrap_err()
            .to_string();
        assert!(err.contains("weft.toml"), "{err}");
    }

    #[test]
    fn invalid_settings_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            "[chunking.text]\ntarget_chars = 100\noverlap_chars = 100\n",
        );
        let err = load_with_env(Some(&path), no_env())
            .unwrap_err()
            .to_string();
        assert!(err.contains("chunking.text.overlap_chars"), "{err}");
    }

    #[test]
    fn a_missing_named_file_is_an_error() {
        let err = load_with_env(Some(Path::new("/nonexistent/weft.toml")), no_env()).unwrap_err();
        assert!(matches!(err, ConfigError::MissingFile(_)));
    }

    #[test]
    fn the_readme_example_is_valid_and_means_what_it_says() {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("```toml\n[data]")
            .expect("README has the config example")
            + 8;
        let example = &readme[start..];
        let example = &example[..example.find("```").expect("closed block")];
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, example);
        let config = load_with_env(Some(&path), Vec::new()).unwrap().config;
        assert_eq!(config.data.dir.as_deref(), Some(Path::new("/var/lib/weft")));
        assert_eq!(config.sources.exclude, ["**/*.min.js"]);
        // The example spells out the defaults.
        assert_eq!(
            config.retrieval,
            weft_core::retrieval::RetrievalConfig::default()
        );
        assert_eq!(config.retrieval.adjacency.code_window, 1);
        assert_eq!(config.rerank.kind, RerankKind::None);
        assert_eq!(config.chunking.code.max_chars, 1200);
    }
}
