//! Incremental indexing of one source into the stores.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use indicatif::ProgressBar;
use serde::Serialize;
use sha2::{Digest, Sha256};
use weft_chunking::Chunker;
use weft_config::WeftConfig;
use weft_core::ports::{DocumentRecord, Embedder, PortError, ProjectState};
use weft_core::{Chunk, DocumentId, index_tag};

use crate::sources::{self, DirSelection, GitRepo, SourceSpec};
use crate::{Issue, Stores};

/// Chunks written between two commits of the stores (and catalog updates).
const CHECKPOINT_CHUNKS: usize = 2048;

/// Why an index run stopped. Problems with single documents do not stop a
/// run; they are reported in [`IndexSummary::errors`].
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A store or the embedder failed; what was committed before stays.
    #[error(transparent)]
    Port(#[from] PortError),
    /// The source could not be read at all.
    #[error("{0}")]
    Source(String),
    /// A setting is unusable.
    #[error("{0}")]
    Config(String),
}

/// How to index.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// The project; default: derived from the source.
    pub project: Option<String>,
    /// Drop the project's chunks and records first and index everything.
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
    /// Documents listed by the source (for a git re-index: changed ones).
    pub documents_seen: usize,
    /// Documents chunked and embedded.
    pub documents_indexed: usize,
    /// Documents whose content hash and index tag (model, text format,
    /// chunker and chunking settings) were unchanged.
    pub documents_unchanged: usize,
    /// Documents removed from the index (gone from the source).
    pub documents_deleted: usize,
    /// Documents not indexed (binary, not UTF-8, too large, robots.txt…).
    pub documents_skipped: usize,
    /// Chunks written (each embedded once).
    pub chunks_written: usize,
    /// Chunks deleted: surplus of shrunk documents and removed documents.
    pub chunks_deleted: usize,
    /// Skipped documents with reasons.
    pub skipped: Vec<Issue>,
    /// Documents that failed, with reasons; what was indexed of them before stays.
    pub errors: Vec<Issue>,
    /// Whether the embedding model was loaded.
    pub model_loaded: bool,
    /// Wall time.
    pub elapsed_ms: u64,
}

/// One document to consider.
enum Input {
    File {
        uri: String,
        path: PathBuf,
    },
    Page {
        uri: String,
        kind: &'static str,
        body: String,
    },
}

impl Input {
    fn uri(&self) -> &str {
        match self {
            Self::File { uri, .. } | Self::Page { uri, .. } => uri,
        }
    }
}

/// A document chunked and waiting to be embedded and written.
struct Pending {
    record: DocumentRecord,
    previous_chunks: Option<u32>,
    chunks: Vec<Chunk>,
}

/// Indexes sources into [`Stores`] with an [`Embedder`].
pub struct Indexer {
    stores: Stores,
    embedder: Arc<dyn Embedder>,
    chunker: Chunker,
    config: WeftConfig,
    sources_dir: PathBuf,
}

impl Indexer {
    /// An indexer writing to `stores`; git checkouts go under `sources_dir`.
    pub fn new(
        stores: Stores,
        embedder: Arc<dyn Embedder>,
        config: WeftConfig,
        sources_dir: PathBuf,
    ) -> Result<Self, IndexError> {
        let chunker = Chunker::new(config.chunking.clone())
            .map_err(|e| IndexError::Config(format!("{}: {}", e.key, e.message)))?;
        Ok(Self {
            stores,
            embedder,
            chunker,
            config,
            sources_dir,
        })
    }

