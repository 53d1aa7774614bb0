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

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
mod chunking;

pub use chunking::{
    ChunkingConfig, CodeConfig, InvalidSetting, LinesConfig, MarkdownConfig, TextConfig,
};

mod cidr;
pub use cidr::Cidr;
mod locations;
pub use locations::{Locations, default_data_dir, default_model_dir};

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

/// Where the record of the live index generation is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GenerationRegistryKind {
    /// A NATS key-value entry (`nats.generations_bucket`), shared by the
    /// distributed services.
    Nats,
    /// `generations.json` in the data directory (what `weft index` writes).
    DataDir,
}

/// `[generations]`: index generations (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerationsConfig {
    /// Where `weft-query` reads which generation is live: `nats` (the
    /// default: the crawler's `--rebuild` switches it there) or `data_dir`
    /// (an index `weft index` wrote into server stores). `weft serve` and
    /// `weft mcp` always read the data directory's.
    pub registry: GenerationRegistryKind,
    /// Seconds a retired generation of server stores is kept after the
    /// switch, so queries that started on it finish (and a switch can be
    /// undone by hand) before `weft-crawler generations gc` removes it.
    pub grace_secs: u64,
}

impl Default for GenerationsConfig {
    fn default() -> Self {
        Self {
            registry: GenerationRegistryKind::Nats,
            grace_secs: 600,
        }
    }
}

/// `[stores]`: where the index lives. `embedded` (the default) keeps the
/// vector index (qdrant-edge) and the text index (tantivy) under
/// `data.dir`; `qdrant` and `meilisearch` use servers, which every
/// embedder and query replica then shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoresConfig {
    /// `embedded` or `qdrant`.
    pub vector: VectorStoreKind,
    /// `embedded` or `meilisearch`.
    pub text: TextStoreKind,
    /// Qdrant's gRPC URL (`http://qdrant:6334`), for `vector = "qdrant"`.
    pub qdrant_url: Option<String>,
    /// The Qdrant collection (created on first use).
    pub qdrant_collection: String,
    /// Name of the environment variable holding Qdrant's API key; none
    /// sends no key.
    pub qdrant_api_key_env: Option<String>,
    /// Meilisearch's URL (`http://meilisearch:7700`), for `text = "meilisearch"`.
    pub meili_url: Option<String>,
    /// The Meilisearch index uid (created on first use).
    pub meili_index: String,
    /// Name of the environment variable holding Meilisearch's API key;
    /// none sends no key. The indexing side (`weft index`, the embedder)
    /// uses it; the query side too unless `meili_search_key_env` is set.
    pub meili_api_key_env: Option<String>,
    /// Name of the environment variable holding a Meilisearch key allowed
    /// only to search (actions `search`, plus `indexes.get` and
    /// `settings.get` to check the index): the query service and `weft
    /// search` use it instead of `meili_api_key_env`, and then never write
    /// to the index.
    pub meili_search_key_env: Option<String>,
}

impl StoresConfig {
    /// Whether either index is embedded, and so lives in the data directory.
    pub fn uses_data_dir(&self) -> bool {
        self.vector == VectorStoreKind::Embedded || self.text == TextStoreKind::Embedded
    }
}

impl Default for StoresConfig {
    fn default() -> Self {
        Self {
            vector: VectorStoreKind::Embedded,
            text: TextStoreKind::Embedded,
            qdrant_url: None,
            qdrant_collection: "weft_chunks".into(),
            qdrant_api_key_env: None,
            meili_url: None,
            meili_index: "weft_chunks".into(),
            meili_api_key_env: None,
            meili_search_key_env: None,
        }
    }
}

/// Where vectors are stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorStoreKind {
    /// qdrant-edge under `data.dir`.
    #[default]
    Embedded,
    /// A Qdrant server.
    Qdrant,
}

/// Where the text index is stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextStoreKind {
    /// tantivy under `data.dir`.
    #[default]
    Embedded,
    /// A Meilisearch server.
    Meilisearch,
}

