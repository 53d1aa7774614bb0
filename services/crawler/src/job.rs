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

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use futures::StreamExt as _;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use weft_core::generations::{GenerationState, Generations, now_secs};
use weft_core::ports::GenerationRegistry;
use weft_sources::SourceSpec;

use crate::{CrawlError, CrawlOptions, Crawler, SourceSummary, Target};

/// The key-value bucket of the runs' records.
pub const RUNS_BUCKET: &str = "weft-crawler-runs";

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

/// A source that failed as a whole.
#[derive(Debug, Clone, Serialize)]
pub struct FailedSource {
    /// Its project.
    pub project: String,
    /// The source as given.
    pub source: String,
    /// Why.
    pub error: String,
}

/// The switch at the end of a rebuild.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchSummary {
    /// The generation live before.
    pub from: Option<u32>,
    /// The generation live now.
    pub to: u32,
    /// Documents its catalog records.
    pub documents: u64,
    /// Chunks its catalog records.
    pub chunks: u64,
    /// Chunks its indexes hold, where the crawler can count them
    /// (server stores, or embedded ones in a data directory it can read).
    pub indexed_chunks: Option<(u64, u64)>,
    /// How long the embedders took after the last publish.
    pub waited_ms: u64,
    /// Whether the Qdrant alias now names the new collection (`None`: no Qdrant).
    pub alias: Option<bool>,
}

/// What a job did: the JSON summary a Kubernetes Job leaves in its log.
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    /// The run's key.
    pub run: String,
    /// Whether an unfinished run was continued.
    pub resumed: bool,
    /// Whether it rebuilt.
    pub rebuild: bool,
    /// The generation written.
    pub generation: u32,
    /// Each source crawled now.
    pub sources: Vec<SourceSummary>,
    /// Sources an earlier, interrupted attempt of the run finished.
    pub already_done: Vec<String>,
    /// Sources that failed.
    pub failed: Vec<FailedSource>,
    /// The switch, when a rebuild made one.
    pub switch: Option<SwitchSummary>,
    /// Why a rebuild did not switch.
    pub not_switched: Option<String>,
    /// Whether the rebuild's generation was aborted (by the operator).
    pub aborted: bool,
    /// Old generations removed at the end.
    pub removed_generations: Vec<u32>,
    /// Wall time.
    pub elapsed_ms: u64,
}

impl JobSummary {
    /// The exit code a Kubernetes Job understands: 0 when the job did its
    /// work — even when some sources failed (they are listed; the next run
    /// tries them again) — and 1 when it did not: every source failed, or a
    /// rebuild did not switch.
    pub fn exit_code(&self) -> u8 {
        let nothing_worked =
            !self.failed.is_empty() && self.sources.is_empty() && self.already_done.is_empty();
        // An operator's abort is not the job failing (and a retried pod
        // must not start another rebuild).
        let rebuild_failed = self.rebuild && self.switch.is_none() && !self.aborted;
        u8::from(nothing_worked || rebuild_failed)
    }
}

/// The record of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RunRecord {
    started_at: u64,
    generation: u32,
    rebuild: bool,
    /// `project\nsource` of every source finished.
    done: Vec<String>,
    finished: bool,
    /// Documents the finished sources left in the generation (published
    /// or found unchanged), for a rebuild's completeness check.
    #[serde(default)]
    expected_documents: u64,
}