    /// What this indexer records per document ([`index_tag`]). A document
    /// whose tag differs is chunked and embedded again even when its content
    /// is not new, so a changed `chunking.*` setting or a new weft never
    /// leaves chunks cut the old way beside chunks cut the new way.
    fn index_tag(&self) -> String {
        let embedder = crate::embedder_tag(&self.config.embedding, self.embedder.model_id());
        index_tag(&embedder, self.chunker.fingerprint())
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
        let mut summary = IndexSummary {
            project: project.clone(),
            source: spec.display(),
            ..Default::default()
        };
        if options.reindex {
            self.drop_project(&project).await?;
        }
        let previous_state = self.stores.catalog.project(&project).await?;
        let selection = DirSelection::new(&self.config.sources).map_err(IndexError::Config)?;
        let known: HashMap<DocumentId, DocumentRecord> = self
            .stores
            .catalog
            .documents(Some(&project))
            .await?
            .into_iter()
            .map(|r| (r.document_id.clone(), r))
            .collect();
        let tag = self.index_tag();
        // Documents indexed by another model, format or chunker: a git source
        // is then walked whole, not diffed, so that unchanged files are redone too.
        let stale = known.values().any(|r| r.embedding != tag);
        if stale {
            tracing::info!(
                project = %project,
                "the model, text format or chunking changed since the last run: every document is chunked and embedded again"
            );
        }

        // List the documents to look at; `complete` says whether the list is
        // the whole project (so absent documents are deletions).
        let mut deleted_uris: Vec<String> = Vec::new();
        let (inputs, complete) = match spec {
            SourceSpec::Dir(path) => {
                let (files, issues) = sources::walk_dir(path, &selection);
                summary.errors.extend(issues);
                let inputs = files
                    .into_iter()
                    .map(|(uri, path)| Input::File { uri, path })
                    .collect::<Vec<_>>();
                (inputs, true)
            }
            SourceSpec::Git(url) => {
                let repo = GitRepo::new(
                    url,
                    &self.sources_dir.join(sources::checkout_name(&project)),
                );
                options
                    .progress
                    .set_message(format!("fetching {}", spec.display()));
                let head = repo.sync().map_err(|e| IndexError::Source(e.to_string()))?;
                summary.revision = Some(head.clone());
                let last = previous_state
                    .as_ref()
                    .filter(|s| s.source == spec.display())
                    .and_then(|s| s.revision.clone())
                    .filter(|rev| !stale && repo.has_commit(rev));
                match last {
                    Some(last) => {
                        let changes = repo
                            .changes(&last, &head)
                            .map_err(|e| IndexError::Source(e.to_string()))?;
                        let skipped_dir = |uri: &str| {
                            uri.split('/')
                                .any(|part| self.config.sources.skip_dirs.iter().any(|d| d == part))
                        };
                        let inputs = changes
                            .changed
                            .into_iter()
                            .filter(|uri| selection.selects(uri) && !skipped_dir(uri))
                            .map(|uri| Input::File {
                                path: repo.dir().join(&uri),
                                uri,
                            })
                            .collect();
                        deleted_uris = changes.deleted;
                        (inputs, false)
                    }
                    None => {
                        let (files, issues) = sources::walk_dir(repo.dir(), &selection);
                        summary.errors.extend(issues);
                        let inputs = files
                            .into_iter()
                            .map(|(uri, path)| Input::File { uri, path })
                            .collect();
                        (inputs, true)
                    }
                }
            }
            SourceSpec::Site(url) => {
                options
                    .progress
                    .set_message(format!("crawling {}", spec.display()));
                let (pages, issues) = sources::crawl(url, &self.config.crawl, &options.progress)
                    .await
                    .map_err(|e| IndexError::Source(e.to_string()))?;
                summary.documents_skipped += issues.len();
                summary.skipped.extend(issues);
                let inputs = pages
                    .into_iter()
                    .map(|p| Input::Page {
                        uri: p.url.to_string(),
                        kind: p.kind,
                        body: p.body,
                    })
                    .collect();
                (inputs, true)
            }
        };

        let progress = &options.progress;
        progress.set_length(inputs.len() as u64);
        progress.set_position(0);
        let mut seen: HashSet<DocumentId> = HashSet::new();
        let mut batch: Vec<Pending> = Vec::new();
        let mut batch_chunks = 0usize;
        let mut uncommitted: Vec<DocumentRecord> = Vec::new();
        let mut removed: Vec<DocumentId> = Vec::new();
        let mut since_checkpoint = 0usize;
        summary.documents_seen = inputs.len();

        for input in inputs {
            progress.inc(1);
            let uri = input.uri().to_owned();
            let id = DocumentId::new(&project, &uri);
            seen.insert(id.clone());
            let bytes = match &input {
                Input::File { path, .. } => match std::fs::read(path) {
                    Ok(b) => b,
                    Err(e) => {
                        summary.errors.push(Issue {
                            uri,
                            reason: format!("cannot be read: {e}"),
                        });
                        continue;
                    }
                },
                Input::Page { body, .. } => body.as_bytes().to_vec(),
            };
            let hash = hex::encode(Sha256::digest(&bytes));
            let previous = known.get(&id);
            if previous.is_some_and(|r| r.content_hash == hash && r.embedding == tag) {
                summary.documents_unchanged += 1;
                continue;
            }
            let chunked = match &input {
                Input::File { .. } => self.chunker.chunk_bytes(&project, &uri, &bytes),
                Input::Page { kind, body, .. } => {
                    Ok(self.chunker.chunk_page(&project, &uri, kind, body))
                }
            };
            let document = match chunked {
                Ok(d) => d,
                Err(e) => {
                    summary.documents_skipped += 1;
                    summary.skipped.push(Issue {
                        uri: uri.clone(),
                        reason: e.reason(),
                    });
                    if let Some(previous) = previous {
                        // It was indexed, but no longer is indexable.
                        self.delete_document(&id).await?;
                        summary.chunks_deleted += previous.chunk_count as usize;
                        summary.documents_deleted += 1;
                        removed.push(id);
                    }
                    continue;
                }
            };
            for warning in &document.warnings {
                tracing::info!(uri = %uri, "{warning}");
            }
            let chunks = document.chunks;
            batch_chunks += chunks.len();
            batch.push(Pending {
                record: DocumentRecord {
                    document_id: id,
                    project: project.clone(),
                    uri,
                    content_hash: hash,
                    chunk_count: chunks.len() as u32,
                    embedding: tag.clone(),
                    version: 0,
                },
                previous_chunks: previous.map(|r| r.chunk_count),
                chunks,
            });
            if batch_chunks >= self.config.embedding.batch_size {
                since_checkpoint += batch_chunks;
                self.write_batch(
                    std::mem::take(&mut batch),
                    &mut summary,
                    &mut uncommitted,
                    progress,
                )
                .await?;
                batch_chunks = 0;
                if since_checkpoint >= CHECKPOINT_CHUNKS {
                    self.checkpoint(&mut uncommitted, &mut removed).await?;
                    since_checkpoint = 0;
                }
            }
        }
        self.write_batch(batch, &mut summary, &mut uncommitted, progress)
            .await?;

        // Documents gone from the source.
        let gone: Vec<&DocumentRecord> = if complete {
            known
                .values()
                .filter(|r| !seen.contains(&r.document_id))
                .collect()
        } else {
            deleted_uris
                .iter()
                .filter_map(|uri| known.get(&DocumentId::new(&project, uri)))
                .collect()
        };
        for record in gone {
            self.delete_document(&record.document_id).await?;
            summary.documents_deleted += 1;
            summary.chunks_deleted += record.chunk_count as usize;
            removed.push(record.document_id.clone());
        }
        self.checkpoint(&mut uncommitted, &mut removed).await?;
        if summary.chunks_written > 0 || summary.chunks_deleted > 0 {
            // Once per run: building the HNSW graph per checkpoint would
            // revisit every grown segment again and again.
            self.stores.vectors.optimize().await?;
        }
        let revision = match spec {
            SourceSpec::Git(_) => summary.revision.clone(),
            _ => None,
        };
        self.stores
            .catalog
            .put_project(
                &project,
                &ProjectState {
                    source: spec_source(spec),
                    revision,
                },
            )
            .await?;
        summary.model_loaded = summary.chunks_written > 0;
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        progress.finish_and_clear();
        Ok(summary)
    }

