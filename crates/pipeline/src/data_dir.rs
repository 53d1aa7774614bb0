//! The data directory: `catalog.redb`, `text/` (tantivy), `vectors/`
//! (qdrant-edge), `sources/` (git checkouts) and `weft-data.json`, which
//! records the embedding model the vectors were made with.
//!
//! A text index from an older weft (another
//! [`weft_text_tantivy::TEXT_FORMAT`]) is rebuilt from the vector index's
//! chunks when the directory is opened, in `text.rebuild/` and then swapped
//! in, so an upgrade never re-embeds anything.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use weft_core::Chunk;
use weft_core::ports::{Catalog, Embedder, PortError, PortResult, TextIndex, VectorIndex};
use weft_text_tantivy::{TEXT_FORMAT, TantivyTextIndex};

const META_FILE: &str = "weft-data.json";
const META_VERSION: u32 = 1;

/// What went wrong opening the data directory.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Nothing has been indexed there yet.
    #[error("no index in {0}: run `weft index PATH` first (or pass --data-dir)")]
    Empty(PathBuf),
    /// `weft-data.json` is unreadable.
    #[error(
        "{path} is not a weft data directory marker ({message}); remove the directory to start over"
    )]
    BadMeta {
        /// The marker file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The data was embedded by another model.
    #[error(
        "{dir} was indexed with the model {found} ({found_dimension} dimensions), not {expected}; \
         use another --data-dir, or remove {dir} to re-index everything with {expected}"
    )]
    ModelMismatch {
        /// The data directory.
        dir: PathBuf,
        /// The model configured now.
        expected: String,
        /// The model recorded.
        found: String,
        /// Its dimension.
        found_dimension: usize,
    },
    /// A store failed to open.
    #[error("{0}")]
    Store(String),
    /// This build has no embedded vector index.
    #[error("this weft was built without the `qdrant-edge` feature: no embedded vector index")]
    NoVectorIndex,
    /// The directory cannot be created or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The model the data directory's vectors were made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataMeta {
    /// Layout version.
    pub version: u32,
    /// Embedding model id.
    pub model: String,
    /// Vector dimension.
    pub dimension: usize,
}

/// The three stores of a data directory, behind their ports.
#[derive(Clone)]
pub struct Stores {
    /// Vectors (with whole chunks as payload).
    pub vectors: Arc<dyn VectorIndex>,
    /// Full text.
    pub text: Arc<dyn TextIndex>,
    /// What is indexed.
    pub catalog: Arc<dyn Catalog>,
    /// The model the vectors were made with.
    pub meta: DataMeta,
}

/// A data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    path: PathBuf,
}

impl DataDir {
    /// The data directory at `path` (not touched yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where git checkouts live.
    pub fn sources_dir(&self) -> PathBuf {
        self.path.join("sources")
    }

