//! `weft-crawler generations list|switch|abort|gc`: the operator's view of
//! index generations.

use std::process::ExitCode;
use std::time::Duration;

use weft_core::ports::GenerationRegistry as _;
use weft_crawler::generations as g;

use crate::args::{Args, GenerationsAction};

/// Runs one generations command and prints its result.
pub async fn run(
    args: &Args,
    action: &GenerationsAction,
    service: weft_startup::Service,
) -> anyhow::Result<ExitCode> {
    let locations = args.locations.resolve(&service.config);
    let jet = service.connect_nats().await?;
    let registry = jet.registry().await?;
    let config = &service.config;
    let (record, text) = match action {
        GenerationsAction::List => {
            let (record, generations) = g::list(&registry, &jet, config, &locations).await?;
            let list = g::GenerationList {
                live: record.live,
                generations,
            };
            super::print(args.json, &list, &list)?;
            return Ok(ExitCode::SUCCESS);
        }
        GenerationsAction::Switch { number, force } => {
            let record = g::switch(&registry, &jet, config, &locations, *number, *force).await?;
            (record, format!("generation {number} is live"))
        }
        GenerationsAction::Abort { number } => {
            let removed = g::abort(&registry, &jet, config, &locations, *number).await?;
            let text = format!("generation {number} aborted; removed {removed:?}");
            (registry.load().await?, text)
        }
        GenerationsAction::Gc { grace_secs } => {
            let grace = Duration::from_secs(grace_secs.unwrap_or(config.generations.grace_secs));
            let removed = g::collect(&registry, &jet, config, &locations, grace).await?;
            (registry.load().await?, format!("removed {removed:?}"))
        }
    };
    super::print(args.json, &record, &format_args!("{text}\n"))?;
    Ok(ExitCode::SUCCESS)
}
