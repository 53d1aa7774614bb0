//! The one write step: a document's chunks into the vector index, the text
//! index and the catalog, for the embedded indexer and the distributed
//! embedder alike.
//!
//! [`IndexWriter::write`] takes a set of [`DocumentUpdate`]s (several
//! documents at once) and
//!
//! 1. drops updates older than the version the catalog records (a document
//!    changed twice ends at its last version);
//! 2. reads, in **one** store call, every chunk stored under the updates'
//!    chunk ids plus each document's first id past its new end; a chunk
//!    stored unchanged whose vectors the same embedder made is not embedded
//!    again;
//! 3. looks up, in **one** vector-index call, stored vectors of the rest by
//!    their [`embedding_key`] — (embedder identity, embedded text), so a
//!    text embedded before in any document, project, fork or earlier cut
//!    is not sent to the model — and
//!    embeds what is left, each distinct text once, in calls bounded by
//!    count and estimated tokens, up to [`EmbedBatching::concurrent_calls`]
//!    at once;
//! 4. upserts vectors and text, and deletes each document's chunks at or
//!    past its new `total_chunks` when any are stored (all of a deleted
//!    document's);
//! 5. keeps the documents' records for the next [`IndexWriter::checkpoint`],
//!    which commits both indexes and only then writes the catalog.
//!
//! Every id is computed from (document, index), so a replay after a crash
//! or a redelivery writes the same points again: nothing is duplicated.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};

use weft_core::ports::{DocumentRecord, Embedder, PortError, PortResult};
use weft_core::{Chunk, ChunkId, DocumentId, IndexIdentity, embedding_key};

use weft_wiring::{EmbedBatching, Stores};

/// A document's new state, to be written.
#[derive(Debug, Clone)]
pub struct DocumentUpdate {
    /// The document.
    pub document_id: DocumentId,
    /// Its project.
    pub project: String,
    /// Its uri.
    pub uri: String,
    /// sha256 of the content the chunks were cut from.
    pub content_hash: String,
    /// Where versions are ordered (the distributed pipeline: the sequence
    /// of the document in the documents stream), the version; else 0. An
    /// update older than the recorded version is dropped.
    pub version: u64,
    /// The fingerprint of the chunker that cut it.
    pub chunker: String,
    /// Its chunks, or its deletion.
    pub content: UpdateContent,
}

/// What a [`DocumentUpdate`] holds.
#[derive(Debug, Clone)]
pub enum UpdateContent {
    /// The document has `total` chunks; these are some or all of them (the
    /// distributed pipeline may carry one document in several parts). A
    /// document that could not be chunked has none: what was indexed of it
    /// goes, and its record (with no chunks) keeps it from being tried
    /// again until it changes.
    Chunks {
        /// How many chunks the document has.
        total: u32,
        /// Chunks of it, in any order.
        chunks: Vec<Chunk>,
    },
    /// The document is gone from its source.
    Deleted,
}

impl DocumentUpdate {
    /// A whole document: all its chunks.
    pub fn whole(
        document_id: DocumentId,
        project: impl Into<String>,
        uri: impl Into<String>,
        content_hash: impl Into<String>,
        chunker: impl Into<String>,
        chunks: Vec<Chunk>,
    ) -> Self {
        Self {
            document_id,
            project: project.into(),
            uri: uri.into(),
            content_hash: content_hash.into(),
            version: 0,
            chunker: chunker.into(),
            content: UpdateContent::Chunks {
                total: chunks.len() as u32,
                chunks,
            },
        }
    }

    /// The deletion of the document a record describes.
    pub fn deletion(record: &DocumentRecord) -> Self {
        Self {
            document_id: record.document_id.clone(),
            project: record.project.clone(),
            uri: record.uri.clone(),
            content_hash: String::new(),
            version: record.version,
            chunker: String::new(),
            content: UpdateContent::Deleted,
        }
    }

    /// The chunks it carries (none for a deletion).
    pub fn chunks(&self) -> &[Chunk] {
        match &self.content {
            UpdateContent::Chunks { chunks, .. } => chunks,
            UpdateContent::Deleted => &[],
        }
    }