/// `[nats]`: the JetStream streams, consumers and key-value bucket that join
/// the distributed services (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL(s), comma-separated.
    pub url: String,
    /// Work-queue stream of documents (`weft.docs.<project>.<document_id>`).
    pub docs_stream: String,
    /// Work-queue stream of chunk batches (`weft.chunks.<project>.<document_id>`).
    pub chunks_stream: String,
    /// Stream of messages that failed `max_deliver` times, with their error.
    pub dead_letter_stream: String,
    /// Key-value bucket of the catalog (what is indexed, by content hash);
    /// index generation N > 0 has its own, `<catalog_bucket>_g<N>`.
    pub catalog_bucket: String,
    /// Key-value bucket of the index generations record (which generation
    /// is live).
    pub generations_bucket: String,
    /// Messages a consumer may have unacknowledged at once.
    pub max_ack_pending: i64,
    /// Deliveries of one message before it goes to the dead-letter stream.
    pub max_deliver: i64,
    /// Seconds before an unacknowledged message is delivered again.
    pub ack_wait_secs: u64,
    /// Messages pulled per fetch.
    pub fetch_batch: usize,
}

impl Default for NatsConfig {
    fn default() -> Self {
        Self {
            url: "nats://127.0.0.1:4222".into(),
            docs_stream: "WEFT_DOCS".into(),
            chunks_stream: "WEFT_CHUNKS".into(),
            dead_letter_stream: "WEFT_DEAD".into(),
            catalog_bucket: "weft-catalog".into(),
            generations_bucket: "weft-generations".into(),
            max_ack_pending: 64,
            max_deliver: 5,
            ack_wait_secs: 60,
            fetch_batch: 16,
        }
    }
}

/// `[query]`: the gRPC query service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryServiceConfig {
    /// Address the gRPC server listens on.
    pub listen: String,
    /// Requests running longer are cancelled (DEADLINE_EXCEEDED); a client's
    /// shorter `grpc-timeout` wins.
    pub request_timeout_secs: u64,
    /// Largest request or response message, in bytes.
    pub max_message_bytes: usize,
    /// Longest query text a search may send, in characters; longer ones are
    /// refused (INVALID_ARGUMENT naming `query`). The model reads at most
    /// its first few hundred tokens anyway.
    pub max_query_chars: usize,
    /// Most hits one search may ask for (`limit`); more is INVALID_ARGUMENT.
    pub max_limit: u32,
    /// Who may call the query API: `api_keys` (bearer API keys from
    /// `api_keys_file`, each bound to projects) or `none` (anyone who
    /// reaches `listen`, logged as a warning at start). Unset: `weft-query`
    /// requires keys (it fails to start without `api_keys_file`); `weft
    /// serve` uses the keys of `api_keys_file` when set, else serves
    /// without authentication on a loopback address only.
    pub auth: Option<QueryAuth>,
    /// The API keys file (TOML, `[[keys]]` entries with salted SHA-256
    /// hashes, as `weft keys new` prints them), e.g. mounted from a
    /// Kubernetes Secret. Re-read when it changes: keys are added, rotated
    /// and revoked without a restart.
    pub api_keys_file: Option<PathBuf>,
    /// Seconds between checks of `api_keys_file` for changes.
    pub api_keys_reload_secs: u64,
    /// Requests per second each API key may make (token bucket), unless
    /// its entry sets its own; unset: no limit. Over it: RESOURCE_EXHAUSTED.
    pub rate_limit_per_sec: Option<f64>,
    /// Requests a key may make at once after being idle (the bucket's
    /// size); unset: the per-second rate, rounded up.
    pub rate_limit_burst: Option<u32>,
    /// PEM certificate chain: with `tls_key_file`, the gRPC port speaks TLS
    /// (rustls) only.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// PEM CA certificate(s): when set, clients must present a certificate
    /// signed by one of them (mutual TLS). Needs `tls_cert_file`.
    pub tls_client_ca_file: Option<PathBuf>,
}

/// `query.auth`: how callers of the query API are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryAuth {
    /// Bearer API keys from `query.api_keys_file`.
    ApiKeys,
    /// No authentication: every caller reads every project.
    None,
}

