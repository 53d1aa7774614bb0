//! The end of a rebuild: once every source is published, wait until the
//! embedders have written all of it and the generation is complete, then
//! switch to it (through the generations manager).

use std::time::Instant;

use weft_core::ErrorKind;
use weft_core::generations::GenerationState;
use weft_index::GenerationManager;
use weft_index::generations::{GenerationsError, SwitchCheck, Switched};

use super::{JobOptions, JobSummary, SwitchSummary};

/// Ends the rebuild of `generation` (which its sources left `expected`
/// documents in) into `summary`: switched to, or why not. A rebuild with
/// failed sources is not switched to; it stays building for a rerun.
pub(super) async fn end_rebuild(
    manager: &GenerationManager<'_>,
    generation: u32,
    expected: u64,
    options: &JobOptions,
    summary: &mut JobSummary,
) {
    if !summary.failed.is_empty() {
        summary.not_switched = Some(format!(
            "{} source(s) failed; generation {generation} stays building: run the job again to continue it, or `weft-crawler generations abort {generation}`",
            summary.failed.len()
        ));
        return;
    }
    match finish_rebuild(manager, generation, expected, options).await {
        Ok(switch) => summary.switch = Some(switch),
        Err(why) => {
            summary.aborted = manager.record().await.is_ok_and(|g| {
                g.get(generation).map(|x| x.state) == Some(GenerationState::Aborted)
            });
            summary.not_switched = Some(why);
        }
    }
}

/// Records what the rebuild published, waits until generation `n` is
/// complete (the manager's check) and switches; gives up on what waiting
/// does not mend, or after `options.wait`.
async fn finish_rebuild(
    manager: &GenerationManager<'_>,
    n: u32,
    expected: u64,
    options: &JobOptions,
) -> Result<SwitchSummary, String> {
    manager
        .record_published(n, expected, true)
        .await
        .map_err(|e| match e.kind() {
            ErrorKind::Unavailable => {
                format!(
                    "cannot record what the rebuild published: {}",
                    weft_core::error_chain(&e)
                )
            }
            _ => weft_core::error_chain(&e),
        })?;
    let waited = Instant::now();
    let deadline = waited + options.wait;
    let mut last_note = String::new();
    loop {
        let attempt = match manager.check(n).await {
            Ok(counts) => manager.switch(n, SwitchCheck::Counted(counts)).await,
            Err(e) => Err(e),
        };
        match attempt {
            Ok(switched) => return Ok(switch_summary(switched, n, waited)),
            Err(e) if e.waits() => {
                let note = match &e {
                    GenerationsError::Incomplete { why, .. } => why.to_string(),
                    other => weft_core::error_chain(other),
                };
                if note != last_note {
                    tracing::info!("generation {n}: {note}");
                    last_note = note;
                }
            }
            // Waiting longer will not help.
            Err(GenerationsError::Incomplete { why, .. }) => {
                return Err(format!(
                    "generation {n}: {why}; it stays building: fix the cause and run the job again, or `weft-crawler generations abort {n}`"
                ));
            }
            Err(e) => return Err(weft_core::error_chain(&e)),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the embedders did not finish generation {n} within {} s ({last_note}); it stays building: run the job again to continue waiting, or `weft-crawler generations abort {n}`",
                options.wait.as_secs()
            ));
        }
        tokio::time::sleep(options.poll).await;
    }
}

/// The switch to `n`, waited for since `waited`, for the job's summary.
fn switch_summary(switched: Switched, n: u32, waited: Instant) -> SwitchSummary {
    let counts = switched.counts.unwrap_or_default();
    let alias = switched.alias.unwrap_or_else(|e| {
        tracing::warn!("the Qdrant alias was not moved: {e}");
        Some(false)
    });
    SwitchSummary {
        from: switched.from,
        to: n,
        documents: counts.documents,
        chunks: counts.catalog_chunks,
        indexed_chunks: counts.indexed,
        waited_ms: waited.elapsed().as_millis() as u64,
        alias,
    }
}
