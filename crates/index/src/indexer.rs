//! The embedded pipeline's run over one source: plan, chunk, write.

use std::sync::Arc;
use std::time::Instant;

use indicatif::ProgressBar;
use serde::Serialize;
use weft_chunking::Chunker;
use weft_config::{InvalidSetting, WeftConfig};
use weft_core::ports::{Catalog, Embedder, PortError};
use weft_core::{DocumentId, IndexIdentity};

use crate::Issue;
use crate::changes::{ChangePlanner, ChangeSet, ChangedDocument, Compare, PlanError, PlanOptions};
use crate::writer::{DocumentUpdate, IndexWriter, WriteStats};
use weft_sources::SourceSpec;
use weft_wiring::EmbedBatching;
use weft_wiring::Stores;

/// Chunks written between two commits of the stores (and catalog updates).
const CHECKPOINT_CHUNKS: usize = 2048;
/// Batches read and chunked ahead of the one being embedded.
const CUT_AHEAD: usize = 2;

/// What cutting documents counted, for the summary.
#[derive(Default)]
pub(crate) struct CutCounts {
    pub(crate) indexed: usize,
    pub(crate) skipped: Vec<Issue>,
}

/// Cuts a changed document into its update. A document that cannot be
/// chunked (binary, not UTF-8, too large) is skipped with its reason, and
/// its update has no chunks: what was indexed of it goes.
fn cut_document(
    chunker: &Chunker,
    project: &str,
    document: ChangedDocument,
    counts: &mut CutCounts,
) -> DocumentUpdate {
    let chunked = chunker.chunk_document(
        project,
        &document.uri,
        document.media_type,
        &document.content,
    );
    let chunks = match chunked {
        Ok(chunked) => {
            for warning in &chunked.warnings {
                tracing::info!(uri = %document.uri, "{warning}");
            }
            counts.indexed += 1;
            chunked.chunks
        }
        Err(e) => {
            counts.skipped.push(Issue {
                uri: document.uri.clone(),
                reason: e.reason(),
            });
            Vec::new()
        }
    };
    DocumentUpdate::whole(
        document.document_id,
        project,
        document.uri,
        document.content_hash,
        chunker.fingerprint(),
        chunks,
    )
}

/// A document cut by [`cut_ahead`], with what `about` noted of it before.
pub(crate) struct Cut<M> {
    /// Its update (no chunks if it was skipped).
    pub(crate) update: DocumentUpdate,
    /// Whether it could not be cut (in the [`CutCounts`]' skipped).
    pub(crate) skipped: bool,
    /// What `about` said of the document.
    pub(crate) about: M,
}

/// The thread of [`cut_ahead`]: it ends with the change set and the counts.
pub(crate) type Cutter = tokio::task::JoinHandle<(ChangeSet, CutCounts)>;

/// Reads and cuts the documents of `changes` on a blocking thread, a few
/// batches ahead of whoever receives them (a bounded queue), so the
/// consumer (the model, the index lookups) never waits for the disk or the
/// chunker. A batch is sent once `full` says so; `about` notes what the
/// consumer needs of a document before it is cut. The thread ends with the
/// change set and the counts when the documents run out or the receiver is
/// dropped.
pub(crate) fn cut_ahead<M: Send + 'static>(
    mut changes: ChangeSet,
    chunker: Chunker,
    project: String,
    full: impl Fn(&[Cut<M>]) -> bool + Send + 'static,
    about: impl Fn(&ChangedDocument) -> M + Send + 'static,
) -> (tokio::sync::mpsc::Receiver<Vec<Cut<M>>>, Cutter) {
    let (batches, ready) = tokio::sync::mpsc::channel::<Vec<Cut<M>>>(CUT_AHEAD);
    let cutter = tokio::task::spawn_blocking(move || {
        let mut counts = CutCounts::default();
        let mut batch: Vec<Cut<M>> = Vec::new();
        while let Some(document) = changes.next_document() {
            let about = about(&document);
            let skipped_before = counts.skipped.len();
            let update = cut_document(&chunker, &project, document, &mut counts);
            batch.push(Cut {
                update,
                skipped: counts.skipped.len() > skipped_before,
                about,
            });
            if full(&batch) && batches.blocking_send(std::mem::take(&mut batch)).is_err() {
                break; // the consumer stopped on an error
            }
        }
        if !batch.is_empty() {
            let _ = batches.blocking_send(batch);
        }
        (changes, counts)
    });
    (ready, cutter)
}

