//! `weft serve`: the gRPC query API (weft.v1.QueryService) over the local data.

use std::process::ExitCode;

use clap::Args;

use crate::context::{Context, StoreArgs};

/// Arguments of `weft serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Listen address (default: `query.listen`, 127.0.0.1:50051).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

pub fn run(config_file: Option<&std::path::Path>, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let ctx = Context::load(config_file, &args.store)?;
    let listen = args
        .listen
        .clone()
        .unwrap_or_else(|| ctx.config.query.listen.clone());
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        if let Some(addr) = &ctx.config.telemetry.metrics_listen {
            let bound = weft_telemetry::serve_metrics(addr).await?;
            eprintln!("metrics on http://{bound}/metrics");
        }
        weft_grpc::run(
            &ctx.config,
            &ctx.locations,
            &listen,
            // On loopback without a keys file: open (a laptop); elsewhere
            // keys or an explicit query.auth = "none".
            weft_auth::AuthDefault::OpenOnLoopback,
            // `weft index` switches generations in the data directory.
            async { Ok(weft_wiring::LiveSource::DataDir) },
            |addr| {
                println!("listening on {addr}");
                eprintln!(
                    "serving weft.v1.QueryService over {} (Ctrl-C stops)",
                    ctx.locations.data_dir.display()
                );
            },
            weft_telemetry::shutdown_signal(),
        )
        .await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