    /// Chunks at and past this index are surplus.
    fn keep(&self) -> u32 {
        match self.content {
            UpdateContent::Chunks { total, .. } => total,
            UpdateContent::Deleted => 0,
        }
    }
}

/// What [`IndexWriter::write`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WriteStats {
    /// Documents written (with their chunks, or none).
    pub documents_written: usize,
    /// Documents deleted.
    pub documents_deleted: usize,
    /// Updates dropped because the catalog has a newer version.
    pub documents_stale: usize,
    /// Chunks written with a vector the model made in this call (one per
    /// distinct text).
    pub chunks_embedded: usize,
    /// Chunks written with a stored vector found by their text's
    /// [`embedding_key`] (another document, project, fork or an earlier
    /// cut of this one had the same text), or made once for an equal text
    /// of the same call: not sent to the model.
    pub vectors_reused: usize,
    /// Chunks found stored unchanged, with vectors of the same embedder:
    /// not written again.
    pub chunks_reused: usize,
    /// Stored chunks deleted: surplus of shrunk documents and deleted ones
    /// (as the catalog counted them).
    pub chunks_deleted: usize,
    /// Tokens of the texts sent to the model, one per four characters
    /// ([`weft_core::embedding_tokens`]): what an API bills, about.
    pub tokens_embedded: u64,
    /// Time spent in the embedder.
    #[serde(skip)]
    pub embedding_time: Duration,
    /// Embedding calls made.
    pub embedding_calls: usize,
}

impl std::ops::AddAssign for WriteStats {
    fn add_assign(&mut self, other: Self) {
        self.documents_written += other.documents_written;
        self.documents_deleted += other.documents_deleted;
        self.documents_stale += other.documents_stale;
        self.chunks_embedded += other.chunks_embedded;
        self.vectors_reused += other.vectors_reused;
        self.chunks_reused += other.chunks_reused;
        self.chunks_deleted += other.chunks_deleted;
        self.tokens_embedded += other.tokens_embedded;
        self.embedding_time += other.embedding_time;
        self.embedding_calls += other.embedding_calls;
    }
}

/// Writes documents' chunks to the stores and the catalog (see the module
/// documentation for the steps).
pub struct IndexWriter {
    target: Stores,
    /// Another vector index whose stored vectors are reused too (the live
    /// generation, while a rebuild writes the next).
    reuse_from: Option<Arc<dyn weft_core::ports::VectorIndex>>,
    embedder: Arc<dyn Embedder>,
    /// The embedder's part of the identity recorded per document.
    embedder_tag: String,
    batching: EmbedBatching,
    records: Vec<DocumentRecord>,
    removed: Vec<DocumentId>,
    pending_chunks: usize,
}

impl IndexWriter {
    /// A writer to the stores `target`, embedding with `embedder`, which the catalog
    /// names `embedder_tag` ([`weft_wiring::embedder_tag`]).
    pub fn new(
        target: Stores,
        embedder: Arc<dyn Embedder>,
        embedder_tag: impl Into<String>,
        batching: EmbedBatching,
    ) -> Self {
        Self {
            target,
            reuse_from: None,
            embedder,
            embedder_tag: embedder_tag.into(),
            batching,
            records: Vec::new(),
            removed: Vec::new(),
            pending_chunks: 0,
        }
    }

    /// The writer, also reusing vectors stored in `vectors` (by the same
    /// [`embedding_key`]s): a rebuild into a new generation embeds only
    /// texts the live generation does not hold.
    pub fn reusing(mut self, vectors: Arc<dyn weft_core::ports::VectorIndex>) -> Self {
        self.reuse_from = Some(vectors);
        self
    }

    /// Stops reusing the vector index [`IndexWriter::reusing`] gave (it is
    /// about to be closed).
    pub fn stop_reusing(&mut self) {
        self.reuse_from = None;
    }

    /// Chunks embedded and written since the last checkpoint.
    pub fn pending_chunks(&self) -> usize {
        self.pending_chunks
    }

    /// The identity recorded for documents cut by `chunker` and embedded here.
    pub fn identity(&self, chunker: &str) -> IndexIdentity {
        IndexIdentity::new(self.embedder_tag.clone(), chunker)
    }

