//! # weft-catalog-redb
//!
//! The embedded catalog: what is indexed, in one [redb] file. For every
//! document it records the content hash and chunk count that were indexed
//! (and with which embedding model and format), so unchanged documents are
//! skipped without reading the model and a shrunk document's surplus chunks
//! are known; for every project, the state of its source (the last indexed
//! git commit).
//!
//! [redb]: https://github.com/cberner/redb

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::Deserialize;
use weft_core::DocumentId;
use weft_core::ports::{Catalog, ErrorKind, PortError, PortResult};

/// redb's and serde's errors, kept as causes.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

const DOCUMENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("documents");
const PROJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("projects");

pub use weft_core::ports::{DocumentRecord, ProjectState};

/// What went wrong with the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// Another process (an index run?) has the catalog open.
    #[error(
        "catalog {0} is in use by another weft process (an index run?); try again when it ends"
    )]
    InUse(PathBuf),
    /// The file cannot be opened as a catalog.
    #[error("catalog {path} cannot be opened ({source}); remove it to index from scratch")]
    Unreadable {
        /// The catalog file.
        path: PathBuf,
        /// What redb said.
        #[source]
        source: BoxError,
    },
    /// A read or write failed.
    #[error("catalog {path}: {source}")]
    Storage {
        /// The catalog file.
        path: PathBuf,
        /// What kind of failure it is.
        kind: ErrorKind,
        /// What failed.
        #[source]
        source: BoxError,
    },
}

impl CatalogError {
    /// What kind of failure it is: a catalog another process holds is
    /// `Unavailable` (try again when it ends), one that does not open as a
    /// catalog `Internal`; a read or write the kind redb's error says.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CatalogError::InUse(_) => ErrorKind::Unavailable,
            CatalogError::Unreadable { .. } => ErrorKind::Internal,
            CatalogError::Storage { kind, .. } => *kind,
        }
    }
}

/// The kind of a redb error: I/O by its own kind, corrupt data or a
/// poisoned lock `Internal`, a value too large `Invalid`, a missing table
/// `NotFound`, a database held elsewhere `Unavailable`.
fn kind_of_redb(e: &redb::Error) -> ErrorKind {
    match e {
        redb::Error::Io(e) => ErrorKind::of_io(e.kind()),
        redb::Error::DatabaseAlreadyOpen
        | redb::Error::WouldBlock
        | redb::Error::TransactionInProgress
        | redb::Error::PreviousIo
        | redb::Error::DatabaseClosed => ErrorKind::Unavailable,
        redb::Error::ValueTooLarge(_) => ErrorKind::Invalid,
        redb::Error::TableDoesNotExist(_) => ErrorKind::NotFound,
        redb::Error::UpgradeRequired(_) => ErrorKind::FailedPrecondition,
        _ => ErrorKind::Internal,
    }
}

/// The catalog in one redb file.
#[derive(Clone)]
pub struct RedbCatalog {
    db: std::sync::Arc<Db>,
    path: PathBuf,
}

/// The file, open for writing or for reading only.
enum Db {
    Write(Database),
    Read(redb::ReadOnlyDatabase),
}

impl Db {
    fn begin_read(&self) -> Result<redb::ReadTransaction, redb::TransactionError> {
        match self {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
        }
    }
}

impl std::fmt::Debug for RedbCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbCatalog")
            .field("path", &self.path)
            .finish()
    }
}