/// Why an index run stopped. Problems with single documents do not stop a
/// run; they are reported in [`IndexSummary::errors`].
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A store or the embedder failed; what was committed before stays.
    #[error(transparent)]
    Port(#[from] PortError),
    /// The source could not be listed at all.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A setting is unusable.
    #[error(transparent)]
    Config(#[from] InvalidSetting),
}

/// How to index.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// The project; default: derived from the source.
    pub project: Option<String>,
    /// Chunk and write every document again, changed or not (stored
    /// vectors of unchanged texts are reused; the project stays searchable
    /// throughout).
    pub reindex: bool,
    /// Progress display (use `ProgressBar::hidden()` for none).
    pub progress: ProgressBar,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            project: None,
            reindex: false,
            progress: ProgressBar::hidden(),
        }
    }
}

/// What an index run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexSummary {
    /// The project.
    pub project: String,
    /// The source as given.
    pub source: String,
    /// The indexed git commit, for repositories.
    pub revision: Option<String>,
    /// For a git source read by diff: the commit it was diffed from.
    pub diffed_from: Option<String>,
    /// Documents listed by the source (for a git re-index: changed ones).
    pub documents_seen: usize,
    /// Documents chunked and embedded.
    pub documents_indexed: usize,
    /// Documents whose content hash and index identity (model, text
    /// format, chunker and chunking settings) were unchanged.
    pub documents_unchanged: usize,
    /// Documents removed from the index (gone from the source).
    pub documents_deleted: usize,
    /// Documents not indexed (binary, not UTF-8, too large, robots.txt…).
    pub documents_skipped: usize,
    /// Chunks written (embedded, or with a stored vector of the same text).
    pub chunks_written: usize,
    /// Of the chunks written, those whose vector was found stored by their
    /// text (another project, fork, or an earlier cut): not sent to the model.
    pub vectors_reused: usize,
    /// Chunks stored unchanged by the same model: not embedded again.
    pub chunks_reused: usize,
    /// Tokens of the texts sent to the model (one per four characters,
    /// [`weft_core::embedding_tokens`]): what `weft index --dry-run`
    /// estimates before a run.
    pub tokens_embedded: u64,
    /// Chunks deleted: surplus of shrunk documents and removed documents.
    pub chunks_deleted: usize,
    /// Skipped documents with reasons.
    pub skipped: Vec<Issue>,
    /// Documents that failed, with reasons; what was indexed of them before stays.
    pub errors: Vec<Issue>,
    /// Whether the embedding model was called.
    pub model_loaded: bool,
    /// Time spent in the embedding model (or API): what the run would take
    /// if nothing else did (reading, chunking and writing overlap it).
    pub embedding_ms: u64,
    /// Wall time.
    pub elapsed_ms: u64,
    /// For a branch overlay (`P@B`): its base, and what it hides of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlay: Option<OverlaySummary>,
}

/// What a run did to a branch overlay ([`weft_core::overlays`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct OverlaySummary {
    /// The project it overlays.
    pub base: String,
    /// The branch.
    pub branch: String,
    /// The base commit the branch was compared with (git sources).
    pub base_revision: Option<String>,
    /// How many paths it hides its base at: changed, added or deleted on
    /// the branch.
    pub hidden: usize,
    /// Whether the overlay was dropped (asked for, or its branch is gone
    /// from the remote): its chunks and records removed, its base intact.
    pub dropped: bool,
}

