//! The data directory of the embedded deployment, and its index
//! generations (DESIGN §6):
//!
//! ```text
//! DIR/
//!   generations.json        which generation is live (replaced by an atomic rename: the switch)
//!   write.lock              held by the one `weft index` writing at a time
//!   sources/                git checkouts, shared by every generation
//!   weft-data.json          ┐ generation 0: an index made before generations
//!   catalog.redb text/ vectors/ ┘ (or by a test writing in place)
//!   generations/g<N>/       generation N: weft-data.json, catalog.redb, text/, vectors/,
//!                           readers.lock (held shared by every process reading it)
//! ```
//!
//! Each generation holds the three stores (the catalog of what is indexed,
//! the text index, the vector index) and `weft-data.json`, the marker that
//! records the embedding model its vectors were made with. [`DataDir`]
//! reads the live one; [`GenerationDir`] is one generation; the stores in it
//! are opened by [`crate::embedded`]; [`crate::generations`] holds the
//! record and copies the live generation into a new one (what is begun,
//! switched and removed is decided by `weft_index::generations`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_core::generations::Generations;

use crate::Stores;

const META_FILE: &str = "weft-data.json";
const META_VERSION: u32 = 1;
/// The record of the data directory's generations.
pub(crate) const GENERATIONS_FILE: &str = "generations.json";
/// Held shared by every process reading a generation; taken exclusively
/// only to remove it.
const READERS_LOCK: &str = "readers.lock";
/// Held by the one process writing the data directory's index.
const WRITE_LOCK: &str = "write.lock";
/// What generation 0 (the index made in place) consists of, beside the
/// directories every generation shares.
pub(crate) const GENERATION_ZERO_ENTRIES: [&str; 6] = [
    "weft-data.json",
    "catalog.redb",
    "text",
    "vectors",
    // Read-only openers' private overlays of `vectors` (weft-vector-edge).
    "vectors.readers",
    READERS_LOCK,
];

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
    /// The generations record is unreadable.
    #[error(
        "{path} is not a weft generations record ({message}); it names the live index generation"
    )]
    BadGenerations {
        /// The record.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The live generation named by the record is not there.
    #[error("{path}: the live index generation {number} is missing")]
    MissingGeneration {
        /// Where it should be.
        path: PathBuf,
        /// Its number.
        number: u32,
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
    /// What kind of failure it is: nothing indexed, or a live generation
    /// that is not there, `NotFound`; data of another model or format, or
    /// a build without the embedded vector index, `FailedPrecondition`; an
    /// unreadable marker or record `Internal`; I/O by its own kind; a
    /// store that failed to open `Unavailable`.
    pub fn kind(&self) -> weft_core::ErrorKind {
        use weft_core::ErrorKind;
        match self {
            DataDirError::Empty(_) | DataDirError::MissingGeneration { .. } => ErrorKind::NotFound,
            DataDirError::ModelMismatch { .. }
            | DataDirError::OldTextFormat { .. }
            | DataDirError::NoVectorIndex => ErrorKind::FailedPrecondition,
            DataDirError::BadMeta { .. } | DataDirError::BadGenerations { .. } => {
                ErrorKind::Internal
            }
            DataDirError::Io { source, .. } => ErrorKind::of_io(source.kind()),
            DataDirError::Store { .. } => ErrorKind::Unavailable,
        }
    }
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

/// A data directory. Reading goes to its live generation; writing in place
/// ([`DataDir::open_for`]) too, or to generation 0 when there is none yet.
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

    /// Where git checkouts live (shared by every generation).
    pub fn sources_dir(&self) -> PathBuf {
        self.path.join("sources")
    }

    /// Generation `number` of the directory (not touched yet).
    pub fn generation(&self, number: u32) -> GenerationDir {
        let path = if number == 0 {
            self.path.clone()
        } else {
            self.path.join("generations").join(format!("g{number}"))
        };
        GenerationDir {
            root: self.path.clone(),
            number,
            path,
        }
    }

    /// The generations record: `generations.json`, else generation 0 live
    /// when an index was made in place, else none.
    pub fn generations(&self) -> Result<Generations, DataDirError> {
        let path = self.path.join(GENERATIONS_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| DataDirError::BadGenerations {
                path,
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(match self.generation(0).meta()? {
                    Some(meta) => Generations::legacy(Some(meta.model), Some(meta.dimension)),
                    None => Generations::default(),
                })
            }
            Err(e) => Err(DataDirError::Io { path, source: e }),
        }
    }

    /// The live generation, if anything has been indexed.
    pub fn live(&self) -> Result<Option<GenerationDir>, DataDirError> {
        let Some(number) = self.generations()?.live_number() else {
            return Ok(None);
        };
        let generation = self.generation(number);
        if number != 0 && !generation.path.is_dir() {
            return Err(DataDirError::MissingGeneration {
                path: generation.path,
                number,
            });
        }
        Ok(Some(generation))
    }

    /// The generation written in place: the live one, else generation 0.
    pub fn in_place(&self) -> Result<GenerationDir, DataDirError> {
        Ok(self.live()?.unwrap_or_else(|| self.generation(0)))
    }

    /// The catalog file of the live generation (or of generation 0).
    pub fn catalog_path(&self) -> Result<PathBuf, DataDirError> {
        Ok(self.in_place()?.catalog_path())
    }

    /// The model of the live generation, or `None` if nothing was indexed yet.
    pub fn meta(&self) -> Result<Option<DataMeta>, DataDirError> {
        match self.live()? {
            Some(live) => live.meta(),
            None => Ok(None),
        }
    }

    /// The model of the live generation; nothing indexed yet is
    /// [`DataDirError::Empty`].
    pub fn existing_meta(&self) -> Result<DataMeta, DataDirError> {
        self.meta()?
            .ok_or_else(|| DataDirError::Empty(self.path.clone()))
    }

    /// The file recording the embedding throughput the last `weft index`
    /// run measured here, per embedder (what `weft index --dry-run`
    /// estimates time from).
    pub fn throughput_path(&self) -> PathBuf {
        self.path.join("throughput.json")
    }

    /// Opens the live generation's stores (vectors, text, catalog).
    pub fn open_existing(&self) -> Result<Stores, DataDirError> {
        let live = self
            .live()?
            .ok_or_else(|| DataDirError::Empty(self.path.clone()))?;
        live.open_existing()
    }

    /// Opens the stores of the live generation (or of generation 0) for
    /// indexing in place with `model` of `dimension`, creating them on
    /// first use; data made by another model is an error.
    pub fn open_for(&self, model: &str, dimension: usize) -> Result<Stores, DataDirError> {
        self.in_place()?.open_for(model, dimension)
    }

    /// Checks that the live generation was made by `model` of `dimension`:
    /// nothing indexed and another model are errors.
    pub fn check_model(&self, model: &str, dimension: usize) -> Result<DataMeta, DataDirError> {
        let found = self.existing_meta()?;
        same_model(&self.path, found, model, dimension)
    }

    /// Records `model` of `dimension` in the generation written in place.
    pub fn record_model(&self, model: &str, dimension: usize) -> Result<DataMeta, DataDirError> {
        self.in_place()?.record_model(model, dimension)
    }

    /// The catalog of the live generation (or of generation 0).
    pub fn open_catalog(&self) -> Result<weft_catalog_redb::RedbCatalog, DataDirError> {
        self.in_place()?.open_catalog()
    }

    /// Takes the directory's write lock, waiting while another process
    /// holds it (`on_wait` is called once, before waiting). One process
    /// writes a data directory's index at a time.
    pub fn lock_writer(&self, on_wait: impl FnOnce()) -> Result<WriteLock, DataDirError> {
        std::fs::create_dir_all(&self.path).map_err(|e| DataDirError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        let path = self.path.join(WRITE_LOCK);
        let file = lock_file(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                on_wait();
                file.lock().map_err(|e| DataDirError::Io {
                    path: path.clone(),
                    source: e,
                })?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(DataDirError::Io { path, source: e });
            }
        }
        Ok(WriteLock { _file: file })
    }
}

fn lock_file(path: &Path) -> Result<std::fs::File, DataDirError> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| DataDirError::Io {
            path: path.to_owned(),
            source: e,
        })
}

