//! `weft index` over the data directory: the sources indexed into a new
//! generation built beside the live one, switched to when complete, so no
//! reader ever sees an index half written or emptied (DESIGN §6, the
//! embedded form of "re-index without downtime").
//!
//! With server stores (`[stores]` naming Qdrant or Meilisearch) the run
//! writes the live indexes in place, as the distributed embedders do: the
//! servers serve readers and writers at once, and their generations are
//! built by `weft-crawler --rebuild`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::ProgressBar;
use serde::Serialize;
use weft_config::{Locations, WeftConfig};
use weft_core::ports::{Catalog, Embedder, PortError};
use weft_sources::SourceSpec;
use weft_wiring::generations::{FileRegistry, GenerationBuild, GenerationCounts};
use weft_wiring::{self as wiring, DataDir, DataDirError, IndexStores, Load, Stores, WiringError};

use crate::generations::{
    Begin, Collected, DataDirStores, GenerationManager, GenerationsError, Resume, SwitchCheck,
};
use crate::indexer::{IndexError, IndexOptions, IndexSummary, Indexer};

/// One source of a run.
#[derive(Debug, Clone)]
pub struct RunSource {
    /// The source.
    pub spec: SourceSpec,
    /// Its project (default: derived from the source).
    pub project: Option<String>,
}

/// How the run treats the index.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Cut and write every document of the sources again (`--reindex`): a
    /// new generation, switched to when complete. With another embedding
    /// model than the live generation's, every project the data directory
    /// holds is indexed again, from the source it was indexed from.
    pub rebuild: bool,
    /// Whose git the run trusts: the user's own (`weft index`), or only
    /// what `[crawl]` allows (sources a remote caller names).
    pub git: GitTrust,
    /// A token budget for this run, over `embedding.max_embed_tokens`: a
    /// run that would embed more is refused before it embeds anything.
    pub max_embed_tokens: Option<u64>,
    /// Branch overlays (`P@B`, [`weft_core::overlays`]) to drop before the
    /// sources are indexed: their chunks and records go; their base stays.
    pub drop: Vec<String>,
}

/// Which git a run's sources may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GitTrust {
    /// The user's own git on their own machine: any transport, any
    /// address, their ssh and proxies ([`weft_sources::GitPolicy::local`]).
    #[default]
    Local,
    /// Only what `[crawl]` allows, as the distributed crawler: its
    /// `git_protocols`, public addresses (unless `allow_private_networks`
    /// lists them), its proxy. For sources named by a remote caller (the
    /// MCP `index` tool over HTTP).
    Crawl,
}

impl GitTrust {
    /// The git policy of this trust under `config`.
    pub(crate) fn policy(self, config: &WeftConfig) -> Result<weft_sources::GitPolicy, RunError> {
        match self {
            GitTrust::Local => Ok(weft_sources::GitPolicy::local()),
            GitTrust::Crawl => weft_sources::GitPolicy::from_crawl_config(&config.crawl)
                .map_err(|e| RunError::Setting(e.to_string())),
        }
    }
}

/// What happened to the generations.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GenerationOutcome {
    /// The live generation after the run.
    pub live: Option<u32>,
    /// The live generation before it.
    pub previous: Option<u32>,
    /// The generation the run wrote (none: nothing changed, or the stores
    /// are written in place).
    pub written: Option<u32>,
    /// Whether the run switched to it.
    pub switched: bool,
    /// Bytes of the live generation's indexes copied to start it.
    pub copied_bytes: u64,
    /// What its stores hold, checked before the switch.
    pub counts: Option<GenerationCounts>,
    /// Old generations removed, and those kept because a process still reads them.
    pub collected: Collected,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct RunOutcome {
    /// Each source's summary, in order.
    pub summaries: Vec<IndexSummary>,
    /// Sources that failed as a whole, with the error.
    pub failed: Vec<(String, IndexError)>,
    /// The generations.
    pub generation: GenerationOutcome,
}