impl QueryServiceConfig {
    /// Checks the authentication, rate-limit and TLS settings.
    fn validate_security(&self) -> Result<(), InvalidSetting> {
        let bad = |key: &str, message: &str| {
            Err(InvalidSetting {
                key: key.into(),
                message: message.into(),
            })
        };
        if self.auth == Some(QueryAuth::ApiKeys) && self.api_keys_file.is_none() {
            return bad(
                "query.api_keys_file",
                "is required when query.auth is api_keys (mint keys with `weft keys new`)",
            );
        }
        if self.api_keys_reload_secs == 0 {
            return bad("query.api_keys_reload_secs", "must be at least 1");
        }
        if self.max_query_chars == 0 {
            return bad("query.max_query_chars", "must be at least 1");
        }
        if !(1..=10_000).contains(&self.max_limit) {
            return bad("query.max_limit", "must be within 1..=10000");
        }
        if let Some(rate) = self.rate_limit_per_sec
            && !(rate.is_finite() && rate > 0.0)
        {
            return bad(
                "query.rate_limit_per_sec",
                "must be a positive number (unset: no limit)",
            );
        }
        if self.rate_limit_burst == Some(0) {
            return bad("query.rate_limit_burst", "must be at least 1");
        }
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => {
                return bad("query.tls_key_file", "is required with query.tls_cert_file");
            }
            (None, Some(_)) => {
                return bad("query.tls_cert_file", "is required with query.tls_key_file");
            }
            _ => {}
        }
        if self.tls_client_ca_file.is_some() && self.tls_cert_file.is_none() {
            return bad(
                "query.tls_client_ca_file",
                "needs query.tls_cert_file and query.tls_key_file (client certificates are checked over TLS)",
            );
        }
        Ok(())
    }
}

/// `[telemetry]`: what every service exposes for operations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Address of the Prometheus `/metrics` endpoint (e.g. `0.0.0.0:9090`);
    /// none when unset.
    pub metrics_listen: Option<String>,
}

impl Default for QueryServiceConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".into(),
            request_timeout_secs: 30,
            max_message_bytes: 16 * 1024 * 1024,
            max_query_chars: weft_core::query::MAX_QUERY_CHARS,
            max_limit: weft_core::query::MAX_LIMIT as u32,
            auth: None,
            api_keys_file: None,
            api_keys_reload_secs: 5,
            rate_limit_per_sec: None,
            rate_limit_burst: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_client_ca_file: None,
        }
    }
}

/// `[embedder]`: how the embedder service batches chunks across documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedderServiceConfig {
    /// At most this many estimated tokens (4 characters each) per embedding call.
    pub max_batch_tokens: usize,
    /// How long to wait for more chunk batches before embedding a partial batch.
    pub linger_ms: u64,
}

impl Default for EmbedderServiceConfig {
    fn default() -> Self {
        Self {
            max_batch_tokens: 16_384,
            linger_ms: 100,
        }
    }
}

/// `[data]`: the data directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    /// The data directory; `--data-dir` and `WEFT_DATA_DIR` override it.
    /// Default: `$XDG_DATA_HOME/weft`, else `~/.local/share/weft`.
    pub dir: Option<PathBuf>,
}

/// `[sources]`: which files of a directory or repository are indexed.
/// `.gitignore` and hidden files are always honoured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesConfig {
    /// If not empty, only paths matching one of these globs are indexed.
    pub include: Vec<String>,
    /// Paths matching one of these globs are skipped.
    pub exclude: Vec<String>,
    /// Directory names skipped anywhere: vendored code and build output.
    pub skip_dirs: Vec<String>,
    /// Follow symlinks of a walked directory that lead outside it. Off: a
    /// tree may come from someone else (an archive, a pull request), and a
    /// link to `~/.ssh/id_rsa` would put the key into the index; such links
    /// are reported and not read. Links within the tree are followed.
    pub follow_outside_symlinks: bool,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        Self {
            include: Vec::new(),
            exclude: Vec::new(),
            skip_dirs: [
                "node_modules",
                "vendor",
                "third_party",
                "target",
                "build",
                "dist",
                "out",
                "bin",
                "obj",
                "__pycache__",
                "venv",
                "bower_components",
                "Pods",
            ]
            .map(String::from)
            .to_vec(),
            follow_outside_symlinks: false,
        }
    }
}