    /// Embeds and writes a batch of documents; their records wait for the
    /// next checkpoint.
    async fn write_batch(
        &self,
        batch: Vec<Pending>,
        summary: &mut IndexSummary,
        uncommitted: &mut Vec<DocumentRecord>,
        progress: &ProgressBar,
    ) -> Result<(), IndexError> {
        if batch.is_empty() {
            return Ok(());
        }
        let chunks: Vec<Chunk> = batch
            .iter()
            .flat_map(|p| p.chunks.iter().cloned())
            .collect();
        if !chunks.is_empty() {
            let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
            let vectors = self.embedder.embed(&texts).await?;
            self.stores.vectors.upsert(&chunks, &vectors).await?;
            self.stores.text.upsert(&chunks).await?;
        }
        for pending in batch {
            let now = pending.record.chunk_count;
            if let Some(before) = pending.previous_chunks.filter(|&b| b > now) {
                let id = &pending.record.document_id;
                self.stores.vectors.delete_document_from(id, now).await?;
                self.stores.text.delete_document_from(id, now).await?;
                summary.chunks_deleted += (before - now) as usize;
            }
            summary.documents_indexed += 1;
            summary.chunks_written += now as usize;
            uncommitted.push(pending.record);
        }
        progress.set_message(format!("{} chunks embedded", summary.chunks_written));
        Ok(())
    }

    /// Commits both indexes, then records what they now hold.
    async fn checkpoint(
        &self,
        uncommitted: &mut Vec<DocumentRecord>,
        removed: &mut Vec<DocumentId>,
    ) -> Result<(), IndexError> {
        self.stores.vectors.commit().await?;
        self.stores.text.commit().await?;
        self.stores.catalog.put_documents(uncommitted).await?;
        self.stores.catalog.remove_documents(removed).await?;
        uncommitted.clear();
        removed.clear();
        Ok(())
    }

    async fn delete_document(&self, id: &DocumentId) -> Result<(), IndexError> {
        self.stores.vectors.delete_document_from(id, 0).await?;
        self.stores.text.delete_document_from(id, 0).await?;
        Ok(())
    }

    /// Removes every chunk and record of `project`.
    pub async fn drop_project(&self, project: &str) -> Result<(), IndexError> {
        self.stores.vectors.delete_project(project).await?;
        self.stores.text.delete_project(project).await?;
        self.stores.vectors.commit().await?;
        self.stores.text.commit().await?;
        let ids: Vec<DocumentId> = self
            .stores
            .catalog
            .documents(Some(project))
            .await?
            .into_iter()
            .map(|r| r.document_id)
            .collect();
        self.stores.catalog.remove_documents(&ids).await?;
        self.stores.catalog.remove_project(project).await?;
        Ok(())
    }
}

fn spec_source(spec: &SourceSpec) -> String {
    spec.display()
}