/// Why a run did not happen or did not switch.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The data directory could not be read or written.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// The stores or the model could not be set up.
    #[error(transparent)]
    Wiring(#[from] WiringError),
    /// The live index was made with another model.
    #[error(
        "{dir} holds vectors of {indexed}, not of the configured {configured}; `weft index --reindex` builds a new generation with {configured} (every project is indexed again from its source), or use another --data-dir"
    )]
    OtherModel {
        /// The data directory.
        dir: String,
        /// The live generation's model.
        indexed: String,
        /// The configured one.
        configured: String,
    },
    /// A project that must be indexed again cannot be.
    #[error("project {project}: {message}")]
    Project {
        /// The project.
        project: String,
        /// Why.
        message: String,
    },
    /// A store failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// A setting the run needs is invalid.
    #[error("{0}")]
    Setting(String),
    /// The indexer could not be set up.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The new generation was not begun or not switched to; the live one
    /// stays.
    #[error("{0}; the live generation is unchanged")]
    Generations(#[from] GenerationsError),
    /// The run would embed more tokens than its budget allows: nothing was
    /// embedded or written.
    #[error(
        "this run would embed about {tokens} tokens ({chunks} chunks), over the budget of {budget} (embedding.max_embed_tokens, or --max-embed-tokens); nothing was embedded or written. `weft index --dry-run` lists what the sources hold; raise the budget or index fewer sources"
    )]
    OverBudget {
        /// Tokens the run would embed.
        tokens: u64,
        /// Chunks it would embed.
        chunks: usize,
        /// The budget.
        budget: u64,
    },
    /// A rebuild lost sources: switching would drop what they held.
    #[error(
        "not switching to generation {generation}: {count} source(s) failed ({first}); the live generation is unchanged"
    )]
    Incomplete {
        /// The generation not switched to.
        generation: u32,
        /// Failed sources.
        count: usize,
        /// The first failure.
        first: String,
    },
}

/// Indexes `sources` into the data directory `config` and `locations`
/// name: into a new generation switched to when complete (embedded
/// stores), or in place (server stores). `progress` makes each source's
/// progress bar; `on_wait` is called when another `weft index` holds the
/// data directory (the run then waits); `on_summary` sees each source's
/// summary as it is done.
pub async fn index_sources(
    config: &WeftConfig,
    locations: &Locations,
    sources: Vec<RunSource>,
    options: RunOptions,
    progress: &(dyn Fn() -> ProgressBar + Sync),
    on_wait: impl FnOnce(),
    on_summary: &mut (dyn FnMut(&IndexSummary) + Send),
) -> Result<RunOutcome, RunError> {
    let data = DataDir::new(&locations.data_dir);
    let all_embedded = config.stores.vector == weft_config::VectorStoreKind::Embedded
        && config.stores.text == weft_config::TextStoreKind::Embedded;
    let _writer = data.lock_writer(on_wait)?;
    if let Some(budget) = options
        .max_embed_tokens
        .or(config.embedding.max_embed_tokens)
    {
        // Under the write lock, so the index does not change in between.
        let estimate = crate::estimate::estimate_sources(
            config,
            locations,
            &sources,
            &options,
            &ProgressBar::hidden,
        )
        .await?;
        if estimate.over_budget {
            return Err(RunError::OverBudget {
                tokens: estimate.tokens_to_embed,
                chunks: estimate.chunks_to_embed,
                budget,
            });
        }
    }
    let outcome = if all_embedded {
        embedded(
            config, locations, &data, sources, options, progress, on_summary,
        )
        .await?
    } else {
        in_place(config, locations, sources, options, progress, on_summary).await?
    };
    let model = wiring::configured_model_id(&config.embedding, &locations.model_dir);
    crate::estimate::record_throughput(
        &data,
        &wiring::embedder_tag(&config.embedding, &model),
        &outcome.summaries,
    );
    Ok(outcome)
}

/// A run over embedded stores: into a new generation, switched to when
/// complete.
async fn embedded(
    config: &WeftConfig,
    locations: &Locations,
    data: &DataDir,
    sources: Vec<RunSource>,
    options: RunOptions,
    progress: &(dyn Fn() -> ProgressBar + Sync),
    on_summary: &mut (dyn FnMut(&IndexSummary) + Send),
) -> Result<RunOutcome, RunError> {
    let embedder = wiring::embedder(config, locations, Load::WhenNeeded).await?;
    let model_changed = model_changed(data, &*embedder, &options)?;
    let registry = FileRegistry::new(data.clone());
    let stores = DataDirStores::new(data.clone(), &config.stores);
    // No grace period: a reader's lease keeps the generation it reads.
    let manager = GenerationManager::new(&registry, &stores);
    // Under the write lock: a building generation is an interrupted run's.
    let begun = manager
        .begin(&Begin {
            model: Some((embedder.model_id(), embedder.dimension())),
            model_changed,
            resume: Resume::Interrupted,
        })
        .await?;
    let run = EmbeddedRun {
        config,
        data: data.clone(),
        manager: &manager,
        build: GenerationBuild {
            target: data.generation(begun.number),
            live: begun.live.map(|n| data.generation(n)),
            fresh: begun.live.is_none() || model_changed,
            resumed: begun.resumed,
        },
        model_changed,
    };
    match run
        .write(embedder, sources, options, progress, on_summary)
        .await
    {
        Ok(mut outcome) => {
            // The switch is done: a generation that cannot be removed now
            // is removed by a later run.
            match manager.gc().await {
                Ok(collected) => outcome.generation.collected = collected,
                Err(e) => tracing::warn!("cannot remove old index generations yet: {e}"),
            }
            Ok(outcome)
        }
        Err(e) => {
            // The live generation stays; what was built is dropped.
            let dropped = match manager.abort(begun.number, &e.to_string()).await {
                Ok(_) => manager.gc().await.map(|_| ()),
                Err(abort) => Err(abort),
            };
            if let Err(dropped) = dropped {
                tracing::warn!("could not remove the unfinished generation: {dropped}");
            }
            Err(e)
        }
    }
}

