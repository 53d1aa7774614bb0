//! What a run would do, before it does it: `weft index --dry-run`, and the
//! `embedding.max_embed_tokens` budget a real run checks before it embeds
//! anything.
//!
//! [`estimate_sources`] lists each source and compares it with the index
//! exactly as a run does ([`ChangePlanner`], the same identity), cuts the
//! new and changed documents with the run's chunker, and looks their chunks
//! up in the live index the way [`crate::IndexWriter`] does: chunks stored
//! unchanged are not written again, texts whose vector is stored (or that
//! an earlier chunk of the run embeds) are not embedded. What is left is
//! what the model would embed, counted in tokens by
//! [`weft_core::embedding_tokens`], the same count a run reports.
//!
//! It loads no model, calls no embedding API and writes nothing to the data
//! directory: the live catalog is read from a copy in a temporary directory
//! and the indexes are opened read-only. A git source is cloned or fetched
//! into weft's checkout cache, as a run would.
//!
//! The time is estimated from the throughput the last run here measured
//! for the same embedder ([`record_throughput`], in
//! [`DataDir::throughput_path`]), or from a stated default.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use weft_chunking::Chunker;
use weft_config::{Locations, WeftConfig};
use weft_core::ports::{Catalog, PortError, VectorIndex};
use weft_core::{ChunkId, IndexIdentity, embedding_key, embedding_tokens};
use weft_sources::SourceSpec;
use weft_wiring::{self as wiring, DataDir, DataDirError, StoreAccess};

use crate::Issue;
use crate::changes::{ChangePlanner, Compare, PlanOptions};
use crate::index_run::{RunError, RunOptions, RunSource};
use crate::indexer::{Cut, IndexError, IndexSummary, cut_ahead};

/// Chunks per second assumed when no run here measured the embedder:
/// all-MiniLM-L6-v2 in fp32 on 2 cores embeds about 30 code chunks a
/// second (bench/RESULTS.md), a little less on longer prose.
pub const DEFAULT_CHUNKS_PER_SECOND: f64 = 25.0;

/// Fewer chunks than this in a run measure the model's start more than its
/// throughput: such a run records none.
const MIN_MEASURED_CHUNKS: u64 = 64;

/// Documents looked up in the index at once.
const LOOKUP_DOCUMENTS: usize = 256;

/// What happens to a source's documents.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DocumentCounts {
    /// Listed by the source (for a git source read by diff: the changed files).
    pub listed: usize,
    /// Not in the index yet: cut and embedded.
    pub new: usize,
    /// In the index with other content or another identity (model, text
    /// format, chunker): cut again.
    pub changed: usize,
    /// In the index as they are: not read further.
    pub unchanged: usize,
    /// In the index but gone from the source: deleted.
    pub removed: usize,
    /// Not indexed: declined by the source (robots.txt, not HTML…) or new
    /// or changed but not cut (binary, not UTF-8, too large), with reasons
    /// in [`SourceEstimate::skipped`]; not counted as new or changed.
    pub skipped: usize,
    /// Listed but unreadable, with reasons in [`SourceEstimate::errors`].
    pub unreadable: usize,
}

/// What indexing one source would do.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceEstimate {
    /// The project.
    pub project: String,
    /// The source as it would be recorded.
    pub source: String,
    /// The commit a git source would be indexed at.
    pub revision: Option<String>,
    /// For a git source read by diff: the indexed commit it is diffed from.
    pub diffed_from: Option<String>,
    /// The documents.
    pub documents: DocumentCounts,
    /// Chunks of the new and changed documents.
    pub chunks: usize,
    /// Of those, chunks stored unchanged with vectors of the same embedder:
    /// not written again.
    pub chunks_stored: usize,
    /// Chunks written with a stored vector of the same text, or of a text an
    /// earlier chunk of the run embeds: not sent to the model.
    pub vectors_reused: usize,
    /// Chunks the model would embed (one per distinct text).
    pub chunks_to_embed: usize,
    /// Their tokens ([`weft_core::embedding_tokens`]).
    pub tokens_to_embed: u64,
    /// Chunks deleted with the removed documents.
    pub chunks_removed: usize,
    /// Documents not indexed, with reasons.
    pub skipped: Vec<Issue>,
    /// Documents that could not be read, with reasons.
    pub errors: Vec<Issue>,
}

