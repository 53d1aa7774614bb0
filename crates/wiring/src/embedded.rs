//! The stores of the embedded deployment, in a data directory: the vector
//! index (`vectors/`, qdrant-edge) and the text index (`text/`, tantivy).
//!
//! A text index from an older weft (another
//! [`weft_text_tantivy::TEXT_FORMAT`]) is rebuilt from the vector index's
//! chunks when the directory is opened, in `text.rebuild/` and then swapped
//! in, so an upgrade never re-embeds anything.

use std::path::Path;
use std::sync::Arc;

use weft_core::Chunk;
use weft_core::ports::VectorIndex;
use weft_text_tantivy::{TEXT_FORMAT, TantivyTextIndex};

use crate::DataDirError;

/// Opens the embedded vector index (`vectors/`) and text index (`text/`)
/// of the data directory `dir`. A text index in an older
/// [`weft_text_tantivy::TEXT_FORMAT`] is first rebuilt from the chunks the
/// vector index holds, so upgrading weft never needs re-embedding.
#[cfg(feature = "qdrant-edge")]
pub(crate) fn open_embedded(
    dir: &Path,
    dimension: usize,
) -> Result<(Arc<dyn VectorIndex>, TantivyTextIndex), DataDirError> {
    let vectors = open_edge(dir, dimension)?;
    let text = open_text(dir, Some(&vectors))?;
    Ok((Arc::new(vectors), text))
}

/// Without qdrant-edge there is no embedded vector index.
#[cfg(not(feature = "qdrant-edge"))]
pub(crate) fn open_embedded(
    _dir: &Path,
    _dimension: usize,
) -> Result<(Arc<dyn VectorIndex>, TantivyTextIndex), DataDirError> {
    Err(DataDirError::NoVectorIndex)
}

/// Opens the embedded vector and text indexes of `dir` for searching
/// only, beside any number of other readers (a generation is read-only
/// once live). A text index in an older format is
/// [`DataDirError::OldTextFormat`]: `weft index` rebuilds it.
#[cfg(feature = "qdrant-edge")]
pub(crate) fn open_embedded_read_only(
    dir: &Path,
    dimension: usize,
) -> Result<(Arc<dyn VectorIndex>, TantivyTextIndex), DataDirError> {
    Ok((
        open_vectors_read_only(dir, dimension)?,
        open_text_read_only(dir)?,
    ))
}

/// Without qdrant-edge there is no embedded vector index.
#[cfg(not(feature = "qdrant-edge"))]
pub(crate) fn open_embedded_read_only(
    _dir: &Path,
    _dimension: usize,
) -> Result<(Arc<dyn VectorIndex>, TantivyTextIndex), DataDirError> {
    Err(DataDirError::NoVectorIndex)
}

/// Opens the text index `text/` of `dir` for searching only.
pub(crate) fn open_text_read_only(dir: &Path) -> Result<TantivyTextIndex, DataDirError> {
    let text = dir.join("text");
    match TantivyTextIndex::format_in(&text)
        .map_err(|e| DataDirError::store("text index", dir, e))?
    {
        Some(found) if found != TEXT_FORMAT => Err(DataDirError::OldTextFormat {
            catalog: dir.join("catalog.redb"),
            text,
            found,
            expected: TEXT_FORMAT,
        }),
        // Not written yet (its writer has not opened it): nothing indexed.
        None => Err(DataDirError::Empty(dir.to_owned())),
        _ => TantivyTextIndex::open_read_only(&text)
            .map_err(|e| DataDirError::store("text index", dir, e)),
    }
}

/// Whether the text index of `dir` is in an older format than this weft
/// reads (a writer rebuilds it when it opens the directory).
pub fn text_is_outdated(dir: &Path) -> bool {
    matches!(
        TantivyTextIndex::format_in(&dir.join("text")),
        Ok(Some(found)) if found != TEXT_FORMAT
    )
}

#[cfg(feature = "qdrant-edge")]
fn open_edge(
    dir: &Path,
    dimension: usize,
) -> Result<weft_vector_edge::EdgeVectorIndex, DataDirError> {
    weft_vector_edge::EdgeVectorIndex::open_or_create(&dir.join("vectors"), dimension)
        .map_err(|e| DataDirError::store("vector index", dir, e))
}

/// The embedded vector index of the data directory `dir`.
#[cfg(feature = "qdrant-edge")]
pub(crate) fn open_vectors(
    dir: &Path,
    dimension: usize,
) -> Result<Arc<dyn VectorIndex>, DataDirError> {
    Ok(Arc::new(open_edge(dir, dimension)?))
}

/// The embedded vector index of the data directory `dir`, for searching
/// only (beside any number of readers and the one process writing it).
#[cfg(feature = "qdrant-edge")]
pub(crate) fn open_vectors_read_only(
    dir: &Path,
    dimension: usize,
) -> Result<Arc<dyn VectorIndex>, DataDirError> {
    let vectors = dir.join("vectors");
    if !vectors.join("edge_config.json").exists() {
        // Not written yet (its writer has not opened it): nothing indexed.
        return Err(DataDirError::Empty(dir.to_owned()));
    }
    Ok(Arc::new(
        weft_vector_edge::EdgeVectorIndex::open_read_only(&vectors, dimension)
            .map_err(|e| DataDirError::store("vector index", dir, e))?,
    ))
}

/// Without qdrant-edge there is no embedded vector index.
#[cfg(not(feature = "qdrant-edge"))]
pub(crate) fn open_vectors_read_only(
    _dir: &Path,
    _dimension: usize,
) -> Result<Arc<dyn VectorIndex>, DataDirError> {
    Err(DataDirError::NoVectorIndex)
}

