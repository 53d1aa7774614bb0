//! The `weft-crawler` program: what its binary (and `weft-all` run as
//! `weft-crawler`) runs.

use std::process::ExitCode;

use crate::args::{Args, Command};

/// The program: its arguments parsed from the process's, run to its exit
/// status (`weft-crawler`, or `weft-all` run by that name).
pub fn main() -> ExitCode {
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
                    crate::cmd::generations::run(&args, action, service).await
                }
                None => crate::cmd::crawl::run(&args, service).await,
            }
        },
    )
}