/// A source that could not be estimated at all.
#[derive(Debug, Clone, Serialize)]
pub struct FailedSource {
    /// The source as given.
    pub source: String,
    /// Why.
    pub error: String,
}

/// The embedding throughput a run measured: what the time of the next is
/// estimated from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredThroughput {
    /// The embedder ([`weft_wiring::embedder_tag`]).
    pub embedder: String,
    /// Chunks embedded.
    pub chunks: u64,
    /// Their tokens.
    pub tokens: u64,
    /// Milliseconds spent embedding them.
    pub embedding_ms: u64,
    /// When (seconds since the Unix epoch).
    pub measured_at: u64,
}

impl MeasuredThroughput {
    /// Tokens per second.
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / (self.embedding_ms.max(1) as f64 / 1000.0)
    }

    /// Chunks per second.
    pub fn chunks_per_second(&self) -> f64 {
        self.chunks as f64 / (self.embedding_ms.max(1) as f64 / 1000.0)
    }
}

/// What the estimated time rests on.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "basis", rename_all = "snake_case")]
pub enum TimeBasis {
    /// The last run here that embedded with the same embedder.
    Measured(MeasuredThroughput),
    /// No run here measured this embedder: [`DEFAULT_CHUNKS_PER_SECOND`].
    Default {
        /// Chunks per second assumed.
        chunks_per_second: f64,
    },
}

/// What a `weft index` run over some sources would do.
#[derive(Debug, Clone, Serialize)]
pub struct RunEstimate {
    /// The embedder vectors would be made with ([`weft_wiring::embedder_tag`]).
    pub embedder: String,
    /// Whether stored chunks and vectors were looked up (false: there is no
    /// index yet, its model is another, or server stores whose dimension
    /// `embedding.dimension` does not give; every chunk then counts as
    /// embedded).
    pub looked_up_stored: bool,
    /// Each source, in order.
    pub sources: Vec<SourceEstimate>,
    /// Sources that could not be listed.
    pub failed: Vec<FailedSource>,
    /// Chunks the model would embed, all sources.
    pub chunks_to_embed: usize,
    /// Their tokens.
    pub tokens_to_embed: u64,
    /// Estimated seconds of embedding (reading, cutting and writing overlap it).
    pub seconds: f64,
    /// What [`RunEstimate::seconds`] rests on.
    pub time: TimeBasis,
    /// `embedding.price_per_million_tokens`, if set.
    pub price_per_million_tokens: Option<f64>,
    /// The estimated cost, with a price set.
    pub cost: Option<f64>,
    /// The token budget (`embedding.max_embed_tokens`, or `--max-embed-tokens`).
    pub max_embed_tokens: Option<u64>,
    /// Whether the tokens to embed exceed the budget: a run would be refused.
    pub over_budget: bool,
    /// What the reader should know (e.g. the model changed).
    pub notes: Vec<String>,
}

/// What an estimate compares sources with and looks their chunks up in.
pub struct EstimateBasis<'a> {
    /// The catalog a run would plan with.
    pub catalog: &'a dyn Catalog,
    /// The vector index whose stored chunks and vectors a run would reuse
    /// (`None`: nothing to reuse, or not looked up).
    pub vectors: Option<Arc<dyn VectorIndex>>,
    /// What in a catalogued document must match for it to be unchanged.
    pub compare: Compare,
    /// The planner that lists sources.
    pub planner: ChangePlanner,
    /// The throughputs measured before, by embedder: time is estimated from
    /// the one of this run's embedder, if there is one.
    pub measured: Vec<MeasuredThroughput>,
    /// What the reader should know (added to [`RunEstimate::notes`]).
    pub notes: Vec<String>,
}

