//! Index generations of the embedded data directory, the mechanics: the
//! record in `generations.json` ([`FileRegistry`]), the copy of the live
//! generation a new one starts from ([`GenerationBuild`]), counting a
//! generation's open stores ([`GenerationCounts`]), syncing it to disk
//! ([`sync_tree`]), and a reader's removal of the generations it let go of
//! ([`collect_garbage`]).
//!
//! The lifecycle (begin, resume, the completeness check, the switch, abort,
//! what is collected) is decided by `weft_index::generations`'
//! `GenerationManager`, for this data directory and for the distributed
//! deployment alike. `weft index` never writes the generation queries
//! read: it copies the live generation's catalog, plans against it, copies
//! the live indexes on the first write (or starts empty: the first index, a
//! new model), writes there, and the manager checks that the catalog and
//! both indexes agree and switches by renaming `generations.json` over its
//! old version. Readers (`weft search`, `weft serve`, `weft mcp`) hold a
//! [`ReadLease`](crate::ReadLease) on the generation they read; a server
//! notices the switch and moves to the new generation; a generation is
//! removed once it is retired and nobody holds a lease on it.

use std::io::Write as _;
use std::path::Path;

use async_trait::async_trait;
use weft_core::generations::Generations;
use weft_core::ports::{
    Catalog, GenerationChange, GenerationRegistry, PortError, PortResult, RegistryError,
};

use crate::data_dir::{DataDir, DataDirError, GENERATIONS_FILE, GenerationDir};

/// Held while `generations.json` is read, changed and replaced.
const REGISTRY_LOCK: &str = "generations.lock";

/// The generations record of a data directory, `generations.json`: read
/// as [`DataDir::generations`] reads it, replaced atomically (written
/// beside, synced, renamed over) under a lock, so a concurrent change is
/// never lost and a reader never sees half a record.
#[derive(Debug, Clone)]
pub struct FileRegistry {
    dir: DataDir,
}

impl FileRegistry {
    /// The record of `dir`.
    pub fn new(dir: DataDir) -> Self {
        Self { dir }
    }

    fn port(e: DataDirError) -> PortError {
        PortError::new(e.kind(), "generations record", e)
    }

    /// [`GenerationRegistry::update`], blocking.
    pub fn update_blocking(
        &self,
        change: &GenerationChange<'_>,
    ) -> Result<Generations, RegistryError> {
        let root = self.dir.path();
        std::fs::create_dir_all(root)
            .map_err(|e| Self::port(io_error(root, e)))
            .map_err(RegistryError::Port)?;
        let lock_path = root.join(REGISTRY_LOCK);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Self::port(io_error(&lock_path, e)))?;
        lock.lock()
            .map_err(|e| Self::port(io_error(&lock_path, e)))?;
        let mut record = self.dir.generations().map_err(Self::port)?;
        change(&mut record)?;
        write_atomically(&root.join(GENERATIONS_FILE), &record).map_err(Self::port)?;
        Ok(record)
    }
}

