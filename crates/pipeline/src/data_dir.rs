//! The data directory of the embedded deployment: `catalog.redb`, `text/`
//! (tantivy), `vectors/` (qdrant-edge), `sources/` (git checkouts) and
//! `weft-data.json`, the marker that records the embedding model the vectors
//! were made with. [`DataDir`] knows the layout and the marker; the stores in
//! it are opened by [`crate::embedded`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::Stores;

const META_FILE: &str = "weft-data.json";
const META_VERSION: u32 = 1;

/// What went wrong opening the data directory.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Nothing has been indexed there yet.
    #[error("no index in {0}: nothing has been indexed there yet")]
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
        "{dir} was indexed with the model {found} ({found_dimension} dimensions), not {expected}"
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
    /// A store in the directory failed to open.
    #[error("{what} in {dir}: {source}")]
    Store {
        /// Which store.
        what: &'static str,
        /// The data directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An older text index could not be rebuilt here.
    #[error(
        "the text index {text} is in text format {found} and this weft reads format {expected}; \
         it is rebuilt automatically only when the vectors are embedded too. Move {text} and \
         {catalog} aside and index again to rebuild it"
    )]
    OldTextFormat {
        /// The text index.
        text: PathBuf,
        /// The catalog beside it.
        catalog: PathBuf,
        /// Its format.
        found: u32,
        /// The format this weft reads.
        expected: u32,
    },
    /// This build has no embedded vector index.
    #[error("this weft was built without the `qdrant-edge` feature: no embedded vector index")]
    NoVectorIndex,
    /// The directory cannot be created or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl DataDirError {
    pub(crate) fn store(
        what: &'static str,
        dir: &Path,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Store {
            what,
            dir: dir.to_owned(),
            source: source.into(),
        }
    }
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

    /// The catalog file.
    pub fn catalog_path(&self) -> PathBuf {
        self.path.join("catalog.redb")
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

    /// The recorded model; nothing indexed yet is [`DataDirError::Empty`].
    pub fn existing_meta(&self) -> Result<DataMeta, DataDirError> {
        self.meta()?
            .ok_or_else(|| DataDirError::Empty(self.path.clone()))
    }

    /// Opens the existing stores (vectors, text, catalog) for reading.
    pub fn open_existing(&self) -> Result<Stores, DataDirError> {
        let meta = self.existing_meta()?;
        self.open_stores(&meta)
    }

    /// Opens the stores for indexing with `model` of `dimension`, creating
    /// them on first use; data made by another model is an error.
    pub fn open_for(&self, model: &str, dimension: usize) -> Result<Stores, DataDirError> {
        let meta = self.record_model(model, dimension)?;
        self.open_stores(&meta)
    }

    /// Checks that the directory holds an index made by `model` of
    /// `dimension`: nothing indexed and another model are errors.
    pub fn check_model(&self, model: &str, dimension: usize) -> Result<DataMeta, DataDirError> {
        let found = self.existing_meta()?;
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

    /// The catalog of the directory.
    pub fn open_catalog(&self) -> Result<weft_catalog_redb::RedbCatalog, DataDirError> {
        weft_catalog_redb::RedbCatalog::open(&self.catalog_path())
            .map_err(|e| DataDirError::store("catalog", &self.path, e))
    }

    fn open_stores(&self, meta: &DataMeta) -> Result<Stores, DataDirError> {
        let catalog = self.open_catalog()?;
        let (vectors, text) = crate::embedded::open_embedded(&self.path, meta.dimension)?;
        Ok(Stores {
            vectors,
            text: Arc::new(text),
            catalog: Arc::new(catalog),
        })
    }
}