    /// Writes `updates` to both indexes; their catalog records wait for the
    /// next [`IndexWriter::checkpoint`]. On an error nothing of these
    /// updates is recorded: write them again (ids are computed, a replay
    /// duplicates nothing).
    pub async fn write(&mut self, updates: &[DocumentUpdate]) -> PortResult<WriteStats> {
        let mut stats = WriteStats::default();
        // Of several versions of a document in one call, the newest wins;
        // an update older than the recorded version goes.
        let mut newest: HashMap<&DocumentId, u64> = HashMap::new();
        for u in updates {
            let v = newest.entry(&u.document_id).or_insert(0);
            *v = (*v).max(u.version);
        }
        let mut current: Vec<(&DocumentUpdate, Option<DocumentRecord>)> = Vec::new();
        for u in updates {
            if newest.get(&u.document_id).is_some_and(|&v| v > u.version) {
                stats.documents_stale += 1;
                continue;
            }
            let recorded = self.target.catalog.document(&u.document_id).await?;
            if recorded.as_ref().is_some_and(|r| r.version > u.version) {
                tracing::info!(uri = %u.uri, version = u.version, "an older version: skipped");
                stats.documents_stale += 1;
                continue;
            }
            current.push((u, recorded));
        }

        // One read: every chunk id of the updates, and each document's
        // first id past its end (stored only if it has surplus chunks).
        let mut ids: Vec<ChunkId> = Vec::new();
        for (u, _) in &current {
            ids.extend(u.chunks().iter().map(Chunk::id));
            ids.push(ChunkId::new(&u.document_id, u.keep()));
        }
        let stored: HashMap<ChunkId, Chunk> = if ids.is_empty() {
            HashMap::new()
        } else {
            self.target
                .vectors
                .get(&ids)
                .await?
                .into_iter()
                .map(|c| (c.id(), c))
                .collect()
        };

        let mut changed: Vec<&Chunk> = Vec::new();
        for (u, recorded) in &current {
            // Stored vectors are reusable only if this embedder made them.
            let same_embedder = recorded
                .as_ref()
                .is_some_and(|r| r.identity.embedder == self.embedder_tag);
            for chunk in u.chunks() {
                if same_embedder && stored.get(&chunk.id()) == Some(chunk) {
                    stats.chunks_reused += 1;
                } else {
                    changed.push(chunk);
                }
            }
        }
        if !changed.is_empty() {
            let owned: Vec<Chunk> = changed.iter().map(|c| (*c).clone()).collect();
            let (vectors, keys) = self.vectors_for(&owned, &mut stats).await?;
            self.target.vectors.upsert(&owned, &vectors, &keys).await?;
            self.target.text.upsert(&owned).await?;
        }

        let mut records = Vec::new();
        let mut removed = Vec::new();
        for (u, recorded) in &current {
            let keep = u.keep();
            let deleted = matches!(u.content, UpdateContent::Deleted);
            if deleted || stored.contains_key(&ChunkId::new(&u.document_id, keep)) {
                self.target
                    .vectors
                    .delete_document_from(&u.document_id, keep)
                    .await?;
                self.target
                    .text
                    .delete_document_from(&u.document_id, keep)
                    .await?;
            }
            if let Some(r) = recorded {
                stats.chunks_deleted += r.chunk_count.saturating_sub(keep) as usize;
            }
            if deleted {
                stats.documents_deleted += 1;
                removed.push(u.document_id.clone());
            } else {
                stats.documents_written += 1;
                records.push(DocumentRecord {
                    document_id: u.document_id.clone(),
                    project: u.project.clone(),
                    uri: u.uri.clone(),
                    content_hash: u.content_hash.clone(),
                    chunk_count: keep,
                    identity: self.identity(&u.chunker),
                    version: u.version,
                });
            }
        }
        self.pending_chunks += stats.chunks_embedded + stats.vectors_reused;
        // Recorded and removal marks are kept only once everything above worked.
        self.records.extend(records);
        self.removed.extend(removed);
        Ok(stats)
    }

