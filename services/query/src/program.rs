//! The `weft-query` program: what its binary (and `weft-all` run as
//! `weft-query`) runs.

use std::process::ExitCode;

use clap::Parser;

/// weft's gRPC query service (weft.v1.QueryService, with grpc.health.v1 and
/// reflection) over the stores `[stores]` configures. Callers need an API
/// key from query.api_keys_file (make one with `weft keys new`) unless
/// query.auth = "none". Settings: defaults, then the config file, then
/// WEFT__… variables.
#[derive(Debug, Parser)]
#[command(name = "weft-query", version)]
struct Args {
    #[command(flatten)]
    config: weft_startup::ConfigArgs,
    #[command(flatten)]
    locations: weft_startup::LocationArgs,
    #[command(flatten)]
    nats: weft_startup::NatsArgs,
    /// Listen address (default: `query.listen`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

/// The program: its arguments parsed from the process's, run to its exit
/// status (`weft-query`, or `weft-all` run by that name).
pub fn main() -> ExitCode {
    let args = Args::parse();
    weft_startup::run_with(
        "weft-query",
        "info",
        &args.config,
        |config| args.nats.apply(config),
        |service| async move {
            let locations = args.locations.resolve(&service.config);
            let listen =
                (args.listen.clone()).unwrap_or_else(|| service.config.query.listen.clone());
            crate::run(&service.config, &locations, &listen, service.shutdown).await?;
            Ok(ExitCode::SUCCESS)
        },
    )
}