impl OverlaySummary {
    /// The summary of `overlay`, `dropped` or not.
    pub fn of(overlay: weft_core::overlays::Overlay, dropped: bool) -> Self {
        Self {
            hidden: overlay.hidden.len(),
            base: overlay.base,
            branch: overlay.branch,
            base_revision: overlay.base_revision,
            dropped,
        }
    }
}

impl IndexSummary {
    fn add(&mut self, stats: WriteStats) {
        self.chunks_written += stats.chunks_embedded + stats.vectors_reused;
        self.vectors_reused += stats.vectors_reused;
        self.chunks_reused += stats.chunks_reused;
        self.chunks_deleted += stats.chunks_deleted;
        self.tokens_embedded += stats.tokens_embedded;
        self.documents_deleted += stats.documents_deleted;
        self.model_loaded |= stats.embedding_calls > 0;
        self.embedding_ms += stats.embedding_time.as_millis() as u64;
    }
}

/// Opens the indexes an [`Indexer`] writes, when it first has something to
/// write: e.g. copies the live generation's indexes into the one being
/// built, then opens them.
pub type OpenIndexes = Box<
    dyn Fn() -> futures::future::BoxFuture<'static, Result<weft_wiring::IndexStores, IndexError>>
        + Send
        + Sync,
>;

/// Where an [`Indexer`] writes.
enum Target {
    /// Open stores, written in place.
    Open(Stores),
    /// A catalog to plan with, and indexes opened on the first write.
    OnFirstWrite {
        catalog: Arc<dyn Catalog>,
        open: OpenIndexes,
        opened: tokio::sync::OnceCell<Stores>,
    },
}

/// Indexes sources into [`Stores`] with an [`Embedder`]: a
/// [`ChangePlanner`] says what changed, the [`Chunker`] cuts it, an
/// [`IndexWriter`] embeds and writes it.
pub struct Indexer {
    target: Target,
    embedder: Arc<dyn Embedder>,
    chunker: Chunker,
    planner: ChangePlanner,
    embedder_tag: String,
    batching: EmbedBatching,
}

impl Indexer {
    /// An indexer writing to `stores`; git checkouts go under `sources_dir`.
    pub fn new(
        stores: Stores,
        embedder: Arc<dyn Embedder>,
        config: &WeftConfig,
        sources_dir: impl Into<std::path::PathBuf>,
    ) -> Result<Self, IndexError> {
        Self::with_target(Target::Open(stores), embedder, config, sources_dir)
    }

    /// An indexer that plans with `catalog` and opens the indexes with
    /// `open` only when a run has something to write (a run over unchanged
    /// sources never calls it); git checkouts go under `sources_dir`.
    pub fn on_first_write(
        catalog: Arc<dyn Catalog>,
        open: OpenIndexes,
        embedder: Arc<dyn Embedder>,
        config: &WeftConfig,
        sources_dir: impl Into<std::path::PathBuf>,
    ) -> Result<Self, IndexError> {
        let target = Target::OnFirstWrite {
            catalog,
            open,
            opened: tokio::sync::OnceCell::new(),
        };
        Self::with_target(target, embedder, config, sources_dir)
    }

    fn with_target(
        target: Target,
        embedder: Arc<dyn Embedder>,
        config: &WeftConfig,
        sources_dir: impl Into<std::path::PathBuf>,
    ) -> Result<Self, IndexError> {
        let chunker = Chunker::new(config.chunking.clone())?;
        let planner = ChangePlanner::for_config(config, sources_dir)?;
        Ok(Self {
            embedder_tag: weft_wiring::embedder_tag(&config.embedding, embedder.model_id()),
            batching: weft_wiring::embed_batching(config),
            target,
            embedder,
            chunker,
            planner,
        })
    }

    /// The same indexer, with git limited to what `policy` allows
    /// ([`ChangePlanner::with_git_policy`]).
    pub fn with_git_policy(mut self, policy: weft_sources::GitPolicy) -> Self {
        self.planner = self.planner.with_git_policy(policy);
        self
    }