/// Estimates what indexing `sources` (each with its project) would do
/// against `basis`, with the chunker and embedder `config` sets up; `force`
/// is a re-index of every document; `budget` overrides
/// `embedding.max_embed_tokens`. The core of [`estimate_sources`] and of
/// `weft-crawler --dry-run`.
pub async fn estimate_with(
    config: &WeftConfig,
    model: &str,
    basis: EstimateBasis<'_>,
    sources: &[(SourceSpec, String)],
    force: bool,
    budget: Option<u64>,
    progress: &(dyn Fn() -> ProgressBar + Sync),
) -> Result<RunEstimate, IndexError> {
    let embedder_tag = wiring::embedder_tag(&config.embedding, model);
    let chunker = Chunker::new(config.chunking.clone())?;
    let identity = IndexIdentity::new(embedder_tag.clone(), chunker.fingerprint());
    let looked_up_stored = basis.vectors.is_some();
    let mut estimator = Estimator {
        planner: basis.planner,
        chunker,
        catalog: basis.catalog,
        vectors: basis.vectors,
        embedder_tag: embedder_tag.clone(),
        identity,
        compare: basis.compare,
        planned: HashSet::new(),
    };
    let mut sources_out = Vec::new();
    let mut failed = Vec::new();
    for (spec, project) in sources {
        let bar = progress();
        match estimator.source(spec, project, force, bar.clone()).await {
            Ok(estimate) => sources_out.push(estimate),
            Err(e) => failed.push(FailedSource {
                source: spec.display(),
                error: weft_core::error_chain(&e),
            }),
        }
        bar.finish_and_clear();
    }
    let chunks_to_embed: usize = sources_out.iter().map(|s| s.chunks_to_embed).sum();
    let tokens_to_embed: u64 = sources_out.iter().map(|s| s.tokens_to_embed).sum();
    let measured = basis
        .measured
        .into_iter()
        .find(|m| m.embedder == embedder_tag);
    let (seconds, time) = match measured {
        Some(m) => (
            tokens_to_embed as f64 / m.tokens_per_second().max(1e-9),
            TimeBasis::Measured(m),
        ),
        None => (
            chunks_to_embed as f64 / DEFAULT_CHUNKS_PER_SECOND,
            TimeBasis::Default {
                chunks_per_second: DEFAULT_CHUNKS_PER_SECOND,
            },
        ),
    };
    let price = config.embedding.price_per_million_tokens;
    let max_embed_tokens = budget.or(config.embedding.max_embed_tokens);
    Ok(RunEstimate {
        embedder: embedder_tag,
        looked_up_stored,
        sources: sources_out,
        failed,
        chunks_to_embed,
        tokens_to_embed,
        seconds,
        time,
        price_per_million_tokens: price,
        cost: price.map(|p| p * tokens_to_embed as f64 / 1e6),
        max_embed_tokens,
        over_budget: max_embed_tokens.is_some_and(|b| tokens_to_embed > b),
        notes: basis.notes,
    })
}

/// Estimates what indexing `sources` into the data directory `config` and
/// `locations` name with `options` would do (`weft index --dry-run`),
/// without loading the model or writing anything (see the module
/// documentation): `options.rebuild` re-indexes every document,
/// `options.max_embed_tokens` overrides `embedding.max_embed_tokens`, and
/// git is trusted as `options.git` says, as in the run.
pub async fn estimate_sources(
    config: &WeftConfig,
    locations: &Locations,
    sources: &[RunSource],
    options: &RunOptions,
    progress: &(dyn Fn() -> ProgressBar + Sync),
) -> Result<RunEstimate, RunError> {
    let data = DataDir::new(&locations.data_dir);
    let model = wiring::configured_model_id(&config.embedding, &locations.model_dir);
    let mut notes = Vec::new();

    // The catalog a run would compare with, read from a copy: a reader
    // may hold the live one open, and nothing is written beside it.
    let scratch = tempfile::tempdir().map_err(|e| DataDirError::Io {
        path: std::env::temp_dir(),
        source: e,
    })?;
    let catalog = catalog_copy(&data, scratch.path())?;

    let live_meta = data.meta()?;
    let other_model = live_meta.as_ref().filter(|m| m.model != model);
    if let Some(meta) = other_model {
        notes.push(format!(
            "the index holds vectors of {}, not of the configured {model}: every document is embedded again, and only `weft index --reindex` does it (it also indexes every other project again, not counted here)",
            meta.model
        ));
    }
    let vectors = match (other_model, &live_meta) {
        (Some(_), _) => None,
        (None, Some(meta)) => open_live_vectors(config, &data, &model, meta.dimension).await?,
        (None, None) if !config.stores.uses_data_dir() => match config.embedding.dimension {
            Some(dimension) => open_live_vectors(config, &data, &model, dimension).await?,
            None => {
                notes.push(NO_DIMENSION.into());
                None
            }
        },
        (None, None) => None,
    };
    let planner = ChangePlanner::for_config(config, data.sources_dir())
        .map_err(IndexError::from)?
        .with_git_policy(options.git.policy(config)?);
    let sources: Vec<(SourceSpec, String)> = sources
        .iter()
        .map(|s| {
            let project = s
                .project
                .clone()
                .unwrap_or_else(|| s.spec.default_project());
            (s.spec.clone(), project)
        })
        .collect();
    let basis = EstimateBasis {
        catalog: &catalog,
        vectors,
        compare: Compare::Everything,
        planner,
        measured: load_throughputs(&data.throughput_path()),
        notes,
    };
    Ok(estimate_with(
        config,
        &model,
        basis,
        &sources,
        options.rebuild,
        options.max_embed_tokens,
        progress,
    )
    .await?)
}