/// Without qdrant-edge there is no embedded vector index.
#[cfg(not(feature = "qdrant-edge"))]
pub(crate) fn open_vectors(
    _dir: &Path,
    _dimension: usize,
) -> Result<Arc<dyn VectorIndex>, DataDirError> {
    Err(DataDirError::NoVectorIndex)
}

/// Every chunk a store holds, in batches: what a text index is rebuilt from.
pub(crate) trait ChunkSource {
    /// Calls `each` with every stored chunk, a batch at a time; errors of
    /// the store name the data directory `dir`.
    fn for_each_chunk(
        &self,
        dir: &Path,
        each: &mut dyn FnMut(Vec<Chunk>) -> Result<(), DataDirError>,
    ) -> Result<(), DataDirError>;
}

#[cfg(feature = "qdrant-edge")]
impl ChunkSource for weft_vector_edge::EdgeVectorIndex {
    fn for_each_chunk(
        &self,
        dir: &Path,
        each: &mut dyn FnMut(Vec<Chunk>) -> Result<(), DataDirError>,
    ) -> Result<(), DataDirError> {
        self.for_each_chunk_blocking(REBUILD_BATCH, |chunks| -> Result<(), RebuildError> {
            each(chunks).map_err(RebuildError::Text)
        })
        .map_err(|e| match e {
            RebuildError::Text(e) => e,
            RebuildError::Vectors(e) => DataDirError::store("vector index", dir, e),
        })
    }
}

#[cfg(feature = "qdrant-edge")]
enum RebuildError {
    Text(DataDirError),
    Vectors(weft_vector_edge::VectorIndexError),
}

#[cfg(feature = "qdrant-edge")]
impl From<weft_vector_edge::VectorIndexError> for RebuildError {
    fn from(e: weft_vector_edge::VectorIndexError) -> Self {
        RebuildError::Vectors(e)
    }
}

/// Chunks per batch when a text index is rebuilt.
const REBUILD_BATCH: usize = 1024;

/// Opens the text index `text/` of the data directory `dir`. One in an
/// older text format is rebuilt from `source` into `text.rebuild/`, then
/// swapped in; until the swap the old index stays where it was, so an
/// interrupted rebuild starts over and loses nothing. Without a source
/// such an index is [`DataDirError::OldTextFormat`], naming what to do.
pub(crate) fn open_text(
    dir: &Path,
    source: Option<&dyn ChunkSource>,
) -> Result<TantivyTextIndex, DataDirError> {
    let store = |e| DataDirError::store("text index", dir, e);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| DataDirError::Io { path, source }
    };
    let text = dir.join("text");
    let staging = dir.join("text.rebuild");
    let old = dir.join("text.old");
    // A swap cut short: `text.old` is the last complete index.
    if old.exists() {
        if text.exists() {
            std::fs::remove_dir_all(&old).map_err(io(&old))?;
        } else {
            std::fs::rename(&old, &text).map_err(io(&text))?;
        }
    }
    let found = TantivyTextIndex::format_in(&text).map_err(store)?;
    let found = match found {
        Some(found) if found != TEXT_FORMAT => found,
        _ => return TantivyTextIndex::open_or_create(&text).map_err(store),
    };
    let Some(source) = source else {
        return Err(DataDirError::OldTextFormat {
            catalog: dir.join("catalog.redb"),
            text,
            found,
            expected: TEXT_FORMAT,
        });
    };
    let started = std::time::Instant::now();
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    let mut chunks = 0usize;
    {
        let rebuilt = TantivyTextIndex::open_or_create(&staging).map_err(store)?;
        source.for_each_chunk(dir, &mut |batch| {
            chunks += batch.len();
            rebuilt.upsert(&batch).map_err(store)
        })?;
        rebuilt.commit().map_err(store)?;
    }
    std::fs::rename(&text, &old).map_err(io(&old))?;
    std::fs::rename(&staging, &text).map_err(io(&text))?;
    std::fs::remove_dir_all(&old).map_err(io(&old))?;
    tracing::warn!(
        "rebuilt the text index {} from text format {found} to {TEXT_FORMAT}: {chunks} chunks from the vector index in {:.1} s",
        text.display(),
        started.elapsed().as_secs_f64()
    );
    TantivyTextIndex::open_or_create(&text).map_err(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_text_index_without_a_source_is_named_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("text");
        TantivyTextIndex::open_or_create(&text)
            .unwrap()
            .commit()
            .unwrap();
        std::fs::remove_file(text.join("weft-text-format")).unwrap();
        let err = open_text(dir.path(), None)
            .err()
            .expect("an old index with nothing to rebuild it from is refused");
        let message = err.to_string();
        assert!(message.contains(&text.display().to_string()), "{message}");
        assert!(message.contains("format 1"), "{message}");
        assert!(message.contains("catalog.redb"), "{message}");
        // The old index is left where it was.
        assert_eq!(TantivyTextIndex::format_in(&text).unwrap(), Some(1));
    }

    #[test]
    fn a_swap_cut_short_is_finished_from_the_old_index() {
        let dir = tempfile::tempdir().unwrap();
        // The old index was moved aside, the rebuilt one not yet moved in.
        TantivyTextIndex::open_or_create(&dir.path().join("text.old"))
            .unwrap()
            .commit()
            .unwrap();
        let index = open_text(dir.path(), None).unwrap();
        assert_eq!(index.len(), 0);
        assert!(dir.path().join("text").exists());
        assert!(!dir.path().join("text.old").exists());
    }
}