/// Whether the embedder's model differs from the live generation's: a
/// rebuild starts empty then, anything else is refused.
fn model_changed(
    data: &DataDir,
    embedder: &dyn Embedder,
    options: &RunOptions,
) -> Result<bool, RunError> {
    let live_meta = data.meta()?;
    let changed = live_meta
        .as_ref()
        .is_some_and(|m| m.model != embedder.model_id() || m.dimension != embedder.dimension());
    if changed && !options.rebuild {
        return Err(RunError::OtherModel {
            dir: data.path().display().to_string(),
            indexed: live_meta.map(|m| m.model).unwrap_or_default(),
            configured: embedder.model_id().to_owned(),
        });
    }
    Ok(changed)
}

/// One `weft index` run over embedded stores: the generation it writes.
struct EmbeddedRun<'a> {
    config: &'a WeftConfig,
    data: DataDir,
    manager: &'a GenerationManager<'a>,
    build: GenerationBuild,
    model_changed: bool,
}

impl EmbeddedRun<'_> {
    /// Writes the sources into the new generation and switches to it when
    /// something changed and it is complete.
    async fn write(
        &self,
        embedder: Arc<dyn Embedder>,
        mut sources: Vec<RunSource>,
        options: RunOptions,
        progress: &(dyn Fn() -> ProgressBar + Sync),
        on_summary: &mut (dyn FnMut(&IndexSummary) + Send),
    ) -> Result<RunOutcome, RunError> {
        let target = self.build.target.number();
        let mut outcome = RunOutcome::default();
        outcome.generation.previous = self.build.live.as_ref().map(|g| g.number());
        outcome.generation.written = Some(target);
        if self.model_changed {
            // Every project of the live generation comes again, from its source.
            add_live_projects(&self.build, &mut sources).await?;
        }
        self.build.copy_catalog()?;
        let catalog: Arc<dyn Catalog> = Arc::new(self.build.target.open_catalog()?);
        let copied = Arc::new(AtomicU64::new(0));
        let open = open_on_first_write(&self.build, &*embedder, copied.clone());
        let indexer = Indexer::on_first_write(
            catalog.clone(),
            open,
            embedder,
            self.config,
            self.data.sources_dir(),
        )?
        .with_git_policy(options.git.policy(self.config)?);
        let reindex = options.rebuild && !self.model_changed;
        drop_each(&indexer, &options.drop, on_summary, &mut outcome).await;
        index_each(
            &indexer,
            &sources,
            reindex,
            progress,
            on_summary,
            &mut outcome,
        )
        .await;
        self.refuse_lost_sources(&outcome)?;
        let Some(stores) = self.written_stores(&indexer).await? else {
            // Nothing changed: the live generation stays as it is.
            drop(indexer);
            drop(catalog);
            self.manager.abort(target, "nothing to write").await?;
            outcome.generation.written = None;
            outcome.generation.live = outcome.generation.previous;
            return Ok(outcome);
        };
        stores.vectors.commit().await?;
        stores.text.commit().await?;
        self.check_projects(&stores, &outcome).await?;
        let counts = GenerationCounts::of(&stores).await?;
        // Every handle closed before the switch, so readers can open it.
        drop(stores);
        drop(indexer);
        drop(catalog);
        self.manager
            .switch(target, SwitchCheck::Counted(counts.into()))
            .await?;
        outcome.generation.counts = Some(counts);
        outcome.generation.switched = true;
        outcome.generation.live = Some(target);
        outcome.generation.copied_bytes = copied.load(Ordering::Relaxed);
        Ok(outcome)
    }

    /// A rebuild started empty (another model) that lost sources would
    /// drop what they held: not switched to.
    fn refuse_lost_sources(&self, outcome: &RunOutcome) -> Result<(), RunError> {
        match outcome.failed.first() {
            Some((source, error)) if self.build.fresh && self.build.live.is_some() => {
                Err(RunError::Incomplete {
                    generation: self.build.target.number(),
                    count: outcome.failed.len(),
                    first: format!("{source}: {error}"),
                })
            }
            _ => Ok(()),
        }
    }

    /// The stores the run wrote, if it wrote any. An index in an older text
    /// format than this weft reads is rebuilt (in the new generation) even
    /// when no document changed; a continued first index is switched to
    /// even when its interrupted run had written everything.
    async fn written_stores(&self, indexer: &Indexer) -> Result<Option<Stores>, RunError> {
        let outdated = self
            .build
            .live
            .as_ref()
            .is_some_and(|live| weft_wiring::text_is_outdated(live.path()));
        if indexer.written_stores().is_none() && (outdated || self.build.resumed) {
            indexer.stores().await?;
        }
        Ok(indexer.written_stores().cloned())
    }

    /// A generation never goes live without a project the live one has
    /// (no command removes projects: losing one is a bug or a cut-short
    /// copy), but for the branch overlays the run dropped.
    async fn check_projects(&self, stores: &Stores, outcome: &RunOutcome) -> Result<(), RunError> {
        let Some(live) = &self.build.live else {
            return Ok(());
        };
        let before = project_names(live)?;
        let mut after: HashSet<String> = stores
            .catalog
            .projects()
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        after.extend(
            outcome
                .summaries
                .iter()
                .filter(|s| s.overlay.as_ref().is_some_and(|o| o.dropped))
                .map(|s| s.project.clone()),
        );
        match before.iter().find(|p| !after.contains(*p)) {
            Some(missing) => Err(RunError::Project {
                project: missing.clone(),
                message: format!(
                    "generation {} does not hold it; not switching (the live generation is unchanged)",
                    self.build.target.number()
                ),
            }),
            None => Ok(()),
        }
    }
}

