//! The `weft-embedder` program: what its binary (and `weft-all` run as
//! `weft-embedder`) runs.

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
    #[command(flatten)]
    config: weft_startup::ConfigArgs,
    #[command(flatten)]
    nats: weft_startup::NatsArgs,
    #[command(flatten)]
    locations: weft_startup::LocationArgs,
}

/// The program: its arguments parsed from the process's, run to its exit
/// status (`weft-embedder`, or `weft-all` run by that name).
pub fn main() -> ExitCode {
    let args = Args::parse();
    weft_startup::run_with(
        "weft-embedder",
        "info",
        &args.config,
        |config| args.nats.apply(config),
        |service| async move {
            let locations = args.locations.resolve(&service.config);
            let jet = service.connect_nats().await?;
            tracing::info!(
                nats = %service.config.nats.url,
                data_dir = %locations.data_dir.display(),
                "embedding"
            );
            let stats = crate::run(jet, &service.config, &locations, service.shutdown).await?;
            tracing::info!(%stats, "worker stopped");
            Ok(ExitCode::SUCCESS)
        },
    )
}
