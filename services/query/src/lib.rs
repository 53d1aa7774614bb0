//! # weft-query
//!
//! The gRPC query service of the distributed deployment: `weft-grpc`'s
//! `weft.v1.QueryService` over the stores `[stores]` configures, following
//! the live generation of the registry `generations.registry` names. The
//! binary (`src/main.rs`) parses its flags and calls [`run`].

#![warn(missing_docs)]

mod program;

pub use program::main;

use weft_config::{GenerationRegistryKind, Locations, WeftConfig};
use weft_grpc::ServiceError;
use weft_wiring::LiveSource;

/// Where the live generation is recorded: the NATS key-value registry the
/// crawler's rebuilds switch, or the data directory's `generations.json`.
pub async fn live_source(config: &WeftConfig) -> Result<LiveSource, ServiceError> {
    match config.generations.registry {
        GenerationRegistryKind::Nats => {
            let generations = |e: weft_nats::NatsError| ServiceError::Generations(e.into());
            let jet = weft_nats::Jet::connect(&config.nats)
                .await
                .map_err(generations)?;
            let registry = jet.registry().await.map_err(generations)?;
            Ok(LiveSource::Registry(std::sync::Arc::new(registry)))
        }
        GenerationRegistryKind::DataDir => Ok(LiveSource::DataDir),
    }
}

/// Serves queries on `listen` until `shutdown` completes; prints
/// `listening on ADDR` on stdout once bound (for scripts that started it on
/// port 0).
pub async fn run(
    config: &WeftConfig,
    locations: &Locations,
    listen: &str,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    weft_grpc::run(
        config,
        locations,
        listen,
        weft_auth::AuthDefault::Required,
        live_source(config),
        |addr| {
            println!("listening on {addr}");
            tracing::info!(data_dir = %locations.data_dir.display(), "listening on {addr}");
        },
        shutdown,
    )
    .await
}
