//! `weft mcp`: weft's tools for assistants over the Model Context Protocol,
//! on stdio (the default) or streamable HTTP, answering from the local index
//! or from a remote `weft-query`. The server itself is `weft_mcp`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use async_trait::async_trait;
use clap::Args;
use weft_index::{GitTrust, RunOptions, RunSource};
use weft_mcp::{
    Backend, BackendError, Caller, EmbeddedBackend, EmbeddedParts, GrpcBackend, IndexRunner,
    McpOptions, PartsProvider, WeftMcp,
};
use weft_sources::SourceSpec;
use weft_wiring::LiveQuery;

use crate::context::{Context, StoreArgs};

/// The environment variable holding the API key sent to `--query-url`.
pub const API_KEY_ENV: &str = "WEFT_API_KEY";

/// Arguments of `weft mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio
    /// (e.g. 127.0.0.1:8808; port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,

    /// Answer from a remote weft-query (gRPC, e.g. http://query:50051)
    /// instead of the local data directory. Its API key is read from the
    /// environment variable WEFT_API_KEY.
    #[arg(long, value_name = "URL")]
    pub query_url: Option<String>,

    /// Offer the `index` tool: the assistant may index paths and URLs into
    /// the local data directory. Over HTTP only keys with `index = true`
    /// may call it, directories only under an `--index-root`, and git and
    /// sites only as `[crawl]` allows (public addresses).
    #[arg(long)]
    pub allow_index: bool,

    /// A directory under which HTTP clients of the `index` tool may index
    /// local paths (repeatable). Without one, they may index no local path.
    #[arg(long = "index-root", value_name = "DIR", requires = "allow_index")]
    pub index_roots: Vec<PathBuf>,

    /// Token budget of `search` and `get_context` when a call gives none.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub max_tokens: usize,

    /// A host name (or host:port) the HTTP server accepts in `Host` besides
    /// loopback names (repeatable).
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,

    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn run(config_file: Option<&Path>, args: &McpArgs) -> anyhow::Result<ExitCode> {
    let ctx = Arc::new(Context::load(config_file, &args.store)?);
    // `[query]`'s bounds, as `weft serve` and `weft search` hold them.
    let bounds = ctx.config.query.request_bounds();
    if let Err(e) = bounds.check_max_tokens(args.max_tokens) {
        bail!("--max-tokens {}", e.problem);
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (backend, indexer): (Arc<dyn Backend>, Option<Arc<dyn IndexRunner>>) =
            match &args.query_url {
                Some(url) => {
                    if args.allow_index {
                        bail!(
                            "--allow-index indexes into the local data directory; \
                             it cannot be combined with --query-url"
                        );
                    }
                    let mut backend = GrpcBackend::connect(url).await?;
                    // The key comes from the environment, never a flag: a flag's
                    // value shows in `ps` and shell history.
                    if let Some(key) = std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty()) {
                        backend = backend.with_bearer_token(&key)?;
                    }
                    (Arc::new(backend), None)
                }
                None => {
                    let live = LocalIndex::default();
                    match ctx.open_live().await {
                        Ok(opened) => live.set(opened),
                        Err(e) if !args.allow_index => return Err(e),
                        // Nothing indexed yet: the index tool makes the first generation.
                        Err(e) => tracing::info!("no index yet: {e:#}"),
                    }
                    let description = format!("the index in {}", ctx.data_dir().path().display());
                    let backend = EmbeddedBackend::following(live.provider(&ctx), description);
                    let indexer = if args.allow_index {
                        Some(Arc::new(CliIndexer {
                            ctx: ctx.clone(),
                            live: live.clone(),
                            roots: index_roots(&args.index_roots)?,
                        }) as Arc<dyn IndexRunner>)
                    } else {
                        None
                    };
                    (Arc::new(backend), indexer)
                }
            };
        tracing::info!(backend = backend.describe(), "weft mcp");
        let server = WeftMcp::new(
            backend,
            indexer,
            McpOptions {
                default_max_tokens: args.max_tokens,
                bounds,
            },
        );
        match &args.http {
            Some(addr) => {
                // As `weft serve`: on loopback without a keys file open, else
                // the keys of query.api_keys_file (or query.auth = "none").
                let config = weft_config::load(config_file)?.config;
                let auth = weft_auth::from_config(
                    &config.query,
                    addr,
                    weft_auth::AuthDefault::OpenOnLoopback,
                )
                .map_err(|e| anyhow::anyhow!("--http {addr}: {e}"))?;
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("--http: cannot listen on {addr}"))?;
                let bound = listener.local_addr()?;
                // stdout is free in HTTP mode: say where to connect.
                println!("listening on http://{bound}/mcp");
                eprintln!("serving MCP over streamable HTTP at http://{bound}/mcp (Ctrl-C stops)");
                weft_mcp::serve_http(
                    server,
                    listener,
                    &args.allowed_hosts,
                    auth,
                    std::time::Duration::from_secs(config.query.api_keys_reload_secs),
                    weft_telemetry::shutdown_signal(),
                )
                .await?;
            }
            None => weft_mcp::serve_stdio(server).await?,
        }
        anyhow::Ok(ExitCode::SUCCESS)
    })
}

