//! `weft mcp`: weft's tools for assistants over the Model Context Protocol,
//! on stdio (the default) or streamable HTTP, answering from the local index
//! or from a remote `weft-query`. The server itself is `weft_mcp`.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use async_trait::async_trait;
use clap::Args;
use weft_core::ports::Embedder;
use weft_core::query::QueryEngine;
use weft_mcp::{Backend, EmbeddedBackend, GrpcBackend, IndexRunner, McpOptions, WeftMcp};
use weft_pipeline::sources::SourceSpec;
use weft_pipeline::{IndexOptions, Indexer, Stores};

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
    /// the local data directory.
    #[arg(long)]
    pub allow_index: bool,

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
    if args.max_tokens == 0 || args.max_tokens > weft_mcp::MAX_TOKENS_LIMIT {
        bail!(
            "--max-tokens {} is not within 1..={}",
            args.max_tokens,
            weft_mcp::MAX_TOKENS_LIMIT
        );
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (backend, indexer): (Arc<dyn Backend>, Option<Arc<dyn IndexRunner>>) = match &args
            .query_url
        {
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
                let ctx = Context::load(config_file, &args.store)?;
                if !args.allow_index && ctx.data_dir().meta()?.is_none() {
                    return Err(weft_pipeline::DataDirError::Empty(
                        ctx.data_dir().path().to_owned(),
                    )
                    .into());
                }
                let (engine, stores, embedder) = open_engine(&ctx).await?;
                let backend = EmbeddedBackend::new(
                    engine,
                    stores.vectors.clone(),
                    stores.catalog.clone(),
                    format!("the index in {}", ctx.data_dir().path().display()),
                );
                let indexer = if args.allow_index {
                    let indexer =
                        Indexer::new(stores, embedder, &ctx.config, ctx.data_dir().sources_dir())?;
                    Some(Arc::new(CliIndexer(indexer)) as Arc<dyn IndexRunner>)
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
            },
        );
        match &args.http {
            Some(addr) => {
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
                    weft_telemetry::shutdown_signal(),
                )
                .await?;
            }
            None => weft_mcp::serve_stdio(server).await?,
        }
        anyhow::Ok(ExitCode::SUCCESS)
    })
}

/// The query engine over the local data directory, with its stores and
/// embedder (the model loads on first use): the one place `weft mcp` builds
/// an engine.
async fn open_engine(
    ctx: &Context,
) -> anyhow::Result<(Arc<QueryEngine>, Stores, Arc<dyn Embedder>)> {
    let (stores, embedder) = ctx.open_for_indexing().await?;
    let engine = weft_pipeline::wiring::query_engine(
        &ctx.config,
        stores.vectors.clone(),
        stores.text.clone(),
        Some(embedder.clone()),
    )?;
    Ok((Arc::new(engine), stores, embedder))
}

/// The `index` tool: the pipeline's indexer over the same stores.
struct CliIndexer(Indexer);

#[async_trait]
impl IndexRunner for CliIndexer {
    async fn index(
        &self,
        source: &str,
        project: Option<&str>,
        reindex: bool,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        let spec = SourceSpec::parse(source)?;
        let options = IndexOptions {
            project: project.map(str::to_owned),
            reindex,
            ..Default::default()
        };
        let summary = self.0.index(&spec, &options).await?;
        Ok(serde_json::to_value(summary)?)
    }
}