/// `[crawl]`: limits of a documentation-site crawl, the networks the
/// crawler may reach, and the transports the distributed crawler's git may
/// use (SECURITY.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrawlConfig {
    /// At most this many pages are fetched.
    pub max_pages: usize,
    /// Links are followed at most this many hops from the start URL.
    pub max_depth: usize,
    /// Per-request timeout in seconds, from connecting to the last byte of
    /// the body.
    pub timeout_secs: u64,
    /// Seconds to wait for a connection.
    pub connect_timeout_secs: u64,
    /// The user agent sent, and matched against robots.txt groups.
    pub user_agent: String,
    /// Networks the crawler may connect to although they are not public
    /// (loopback, RFC 1918, link-local, CGNAT, IPv6 ULA, …): CIDRs such as
    /// `"10.20.0.0/16"`, or single addresses. Empty: public addresses only.
    /// Checked on the address actually connected to, on every redirect,
    /// for sites and for the distributed crawler's git.
    pub allow_private_networks: Vec<String>,
    /// A response body larger than this (after decompression) is refused.
    pub max_page_bytes: u64,
    /// Redirects followed per request (each checked like the first URL).
    pub max_redirects: usize,
    /// Media types of pages that are fetched; others are skipped without
    /// reading their body.
    pub content_types: Vec<String>,
    /// An HTTP proxy for site crawling (`http://proxy:3128`). Unset: no
    /// proxy at all; the `HTTP(S)_PROXY` variables are ignored, since a
    /// proxy connects on the crawler's behalf, out of reach of the address
    /// check. With a proxy the check applies to the names as the crawler
    /// resolves them; the proxy must enforce its own egress policy.
    pub proxy: Option<String>,
    /// Transports the distributed crawler (`weft-crawler`) lets git use:
    /// any of `https`, `ssh`, `http`, `git`, `file`. `weft index` on your
    /// own machine allows all five; remote helpers (`ext::`, `fd::`) are
    /// never allowed.
    pub git_protocols: Vec<String>,
}

/// The transports `crawl.git_protocols` may name.
pub const GIT_PROTOCOLS: &[&str] = &["https", "ssh", "http", "git", "file"];

impl Default for CrawlConfig {
    fn default() -> Self {
        Self {
            max_pages: 1000,
            max_depth: 8,
            timeout_secs: 30,
            connect_timeout_secs: 10,
            user_agent: "weft".into(),
            allow_private_networks: Vec::new(),
            max_page_bytes: 16 * 1024 * 1024,
            max_redirects: 5,
            content_types: [
                "text/html",
                "application/xhtml+xml",
                "text/markdown",
                "text/x-markdown",
                "text/plain",
            ]
            .map(String::from)
            .to_vec(),
            proxy: None,
            git_protocols: vec!["https".into(), "ssh".into()],
        }
    }
}