    /// The catalog runs are planned with and recorded in.
    pub fn catalog(&self) -> &Arc<dyn Catalog> {
        match &self.target {
            Target::Open(stores) => &stores.catalog,
            Target::OnFirstWrite { catalog, .. } => catalog,
        }
    }

    /// The stores written so far: `None` when indexes are opened on the
    /// first write and nothing was written yet.
    pub fn written_stores(&self) -> Option<&Stores> {
        match &self.target {
            Target::Open(stores) => Some(stores),
            Target::OnFirstWrite { opened, .. } => opened.get(),
        }
    }

    /// The stores to write, opened now if they are opened on first write
    /// (e.g. to rebuild an outdated text index even when no document changed).
    pub async fn stores(&self) -> Result<&Stores, IndexError> {
        match &self.target {
            Target::Open(stores) => Ok(stores),
            Target::OnFirstWrite {
                catalog,
                open,
                opened,
            } => {
                opened
                    .get_or_try_init(|| async {
                        let indexes = open().await?;
                        Ok::<_, IndexError>(Stores::new(indexes, catalog.clone()))
                    })
                    .await
            }
        }
    }

    /// What this indexer records per document. A document recorded with
    /// another identity is chunked and embedded again even when its content
    /// is not new, so a changed `chunking.*` setting or a new weft never
    /// leaves chunks cut the old way beside chunks cut the new way.
    pub fn identity(&self) -> IndexIdentity {
        IndexIdentity::new(self.embedder_tag.clone(), self.chunker.fingerprint())
    }

    /// Indexes `spec`: new and changed documents are chunked, embedded and
    /// written; unchanged ones skipped; removed ones deleted.
    pub async fn index(
        &self,
        spec: &SourceSpec,
        options: &IndexOptions,
    ) -> Result<IndexSummary, IndexError> {
        let started = Instant::now();
        let project = options
            .project
            .clone()
            .unwrap_or_else(|| spec.default_project());
        let plan = PlanOptions {
            expected: self.identity(),
            compare: Compare::Everything,
            force: options.reindex,
            progress: options.progress.clone(),
        };
        let mut changes = self
            .planner
            .plan(&**self.catalog(), spec, &project, &plan)
            .await?;
        if changes.outdated > 0 {
            tracing::info!(
                project = %project,
                documents = changes.outdated,
                "the model, text format or chunking changed since the last run: those documents are chunked and embedded again"
            );
        }
        let mut summary = IndexSummary {
            project: project.clone(),
            source: changes.source.clone(),
            revision: changes.revision.clone(),
            diffed_from: changes.diffed_from.clone(),
            documents_seen: changes.listed(),
            documents_skipped: changes.skipped.len(),
            skipped: std::mem::take(&mut changes.skipped),
            ..Default::default()
        };
        let progress = &options.progress;
        progress.set_length(changes.listed() as u64);
        progress.set_position(0);

        // Opened with the first batch: a run with nothing to write opens no index.
        let mut writer: Option<IndexWriter> = None;
        // Reading and chunking run on a blocking thread, a few batches
        // ahead of embedding and writing (a bounded queue), so the model
        // never waits for the disk or the chunker.
        let max_texts = self.batching.max_texts;
        let (mut ready, cutter) = cut_ahead(
            changes,
            self.chunker.clone(),
            project.clone(),
            move |batch| batch.iter().map(|c| c.update.chunks().len()).sum::<usize>() >= max_texts,
            |_| (),
        );
        let rate = Instant::now();
        let mut written = Ok(());
        while let Some(batch) = ready.recv().await {
            let mut batch: Vec<DocumentUpdate> = batch.into_iter().map(|c| c.update).collect();
            written = self.flush(&mut writer, &mut batch, &mut summary).await;
            if let (Ok(()), Some(w)) = (&written, &mut writer)
                && w.pending_chunks() >= CHECKPOINT_CHUNKS
            {
                written = w.checkpoint().await.map_err(IndexError::from);
            }
            if written.is_err() {
                break;
            }
            let seconds = rate.elapsed().as_secs_f64().max(1e-3);
            progress.set_message(format!(
                "{} chunks written, {:.1} chunks/s",
                summary.chunks_written,
                summary.chunks_written as f64 / seconds
            ));
        }
        drop(ready);
        let (mut changes, cut) = cutter
            .await
            .map_err(|e| IndexError::Port(PortError::internal("chunking thread", e.to_string())))?;
        written?;
        summary.documents_indexed += cut.indexed;
        summary.documents_skipped += cut.skipped.len();
        summary.skipped.extend(cut.skipped);
        summary.documents_unchanged = changes.unchanged;
        summary.errors.append(&mut changes.errors);
        let mut removed: Vec<DocumentUpdate> = changes
            .removed()
            .iter()
            .map(DocumentUpdate::deletion)
            .collect();
        self.flush(&mut writer, &mut removed, &mut summary).await?;
        if let Some(writer) = &mut writer {
            writer.checkpoint().await?;
        }
        if summary.chunks_written > 0 || summary.chunks_deleted > 0 {
            // Once per run: building the HNSW graph per checkpoint would
            // revisit every grown segment again and again.
            self.stores().await?.vectors.optimize().await?;
        }
        // Where indexes open on the first write, a run that wrote nothing
        // records nothing: its generation is dropped unchanged.
        let state = changes.project_state();
        if changes.gone {
            // A branch gone from the remote: its documents were removed
            // above; the project goes too.
            tracing::info!(project = %project, "the branch is gone from the remote: its overlay is dropped");
            self.stores()
                .await?
                .catalog
                .remove_project(&project)
                .await?;
        } else if let Some(stores) = self.written_stores() {
            stores.catalog.put_project(&project, &state).await?;
        }
        summary.overlay = state.overlay.map(|o| OverlaySummary::of(o, changes.gone));
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        progress.finish_and_clear();
        Ok(summary)
    }

