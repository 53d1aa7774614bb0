//! `weft-chunker`: a chunker worker of the distributed pipeline.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// A weft chunker worker: pulls documents from NATS JetStream, chunks them,
/// publishes chunk batches. Run as many as you like; they share the work.
/// Settings: defaults, then the config file, then WEFT__… variables
/// (e.g. WEFT__NATS__URL).
#[derive(Debug, Parser)]
#[command(name = "weft-chunker", version)]
struct Args {
    /// Configuration file (default: ./weft.toml when it exists).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// NATS server URL (default: `nats.url`).
    #[arg(long, value_name = "URL")]
    nats_url: Option<String>,
}

fn main() -> ExitCode {
    weft_telemetry::init_logging("info");
    let args = Args::parse();
    let tracing = match weft_telemetry::trace::init_tracing("weft-chunker") {
        Ok(tracing) => tracing,
        Err(error) => {
            eprintln!("weft-chunker: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = run(args);
    // Spans still pending are exported before the process ends.
    tracing.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weft-chunker: {error:#}");
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
    if let Some(addr) = &config.telemetry.metrics_listen {
        let bound = weft_telemetry::serve_metrics(addr).await?;
        tracing::info!("metrics on http://{bound}/metrics");
    }
    tracing::info!(nats = %config.nats.url, "weft-chunker started");
    let stats = weft_chunker::run(&config, weft_telemetry::shutdown_signal()).await?;
    tracing::info!(
        done = stats.done,
        retried = stats.retried,
        dead_lettered = stats.dead_lettered,
        "weft-chunker stopped"
    );
    Ok(())
}