    /// Makes what was written durable: commits both indexes, then records
    /// the written documents in the catalog and forgets the deleted ones.
    /// The records of a failed checkpoint are dropped with it: the updates
    /// must be written again.
    pub async fn checkpoint(&mut self) -> PortResult<()> {
        let records = std::mem::take(&mut self.records);
        let removed = std::mem::take(&mut self.removed);
        self.pending_chunks = 0;
        self.target.vectors.commit().await?;
        self.target.text.commit().await?;
        self.target.catalog.put_documents(&records).await?;
        self.target.catalog.remove_documents(&removed).await?;
        Ok(())
    }

    /// The vectors of `chunks` and their keys: stored ones found by key (one
    /// lookup for the whole call), the others made by the model once per
    /// distinct text.
    async fn vectors_for(
        &self,
        chunks: &[Chunk],
        stats: &mut WriteStats,
    ) -> PortResult<(Vec<Vec<f32>>, Vec<String>)> {
        let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
        let keys: Vec<String> = texts
            .iter()
            .map(|t| embedding_key(&self.embedder_tag, t))
            .collect();
        let mut distinct: Vec<String> = keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let mut known = self.target.vectors.vectors_by_key(&distinct).await?;
        if let Some(other) = &self.reuse_from {
            let unknown: Vec<String> = distinct
                .iter()
                .filter(|k| !known.contains_key(*k))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                match other.vectors_by_key(&unknown).await {
                    Ok(found) => known.extend(found),
                    // Only a saving: embed instead.
                    Err(e) => tracing::warn!("cannot look up stored vectors to reuse: {e}"),
                }
            }
        }
        let mut asked = HashSet::new();
        let missing: Vec<usize> = (0..keys.len())
            .filter(|&i| !known.contains_key(&keys[i]) && asked.insert(keys[i].as_str()))
            .collect();
        let to_embed: Vec<&str> = missing.iter().map(|&i| texts[i].as_str()).collect();
        stats.tokens_embedded += to_embed
            .iter()
            .map(|t| weft_core::embedding_tokens(t))
            .sum::<u64>();
        let fresh = self.embed(&to_embed, stats).await?;
        for (&i, vector) in missing.iter().zip(fresh) {
            known.insert(keys[i].clone(), vector);
        }
        stats.chunks_embedded += missing.len();
        stats.vectors_reused += chunks.len() - missing.len();
        let vectors = keys
            .iter()
            .map(|key| {
                known.get(key).cloned().ok_or_else(|| {
                    PortError::internal(
                        format!("embedder {}", self.embedder.model_id()),
                        "a text was neither stored nor embedded",
                    )
                })
            })
            .collect::<PortResult<Vec<_>>>()?;
        Ok((vectors, keys))
    }

    /// Embeds `texts` in calls bounded by count and estimated tokens, up to
    /// `concurrent_calls` at once; the time counted is the wall time of all.
    async fn embed(&self, all: &[&str], stats: &mut WriteStats) -> PortResult<Vec<Vec<f32>>> {
        let mut calls: Vec<Vec<String>> = Vec::new();
        let mut start = 0;
        while start < all.len() {
            let mut texts = Vec::new();
            let mut tokens = 0;
            let mut end = start;
            while end < all.len() && texts.len() < self.batching.max_texts.max(1) {
                let text = all[end].to_owned();
                let estimate = text.len() / 4 + 1;
                if !texts.is_empty() && tokens + estimate > self.batching.max_tokens {
                    break;
                }
                tokens += estimate;
                texts.push(text);
                end += 1;
            }
            calls.push(texts);
            start = end;
        }
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let started = Instant::now();
        stats.embedding_calls += calls.len();
        let batches: Vec<Vec<Vec<f32>>> = futures::stream::iter(calls)
            .map(|texts| async move {
                let batch = self.embedder.embed(&texts).await?;
                if batch.len() != texts.len() {
                    return Err(PortError::internal(
                        format!("embedder {}", self.embedder.model_id()),
                        format!("{} vectors for {} texts", batch.len(), texts.len()),
                    ));
                }
                Ok(batch)
            })
            .buffered(self.batching.concurrent_calls.max(1))
            .try_collect()
            .await?;
        stats.embedding_time += started.elapsed();
        Ok(batches.into_iter().flatten().collect())
    }
}