/// The summary as people read it: a line per source (with what it skipped
/// or failed on), then the switch of a rebuild and the generations removed.
impl std::fmt::Display for JobSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for s in &self.sources {
            let read = match &s.diffed_from {
                Some(base) => format!(" (git diff from {})", &base[..base.len().min(12)]),
                None => String::new(),
            };
            writeln!(
                f,
                "{}: {} documents{read}, {} published, {} unchanged, {} deleted, {} skipped, {} errors ({:.1} s)",
                s.project,
                s.documents_seen,
                s.documents_published,
                s.documents_unchanged,
                s.documents_deleted,
                s.skipped.len(),
                s.errors.len(),
                s.elapsed_ms as f64 / 1000.0
            )?;
            for issue in s.skipped.iter().chain(&s.errors) {
                writeln!(f, "  {}: {}", issue.uri, issue.reason)?;
            }
        }
        for source in &self.already_done {
            writeln!(f, "{source}: done by an earlier attempt of this run")?;
        }
        for failed in &self.failed {
            writeln!(f, "{}: FAILED: {}", failed.project, failed.error)?;
        }
        if let Some(s) = &self.switch {
            writeln!(
                f,
                "index generation {} is live (was {}): {} documents, {} chunks; the embedders finished {:.1} s after the last publish",
                s.to,
                s.from
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "none".into()),
                s.documents,
                s.chunks,
                s.waited_ms as f64 / 1000.0
            )?;
        }
        if let Some(why) = &self.not_switched {
            writeln!(f, "not switched: {why}")?;
        }
        if !self.removed_generations.is_empty() {
            writeln!(f, "removed old generations {:?}", self.removed_generations)?;
        }
        Ok(())
    }
}

fn source_key(spec: &SourceSpec, project: &str) -> String {
    format!("{project}\n{}", spec.display())
}

/// The key of a run: what it does.
fn run_key(work: &[(SourceSpec, String)], rebuild: bool, reindex: bool) -> String {
    let mut hash = sha2::Sha256::new();
    let mode = match (rebuild, reindex) {
        (true, _) => "rebuild\n",
        (false, true) => "reindex\n",
        (false, false) => "crawl\n",
    };
    hash.update(mode.as_bytes());
    for (spec, project) in work {
        hash.update(source_key(spec, project).as_bytes());
        hash.update(b"\0");
    }
    hex::encode(&hash.finalize()[..8])
}

/// The runs' records.
struct Runs {
    store: kv::Store,
    key: String,
}

impl Runs {
    async fn load(&self) -> Result<Option<RunRecord>, CrawlError> {
        let entry = self
            .store
            .entry(&self.key)
            .await
            .map_err(|e| nats_error("read the run record", e))?;
        Ok(match entry {
            Some(e) if e.operation == kv::Operation::Put => serde_json::from_slice(&e.value).ok(),
            _ => None,
        })
    }

    async fn save(&self, record: &RunRecord) -> Result<(), CrawlError> {
        let bytes =
            serde_json::to_vec(record).map_err(|e| nats_error("encode the run record", e))?;
        self.store
            .put(&self.key, bytes.into())
            .await
            .map_err(|e| nats_error("write the run record", e))?;
        Ok(())
    }
}