impl CrawlConfig {
    /// The networks of `allow_private_networks`, parsed.
    pub fn private_network_allow_list(&self) -> Result<Vec<Cidr>, InvalidSetting> {
        self.allow_private_networks
            .iter()
            .map(|n| {
                n.parse::<Cidr>().map_err(|message| InvalidSetting {
                    key: "crawl.allow_private_networks".into(),
                    message,
                })
            })
            .collect()
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        let bad = |key: &str, message: String| {
            Err(InvalidSetting {
                key: key.into(),
                message,
            })
        };
        if self.max_pages == 0 {
            return bad("crawl.max_pages", "must be at least 1".into());
        }
        if self.timeout_secs == 0 {
            return bad("crawl.timeout_secs", "must be at least 1".into());
        }
        if self.connect_timeout_secs == 0 {
            return bad("crawl.connect_timeout_secs", "must be at least 1".into());
        }
        if self.max_page_bytes < 1024 {
            return bad("crawl.max_page_bytes", "must be at least 1024".into());
        }
        self.private_network_allow_list()?;
        if self.content_types.is_empty() {
            return bad(
                "crawl.content_types",
                "must name at least one media type".into(),
            );
        }
        for t in &self.content_types {
            let ok = t.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "/+-.".contains(c))
            });
            if !ok {
                return bad(
                    "crawl.content_types",
                    format!("{t:?} is not a media type like text/html"),
                );
            }
        }
        if let Some(proxy) = &self.proxy
            && !(proxy.starts_with("http://") || proxy.starts_with("https://"))
        {
            return bad(
                "crawl.proxy",
                format!("{proxy:?} is not an http:// or https:// proxy URL"),
            );
        }
        for p in &self.git_protocols {
            if !GIT_PROTOCOLS.contains(&p.as_str()) {
                return bad(
                    "crawl.git_protocols",
                    format!(
                        "{p:?} is not one of {}; remote helpers such as ext run commands and are never allowed",
                        GIT_PROTOCOLS.join(", ")
                    ),
                );
            }
        }
        Ok(())
    }
}

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
    fn resolve_model_dir(&mut self) {
        if self.provider == EmbeddingProvider::Local
            && self.model_dir.is_none()
            && let Some(model) = &self.model
        {
            self.model_dir = Some(Self::fetched_model_dir(model));
        }
    }
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
        }
    }
}

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