/// A followed live index and the task following it.
type Followed = (LiveQuery, Arc<tokio::task::JoinHandle<()>>);

/// The local index's live generation, once there is one, followed.
#[derive(Clone, Default)]
struct LocalIndex {
    live: Arc<std::sync::RwLock<Option<Followed>>>,
}

impl LocalIndex {
    fn set(&self, live: LiveQuery) {
        let follow = Arc::new(live.follow(weft_grpc::FOLLOW_EVERY));
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = Some((live, follow));
    }

    fn get(&self) -> Option<LiveQuery> {
        self.live
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(live, _)| live.clone())
    }

    /// The parts of the live generation, for each call.
    fn provider(&self, ctx: &Context) -> PartsProvider {
        let this = self.clone();
        let data = ctx.data_dir();
        Arc::new(move || {
            let live = this.get().ok_or_else(|| {
                BackendError::Unsupported(format!(
                    "nothing is indexed in {} yet: call the index tool first",
                    data.path().display()
                ))
            })?;
            let stack = live.current();
            let catalog = stack
                .catalog_now(&data)
                .map_err(|e| BackendError::Unsupported(e.to_string()))?;
            Ok(EmbeddedParts {
                engine: stack.engine.clone(),
                vectors: stack.vectors.clone(),
                catalog,
                keep: Some(stack),
            })
        })
    }
}

impl Drop for LocalIndex {
    fn drop(&mut self) {
        if Arc::strong_count(&self.live) == 1
            && let Some((_, follow)) = self.live.read().unwrap_or_else(|p| p.into_inner()).as_ref()
        {
            follow.abort();
        }
    }
}

/// The `index` tool: the same index run as `weft index` (a new generation,
/// switched to when complete), then the new generation is read at once.
struct CliIndexer {
    ctx: Arc<Context>,
    live: LocalIndex,
    /// `--index-root`s, resolved: where remote callers may index paths.
    roots: Vec<PathBuf>,
}

/// The `--index-root` directories, resolved (links followed), so that a
/// path is compared with what it really is.
fn index_roots(roots: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    roots
        .iter()
        .map(|root| {
            std::fs::canonicalize(root).with_context(|| format!("--index-root {}", root.display()))
        })
        .collect()
}

impl CliIndexer {
    /// Refuses what a remote caller may not have indexed: a local path
    /// outside every `--index-root` (resolved, so no link or `..` leads
    /// out). Git and sites obey `[crawl]` ([`GitTrust::Crawl`]).
    fn check_remote(&self, spec: &SourceSpec) -> Result<(), String> {
        let SourceSpec::Dir(path) = spec else {
            return Ok(());
        };
        if self.roots.is_empty() {
            return Err(
                "over HTTP, local paths are indexed only under an --index-root of weft mcp".into(),
            );
        }
        let resolved = std::fs::canonicalize(path).map_err(|e| format!("cannot be read: {e}"))?;
        if self.roots.iter().any(|root| resolved.starts_with(root)) {
            Ok(())
        } else {
            Err("is outside every --index-root of weft mcp: not indexed".into())
        }
    }
}

#[async_trait]
impl IndexRunner for CliIndexer {
    async fn index(
        &self,
        source: &str,
        project: Option<&str>,
        reindex: bool,
        caller: Caller,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        let spec = SourceSpec::parse(source)?;
        let git = match caller {
            Caller::Local => GitTrust::Local,
            Caller::Remote => {
                self.check_remote(&spec)?;
                GitTrust::Crawl
            }
        };
        let outcome = weft_index::index_sources(
            &self.ctx.config,
            &self.ctx.locations,
            vec![RunSource {
                spec,
                project: project.map(str::to_owned),
            }],
            RunOptions {
                rebuild: reindex,
                git,
                // `embedding.max_embed_tokens` still applies.
                max_embed_tokens: None,
                drop: Vec::new(),
            },
            &indicatif::ProgressBar::hidden,
            || tracing::info!("waiting for another weft index on the data directory"),
            &mut |_| {},
        )
        .await?;
        if let Some((_, e)) = outcome.failed.into_iter().next() {
            return Err(e.into());
        }
        match self.live.get() {
            Some(live) => {
                live.refresh().await?;
            }
            None => self.live.set(self.ctx.open_live().await?),
        }
        let summary = outcome.summaries.into_iter().next();
        Ok(serde_json::json!({
            "summary": summary,
            "generation": outcome.generation,
        }))
    }
}