/// How the run opens the new generation's indexes on its first write:
/// copied from the live generation (unless it starts empty or is
/// continued; the bytes copied go to `copied`), then opened for `embedder`'s
/// model.
fn open_on_first_write(
    build: &GenerationBuild,
    embedder: &dyn Embedder,
    copied: Arc<AtomicU64>,
) -> crate::indexer::OpenIndexes {
    let (target, live, fresh, resumed) = (
        build.target.clone(),
        build.live.clone(),
        build.fresh,
        build.resumed,
    );
    let (model, dimension) = (embedder.model_id().to_owned(), embedder.dimension());
    Box::new(move || {
        let probe = GenerationBuild {
            target: target.clone(),
            live: live.clone(),
            fresh,
            resumed,
        };
        let (model, copied) = (model.clone(), copied.clone());
        Box::pin(async move {
            let opened =
                tokio::task::spawn_blocking(move || -> Result<IndexStores, DataDirError> {
                    copied.store(probe.copy_indexes()?, Ordering::Relaxed);
                    probe.target.open_indexes(&model, dimension)
                })
                .await
                .map_err(|e| {
                    // The thread panicked.
                    IndexError::Port(PortError::internal(
                        "opening the new generation",
                        e.to_string(),
                    ))
                })?;
            opened.map_err(|e| IndexError::Port(PortError::new(e.kind(), "data directory", e)))
        })
    })
}

/// Indexes each source with `indexer`, recording each summary (shown to
/// `on_summary`) or failure in `outcome`.
async fn index_each(
    indexer: &Indexer,
    sources: &[RunSource],
    reindex: bool,
    progress: &(dyn Fn() -> ProgressBar + Sync),
    on_summary: &mut (dyn FnMut(&IndexSummary) + Send),
    outcome: &mut RunOutcome,
) {
    for source in sources {
        let run_options = IndexOptions {
            project: source.project.clone(),
            reindex,
            progress: progress(),
        };
        match indexer.index(&source.spec, &run_options).await {
            Ok(summary) => {
                on_summary(&summary);
                outcome.summaries.push(summary);
            }
            Err(e) => {
                run_options.progress.finish_and_clear();
                outcome.failed.push((source.spec.display(), e));
            }
        }
    }
}

