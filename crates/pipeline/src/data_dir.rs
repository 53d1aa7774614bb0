//! The data directory: `catalog.redb`, `text/` (tantivy), `vectors/`
//! (qdrant-edge), `sources/` (git checkouts) and `weft-data.json`, which
//! records the embedding model the vectors were made with.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use weft_core::ports::{Catalog, Embedder, PortError, PortResult, TextIndex, VectorIndex};

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
        let text = weft_text_tantivy::TantivyTextIndex::open_or_create(&self.path.join("text"))
            .map_err(|e| store(&e))?;
        let vectors = open_vectors(&self.path.join("vectors"), meta.dimension)?;
        Ok(Stores {
            vectors,
            text: Arc::new(text),
            catalog: Arc::new(catalog),
            meta,
        })
    }
}

#[cfg(feature = "qdrant-edge")]
pub(crate) fn open_vectors(
    dir: &Path,
    dimension: usize,
) -> Result<Arc<dyn VectorIndex>, DataDirError> {
    let index = weft_vector_edge::EdgeVectorIndex::open_or_create(dir, dimension)
        .map_err(|e| DataDirError::Store(e.to_string()))?;
    Ok(Arc::new(index))
}

#[cfg(not(feature = "qdrant-edge"))]
pub(crate) fn open_vectors(
    _dir: &Path,
    _dimension: usize,
) -> Result<Arc<dyn VectorIndex>, DataDirError> {
    Err(DataDirError::NoVectorIndex)
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
        embedder.embed(texts).await
    }
}