/// Why server stores were not looked up.
pub const NO_DIMENSION: &str = "stored vectors were not looked up: set embedding.dimension for the server stores to be opened without calling the embedding API";

impl RunEstimate {
    /// The estimate for people, as `weft index --dry-run` and
    /// `weft-crawler --dry-run` print it.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let e = self;
        writeln!(
            out,
            "dry run: nothing was indexed and the model was not loaded"
        )?;
        for s in &e.sources {
            let d = &s.documents;
            writeln!(
                out,
                "{} ({}): {} documents listed: {} new, {} changed, {} unchanged, {} removed, {} skipped, {} unreadable",
                s.project,
                s.source,
                d.listed,
                d.new,
                d.changed,
                d.unchanged,
                d.removed,
                d.skipped,
                d.unreadable
            )?;
            if let Some(rev) = &s.revision {
                match &s.diffed_from {
                    Some(from) => writeln!(out, "  revision {rev} (diffed from {from})")?,
                    None => writeln!(out, "  revision {rev}")?,
                }
            }
            writeln!(
                out,
                "  {} chunks in new and changed documents: {} stored unchanged, {} with stored vectors of the same text, {} to embed (~{} tokens); {} chunks deleted",
                s.chunks,
                s.chunks_stored,
                s.vectors_reused,
                s.chunks_to_embed,
                s.tokens_to_embed,
                s.chunks_removed
            )?;
            const SHOWN: usize = 10;
            for issue in s.errors.iter().take(SHOWN) {
                writeln!(out, "  unreadable {}: {}", issue.uri, issue.reason)?;
            }
            for issue in s.skipped.iter().take(SHOWN) {
                writeln!(out, "  skipped  {}: {}", issue.uri, issue.reason)?;
            }
            let more = s.skipped.len().saturating_sub(SHOWN) + s.errors.len().saturating_sub(SHOWN);
            if more > 0 {
                writeln!(out, "  … and {more} more (see --json)")?;
            }
        }
        let rate = match &e.time {
            TimeBasis::Measured(m) => format!(
                "{:.0} tokens/s, measured by the last run here ({} chunks)",
                m.tokens_per_second(),
                m.chunks
            ),
            TimeBasis::Default { chunks_per_second } => format!(
                "{chunks_per_second:.0} chunks/s, a default (no run here measured this embedder yet)"
            ),
        };
        writeln!(
            out,
            "total: {} chunks, ~{} tokens to embed with {}; ~{} of embedding at {rate}",
            e.chunks_to_embed,
            e.tokens_to_embed,
            e.embedder,
            duration(e.seconds)
        )?;
        if let (Some(cost), Some(price)) = (e.cost, e.price_per_million_tokens) {
            let cost = if cost >= 1.0 {
                format!("{cost:.2}")
            } else {
                format!("{cost:.2e}")
                    .parse::<f64>()
                    .map_or_else(|_| cost.to_string(), |c| c.to_string())
            };
            writeln!(
                out,
                "  cost ~{cost} at {price} per million tokens (embedding.price_per_million_tokens)"
            )?;
        }
        if let Some(budget) = e.max_embed_tokens {
            let verdict = if e.over_budget {
                "over it: the run would be refused"
            } else {
                "within it"
            };
            writeln!(out, "  budget {budget} tokens: {verdict}")?;
        }
        if !e.looked_up_stored {
            writeln!(
                out,
                "  (no stored chunks or vectors to reuse were looked up: every chunk counts as embedded)"
            )?;
        }
        for note in &e.notes {
            writeln!(out, "  note: {note}")?;
        }
        Ok(())
    }
}