    /// Drops the branch overlay `project` (`P@B`): its chunks from both
    /// indexes, its document records and its project record. Its base is
    /// not touched. A project that is not an overlay is refused.
    pub async fn drop_overlay(&self, project: &str) -> Result<IndexSummary, IndexError> {
        let started = Instant::now();
        let refuse = |problem: String| {
            IndexError::Plan(PlanError::Project {
                project: project.to_owned(),
                problem,
            })
        };
        let state = self
            .catalog()
            .project(project)
            .await?
            .ok_or_else(|| refuse("is not indexed".into()))?;
        let overlay = state.overlay.ok_or_else(|| {
            refuse("is not a branch overlay (project@branch); only overlays are dropped".into())
        })?;
        let stores = self.stores().await?;
        let records = stores.catalog.documents(Some(project)).await?;
        stores.vectors.delete_project(project).await?;
        stores.text.delete_project(project).await?;
        stores.vectors.commit().await?;
        stores.text.commit().await?;
        let ids: Vec<DocumentId> = records.iter().map(|r| r.document_id.clone()).collect();
        stores.catalog.remove_documents(&ids).await?;
        stores.catalog.remove_project(project).await?;
        Ok(IndexSummary {
            project: project.to_owned(),
            source: state.source,
            documents_deleted: records.len(),
            chunks_deleted: records.iter().map(|r| r.chunk_count as usize).sum(),
            elapsed_ms: started.elapsed().as_millis() as u64,
            overlay: Some(OverlaySummary::of(overlay, true)),
            ..Default::default()
        })
    }

    async fn flush(
        &self,
        writer: &mut Option<IndexWriter>,
        batch: &mut Vec<DocumentUpdate>,
        summary: &mut IndexSummary,
    ) -> Result<(), IndexError> {
        if !batch.is_empty() {
            if writer.is_none() {
                let stores = self.stores().await?.clone();
                *writer = Some(IndexWriter::new(
                    stores,
                    self.embedder.clone(),
                    self.embedder_tag.clone(),
                    self.batching,
                ));
            }
            if let Some(writer) = writer {
                let stats = writer.write(batch).await?;
                summary.add(stats);
            }
            batch.clear();
        }
        Ok(())
    }
}