fn same_model(
    dir: &Path,
    found: DataMeta,
    model: &str,
    dimension: usize,
) -> Result<DataMeta, DataDirError> {
    if found.model != model || found.dimension != dimension {
        return Err(DataDirError::ModelMismatch {
            dir: dir.to_owned(),
            expected: model.to_owned(),
            found: found.model,
            found_dimension: found.dimension,
        });
    }
    Ok(found)
}

/// The data directory's write lock, released when dropped.
#[derive(Debug)]
pub struct WriteLock {
    _file: std::fs::File,
}

/// A process reading a generation: while any lease is held, the
/// generation is not removed. Released when dropped.
#[derive(Debug)]
pub struct ReadLease {
    _file: std::fs::File,
    number: u32,
}

impl ReadLease {
    /// The generation read.
    pub fn generation(&self) -> u32 {
        self.number
    }
}

/// One generation of a data directory: its own catalog, text and vector
/// indexes and model marker.
#[derive(Debug, Clone)]
pub struct GenerationDir {
    root: PathBuf,
    number: u32,
    path: PathBuf,
}

impl GenerationDir {
    /// Its number.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Its directory (the data directory itself for generation 0).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The data directory it belongs to.
    pub fn data_dir(&self) -> DataDir {
        DataDir::new(&self.root)
    }