fn io_error(path: &Path, source: std::io::Error) -> DataDirError {
    DataDirError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Writes `record` beside `path`, syncs it, renames it over `path` and
/// syncs the directory: `path` holds the old record or the new one, whole.
fn write_atomically(path: &Path, record: &Generations) -> Result<(), DataDirError> {
    let json = serde_json::to_vec_pretty(record).map_err(|e| DataDirError::BadGenerations {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let staging = path.with_extension("json.new");
    {
        let mut file = std::fs::File::create(&staging).map_err(|e| io_error(&staging, e))?;
        file.write_all(&json).map_err(|e| io_error(&staging, e))?;
        file.sync_all().map_err(|e| io_error(&staging, e))?;
    }
    std::fs::rename(&staging, path).map_err(|e| io_error(path, e))?;
    if let Some(parent) = path.parent()
        && let Ok(dir) = std::fs::File::open(parent)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[async_trait]
impl GenerationRegistry for FileRegistry {
    async fn load(&self) -> PortResult<Generations> {
        self.dir.generations().map_err(Self::port)
    }

    async fn update(&self, change: &GenerationChange<'_>) -> Result<Generations, RegistryError> {
        self.update_blocking(change)
    }
}

/// What [`collect_garbage`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Collected {
    /// Generations removed.
    pub removed: Vec<u32>,
    /// Retired or aborted generations still read by some process (a
    /// server that has not moved yet, a query in flight): removed by a later
    /// run, or by the reader following the live one once it lets go.
    pub still_read: Vec<u32>,
}

/// Removes the data directory's retired and aborted generations that no
/// process reads, and forgets them in the record: what a reader following
/// the live generation ([`LiveQuery`](crate::LiveQuery)) does once it lets
/// go of one. It is `GenerationManager::gc` of `weft-index` over the data
/// directory, kept here for the query side, which links no `weft-index`
/// (DESIGN §2); both decide with the record's `removable` and remove with
/// [`GenerationDir::remove_if_unread`]. Embedded generations need no grace
/// period: a reader's lease keeps its generation.
pub fn collect_garbage(dir: &DataDir) -> Result<Collected, DataDirError> {
    let record = dir.generations()?;
    let mut collected = Collected::default();
    for number in record.removable(u64::MAX, 0) {
        let generation = dir.generation(number);
        if generation.remove_if_unread()? {
            collected.removed.push(number);
        } else {
            collected.still_read.push(number);
        }
    }
    if !collected.removed.is_empty() {
        let removed = collected.removed.clone();
        FileRegistry::new(dir.clone())
            .update_blocking(&move |g: &mut Generations| {
                for n in &removed {
                    // Already forgotten by a concurrent collection: fine.
                    let _ = g.forget(*n);
                }
                Ok(())
            })
            .map_err(|e| DataDirError::BadGenerations {
                path: dir.path().join(GENERATIONS_FILE),
                message: e.to_string(),
            })?;
    }
    Ok(collected)
}

/// Copies the directory tree `from` into `to` (created), leaving out the
/// top-level entries named in `skip`, returning the bytes copied. Used to
/// start a generation from the live one's indexes, which no process writes.
pub(crate) fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> Result<u64, DataDirError> {
    let mut bytes = 0u64;
    std::fs::create_dir_all(to).map_err(|e| io_error(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| io_error(from, e))? {
        let entry = entry.map_err(|e| io_error(from, e))?;
        if skip.iter().any(|s| entry.file_name() == *s) {
            continue;
        }
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| io_error(&source, e))?;
        if kind.is_dir() {
            bytes += copy_tree(&source, &target, &[])?;
        } else if kind.is_file() {
            bytes += copy_sparse(&source, &target).map_err(|e| io_error(&source, e))?;
        }
        // Stores make no symlinks; anything else is not copied.
    }
    Ok(bytes)
}

/// Copies the file `from` to `to`, leaving runs of zeros as holes: the
/// vector index preallocates its files (sparse, mostly zeros), and a plain
/// copy would write every zero, so each generation would take the whole
/// preallocated size on disk. Returns the file's length.
fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom, Write};
    const BLOCK: usize = 64 * 1024;
    static ZEROS: [u8; BLOCK] = [0; BLOCK];
    let mut source = std::fs::File::open(from)?;
    let mut target = std::fs::File::create(to)?;
    let mut block = vec![0u8; BLOCK];
    let mut length = 0u64;
    loop {
        // Fill the block (a short read is not the end of the file).
        let mut filled = 0;
        while filled < BLOCK {
            match source.read(&mut block[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            break;
        }
        let data = &block[..filled];
        // Compared as slices (memcmp), not byte by byte.
        if data == &ZEROS[..filled] {
            target.seek(SeekFrom::Current(filled as i64))?;
        } else {
            target.write_all(data)?;
        }
        length += filled as u64;
        if filled < BLOCK {
            break;
        }
    }
    // Trailing holes: the length is set, not written.
    target.set_len(length)?;
    target.set_permissions(source.metadata()?.permissions())?;
    Ok(length)
}

/// Syncs every file and directory under `path` to disk (files copied into
/// a generation are otherwise only in the page cache when it is switched to).
pub fn sync_tree(path: &Path) -> Result<(), DataDirError> {
    for entry in std::fs::read_dir(path).map_err(|e| io_error(path, e))? {
        let entry = entry.map_err(|e| io_error(path, e))?;
        let kind = entry.file_type().map_err(|e| io_error(&entry.path(), e))?;
        if kind.is_dir() {
            sync_tree(&entry.path())?;
        } else if kind.is_file() {
            let file = std::fs::File::open(entry.path()).map_err(|e| io_error(&entry.path(), e))?;
            file.sync_all().map_err(|e| io_error(&entry.path(), e))?;
        }
    }
    std::fs::File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| io_error(path, e))
}

/// How many chunks a generation holds, by each of its stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GenerationCounts {
    /// Documents the catalog records.
    pub documents: u64,
    /// Chunks the catalog records (the sum of its documents' chunk counts).
    pub catalog_chunks: u64,
    /// Chunks in the vector index.
    pub vector_chunks: u64,
    /// Chunks in the text index.
    pub text_chunks: u64,
}

impl GenerationCounts {
    /// Whether the catalog and both indexes hold the same chunks.
    pub fn agree(&self) -> bool {
        self.catalog_chunks == self.vector_chunks && self.vector_chunks == self.text_chunks
    }

    /// Counts a generation's stores.
    pub async fn of(stores: &crate::Stores) -> PortResult<Self> {
        Self::of_parts(&*stores.catalog, &*stores.vectors, &*stores.text).await
    }

    /// Counts the catalog and the two indexes.
    pub async fn of_parts(
        catalog: &dyn Catalog,
        vectors: &dyn weft_core::ports::VectorIndex,
        text: &dyn weft_core::ports::TextIndex,
    ) -> PortResult<Self> {
        let records = catalog.documents(None).await?;
        Ok(Self {
            documents: records.len() as u64,
            catalog_chunks: records.iter().map(|r| u64::from(r.chunk_count)).sum(),
            vector_chunks: vectors.count().await?,
            text_chunks: text.count().await?,
        })
    }
}

/// The generation an embedded index run writes, and what it started from.
#[derive(Debug)]
pub struct GenerationBuild {
    /// The generation written.
    pub target: GenerationDir,
    /// The live generation when the run started.
    pub live: Option<GenerationDir>,
    /// Whether the target starts empty (nothing live, or another model)
    /// rather than from a copy of the live generation.
    pub fresh: bool,
    /// Whether the target was left building by an interrupted run and is
    /// continued.
    pub resumed: bool,
}

impl GenerationBuild {
    /// Copies the live generation's catalog into the target (not for a
    /// fresh or resumed one), so the run plans against what is live.
    pub fn copy_catalog(&self) -> Result<(), DataDirError> {
        if self.fresh || self.resumed {
            return Ok(());
        }
        if let Some(live) = &self.live {
            let from = live.catalog_path();
            if from.exists() {
                let to = self.target.catalog_path();
                std::fs::copy(&from, &to).map_err(|e| io_error(&from, e))?;
            }
        }
        Ok(())
    }

    /// Copies the live generation's indexes and model marker into the
    /// target (not for a fresh or resumed one): the bytes copied.
    pub fn copy_indexes(&self) -> Result<u64, DataDirError> {
        if self.fresh || self.resumed {
            return Ok(0);
        }
        let Some(live) = &self.live else {
            return Ok(0);
        };
        let mut bytes = 0;
        // The vector index's write-ahead log is copied with it: qdrant
        // numbers operations by their place in the log and ignores one
        // numbered below what a segment holds, so a fresh log would make
        // the copy drop the run's updates and deletions.
        for (name, skip) in [("vectors", &[][..]), ("text", &[][..])] {
            let from = live.path().join(name);
            if from.is_dir() {
                bytes += copy_tree(&from, &self.target.path().join(name), skip)?;
            }
        }
        let marker = live.path().join("weft-data.json");
        if marker.exists() {
            bytes += std::fs::copy(&marker, self.target.path().join("weft-data.json"))
                .map_err(|e| io_error(&marker, e))?;
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_keeps_the_bytes_and_leaves_zeros_as_holes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("a"), dir.path().join("b"));
        // 8 MiB preallocated, data at the start, the middle and the end.
        let mut bytes = vec![0u8; 8 << 20];
        bytes[..100].fill(7);
        bytes[4 << 20..(4 << 20) + 70_000].fill(9);
        let end = bytes.len();
        bytes[end - 3..].fill(1);
        std::fs::write(&from, &bytes).unwrap();
        let length = copy_sparse(&from, &to).unwrap();
        assert_eq!(length, bytes.len() as u64);
        assert_eq!(std::fs::read(&to).unwrap(), bytes);
        // Blocks of 512 bytes: a few 64 KiB blocks hold data, not 8 MiB.
        assert!(
            std::fs::metadata(&to).unwrap().blocks() * 512 < 1 << 20,
            "{} bytes on disk",
            std::fs::metadata(&to).unwrap().blocks() * 512
        );
        // Ending in zeros: the length is kept.
        std::fs::write(&from, [1u8, 0, 0, 0]).unwrap();
        assert_eq!(copy_sparse(&from, &to).unwrap(), 4);
        assert_eq!(std::fs::read(&to).unwrap(), [1, 0, 0, 0]);
    }

    #[test]
    fn the_record_is_replaced_whole_and_changes_are_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path());
        assert_eq!(data.generations().unwrap(), Generations::default());
        let registry = FileRegistry::new(data.clone());
        // Two threads begin and abort generations at once: every change lands.
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..20 {
                        registry
                            .update_blocking(&|g: &mut Generations| {
                                let n = g.begin(1, None)?;
                                g.abort(n, 2, "test")
                            })
                            .unwrap();
                    }
                });
            }
        });
        let record = data.generations().unwrap();
        assert_eq!(record.generations.len(), 40);
        assert!(!dir.path().join("generations.json.new").exists());
    }

    #[test]
    fn a_generation_read_by_a_lease_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path());
        let registry = FileRegistry::new(data.clone());
        registry
            .update_blocking(&|g: &mut Generations| {
                let first = g.begin(1, None)?;
                g.switch_to(first, 1)?;
                let second = g.begin(2, Some(first))?;
                g.switch_to(second, 3)
            })
            .unwrap();
        let first = data.generation(1);
        std::fs::create_dir_all(first.path().join("vectors")).unwrap();
        std::fs::create_dir_all(data.generation(2).path()).unwrap();
        let lease = first.lease().unwrap();
        let collected = collect_garbage(&data).unwrap();
        assert_eq!(collected.still_read, vec![1]);
        assert!(first.path().exists());
        drop(lease);
        let collected = collect_garbage(&data).unwrap();
        assert_eq!(collected.removed, vec![1]);
        assert!(!first.path().exists());
        assert!(data.generations().unwrap().get(1).is_none());
        assert_eq!(data.live().unwrap().unwrap().number(), 2);
    }

    #[test]
    fn generation_zero_is_removed_without_the_shared_entries() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path());
        data.generation(0).record_model("m", 4).unwrap();
        std::fs::create_dir_all(dir.path().join("vectors")).unwrap();
        std::fs::create_dir_all(dir.path().join("sources/repo")).unwrap();
        // An index made in place reads as generation 0, live.
        assert_eq!(data.live().unwrap().unwrap().number(), 0);
        FileRegistry::new(data.clone())
            .update_blocking(&|g: &mut Generations| {
                let n = g.begin(1, Some(0))?;
                g.switch_to(n, 2)
            })
            .unwrap();
        std::fs::create_dir_all(data.generation(1).path()).unwrap();
        let collected = collect_garbage(&data).unwrap();
        assert_eq!(collected.removed, vec![0]);
        assert!(!dir.path().join("vectors").exists());
        assert!(!dir.path().join("weft-data.json").exists());
        assert!(dir.path().join("sources/repo").exists());
        assert!(dir.path().join("generations/g1").exists());
    }
}