impl RedbCatalog {
    /// Opens the catalog at `path`, creating it (and its directory) if absent.
    pub fn open(path: &Path) -> Result<Self, CatalogError> {
        let unreadable = |source: BoxError| CatalogError::Unreadable {
            path: path.to_owned(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| unreadable(e.into()))?;
        }
        let db = Database::create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => CatalogError::InUse(path.to_owned()),
            e => unreadable(e.into()),
        })?;
        let catalog = RedbCatalog {
            db: std::sync::Arc::new(Db::Write(db)),
            path: path.to_owned(),
        };
        // Create the tables, so that reads of a new catalog find them.
        catalog.write(|txn| {
            txn.open_table(DOCUMENTS)?;
            txn.open_table(PROJECTS)?;
            Ok(())
        })?;
        Ok(catalog)
    }

    /// Opens the existing catalog at `path` for reading only, beside any
    /// number of other readers (an index generation's catalog once live).
    /// Writes fail.
    pub fn open_read_only(path: &Path) -> Result<Self, CatalogError> {
        let db = redb::ReadOnlyDatabase::open(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => CatalogError::InUse(path.to_owned()),
            e => CatalogError::Unreadable {
                path: path.to_owned(),
                source: e.into(),
            },
        })?;
        Ok(RedbCatalog {
            db: std::sync::Arc::new(Db::Read(db)),
            path: path.to_owned(),
        })
    }

    fn storage(&self, e: impl Into<redb::Error>) -> CatalogError {
        let e = e.into();
        self.failed(kind_of_redb(&e), e)
    }

    fn failed(&self, kind: ErrorKind, e: impl Into<BoxError>) -> CatalogError {
        CatalogError::Storage {
            path: self.path.clone(),
            kind,
            source: e.into(),
        }
    }

    fn write(
        &self,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    ) -> Result<(), CatalogError> {
        let Db::Write(db) = &*self.db else {
            return Err(self.failed(ErrorKind::FailedPrecondition, "opened for reading only"));
        };
        let txn = db.begin_write().map_err(|e| self.storage(e))?;
        f(&txn).map_err(|e| self.storage(e))?;
        txn.commit().map_err(|e| self.storage(e))
    }

    fn decode<T: for<'de> Deserialize<'de>>(&self, bytes: &[u8]) -> Result<T, CatalogError> {
        serde_json::from_slice(bytes)
            .map_err(|e| self.failed(ErrorKind::Internal, format!("corrupt record: {e}")))
    }

    /// The record of a document, if it is indexed.
    pub fn document(&self, id: &DocumentId) -> Result<Option<DocumentRecord>, CatalogError> {
        let txn = self.db.begin_read().map_err(|e| self.storage(e))?;
        let table = txn.open_table(DOCUMENTS).map_err(|e| self.storage(e))?;
        let value = table.get(id.as_str()).map_err(|e| self.storage(e))?;
        value.map(|v| self.decode(v.value())).transpose()
    }

    /// Records documents as indexed, replacing earlier records, in one transaction.
    pub fn put_documents(&self, records: &[DocumentRecord]) -> Result<(), CatalogError> {
        let encoded: Vec<(String, Vec<u8>)> = records
            .iter()
            .map(|r| {
                Ok((
                    r.document_id.as_str().to_owned(),
                    serde_json::to_vec(r).map_err(|e| self.failed(ErrorKind::Internal, e))?,
                ))
            })
            .collect::<Result<_, CatalogError>>()?;
        self.write(|txn| {
            let mut table = txn.open_table(DOCUMENTS)?;
            for (key, value) in &encoded {
                table.insert(key.as_str(), value.as_slice())?;
            }
            Ok(())
        })
    }

    /// Forgets documents (they were deleted from the index).
    pub fn remove_documents(&self, ids: &[DocumentId]) -> Result<(), CatalogError> {
        self.write(|txn| {
            let mut table = txn.open_table(DOCUMENTS)?;
            for id in ids {
                table.remove(id.as_str())?;
            }
            Ok(())
        })
    }

    /// Every document of `project` (all projects when `None`), by id.
    pub fn documents(&self, project: Option<&str>) -> Result<Vec<DocumentRecord>, CatalogError> {
        let txn = self.db.begin_read().map_err(|e| self.storage(e))?;
        let table = txn.open_table(DOCUMENTS).map_err(|e| self.storage(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.storage(e))? {
            let (_, value) = entry.map_err(|e| self.storage(e))?;
            let record: DocumentRecord = self.decode(value.value())?;
            if project.is_none_or(|p| p == record.project) {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// The state of a project's source, if it was indexed.
    pub fn project(&self, name: &str) -> Result<Option<ProjectState>, CatalogError> {
        let txn = self.db.begin_read().map_err(|e| self.storage(e))?;
        let table = txn.open_table(PROJECTS).map_err(|e| self.storage(e))?;
        let value = table.get(name).map_err(|e| self.storage(e))?;
        value.map(|v| self.decode(v.value())).transpose()
    }

    /// Records the state of a project's source.
    pub fn put_project(&self, name: &str, state: &ProjectState) -> Result<(), CatalogError> {
        let value = serde_json::to_vec(state).map_err(|e| self.failed(ErrorKind::Internal, e))?;
        self.write(|txn| {
            txn.open_table(PROJECTS)?.insert(name, value.as_slice())?;
            Ok(())
        })
    }

    /// Every project, by name.
    pub fn projects(&self) -> Result<Vec<(String, ProjectState)>, CatalogError> {
        let txn = self.db.begin_read().map_err(|e| self.storage(e))?;
        let table = txn.open_table(PROJECTS).map_err(|e| self.storage(e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.storage(e))? {
            let (key, value) = entry.map_err(|e| self.storage(e))?;
            out.push((key.value().to_owned(), self.decode(value.value())?));
        }
        Ok(out)
    }

    /// Forgets a project and all its documents.
    pub fn remove_project(&self, name: &str) -> Result<(), CatalogError> {
        let ids: Vec<DocumentId> = self
            .documents(Some(name))?
            .into_iter()
            .map(|r| r.document_id)
            .collect();
        self.write(|txn| {
            let mut documents = txn.open_table(DOCUMENTS)?;
            for id in &ids {
                documents.remove(id.as_str())?;
            }
            txn.open_table(PROJECTS)?.remove(name)?;
            Ok(())
        })
    }
}

/// The catalog port over [`RedbCatalog`]: each call runs on tokio's blocking pool.
#[async_trait::async_trait]
impl Catalog for RedbCatalog {
    async fn document(&self, id: &DocumentId) -> PortResult<Option<DocumentRecord>> {
        let id = id.clone();
        self.blocking(move |c| c.document(&id)).await
    }
    async fn put_documents(&self, records: &[DocumentRecord]) -> PortResult<()> {
        let records = records.to_vec();
        self.blocking(move |c| c.put_documents(&records)).await
    }
    async fn remove_documents(&self, ids: &[DocumentId]) -> PortResult<()> {
        let ids = ids.to_vec();
        self.blocking(move |c| c.remove_documents(&ids)).await
    }
    async fn documents(&self, project: Option<&str>) -> PortResult<Vec<DocumentRecord>> {
        let project = project.map(str::to_owned);
        self.blocking(move |c| c.documents(project.as_deref()))
            .await
    }
    async fn project(&self, name: &str) -> PortResult<Option<ProjectState>> {
        let name = name.to_owned();
        self.blocking(move |c| c.project(&name)).await
    }
    async fn put_project(&self, name: &str, state: &ProjectState) -> PortResult<()> {
        let (name, state) = (name.to_owned(), state.clone());
        self.blocking(move |c| c.put_project(&name, &state)).await
    }
    async fn projects(&self) -> PortResult<Vec<(String, ProjectState)>> {
        self.blocking(|c| c.projects()).await
    }
    async fn remove_project(&self, name: &str) -> PortResult<()> {
        let name = name.to_owned();
        self.blocking(move |c| c.remove_project(&name)).await
    }
}

trait Blocking {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&RedbCatalog) -> Result<T, CatalogError> + Send + 'static,
    ) -> PortResult<T>;
}

impl Blocking for RedbCatalog {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&RedbCatalog) -> Result<T, CatalogError> + Send + 'static,
    ) -> PortResult<T> {
        let catalog = self.clone();
        tokio::task::spawn_blocking(move || f(&catalog))
            .await
            // The thread panicked.
            .map_err(|e| PortError::internal(COMPONENT, e))?
            .map_err(|e| PortError::new(e.kind(), COMPONENT, e))
    }
}