/// Drops each branch overlay of `projects` with `indexer`, recording each
/// summary (shown to `on_summary`) or failure in `outcome`.
async fn drop_each(
    indexer: &Indexer,
    projects: &[String],
    on_summary: &mut (dyn FnMut(&IndexSummary) + Send),
    outcome: &mut RunOutcome,
) {
    for project in projects {
        match indexer.drop_overlay(project).await {
            Ok(summary) => {
                on_summary(&summary);
                outcome.summaries.push(summary);
            }
            Err(e) => outcome.failed.push((project.clone(), e)),
        }
    }
}

/// The projects a generation's catalog records (read from a copy: a reader
/// may hold it open).
fn project_names(generation: &wiring::GenerationDir) -> Result<HashSet<String>, RunError> {
    let from = generation.catalog_path();
    if !from.exists() {
        return Ok(HashSet::new());
    }
    let scratch = tempfile_path(&from);
    std::fs::copy(&from, &scratch).map_err(|e| DataDirError::Io {
        path: from.clone(),
        source: e,
    })?;
    let names = weft_catalog_redb::RedbCatalog::open(&scratch)
        .map_err(catalog_error)
        .and_then(|c| c.projects().map_err(catalog_error));
    let _ = std::fs::remove_file(&scratch);
    Ok(names?.into_iter().map(|(name, _)| name).collect())
}

/// A catalog's error as the port's.
fn catalog_error(e: weft_catalog_redb::CatalogError) -> PortError {
    PortError::new(e.kind(), "catalog", e)
}

/// A scratch path beside `path`, unique to this process.
fn tempfile_path(path: &std::path::Path) -> std::path::PathBuf {
    path.with_extension(format!("redb.read-{}", std::process::id()))
}

/// Adds the live generation's projects that `sources` does not name, each
/// from the source it was indexed from.
async fn add_live_projects(
    build: &GenerationBuild,
    sources: &mut Vec<RunSource>,
) -> Result<(), RunError> {
    let Some(live) = &build.live else {
        return Ok(());
    };
    let from = live.catalog_path();
    if !from.exists() {
        return Ok(());
    }
    // Read from a copy: a reader may hold the live catalog open.
    let scratch = tempfile_path(&from);
    std::fs::copy(&from, &scratch).map_err(|e| DataDirError::Io {
        path: from.clone(),
        source: e,
    })?;
    let projects = {
        let catalog = weft_catalog_redb::RedbCatalog::open(&scratch).map_err(catalog_error)?;
        catalog.projects().map_err(catalog_error)?
    };
    let _ = std::fs::remove_file(&scratch);
    let named: HashSet<String> = sources
        .iter()
        .map(|s| {
            s.project
                .clone()
                .unwrap_or_else(|| s.spec.default_project())
        })
        .collect();
    // A branch overlay is planned over its base: bases first.
    let (bases, overlays): (Vec<_>, Vec<_>) =
        projects.into_iter().partition(|(_, s)| s.overlay.is_none());
    for (project, state) in bases.into_iter().chain(overlays) {
        if named.contains(&project) {
            continue;
        }
        let spec = SourceSpec::parse(&state.source).map_err(|message| RunError::Project {
            project: project.clone(),
            message: format!(
                "its recorded source {:?} cannot be read again: {message}",
                state.source
            ),
        })?;
        sources.push(RunSource {
            spec,
            project: Some(project),
        });
    }
    Ok(())
}

/// A run over server stores: in place, as before generations.
async fn in_place(
    config: &WeftConfig,
    locations: &Locations,
    sources: Vec<RunSource>,
    options: RunOptions,
    progress: &(dyn Fn() -> ProgressBar + Sync),
    on_summary: &mut (dyn FnMut(&IndexSummary) + Send),
) -> Result<RunOutcome, RunError> {
    let data = DataDir::new(&locations.data_dir);
    let catalog = Arc::new(data.open_catalog()?);
    let (stores, embedder, _) =
        wiring::open_for_writing(config, locations, catalog, Load::WhenNeeded).await?;
    let indexer = Indexer::new(stores, embedder, config, data.sources_dir())?
        .with_git_policy(options.git.policy(config)?);
    let mut outcome = RunOutcome::default();
    drop_each(&indexer, &options.drop, on_summary, &mut outcome).await;
    index_each(
        &indexer,
        &sources,
        options.rebuild,
        progress,
        on_summary,
        &mut outcome,
    )
    .await;
    outcome.generation.live = data.live()?.map(|g| g.number());
    outcome.generation.previous = outcome.generation.live;
    Ok(outcome)
}
