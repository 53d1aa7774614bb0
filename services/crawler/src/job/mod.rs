//! The organisation-wide crawl as a job (DESIGN §6): many sources, a few
//! at a time, each reported as it ends; one failing source never fails the
//! rest; a job killed halfway and started again skips the sources it
//! finished; `--rebuild` crawls everything into a new index generation and
//! switches to it when the embedders have written all of it.
//!
//! The record of a run is a key-value entry (`weft-crawler-runs`), keyed by
//! what the run does (its sources, in order, and whether it rebuilds): a
//! Kubernetes Job's pod restarted after a kill finds its run unfinished and
//! continues it — a rebuild in the same generation.
//!
//! | file | holds |
//! |---|---|
//! | `runs` | the run's record, the resume policy, each source recorded as done |
//! | `progress` | the sources crawled a few at a time, with progress bars or log lines |
//! | `rebuild` | waiting for the embedders, the completeness check and the switch |
//! | `summary` | the JSON summary, its text, the exit code |
//!
//! Generations are begun, checked, switched and collected by
//! `weft-index`'s [`GenerationManager`] over the crawler's
//! [`NatsStores`](crate::generations::NatsStores).

mod progress;
mod rebuild;
mod runs;
mod summary;

use std::time::{Duration, Instant};

use weft_index::GenerationManager;
use weft_sources::SourceSpec;

pub use runs::RUNS_BUCKET;
pub use summary::{FailedSource, JobSummary, SwitchSummary};

use crate::generations::NatsStores;
use crate::{CrawlError, Crawler};
use runs::{Bookkeeping, Runs};

/// How to run a job.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// Publish every document, changed or not (into the live generation).
    pub reindex: bool,
    /// Crawl every source into a new generation and switch to it when the
    /// embedders have written all of it.
    pub rebuild: bool,
    /// Sources crawled at once.
    pub concurrency: usize,
    /// How long a rebuild waits for the embedders before it gives up (the
    /// generation stays building: a rerun continues it).
    pub wait: Duration,
    /// How often a rebuild checks the embedders' progress.
    pub poll: Duration,
    /// An unfinished run started less than this long ago is continued.
    pub resume_within: Duration,
    /// Retired generations older than this are removed at the end of a job
    /// (`[generations] grace_secs`).
    pub grace: Duration,
    /// Show progress bars (a terminal); else one log line per source.
    pub progress: bool,
}

impl Default for JobOptions {
    fn default() -> Self {
        Self {
            reindex: false,
            rebuild: false,
            concurrency: 4,
            wait: Duration::from_secs(6 * 3600),
            poll: Duration::from_secs(5),
            resume_within: Duration::from_secs(12 * 3600),
            grace: Duration::from_secs(600),
            progress: false,
        }
    }
}

impl Crawler {
    /// Runs `work` as one job (see the module documentation).
    pub async fn run_job(
        &self,
        work: &[(SourceSpec, String)],
        config: &weft_config::WeftConfig,
        locations: &weft_config::Locations,
        options: &JobOptions,
    ) -> Result<JobSummary, CrawlError> {
        let started = Instant::now();
        let registry = self.jet().registry().await?;
        let stores = NatsStores::new(self.jet(), config, locations);
        let manager = GenerationManager::new(&registry, &stores).with_grace(options.grace);
        let runs = Runs::open(self.jet(), work, options).await?;
        let start = runs.start(&manager, options).await?;
        let generation = start.run.generation;
        let book = Bookkeeping::new(&runs, &manager, start.run);
        let (already_done, mut todo) = book.split(work);
        // Sources with a kept checkout first, and the checkouts of those
        // still to come kept until their turn (crawl.max_checkout_bytes).
        self.planner
            .checkouts()
            .plan_run(&mut todo, |(spec, project)| {
                matches!(spec, SourceSpec::Git(_)).then_some(project.as_str())
            });
        tracing::info!(
            run = %runs.key(),
            generation,
            rebuild = options.rebuild,
            sources = work.len(),
            done_before = already_done.len(),
            "crawl job"
        );
        let target = self.target(generation).await?;
        // Branch overlays are compared with their projects: projects first.
        let (overlays, bases): (Vec<_>, Vec<_>) = todo
            .into_iter()
            .partition(|(_, project)| weft_core::overlays::split_overlay(project).is_some());
        let mut results = self.crawl_all(bases, &target, &book, options).await;
        if !overlays.is_empty() {
            results.extend(self.crawl_all(overlays, &target, &book, options).await);
        }
        self.jet().flush().await?;
        let mut summary = JobSummary::new(
            runs.key().to_owned(),
            start.resumed,
            options.rebuild,
            generation,
            already_done,
        );
        summary.add_results(results);
        if options.rebuild {
            let expected = book.record().expected_documents;
            rebuild::end_rebuild(&manager, generation, expected, options, &mut summary).await;
        }
        // A run that ran to its end is done, failed sources and all (the
        // next run tries them again); a rebuild is done when it switched.
        // Only a run cut short (killed) is continued.
        if !options.rebuild || summary.switch.is_some() || summary.aborted {
            book.finish().await?;
        }
        summary.removed_generations = collect(&manager).await;
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(summary)
    }
}

/// Removes old generations at the end of a job: what was removed (a
/// failure is logged; the next job or `generations gc` tries again).
async fn collect(manager: &GenerationManager<'_>) -> Vec<u32> {
    match manager.gc().await {
        Ok(collected) => collected.removed,
        Err(e) => {
            tracing::warn!("cannot remove old generations: {e}");
            Vec::new()
        }
    }
}
