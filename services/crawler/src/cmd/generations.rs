//! `weft-crawler generations list|switch|abort|gc`: the operator's view of
//! index generations, through the generations manager of `weft-index`.

use std::process::ExitCode;
use std::time::Duration;

use crate::generations::NatsStores;
use weft_index::GenerationManager;
use weft_index::generations::{GenerationsError, SwitchCheck};

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
    let stores = NatsStores::new(&jet, config, &locations);
    let grace_secs = match action {
        GenerationsAction::Gc {
            grace_secs: Some(secs),
        } => *secs,
        _ => config.generations.grace_secs,
    };
    let manager =
        GenerationManager::new(&registry, &stores).with_grace(Duration::from_secs(grace_secs));
    let (record, text) = match action {
        GenerationsAction::List => {
            let list = manager.list().await?;
            super::print(args.json, &list, &list)?;
            return Ok(ExitCode::SUCCESS);
        }
        GenerationsAction::Switch { number, force } => {
            let check = if *force {
                SwitchCheck::Force
            } else {
                SwitchCheck::Count
            };
            let switched = manager.switch(*number, check).await.map_err(|e| {
                if matches!(e, GenerationsError::Incomplete { .. }) {
                    anyhow::anyhow!("{e} (--force switches anyway)")
                } else {
                    e.into()
                }
            })?;
            switched.alias.map_err(|source| GenerationsError::Stores {
                number: *number,
                source,
            })?;
            (switched.record, format!("generation {number} is live"))
        }
        GenerationsAction::Abort { number } => {
            let collected = manager.abort(*number, "aborted by the operator").await?;
            let text = format!(
                "generation {number} aborted; removed {:?}",
                collected.removed
            );
            (manager.record().await?, text)
        }
        GenerationsAction::Gc { .. } => {
            let collected = manager.gc().await?;
            (
                manager.record().await?,
                format!("removed {:?}", collected.removed),
            )
        }
    };
    super::print(args.json, &record, &format_args!("{text}\n"))?;
    Ok(ExitCode::SUCCESS)
}
