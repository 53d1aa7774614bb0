//! `weft-crawler`: publishes the new, changed and deleted documents of
//! sources to the distributed pipeline, then exits (a Kubernetes Job); and
//! `weft-crawler generations …`, the operator's view of index generations.

use std::process::ExitCode;

mod args;
mod cmd;

use args::{Args, Command};

fn main() -> ExitCode {
    let args = Args::parse_checked();
    weft_startup::run_with(
        "weft-crawler",
        "warn,weft_crawler=info,weft_index=info",
        &args.config,
        |config| {
            args.nats.apply(config);
            // An operator's command (often run in another service's
            // container, which holds the metrics port) opens no listener.
            if args.command.is_some() {
                config.telemetry.metrics_listen = None;
            }
        },
        |service| async {
            match &args.command {
                Some(Command::Generations { action }) => {
                    cmd::generations::run(&args, action, service).await
                }
                None => cmd::crawl::run(&args, service).await,
            }
        },
    )
}