/// Seconds, for people.
fn duration(seconds: f64) -> String {
    if seconds < 90.0 {
        format!("{seconds:.0} s")
    } else if seconds < 90.0 * 60.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{:.1} h", seconds / 3600.0)
    }
}

/// A copy of the catalog a run would plan with (the live generation's, or
/// generation 0's), in `scratch`; an empty one when there is none yet.
fn catalog_copy(
    data: &DataDir,
    scratch: &Path,
) -> Result<weft_catalog_redb::RedbCatalog, RunError> {
    let copy = scratch.join("catalog.redb");
    let from = data.catalog_path()?;
    if from.exists() {
        std::fs::copy(&from, &copy).map_err(|e| DataDirError::Io {
            path: from.clone(),
            source: e,
        })?;
    }
    weft_catalog_redb::RedbCatalog::open(&copy)
        .map_err(|e| RunError::Port(PortError::new(e.kind(), "catalog", e)))
}

/// The vector index a run would reuse from, opened read-only: the live
/// generation's (or generation 0's).
async fn open_live_vectors(
    config: &WeftConfig,
    data: &DataDir,
    model: &str,
    dimension: usize,
) -> Result<Option<Arc<dyn VectorIndex>>, RunError> {
    let generation = match data.live()? {
        Some(live) => live,
        None if config.stores.uses_data_dir() => return Ok(None),
        None => data.in_place()?,
    };
    let stores = wiring::open_index_stores(
        &config.stores,
        &generation,
        model,
        dimension,
        StoreAccess::Read,
    )
    .await
    .map_err(|e| RunError::Wiring(e.into()))?;
    Ok(Some(stores.vectors))
}

/// What the catalog records of a new or changed document.
struct Recorded {
    /// Nothing: the document is new.
    new: bool,
    /// That it was embedded by the same embedder (so its stored chunks may
    /// be kept).
    same_embedder: bool,
}

/// Estimates sources one after the other, remembering the texts earlier
/// ones embed (a run embeds each distinct text once).
struct Estimator<'a> {
    planner: ChangePlanner,
    chunker: Chunker,
    catalog: &'a dyn Catalog,
    vectors: Option<Arc<dyn VectorIndex>>,
    embedder_tag: String,
    identity: IndexIdentity,
    compare: Compare,
    /// Keys of the texts counted as embedded so far.
    planned: HashSet<String>,
}

