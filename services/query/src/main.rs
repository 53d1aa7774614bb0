//! `weft-query`: the gRPC query service.

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
    config: weft_service::ConfigArgs,
    #[command(flatten)]
    locations: weft_service::LocationArgs,
    #[command(flatten)]
    nats: weft_service::NatsArgs,
    /// Listen address (default: `query.listen`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    weft_service::run_with(
        "weft-query",
        "info",
        &args.config,
        |config| args.nats.apply(config),
        |service| async move {
            let locations = args.locations.resolve(&service.config);
            let listen = args
                .listen
                .clone()
                .unwrap_or_else(|| service.config.query.listen.clone());
            weft_server::run(
                &service.config,
                &locations,
                &listen,
                weft_server::auth::AuthDefault::Required,
                // Which generation is live: the record the crawler's
                // rebuilds switch (`generations.registry`).
                async {
                    match service.config.generations.registry {
                        weft_config::GenerationRegistryKind::Nats => {
                            let jet = weft_nats::Jet::connect(&service.config.nats)
                                .await
                                .map_err(|e| {
                                    weft_server::ServiceError::Generations(e.to_string())
                                })?;
                            let registry = jet.registry().await.map_err(|e| {
                                weft_server::ServiceError::Generations(e.to_string())
                            })?;
                            Ok(weft_pipeline::wiring::LiveSource::Registry(
                                std::sync::Arc::new(registry),
                            ))
                        }
                        weft_config::GenerationRegistryKind::DataDir => {
                            Ok(weft_pipeline::wiring::LiveSource::DataDir)
                        }
                    }
                },
                |addr| {
                    // One line on stdout, for scripts and tests that started us on port 0.
                    println!("listening on {addr}");
                    tracing::info!(data_dir = %locations.data_dir.display(), "listening on {addr}");
                },
                service.shutdown,
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        },
    )
}