const COMPONENT: &str = "catalog (redb)";

#[cfg(test)]
mod tests {
    use super::*;

    fn record(project: &str, uri: &str, hash: &str, chunks: u32) -> DocumentRecord {
        DocumentRecord {
            document_id: DocumentId::new(project, uri),
            project: project.into(),
            uri: uri.into(),
            content_hash: hash.into(),
            chunk_count: chunks,
            identity: weft_core::IndexIdentity::new("all-MiniLM-L6-v2@256", "chunker-1-abc"),
            version: 0,
        }
    }

    #[test]
    fn documents_round_trip_and_replace() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = RedbCatalog::open(&dir.path().join("catalog.redb")).unwrap();
        let a = record("p", "a.rs", "h1", 3);
        assert_eq!(catalog.document(&a.document_id).unwrap(), None);
        catalog
            .put_documents(&[
                a.clone(),
                record("p", "b.rs", "h2", 1),
                record("q", "c.md", "h3", 5),
            ])
            .unwrap();
        assert_eq!(catalog.document(&a.document_id).unwrap(), Some(a.clone()));

        let changed = DocumentRecord {
            content_hash: "h9".into(),
            chunk_count: 2,
            ..a.clone()
        };
        catalog
            .put_documents(std::slice::from_ref(&changed))
            .unwrap();
        assert_eq!(catalog.document(&a.document_id).unwrap(), Some(changed));
        assert_eq!(catalog.documents(Some("p")).unwrap().len(), 2);
        assert_eq!(catalog.documents(None).unwrap().len(), 3);

        catalog
            .remove_documents(std::slice::from_ref(&a.document_id))
            .unwrap();
        assert_eq!(catalog.document(&a.document_id).unwrap(), None);
        assert_eq!(catalog.documents(Some("p")).unwrap().len(), 1);
    }

    #[test]
    fn projects_keep_their_revision_and_can_be_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/catalog.redb");
        {
            let catalog = RedbCatalog::open(&path).unwrap();
            let state = ProjectState {
                source: "https://example.com/repo.git".into(),
                revision: Some("abc123".into()),
                indexed_at: Some(1_700_000_000),
                overlay: None,
            };
            catalog.put_project("repo", &state).unwrap();
            catalog
                .put_documents(&[
                    record("repo", "a.rs", "h", 1),
                    record("other", "b.rs", "h", 1),
                ])
                .unwrap();
        }
        // Reopened: everything persisted.
        let catalog = RedbCatalog::open(&path).unwrap();
        assert_eq!(
            catalog.project("repo").unwrap().and_then(|s| s.revision),
            Some("abc123".into())
        );
        assert_eq!(catalog.projects().unwrap().len(), 1);
        catalog.remove_project("repo").unwrap();
        assert_eq!(catalog.project("repo").unwrap(), None);
        assert!(catalog.documents(Some("repo")).unwrap().is_empty());
        assert_eq!(catalog.documents(Some("other")).unwrap().len(), 1);
    }

    #[test]
    fn a_corrupt_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.redb");
        std::fs::write(
            &path,
            b"this is not a redb file, just some bytes that are long enough to be read",
        )
        .unwrap();
        let err = RedbCatalog::open(&path).unwrap_err();
        assert!(matches!(err, CatalogError::Unreadable { .. }));
        assert!(err.to_string().contains("catalog.redb"), "{err}");
    }
}