    /// The recorded model, or `None` if nothing was indexed yet.
    pub fn meta(&self) -> Result<Option<DataMeta>, DataDirError> {
        let path = self.path.join(META_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(DataDirError::Io { path, source: e }),
        };
        let meta: DataMeta = serde_json::from_slice(&bytes).map_err(|e| DataDirError::BadMeta {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if meta.version != META_VERSION {
            return Err(DataDirError::BadMeta {
                path,
                message: format!("layout version {} is not {META_VERSION}", meta.version),
            });
        }
        Ok(Some(meta))
    }

    /// Opens existing stores for searching.
    pub fn open_existing(&self) -> Result<Stores, DataDirError> {
        let meta = self
            .meta()?
            .ok_or_else(|| DataDirError::Empty(self.path.clone()))?;
        self.open_stores(meta)
    }

    /// Opens the stores for indexing with `model` of `dimension`, creating
    /// them on first use; data made by another model is an error.
    pub fn open_for(&self, model: &str, dimension: usize) -> Result<Stores, DataDirError> {
        let meta = self.record_model(model, dimension)?;
        self.open_stores(meta)
    }

    /// Checks that the directory holds an index made by `model` of
    /// `dimension`: nothing indexed and another model are errors.
    pub fn check_model(&self, model: &str, dimension: usize) -> Result<DataMeta, DataDirError> {
        let found = self
            .meta()?
            .ok_or_else(|| DataDirError::Empty(self.path.clone()))?;
        self.same_model(found, model, dimension)
    }

    /// Records `model` of `dimension` as the one the directory's vectors
    /// are made with, creating the directory; a directory recorded with
    /// another model is an error.
    pub fn record_model(&self, model: &str, dimension: usize) -> Result<DataMeta, DataDirError> {
        if let Some(found) = self.meta()? {
            return self.same_model(found, model, dimension);
        }
        std::fs::create_dir_all(&self.path).map_err(|e| DataDirError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        let meta = DataMeta {
            version: META_VERSION,
            model: model.to_owned(),
            dimension,
        };
        let path = self.path.join(META_FILE);
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| DataDirError::BadMeta {
            path: path.clone(),
            message: e.to_string(),
        })?;
        std::fs::write(&path, json).map_err(|e| DataDirError::Io { path, source: e })?;
        Ok(meta)
    }

    fn same_model(
        &self,
        found: DataMeta,
        model: &str,
        dimension: usize,
    ) -> Result<DataMeta, DataDirError> {
        if found.model != model || found.dimension != dimension {
            return Err(DataDirError::ModelMismatch {
                dir: self.path.clone(),
                expected: model.to_owned(),
                found: found.model,
                found_dimension: found.dimension,
            });
        }
        Ok(found)
    }

    fn open_stores(&self, meta: DataMeta) -> Result<Stores, DataDirError> {
        let store = |e: &dyn std::fmt::Display| DataDirError::Store(e.to_string());
        let catalog = weft_catalog_redb::RedbCatalog::open(&self.path.join("catalog.redb"))
            .map_err(|e| store(&e))?;
        let (vectors, text) = open_embedded(&self.path, meta.dimension)?;
        Ok(Stores {
            vectors,
            text: Arc::new(text),
            catalog: Arc::new(catalog),
            meta,
        })
    }
}

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

#[cfg(feature = "qdrant-edge")]
fn open_edge(
    dir: &Path,
    dimension: usize,
) -> Result<weft_vector_edge::EdgeVectorIndex, DataDirError> {
    weft_vector_edge::EdgeVectorIndex::open_or_create(&dir.join("vectors"), dimension)
        .map_err(|e| DataDirError::Store(e.to_string()))
}

/// The embedded vector index of the data directory `dir`.
#[cfg(feature = "qdrant-edge")]
pub(crate) fn open_vectors(
    dir: &Path,
    dimension: usize,
) -> Result<Arc<dyn VectorIndex>, DataDirError> {
    Ok(Arc::new(open_edge(dir, dimension)?))
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
    /// Calls `each` with every stored chunk, a batch at a time.
    fn for_each_chunk(
        &self,
        each: &mut dyn FnMut(Vec<Chunk>) -> Result<(), DataDirError>,
    ) -> Result<(), DataDirError>;
}

#[cfg(feature = "qdrant-edge")]
impl ChunkSource for weft_vector_edge::EdgeVectorIndex {
    fn for_each_chunk(
        &self,
        each: &mut dyn FnMut(Vec<Chunk>) -> Result<(), DataDirError>,
    ) -> Result<(), DataDirError> {
        self.for_each_chunk_blocking(REBUILD_BATCH, |chunks| -> Result<(), RebuildError> {
            each(chunks).map_err(RebuildError::Text)
        })
        .map_err(|e| match e {
            RebuildError::Text(e) => e,
            RebuildError::Vectors(e) => DataDirError::Store(e.to_string()),
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
/// such an index is [`DataDirError::Store`] naming the format and what to do.
pub(crate) fn open_text(
    dir: &Path,
    source: Option<&dyn ChunkSource>,
) -> Result<TantivyTextIndex, DataDirError> {
    let store = |e: &dyn std::fmt::Display| DataDirError::Store(e.to_string());
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
    let found = TantivyTextIndex::format_in(&text).map_err(|e| store(&e))?;
    let found = match found {
        Some(found) if found != TEXT_FORMAT => found,
        _ => return TantivyTextIndex::open_or_create(&text).map_err(|e| store(&e)),
    };
    let Some(source) = source else {
        return Err(DataDirError::Store(format!(
            "the text index {} is in text format {found} and this weft reads format \
             {TEXT_FORMAT}; it is rebuilt automatically only when the vectors are embedded \
             too. Move {} and {} aside and re-index to rebuild it",
            text.display(),
            text.display(),
            dir.join("catalog.redb").display()
        )));
    };
    let started = std::time::Instant::now();
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    let mut chunks = 0usize;
    {
        let rebuilt = TantivyTextIndex::open_or_create(&staging).map_err(|e| store(&e))?;
        source.for_each_chunk(&mut |batch| {
            chunks += batch.len();
            rebuilt.upsert(&batch).map_err(|e| store(&e))
        })?;
        rebuilt.commit().map_err(|e| store(&e))?;
    }
    std::fs::rename(&text, &old).map_err(io(&old))?;
    std::fs::rename(&staging, &text).map_err(io(&text))?;
    std::fs::remove_dir_all(&old).map_err(io(&old))?;
    tracing::warn!(
        "rebuilt the text index {} from text format {found} to {TEXT_FORMAT}: {chunks} chunks from the vector index in {:.1} s",
        text.display(),
        started.elapsed().as_secs_f64()
    );
    TantivyTextIndex::open_or_create(&text).map_err(|e| store(&e))
}

/// The platform's data directory for weft: `$XDG_DATA_HOME/weft`, else
/// `~/Library/Application Support/weft` on macOS, `%APPDATA%\weft` on
/// Windows, `~/.local/share/weft` elsewhere.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("weft");
    }
    if let Some(appdata) = std::env::var_os("APPDATA").filter(|_| cfg!(windows)) {
        return PathBuf::from(appdata).join("weft");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    if cfg!(target_os = "macos") {
        home.join("Library/Application Support/weft")
    } else {
        home.join(".local/share/weft")
    }
}

/// Where `tools/fetch-model.sh` puts the default model:
/// `~/.cache/weft/models/all-MiniLM-L6-v2`.
pub fn default_model_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/weft/models/all-MiniLM-L6-v2")
}

type Loader = dyn Fn() -> Result<Arc<dyn Embedder>, String> + Send + Sync;

/// An embedder loaded on first use, so that a run with nothing to embed
/// never reads the model.
pub struct LazyEmbedder {
    model_id: String,
    dimension: usize,
    loader: Box<Loader>,
    loaded: OnceLock<Result<Arc<dyn Embedder>, String>>,
}

impl LazyEmbedder {
    /// An embedder for `model_id` of `dimension`, loaded by `loader` when
    /// first asked to embed.
    pub fn new(
        model_id: impl Into<String>,
        dimension: usize,
        loader: impl Fn() -> Result<Arc<dyn Embedder>, String> + Send + Sync + 'static,
    ) -> Self {
        Self {
            model_id: model_id.into(),
            dimension,
            loader: Box::new(loader),
            loaded: OnceLock::new(),
        }
    }

    /// An embedder that is already loaded.
    pub fn loaded(embedder: Arc<dyn Embedder>) -> Self {
        let (model_id, dimension) = (embedder.model_id().to_owned(), embedder.dimension());
        let me = Self::new(model_id, dimension, || Err("unreachable".into()));
        let _ = me.loaded.set(Ok(embedder));
        me
    }

    /// Whether the model has been loaded.
    pub fn is_loaded(&self) -> bool {
        matches!(self.loaded.get(), Some(Ok(_)))
    }

    fn get(&self) -> PortResult<Arc<dyn Embedder>> {
        self.loaded
            .get_or_init(|| (self.loader)())
            .clone()
            .map_err(|e| PortError::new("embedding model", e))
    }

    /// The loaded model, once its dimension is known to be the index's.
    fn checked(&self) -> PortResult<Arc<dyn Embedder>> {
        let embedder = self.get()?;
        if embedder.dimension() != self.dimension {
            return Err(PortError::new(
                "embedding model",
                format!(
                    "{} makes {}-dimensional vectors, the index holds {}",
                    embedder.model_id(),
                    embedder.dimension(),
                    self.dimension
                ),
            ));
        }
        Ok(embedder)
    }
}

#[async_trait::async_trait]
impl Embedder for LazyEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    async fn embed(&self, texts: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.checked()?.embed(texts).await
    }
    async fn embed_queries(&self, queries: &[String]) -> PortResult<Vec<Vec<f32>>> {
        self.checked()?.embed_queries(queries).await
    }
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
