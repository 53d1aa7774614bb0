//! The `weft-chunker` program: what its binary (and `weft-all` run as
//! `weft-chunker`) runs.

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

/// The program: its arguments parsed from the process's, run to its exit
/// status (`weft-chunker`, or `weft-all` run by that name).
pub fn main() -> ExitCode {
    let args = Args::parse();
    weft_startup::run_with(
        "weft-chunker",
        "info",
        &args.config,
        |config| args.nats.apply(config),
        |service| async move {
            let jet = service.connect_nats().await?;
            tracing::info!(nats = %service.config.nats.url, "chunking");
            let stats = crate::run(jet, &service.config, service.shutdown).await?;
            tracing::info!(%stats, "worker stopped");
            Ok(ExitCode::SUCCESS)
        },
    )
}