fn nats_error(what: &str, e: impl std::fmt::Display) -> CrawlError {
    CrawlError::Nats(weft_nats::NatsError::JetStream {
        what: what.to_owned(),
        source: e.to_string().into(),
    })
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
        let runs = Runs {
            store: self
                .jet()
                .bucket(RUNS_BUCKET, "weft-crawler runs: what each job finished")
                .await?,
            key: run_key(work, options.rebuild, options.reindex),
        };
        let record = registry.load().await?;
        let previous = runs.load().await?;
        let fresh_enough = |r: &RunRecord| {
            now_secs().saturating_sub(r.started_at) < options.resume_within.as_secs()
        };
        // Continue an interrupted run: an incremental one whose generation
        // is still live, a rebuild whose generation is still building.
        let mut resumed = previous
            .filter(|r| !r.finished && fresh_enough(r))
            .filter(|r| {
                let state = record.get(r.generation).map(|g| g.state);
                if r.rebuild {
                    state == Some(GenerationState::Building)
                } else {
                    record.live_number() == Some(r.generation)
                }
            });
        let generation = match (&resumed, options.rebuild) {
            (Some(r), _) => r.generation,
            (None, false) => record.live_number().unwrap_or(0),
            (None, true) => {
                let based_on = record.live_number();
                let now = now_secs();
                let written = registry
                    .update(&|g: &mut Generations| g.begin(now, based_on).map(|_| ()))
                    .await
                    .map_err(|e| CrawlError::Generations(e.to_string()))?;
                written.building().map(|g| g.number).ok_or_else(|| {
                    CrawlError::Generations("the new generation is not recorded".into())
                })?
            }
        };
        let continued = resumed.is_some();
        let mut run = resumed.take().unwrap_or_else(|| RunRecord {
            started_at: now_secs(),
            generation,
            rebuild: options.rebuild,
            ..Default::default()
        });
        runs.save(&run).await?;
        tracing::info!(
            run = %runs.key,
            generation,
            rebuild = options.rebuild,
            sources = work.len(),
            done_before = run.done.len(),
            "crawl job"
        );
        let target = self.target(generation).await?;
        let already_done: Vec<String> = work
            .iter()
            .filter(|(spec, project)| run.done.contains(&source_key(spec, project)))
            .map(|(spec, _)| spec.display())
            .collect();
        let todo: Vec<&(SourceSpec, String)> = work
            .iter()
            .filter(|(spec, project)| !run.done.contains(&source_key(spec, project)))
            .collect();
        let bars = options.progress.then(MultiProgress::new);
        let total = todo.len();
        let state = Arc::new(Mutex::new(run.clone()));
        let finished_count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let results: Vec<(String, String, Result<SourceSummary, CrawlError>)> =
            futures::stream::iter(todo)
                .map(|(spec, project)| {
                    let bar = match &bars {
                        Some(m) => {
                            let bar = m.add(ProgressBar::new(0));
                            if let Ok(style) = ProgressStyle::with_template(
                                "{spinner} {msg:24} [{bar:30}] {pos}/{len} {per_sec}",
                            ) {
                                bar.set_style(style);
                            }
                            bar
                        }
                        None => ProgressBar::hidden(),
                    };
                    let crawl_options = CrawlOptions {
                        reindex: options.reindex,
                        progress: bar.clone(),
                    };
                    let (target, runs, state, finished_count, registry, rebuild) = (
                        target.clone(),
                        &runs,
                        state.clone(),
                        finished_count.clone(),
                        &registry,
                        options.rebuild,
                    );
                    async move {
                        let result = self.crawl(spec, project, &target, &crawl_options).await;
                        bar.finish_and_clear();
                        let n = finished_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        match &result {
                            Ok(s) => {
                                tracing::info!(
                                    "[{n}/{total}] {project}: {} documents, {} published, {} unchanged, {} deleted, {} errors",
                                    s.documents_seen,
                                    s.documents_published,
                                    s.documents_unchanged,
                                    s.documents_deleted,
                                    s.errors.len()
                                );
                                let snapshot = {
                                    let mut run = state.lock().unwrap_or_else(|p| p.into_inner());
                                    run.done.push(source_key(spec, project));
                                    run.expected_documents +=
                                        (s.documents_published + s.documents_unchanged) as u64;
                                    run.clone()
                                };
                                if let Err(e) = runs.save(&snapshot).await {
                                    tracing::warn!("cannot record {project} as done: {e}");
                                }
                                // What the rebuild has published so far, for
                                // `generations list` and a hand switch.
                                if rebuild {
                                    let expected = snapshot.expected_documents;
                                    let n = target.generation;
                                    if let Err(e) = registry
                                        .update(&|g: &mut Generations| {
                                            if let Some(b) = g.generations.iter_mut().find(|x| x.number == n) {
                                                b.expected_documents = Some(expected);
                                                b.note = Some("crawling".into());
                                            }
                                            Ok(())
                                        })
                                        .await
                                    {
                                        tracing::warn!("cannot record the rebuild's progress: {e}");
                                    }
                                }
                            }
                            Err(e) => tracing::warn!("[{n}/{total}] {project}: FAILED: {}", weft_core::error_chain(e)),
                        }
                        (project.clone(), spec.display(), result)
                    }
                })
                .buffer_unordered(options.concurrency.max(1))
                .collect()
                .await;
        self.jet().flush().await?;
        let mut summary = JobSummary {
            run: runs.key.clone(),
            resumed: continued,
            rebuild: options.rebuild,
            generation,
            sources: Vec::new(),
            already_done,
            failed: Vec::new(),
            switch: None,
            not_switched: None,
            aborted: false,
            removed_generations: Vec::new(),
            elapsed_ms: 0,
        };
        for (project, source, result) in results {
            match result {
                Ok(s) => summary.sources.push(s),
                Err(e) => summary.failed.push(FailedSource {
                    project,
                    source,
                    error: weft_core::error_chain(&e),
                }),
            }
        }
        run = state.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if options.rebuild {
            if summary.failed.is_empty() {
                match self
                    .finish_rebuild(
                        &registry,
                        &target,
                        run.expected_documents,
                        config,
                        locations,
                        options,
                    )
                    .await
                {
                    Ok(switch) => summary.switch = Some(switch),
                    Err(why) => {
                        summary.aborted = registry.load().await.is_ok_and(|g| {
                            g.get(generation).map(|x| x.state) == Some(GenerationState::Aborted)
                        });
                        summary.not_switched = Some(why);
                    }
                }
            } else {
                summary.not_switched = Some(format!(
                    "{} source(s) failed; generation {generation} stays building: run the job again to continue it, or `weft-crawler generations abort {generation}`",
                    summary.failed.len()
                ));
            }
        }
        // A run that ran to its end is done, failed sources and all (the
        // next run tries them again); a rebuild is done when it switched.
        // Only a run cut short (killed) is continued.
        let complete = !options.rebuild || summary.switch.is_some() || summary.aborted;
        if complete {
            run.finished = true;
            runs.save(&run).await?;
        }
        summary.removed_generations =
            crate::generations::collect(&registry, self.jet(), config, locations, options.grace)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!("cannot remove old generations: {e}");
                    Vec::new()
                });
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(summary)
    }

    /// Waits until the embedders have written every document the rebuild
    /// left in `target` and the generation's counts agree, then switches.
    async fn finish_rebuild(
        &self,
        registry: &dyn GenerationRegistry,
        target: &Target,
        expected: u64,
        config: &weft_config::WeftConfig,
        locations: &weft_config::Locations,
        options: &JobOptions,
    ) -> Result<SwitchSummary, String> {
        let n = target.generation;
        registry
            .update(&|g: &mut Generations| {
                if let Some(building) = g.generations.iter_mut().find(|x| x.number == n) {
                    building.expected_documents = Some(expected);
                    building.note = Some("published: waiting for the embedders".into());
                }
                Ok(())
            })
            .await
            .map_err(|e| format!("cannot record what the rebuild published: {e}"))?;
        let waited = Instant::now();
        let deadline = waited + options.wait;
        let mut last_note = String::new();
        let mut counter = crate::generations::Counter::new(self.jet(), config, locations);
        loop {
            let check = crate::generations::check_complete(
                registry,
                &mut counter,
                &target.catalog,
                n,
                expected,
            )
            .await;
            match check {
                Ok(Some(counts)) => {
                    let from = registry.load().await.ok().and_then(|g| g.live_number());
                    let now = now_secs();
                    registry
                        .update(&|g: &mut Generations| g.switch_to(n, now))
                        .await
                        .map_err(|e| e.to_string())?;
                    let alias = weft_wiring::point_live_alias(&config.stores, n)
                        .await
                        .unwrap_or_else(|e| {
                            tracing::warn!("the Qdrant alias was not moved: {e}");
                            Some(false)
                        });
                    tracing::info!(from = ?from, to = n, "switched the live index generation");
                    return Ok(SwitchSummary {
                        from,
                        to: n,
                        documents: counts.documents,
                        chunks: counts.catalog_chunks,
                        indexed_chunks: counts.indexed,
                        waited_ms: waited.elapsed().as_millis() as u64,
                        alias,
                    });
                }
                Ok(None) => {}
                Err(crate::generations::Incomplete::Waiting(note)) => {
                    if note != last_note {
                        tracing::info!("generation {n}: {note}");
                        last_note = note;
                    }
                }
                // Waiting longer will not help.
                Err(crate::generations::Incomplete::Stuck(why)) => {
                    return Err(format!(
                        "generation {n}: {why}; it stays building: fix the cause and run the job again, or `weft-crawler generations abort {n}`"
                    ));
                }
                Err(crate::generations::Incomplete::Aborted(why)) => {
                    return Err(format!("generation {n} {why}"));
                }
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
}