    /// Its catalog file.
    pub fn catalog_path(&self) -> PathBuf {
        self.path.join("catalog.redb")
    }

    /// The recorded model, or `None` if nothing was written yet.
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

    /// Opens its existing stores for reading.
    pub fn open_existing(&self) -> Result<Stores, DataDirError> {
        let meta = self
            .meta()?
            .ok_or_else(|| DataDirError::Empty(self.root.clone()))?;
        self.open_stores(&meta)
    }

    /// Opens its stores for indexing with `model` of `dimension`, creating
    /// them on first use; data made by another model is an error.
    pub fn open_for(&self, model: &str, dimension: usize) -> Result<Stores, DataDirError> {
        let meta = self.record_model(model, dimension)?;
        self.open_stores(&meta)
    }

    /// Records `model` of `dimension` as the one its vectors are made with,
    /// creating the directory; one recorded with another model is an error.
    pub fn record_model(&self, model: &str, dimension: usize) -> Result<DataMeta, DataDirError> {
        if let Some(found) = self.meta()? {
            return same_model(&self.root, found, model, dimension);
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

    /// Checks that it holds an index made by `model` of `dimension`.
    pub fn check_model(&self, model: &str, dimension: usize) -> Result<DataMeta, DataDirError> {
        let found = self
            .meta()?
            .ok_or_else(|| DataDirError::Empty(self.root.clone()))?;
        same_model(&self.root, found, model, dimension)
    }

    /// Its catalog.
    pub fn open_catalog(&self) -> Result<weft_catalog_redb::RedbCatalog, DataDirError> {
        std::fs::create_dir_all(&self.path).map_err(|e| DataDirError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        weft_catalog_redb::RedbCatalog::open(&self.catalog_path())
            .map_err(|e| DataDirError::store("catalog", &self.root, e))
    }

    /// Its catalog, for reading only (beside other readers).
    pub fn open_catalog_read_only(&self) -> Result<weft_catalog_redb::RedbCatalog, DataDirError> {
        weft_catalog_redb::RedbCatalog::open_read_only(&self.catalog_path())
            .map_err(|e| DataDirError::store("catalog", &self.root, e))
    }

    /// A lease for reading it: it is not removed while the lease is held.
    /// Taken before its stores are opened.
    pub fn lease(&self) -> Result<ReadLease, DataDirError> {
        let path = self.path.join(READERS_LOCK);
        let file = lock_file(&path)?;
        file.lock_shared()
            .map_err(|e| DataDirError::Io { path, source: e })?;
        Ok(ReadLease {
            _file: file,
            number: self.number,
        })
    }

    /// Removes its files if no process reads it (no lease is held): `true`
    /// when removed, `false` when still read. Generation 0 leaves the
    /// data directory's shared entries (`sources/`, `generations/`…).
    pub fn remove_if_unread(&self) -> Result<bool, DataDirError> {
        if !self.path.exists() {
            return Ok(true);
        }
        let lock_path = self.path.join(READERS_LOCK);
        let file = lock_file(&lock_path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(DataDirError::Io {
                    path: lock_path,
                    source: e,
                });
            }
        }
        let io = |path: PathBuf| move |source| DataDirError::Io { path, source };
        if self.number == 0 {
            for name in GENERATION_ZERO_ENTRIES {
                let entry = self.path.join(name);
                match std::fs::symlink_metadata(&entry) {
                    Ok(m) if m.is_dir() => {
                        std::fs::remove_dir_all(&entry).map_err(io(entry.clone()))?
                    }
                    Ok(_) => std::fs::remove_file(&entry).map_err(io(entry.clone()))?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(DataDirError::Io {
                            path: entry,
                            source: e,
                        });
                    }
                }
            }
        } else {
            std::fs::remove_dir_all(&self.path).map_err(io(self.path.clone()))?;
        }
        drop(file);
        Ok(true)
    }

    /// Opens its vector and text indexes for writing with `model` of
    /// `dimension` (recorded on first use), without the catalog: for a run
    /// that holds the catalog open already.
    pub fn open_indexes(
        &self,
        model: &str,
        dimension: usize,
    ) -> Result<crate::IndexStores, DataDirError> {
        let meta = self.record_model(model, dimension)?;
        let (vectors, text) = crate::embedded::open_embedded(&self.path, meta.dimension)?;
        Ok(crate::IndexStores {
            vectors,
            text: Arc::new(text),
            description: format!("generation {} in {}", self.number, self.root.display()),
        })
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
