//! `weft-chunker`: a chunker worker of the distributed pipeline.

use std::process::ExitCode;

use clap::Parser;

/// A weft chunker worker: pulls documents from NATS JetStream, chunks them,
/// publishes chunk batches. Run as many as you like; they share the work.
/// Settings: defaults, then the config file, then WEFT__… variables
/// (e.g. WEFT__NATS__URL).
#[derive(Debug, Parser)]
#[command(name = "weft-chunker", version)]
struct Args {
    #[command(flatten)]
    config: weft_startup::ConfigArgs,
    #[command(flatten)]
    nats: weft_startup::NatsArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    weft_startup::run_with(
        "weft-chunker",
        "info",
        &args.config,
        |config| args.nats.apply(config),
        |service| async move {
            let jet = service.connect_nats().await?;
            tracing::info!(nats = %service.config.nats.url, "chunking");
            let stats = weft_chunker::run(jet, &service.config, service.shutdown).await?;
            tracing::info!(%stats, "worker stopped");
            Ok(ExitCode::SUCCESS)
        },
    )
}