impl Estimator<'_> {
    async fn source(
        &mut self,
        spec: &SourceSpec,
        project: &str,
        force: bool,
        progress: ProgressBar,
    ) -> Result<SourceEstimate, IndexError> {
        let plan = PlanOptions {
            expected: self.identity.clone(),
            compare: self.compare,
            force,
            progress: progress.clone(),
        };
        let mut changes = self
            .planner
            .plan(self.catalog, spec, project, &plan)
            .await?;
        progress.set_length(changes.listed() as u64);
        let mut out = SourceEstimate {
            project: project.to_owned(),
            source: changes.source.clone(),
            revision: changes.revision.clone(),
            diffed_from: changes.diffed_from.clone(),
            skipped: std::mem::take(&mut changes.skipped),
            ..Default::default()
        };
        out.documents.listed = changes.listed();
        // Read and cut ahead of the lookups, as in a run.
        let embedder_tag = self.embedder_tag.clone();
        let (mut ready, cutter) = cut_ahead(
            changes,
            self.chunker.clone(),
            project.to_owned(),
            |batch| batch.len() >= LOOKUP_DOCUMENTS,
            move |document| {
                let recorded = document.previous.as_ref();
                Recorded {
                    new: recorded.is_none(),
                    same_embedder: recorded.is_some_and(|r| r.identity.embedder == embedder_tag),
                }
            },
        );
        let mut counted = Ok(());
        while let Some(batch) = ready.recv().await {
            counted = self.count(&batch, &mut out).await;
            if counted.is_err() {
                break;
            }
        }
        drop(ready);
        let (mut changes, cut) = cutter
            .await
            .map_err(|e| IndexError::Port(PortError::internal("chunking thread", e.to_string())))?;
        counted?;
        out.documents.unchanged = changes.unchanged;
        out.documents.skipped = out.skipped.len() + cut.skipped.len();
        out.skipped.extend(cut.skipped);
        out.errors = std::mem::take(&mut changes.errors);
        out.documents.unreadable = out.errors.len();
        let removed = changes.removed();
        out.documents.removed = removed.len();
        out.chunks_removed = removed.iter().map(|r| r.chunk_count as usize).sum();
        Ok(out)
    }

    /// Counts what writing `batch` would store, reuse and embed.
    async fn count(
        &mut self,
        batch: &[Cut<Recorded>],
        out: &mut SourceEstimate,
    ) -> Result<(), IndexError> {
        for cut in batch.iter().filter(|c| !c.skipped) {
            if cut.about.new {
                out.documents.new += 1;
            } else {
                out.documents.changed += 1;
            }
        }
        // Chunks stored as they are, with this embedder's vectors.
        let ids: Vec<ChunkId> = batch
            .iter()
            .filter(|c| c.about.same_embedder)
            .flat_map(|c| c.update.chunks().iter().map(|chunk| chunk.id()))
            .collect();
        let stored: std::collections::HashMap<ChunkId, weft_core::Chunk> =
            match (&self.vectors, ids.is_empty()) {
                (Some(vectors), false) => vectors
                    .get(&ids)
                    .await?
                    .into_iter()
                    .map(|c| (c.id(), c))
                    .collect(),
                _ => Default::default(),
            };
        let mut rest: Vec<(String, String)> = Vec::new();
        for cut in batch {
            for chunk in cut.update.chunks() {
                out.chunks += 1;
                if cut.about.same_embedder && stored.get(&chunk.id()) == Some(chunk) {
                    out.chunks_stored += 1;
                } else {
                    let text = chunk.embedding_text();
                    rest.push((embedding_key(&self.embedder_tag, &text), text));
                }
            }
        }
        // Texts whose vectors are stored, looked up by key in one call.
        let mut asked: Vec<String> = rest
            .iter()
            .map(|(key, _)| key.clone())
            .filter(|key| !self.planned.contains(key))
            .collect();
        asked.sort_unstable();
        asked.dedup();
        let known = match (&self.vectors, asked.is_empty()) {
            (Some(vectors), false) => vectors.vectors_by_key(&asked).await?,
            _ => Default::default(),
        };
        for (key, text) in rest {
            if known.contains_key(&key) || !self.planned.insert(key) {
                out.vectors_reused += 1;
            } else {
                out.chunks_to_embed += 1;
                out.tokens_to_embed += embedding_tokens(&text);
            }
        }
        Ok(())
    }
}

/// The throughputs recorded in `path`; none when it is missing or unreadable
/// (an estimate then states its default).
pub fn load_throughputs(path: &Path) -> Vec<MeasuredThroughput> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), "unreadable throughput record, ignored: {e}");
            Vec::new()
        }),
        Err(_) => Vec::new(),
    }
}

/// Records the embedding throughput of a run's `summaries` with
/// `embedder` in the data directory, replacing the embedder's previous
/// record; a run that embedded fewer than 64 chunks records nothing. Only
/// a saving for later estimates: a failure is logged, not returned.
pub fn record_throughput(data: &DataDir, embedder: &str, summaries: &[IndexSummary]) {
    let chunks: u64 = summaries
        .iter()
        .map(|s| s.chunks_written.saturating_sub(s.vectors_reused) as u64)
        .sum();
    let tokens: u64 = summaries.iter().map(|s| s.tokens_embedded).sum();
    let embedding_ms: u64 = summaries.iter().map(|s| s.embedding_ms).sum();
    if chunks < MIN_MEASURED_CHUNKS || tokens == 0 || embedding_ms == 0 {
        return;
    }
    let path = data.throughput_path();
    let mut all = load_throughputs(&path);
    all.retain(|m| m.embedder != embedder);
    all.push(MeasuredThroughput {
        embedder: embedder.to_owned(),
        chunks,
        tokens,
        embedding_ms,
        measured_at: weft_core::generations::now_secs(),
    });
    let write = || -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json)?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        tracing::warn!(path = %path.display(), "cannot record the embedding throughput: {e}");
    }
}
