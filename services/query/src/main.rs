//! `weft-query`: the gRPC query service over a data directory.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// weft's gRPC query service (weft.v1.QueryService, with grpc.health.v1 and
/// reflection). Settings: defaults, then the config file, then WEFT__… variables.
#[derive(Debug, Parser)]
#[command(name = "weft-query", version)]
struct Args {
    /// Configuration file (default: ./weft.toml when it exists).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The data directory the embedder service writes (default: `data.dir`).
    #[arg(long, env = "WEFT_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The embedding model directory (default: `embedding.model_dir`, else
    /// ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long, env = "WEFT_MODEL_DIR", value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Listen address (default: `query.listen`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

fn main() -> ExitCode {
    weft_telemetry::init_logging("info,qdrant_edge=error");
    let args = Args::parse();
    let tracing = match weft_telemetry::trace::init_tracing("weft-query") {
        Ok(tracing) => tracing,
        Err(error) => {
            eprintln!("weft-query: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = run(args);
    // Spans still pending are exported before the process ends.
    tracing.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weft-query: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn run(args: Args) -> anyhow::Result<()> {
    let config = weft_config::load(args.config.as_deref())?.config;
    let data_dir = args
        .data_dir
        .or_else(|| config.data.dir.clone())
        .unwrap_or_else(weft_pipeline::default_data_dir);
    let model_dir = args
        .model_dir
        .or_else(|| config.embedding.model_dir.clone())
        .unwrap_or_else(weft_pipeline::default_model_dir);
    let listen = args.listen.unwrap_or_else(|| config.query.listen.clone());
    if let Some(addr) = &config.telemetry.metrics_listen {
        let bound = weft_telemetry::serve_metrics(addr).await?;
        tracing::info!("metrics on http://{bound}/metrics");
    }
    weft_query::run(
        &config,
        &data_dir,
        &model_dir,
        &listen,
        |addr| {
            // One line on stdout, for scripts and tests that started us on port 0.
            println!("listening on {addr}");
            tracing::info!(data_dir = %data_dir.display(), "weft-query listening on {addr}");
        },
        weft_telemetry::shutdown_signal(),
    )
    .await?;
    tracing::info!("weft-query stopped");
    Ok(())
}