impl WeftConfig {
    /// Checks every setting; the first bad one is named in the error.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        self.chunking.validate()?;
        let bad = |key: &str, message: &str| {
            Err(InvalidSetting {
                key: key.into(),
                message: message.into(),
            })
        };
        self.crawl.validate()?;
        if self.embedding.max_tokens < 8 {
            return bad("embedding.max_tokens", "must be at least 8");
        }
        if self.embedding.batch_size == 0 {
            return bad("embedding.batch_size", "must be at least 1");
        }
        if self.embedding.provider == EmbeddingProvider::Http {
            if self
                .embedding
                .url
                .as_deref()
                .is_none_or(|u| u.trim().is_empty())
            {
                return bad(
                    "embedding.url",
                    "is required when embedding.provider is http",
                );
            }
            if self
                .embedding
                .model
                .as_deref()
                .is_none_or(|m| m.trim().is_empty())
            {
                return bad(
                    "embedding.model",
                    "is required when embedding.provider is http",
                );
            }
        }
        if self.embedding.provider == EmbeddingProvider::Local
            && let Some(model) = &self.embedding.model
        {
            if model.is_empty() || model.contains(['/', '\\']) || model.starts_with('.') {
                return bad(
                    "embedding.model",
                    "must be a model name such as all-MiniLM-L6-v2 or all-mpnet-base-v2 (a directory goes in embedding.model_dir)",
                );
            }
            if let Some(dir) = &self.embedding.model_dir
                && dir.file_name() != Some(std::ffi::OsStr::new(model))
            {
                return bad(
                    "embedding.model",
                    "names the model, and embedding.model_dir is a directory of another name: set one of them",
                );
            }
        }
        if self.embedding.dimension == Some(0) {
            return bad("embedding.dimension", "must be at least 1");
        }
        if self.embedding.max_in_flight == 0 {
            return bad("embedding.max_in_flight", "must be at least 1");
        }
        if self.embedding.timeout_secs == 0 {
            return bad("embedding.timeout_secs", "must be at least 1");
        }
        if self.rerank.kind != RerankKind::None && self.rerank.url.is_none() {
            return bad("rerank.url", "is required when rerank.kind is not none");
        }
        if self.nats.url.trim().is_empty() {
            return bad("nats.url", "must not be empty");
        }
        for (key, name) in [
            ("nats.docs_stream", &self.nats.docs_stream),
            ("nats.chunks_stream", &self.nats.chunks_stream),
            ("nats.dead_letter_stream", &self.nats.dead_letter_stream),
            ("nats.catalog_bucket", &self.nats.catalog_bucket),
        ] {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(InvalidSetting {
                    key: key.into(),
                    message: format!("{name:?} must be letters, digits, '-' or '_'"),
                });
            }
        }
        if self.nats.max_ack_pending < 1 {
            return bad("nats.max_ack_pending", "must be at least 1");
        }
        if self.nats.max_deliver < 1 {
            return bad("nats.max_deliver", "must be at least 1");
        }
        if self.nats.ack_wait_secs == 0 {
            return bad("nats.ack_wait_secs", "must be at least 1");
        }
        if self.nats.fetch_batch == 0 {
            return bad("nats.fetch_batch", "must be at least 1");
        }
        for (key, addr) in [
            ("query.listen", Some(&self.query.listen)),
            (
                "telemetry.metrics_listen",
                self.telemetry.metrics_listen.as_ref(),
            ),
        ] {
            if let Some(addr) = addr
                && addr.parse::<std::net::SocketAddr>().is_err()
            {
                return Err(InvalidSetting {
                    key: key.into(),
                    message: format!("{addr:?} is not an address like 127.0.0.1:50051"),
                });
            }
        }
        if self.query.request_timeout_secs == 0 {
            return bad("query.request_timeout_secs", "must be at least 1");
        }
        if self.query.max_message_bytes < 1024 {
            return bad("query.max_message_bytes", "must be at least 1024");
        }
        self.query.validate_security()?;
        if self.embedder.max_batch_tokens < 1 {
            return bad("embedder.max_batch_tokens", "must be at least 1");
        }
        let st = &self.stores;
        if st.vector == VectorStoreKind::Qdrant {
            if st.qdrant_url.as_deref().is_none_or(|u| u.trim().is_empty()) {
                return bad(
                    "stores.qdrant_url",
                    "is required when stores.vector is qdrant",
                );
            }
            if st.qdrant_collection.trim().is_empty() {
                return bad("stores.qdrant_collection", "must not be empty");
            }
        }
        if st.text == TextStoreKind::Meilisearch {
            if st.meili_url.as_deref().is_none_or(|u| u.trim().is_empty()) {
                return bad(
                    "stores.meili_url",
                    "is required when stores.text is meilisearch",
                );
            }
            if st.meili_index.is_empty()
                || !st
                    .meili_index
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(InvalidSetting {
                    key: "stores.meili_index".into(),
                    message: format!(
                        "{:?} must be letters, digits, '-' or '_' (a Meilisearch index uid)",
                        st.meili_index
                    ),
                });
            }
        }
        let r = &self.retrieval;
        if r.fusion.k.is_nan() || r.fusion.k <= 0.0 {
            return bad("retrieval.fusion.k", "must be positive");
        }
        if r.adjacency.max_chunks == 0 {
            return bad("retrieval.adjacency.max_chunks", "must be at least 1");
        }
        if r.fusion.min_candidates == 0 {
            return bad("retrieval.fusion.min_candidates", "must be at least 1");
        }
        for (key, weight) in [
            ("retrieval.fusion.vector_weight", r.fusion.vector_weight),
            ("retrieval.fusion.text_weight", r.fusion.text_weight),
        ] {
            if weight.is_nan() || weight < 0.0 {
                return bad(key, "must be zero or more");
            }
        }
        for (key, globs) in [
            ("sources.include", &self.sources.include),
            ("sources.exclude", &self.sources.exclude),
        ] {
            for glob in globs {
                if let Err(e) = globset::Glob::new(glob) {
                    return Err(InvalidSetting {
                        key: key.into(),
                        message: format!("{glob:?} is not a glob: {e}"),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file named with `--config` does not exist.
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    /// A file or variable could not be read or has a value of the wrong shape.
    #[error("{source_name}: {message}")]
    Malformed {
        /// The file, or "environment".
        source_name: String,
        /// What the parser said, including the key.
        message: String,
    },
    /// A value has the right shape but cannot work.
    #[error("{source_name}: {setting}")]
    Invalid {
        /// Where the settings came from.
        source_name: String,
        /// The key and what is wrong with it.
        setting: InvalidSetting,
    },
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
    fn the_local_model_is_chosen_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "[embedding]\nmodel = \"all-mpnet-base-v2\"\n");
        let config = load_with_env(Some(&path), no_env()).unwrap().config;
        let model_dir = config.embedding.model_dir.expect("resolved");
        assert!(
            model_dir.ends_with(".cache/weft/models/all-mpnet-base-v2"),
            "{}",
            model_dir.display()
        );
        assert_eq!(config.embedding.model.as_deref(), Some("all-mpnet-base-v2"));

        for (text, key) in [
            ("[embedding]\nmodel = \"../x\"\n", "embedding.model"),
            (
                "[embedding]\nmodel = \"all-mpnet-base-v2\"\nmodel_dir = \"/m/all-MiniLM-L6-v2\"\n",
                "embedding.model",
            ),
        ] {
            let path = write(&dir, text);
            let err = load_with_env(Some(&path), no_env())
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{err}");
        }
        // The same name in both is consistent; an http model name is no directory.
        let path = write(
            &dir,
            "[embedding]\nmodel = \"m\"\nmodel_dir = \"/models/m\"\n",
        );
        assert!(load_with_env(Some(&path), no_env()).is_ok());
        let path = write(
            &dir,
            "[embedding]\nprovider = \"http\"\nurl = \"http://x\"\nmodel = \"org/e5\"\n",
        );
        let config = load_with_env(Some(&path), no_env()).unwrap().config;
        assert_eq!(config.embedding.model_dir, None);
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

    #[test]
    fn new_sections_are_validated_by_key() {
        let dir = tempfile::tempdir().unwrap();
        for (toml, key) in [
            ("[crawl]\nmax_pages = 0\n", "crawl.max_pages"),
            (
                "[crawl]\nallow_private_networks = [\"10.0.0.1/8\"]\n",
                "crawl.allow_private_networks",
            ),
            (
                "[crawl]\ngit_protocols = [\"https\", \"ext\"]\n",
                "crawl.git_protocols",
            ),
            (
                "[crawl]\ncontent_types = [\"html\"]\n",
                "crawl.content_types",
            ),
            ("[crawl]\nproxy = \"socks5://p\"\n", "crawl.proxy"),
            ("[crawl]\nmax_page_bytes = 10\n", "crawl.max_page_bytes"),
            ("[rerank]\nkind = \"tei\"\n", "rerank.url"),
            ("[sources]\nexclude = [\"a/[\"]\n", "sources.exclude"),
            ("[retrieval.fusion]\nk = 0.0\n", "retrieval.fusion.k"),
            (
                "[retrieval.fusion]\nmin_candidates = 0\n",
                "retrieval.fusion.min_candidates",
            ),
            (
                "[retrieval.fusion]\ntext_weight = -1.0\n",
                "retrieval.fusion.text_weight",
            ),
            ("[nats]\nmax_deliver = 0\n", "nats.max_deliver"),
            ("[nats]\ndocs_stream = \"a.b\"\n", "nats.docs_stream"),
            ("[query]\nlisten = \"localhost\"\n", "query.listen"),
            ("[query]\nauth = \"api_keys\"\n", "query.api_keys_file"),
            ("[query]\nauth = \"open\"\n", "open"),
            (
                "[query]\ntls_cert_file = \"/tls/cert.pem\"\n",
                "query.tls_key_file",
            ),
            (
                "[query]\ntls_client_ca_file = \"/tls/ca.pem\"\n",
                "query.tls_client_ca_file",
            ),
            (
                "[query]\nrate_limit_per_sec = 0.0\n",
                "query.rate_limit_per_sec",
            ),
            ("[query]\nrate_limit_burst = 0\n", "query.rate_limit_burst"),
            ("[query]\nmax_query_chars = 0\n", "query.max_query_chars"),
            ("[query]\nmax_limit = 0\n", "query.max_limit"),
            ("[query]\nmax_limit = 1000000000\n", "query.max_limit"),
            (
                "[query]\napi_keys_reload_secs = 0\n",
                "query.api_keys_reload_secs",
            ),
            (
                "[telemetry]\nmetrics_listen = \"nine\"\n",
                "telemetry.metrics_listen",
            ),
            (
                "[embedder]\nmax_batch_tokens = 0\n",
                "embedder.max_batch_tokens",
            ),
            ("[stores]\nvector = \"qdrant\"\n", "stores.qdrant_url"),
            ("[stores]\ntext = \"meilisearch\"\n", "stores.meili_url"),
            (
                "[stores]\ntext = \"meilisearch\"\nmeili_url = \"http://m:7700\"\nmeili_index = \"a b\"\n",
                "stores.meili_index",
            ),
            ("[stores]\nvector = \"pinecone\"\n", "pinecone"),
            ("[retrieval.fusion]\nmethod = \"borda\"\n", "borda"),
        ] {
            let path = write(&dir, toml);
            let err = load_with_env(Some(&path), Vec::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{toml}: {err}");
        }
    }

    #[test]
    fn crawl_network_settings_come_from_file_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "[crawl]\ngit_protocols = [\"https\"]\n");
        let env = vec![(
            "WEFT__CRAWL__ALLOW_PRIVATE_NETWORKS".to_owned(),
            "10.20.0.0/16,fd00::/8".to_owned(),
        )];
        let crawl = load_with_env(Some(&path), env).unwrap().config.crawl;
        assert_eq!(crawl.git_protocols, ["https"]);
        let nets = crawl.private_network_allow_list().unwrap();
        assert_eq!(nets.len(), 2);
        assert!(nets[0].contains("10.20.3.4".parse().unwrap()));
        assert!(nets[1].contains("fd12::1".parse().unwrap()));
        // Public addresses only, by default.
        assert!(CrawlConfig::default().allow_private_networks.is_empty());
    }

    #[test]
    fn query_security_settings_come_from_file_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            "[query]\napi_keys_file = \"/etc/weft-auth/keys.toml\"\ntls_cert_file = \"/tls/tls.crt\"\ntls_key_file = \"/tls/tls.key\"\n",
        );
        let env = vec![
            ("WEFT__QUERY__AUTH".to_owned(), "api_keys".to_owned()),
            (
                "WEFT__QUERY__RATE_LIMIT_PER_SEC".to_owned(),
                "2.5".to_owned(),
            ),
            (
                "WEFT__STORES__MEILI_SEARCH_KEY_ENV".to_owned(),
                "MEILI_SEARCH_KEY".to_owned(),
            ),
        ];
        let config = load_with_env(Some(&path), env).unwrap().config;
        assert_eq!(config.query.auth, Some(QueryAuth::ApiKeys));
        assert_eq!(
            config.query.api_keys_file.as_deref(),
            Some(Path::new("/etc/weft-auth/keys.toml"))
        );
        assert_eq!(config.query.rate_limit_per_sec, Some(2.5));
        assert!(config.query.tls_key_file.is_some());
        assert_eq!(
            config.stores.meili_search_key_env.as_deref(),
            Some("MEILI_SEARCH_KEY")
        );
        let env = vec![("WEFT__QUERY__AUTH".to_owned(), "none".to_owned())];
        let config = load_with_env(Some(&write(&dir, "")), env).unwrap().config;
        assert_eq!(config.query.auth, Some(QueryAuth::None));
        // Unset by default: each binary decides (weft-query requires keys).
        assert_eq!(QueryServiceConfig::default().auth, None);
    }

    #[test]
    fn stores_come_from_file_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            "[stores]\nvector = \"qdrant\"\nqdrant_url = \"http://qdrant:6334\"\nqdrant_api_key_env = \"QDRANT_KEY\"\n",
        );
        let env = vec![
            ("WEFT__STORES__TEXT".to_owned(), "meilisearch".to_owned()),
            (
                "WEFT__STORES__MEILI_URL".to_owned(),
                "http://meili:7700".to_owned(),
            ),
        ];
        let stores = load_with_env(Some(&path), env).unwrap().config.stores;
        assert_eq!(stores.vector, VectorStoreKind::Qdrant);
        assert_eq!(stores.qdrant_url.as_deref(), Some("http://qdrant:6334"));
        assert_eq!(stores.qdrant_collection, "weft_chunks");
        assert_eq!(stores.qdrant_api_key_env.as_deref(), Some("QDRANT_KEY"));
        assert_eq!(stores.text, TextStoreKind::Meilisearch);
        assert_eq!(stores.meili_url.as_deref(), Some("http://meili:7700"));
        assert_eq!(stores.meili_index, "weft_chunks");
    }
}
