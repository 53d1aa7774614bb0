//! `weft-embedder`: an embedder worker of the distributed pipeline.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// A weft embedder worker: pulls chunk batches from NATS JetStream, embeds
/// what changed, writes the vector and text indexes (`[stores]`: embedded
/// in the data directory, or Qdrant and Meilisearch servers) and the
/// catalog in NATS. Settings: defaults, then the config file, then
/// WEFT__… variables (e.g. WEFT__NATS__URL).
#[derive(Debug, Parser)]
#[command(name = "weft-embedder", version)]
struct Args {
    /// Configuration file (default: ./weft.toml when it exists).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// NATS server URL (default: `nats.url`).
    #[arg(long, value_name = "URL")]
    nats_url: Option<String>,
    /// The data directory to write (default: `data.dir`, else the platform's).
    #[arg(long, env = "WEFT_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The embedding model directory (default: `embedding.model_dir`, else
    /// ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long, env = "WEFT_MODEL_DIR", value_name = "DIR")]
    model_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    weft_telemetry::init_logging("info,qdrant_edge=error");
    let args = Args::parse();
    let tracing = match weft_telemetry::trace::init_tracing("weft-embedder") {
        Ok(tracing) => tracing,
        Err(error) => {
            eprintln!("weft-embedder: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = run(args);
    // Spans still pending are exported before the process ends.
    tracing.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weft-embedder: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn run(args: Args) -> anyhow::Result<()> {
    let mut config = weft_config::load(args.config.as_deref())?.config;
    if let Some(url) = args.nats_url {
        config.nats.url = url;
    }
    let data_dir = args
        .data_dir
        .or_else(|| config.data.dir.clone())
        .unwrap_or_else(weft_pipeline::default_data_dir);
    let model_dir = args
        .model_dir
        .or_else(|| config.embedding.model_dir.clone())
        .unwrap_or_else(weft_pipeline::default_model_dir);
    if let Some(addr) = &config.telemetry.metrics_listen {
        let bound = weft_telemetry::serve_metrics(addr).await?;
        tracing::info!("metrics on http://{bound}/metrics");
    }
    tracing::info!(nats = %config.nats.url, data_dir = %data_dir.display(), "weft-embedder started");
    let stats = weft_embedder::run(
        &config,
        &data_dir,
        &model_dir,
        weft_telemetry::shutdown_signal(),
    )
    .await?;
    tracing::info!(
        done = stats.done,
        retried = stats.retried,
        dead_lettered = stats.dead_lettered,
        "weft-embedder stopped"
    );
    Ok(())
}
