//! The stores, as `[stores]` configures them: the vector and text indexes
//! embedded under the data directory, or on Qdrant and Meilisearch servers
//! shared by every replica; and [`Stores`], the indexes with the catalog
//! that records what they hold.

use std::path::Path;
use std::sync::Arc;

use weft_config::{StoresConfig, TextStoreKind, VectorStoreKind};
use weft_core::ports::{Catalog, TextIndex, VectorIndex};

use crate::data_dir::{DataDirError, GenerationDir};

/// The three stores an index run writes: the vector index, the text index
/// and the catalog of what they hold.
#[derive(Clone)]
pub struct Stores {
    /// Vectors, with whole chunks as payload.
    pub vectors: Arc<dyn VectorIndex>,
    /// Full text.
    pub text: Arc<dyn TextIndex>,
    /// What is indexed, by content hash.
    pub catalog: Arc<dyn Catalog>,
}

impl Stores {
    /// The indexes of `indexes` with `catalog`.
    pub fn new(indexes: IndexStores, catalog: Arc<dyn Catalog>) -> Self {
        Self {
            vectors: indexes.vectors,
            text: indexes.text,
            catalog,
        }
    }
}

/// Why the stores could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StoresError {
    /// An embedded store, or the data directory's marker.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// A setting the chosen store needs is missing.
    #[error("{key} is not set")]
    Missing {
        /// The setting.
        key: &'static str,
    },
    /// The variable that should hold a store's API key is not set.
    #[error("{key} names the environment variable {variable}, which is not set")]
    MissingKey {
        /// The setting naming the variable.
        key: &'static str,
        /// The variable.
        variable: String,
    },
    /// The Qdrant server refused or could not be reached.
    #[error("stores.vector = \"qdrant\": {0}")]
    Qdrant(weft_vector_qdrant::QdrantIndexError),
    /// The Meilisearch server refused or could not be reached.
    #[error("stores.text = \"meilisearch\": {0}")]
    Meilisearch(weft_text_meili::MeiliIndexError),
}

impl StoresError {
    /// What kind of failure it is: a setting or key that is not there
    /// `FailedPrecondition`; a store's own error its own kind.
    pub fn kind(&self) -> weft_core::ErrorKind {
        match self {
            StoresError::DataDir(e) => e.kind(),
            StoresError::Missing { .. } | StoresError::MissingKey { .. } => {
                weft_core::ErrorKind::FailedPrecondition
            }
            StoresError::Qdrant(e) => e.kind(),
            StoresError::Meilisearch(e) => e.kind(),
        }
    }
}

/// What a service does with the indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreAccess {
    /// Writes (the embedder): embedded stores are created on first use.
    Write,
    /// Reads (the query service): embedded stores must already hold an index.
    Read,
}

/// The two indexes a service works on.
#[derive(Clone)]
pub struct IndexStores {
    /// Vectors, with whole chunks as payload.
    pub vectors: Arc<dyn VectorIndex>,
    /// Full text.
    pub text: Arc<dyn TextIndex>,
    /// Where they are, for logs (e.g. `vectors in Qdrant URL collection C, text embedded in DIR`).
    pub description: String,
}

/// Opens the vector and text indexes of `stores` in `generation` for
/// vectors of `model_id` and `dimension`. Embedded ones live in the
/// generation's directory, whose marker must name the same model (or is
/// written, for [`StoreAccess::Write`] on a new directory); server ones are
/// the generation's collection and index (the base names for generation 0,
/// `<name>_g<N>` after); a Qdrant collection must have vectors of
/// `dimension`. API keys are read from the environment variables the
/// config names; a named variable that is unset is an error naming it.
pub async fn open_index_stores(
    stores: &StoresConfig,
    generation: &GenerationDir,
    model_id: &str,
    dimension: usize,
    access: StoreAccess,
) -> Result<IndexStores, StoresError> {
    if stores.uses_data_dir() {
        match access {
            StoreAccess::Write => generation.record_model(model_id, dimension)?,
            StoreAccess::Read => generation.check_model(model_id, dimension)?,
        };
    }
    // One rule for every combination of stores: a writer opens the embedded
    // stores it writes (one process may), a reader opens each embedded store
    // read-only, so any number of processes search a generation while its
    // writer (the distributed embedder) still holds it. Both embedded: opened
    // together, so an outdated text index is rebuilt from the vector index's
    // chunks.
    let data_dir: &Path = generation.path();
    if let (VectorStoreKind::Embedded, TextStoreKind::Embedded) = (stores.vector, stores.text) {
        let (vectors, text) = match access {
            StoreAccess::Write => crate::embedded::open_embedded(data_dir, dimension)?,
            StoreAccess::Read => crate::embedded::open_embedded_read_only(data_dir, dimension)?,
        };
        let place = data_dir.display();
        return Ok(IndexStores {
            vectors,
            text: Arc::new(text),
            description: format!("vectors embedded in {place}, text embedded in {place}"),
        });
    }
    let (vectors, vectors_at) = open_vector_store(stores, generation, dimension, access).await?;
    let (text, text_at) = open_text_store(stores, generation, access).await?;
    Ok(IndexStores {
        vectors,
        text,
        description: format!("{vectors_at}, {text_at}"),
    })
}

/// The vector index `[stores]` configures for `generation`, opened for
/// `access`, and where it is (for logs).
async fn open_vector_store(
    stores: &StoresConfig,
    generation: &GenerationDir,
    dimension: usize,
    access: StoreAccess,
) -> Result<(Arc<dyn VectorIndex>, String), StoresError> {
    let data_dir = generation.path();
    match stores.vector {
        VectorStoreKind::Embedded => {
            let vectors = match access {
                StoreAccess::Write => crate::embedded::open_vectors(data_dir, dimension)?,
                StoreAccess::Read => crate::embedded::open_vectors_read_only(data_dir, dimension)?,
            };
            Ok((
                vectors,
                format!("vectors embedded in {}", data_dir.display()),
            ))
        }
        VectorStoreKind::Qdrant => {
            let collection =
                weft_core::generations::store_name(&stores.qdrant_collection, generation.number());
            let url = required(&stores.qdrant_url, "stores.qdrant_url")?;
            let key = api_key(&stores.qdrant_api_key_env, "stores.qdrant_api_key_env")?;
            // Reading: open without creating or changing anything, so the
            // query side works with Qdrant's read-only key.
            let index = match access {
                StoreAccess::Write => {
                    weft_vector_qdrant::QdrantVectorIndex::connect(url, key, &collection, dimension)
                        .await
                }
                StoreAccess::Read => {
                    weft_vector_qdrant::QdrantVectorIndex::open_for_search(
                        url,
                        key,
                        &collection,
                        dimension,
                    )
                    .await
                }
            }
            .map_err(StoresError::Qdrant)?;
            Ok((
                Arc::new(index),
                format!("vectors in Qdrant {url} collection {collection}"),
            ))
        }
    }
}

/// The text index `[stores]` configures for `generation`, opened for
/// `access`, and where it is (for logs). An embedded one alone cannot be
/// rebuilt from an older format here (the vectors are elsewhere).
async fn open_text_store(
    stores: &StoresConfig,
    generation: &GenerationDir,
    access: StoreAccess,
) -> Result<(Arc<dyn TextIndex>, String), StoresError> {
    let data_dir = generation.path();
    match stores.text {
        TextStoreKind::Embedded => {
            let text = match access {
                StoreAccess::Write => crate::embedded::open_text(data_dir, None)?,
                StoreAccess::Read => crate::embedded::open_text_read_only(data_dir)?,
            };
            Ok((
                Arc::new(text),
                format!("text embedded in {}", data_dir.display()),
            ))
        }
        TextStoreKind::Meilisearch => {
            let meili_index =
                weft_core::generations::store_name(&stores.meili_index, generation.number());
            let url = required(&stores.meili_url, "stores.meili_url")?;
            // Reading with a search-only key: open without creating or
            // configuring anything (the query side never writes).
            let index = match (access, &stores.meili_search_key_env) {
                (StoreAccess::Read, Some(_)) => {
                    let key = api_key(&stores.meili_search_key_env, "stores.meili_search_key_env")?;
                    weft_text_meili::MeiliTextIndex::open_for_search(url, key, &meili_index).await
                }
                _ => {
                    let key = api_key(&stores.meili_api_key_env, "stores.meili_api_key_env")?;
                    weft_text_meili::MeiliTextIndex::connect(url, key, &meili_index).await
                }
            }
            .map_err(StoresError::Meilisearch)?;
            Ok((
                Arc::new(index),
                format!("text in Meilisearch {url} index {meili_index}"),
            ))
        }
    }
}

/// Removes the vector and text indexes of generation `generation` that
/// `stores` configures: embedded ones in `data`'s generation directory (when
/// no process reads it), its Qdrant collection and Meilisearch index. Its
/// catalog goes with the registry that recorded it. What was removed, for
/// the operator; an index already gone is not an error.
pub async fn remove_generation_indexes(
    stores: &StoresConfig,
    data: &crate::DataDir,
    generation: u32,
) -> Result<Vec<String>, StoresError> {
    let mut removed = Vec::new();
    if stores.uses_data_dir() {
        let dir = data.generation(generation);
        if dir.path().exists() {
            if dir.remove_if_unread()? {
                removed.push(format!("{}", dir.path().display()));
            } else {
                return Err(StoresError::DataDir(DataDirError::Io {
                    path: dir.path().to_owned(),
                    source: std::io::Error::other("a process still reads this generation"),
                }));
            }
        }
    }
    if stores.vector == VectorStoreKind::Qdrant {
        let url = required(&stores.qdrant_url, "stores.qdrant_url")?;
        let key = api_key(&stores.qdrant_api_key_env, "stores.qdrant_api_key_env")?;
        let name = weft_core::generations::store_name(&stores.qdrant_collection, generation);
        if weft_vector_qdrant::QdrantVectorIndex::drop_collection(url, key, &name)
            .await
            .map_err(StoresError::Qdrant)?
        {
            removed.push(format!("Qdrant collection {name}"));
        }
    }
    if stores.text == TextStoreKind::Meilisearch {
        let url = required(&stores.meili_url, "stores.meili_url")?;
        let key = api_key(&stores.meili_api_key_env, "stores.meili_api_key_env")?;
        let name = weft_core::generations::store_name(&stores.meili_index, generation);
        if weft_text_meili::MeiliTextIndex::drop_index(url, key, &name)
            .await
            .map_err(StoresError::Meilisearch)?
        {
            removed.push(format!("Meilisearch index {name}"));
        }
    }
    Ok(removed)
}

/// Points the Qdrant alias named `stores.qdrant_collection` at generation
/// `generation`'s collection, in one atomic call, for readers outside weft
/// that address the live collection by name (weft's own query services
/// follow the generations record). `None` without Qdrant; `Some(false)`
/// while a collection holds that name itself (generation 0, until removed).
pub async fn point_live_alias(
    stores: &StoresConfig,
    generation: u32,
) -> Result<Option<bool>, StoresError> {
    if stores.vector != VectorStoreKind::Qdrant || generation == 0 {
        return Ok(None);
    }
    let url = required(&stores.qdrant_url, "stores.qdrant_url")?;
    let key = api_key(&stores.qdrant_api_key_env, "stores.qdrant_api_key_env")?;
    let name = weft_core::generations::store_name(&stores.qdrant_collection, generation);
    weft_vector_qdrant::QdrantVectorIndex::point_alias(url, key, &stores.qdrant_collection, &name)
        .await
        .map(Some)
        .map_err(StoresError::Qdrant)
}

fn required<'a>(value: &'a Option<String>, key: &'static str) -> Result<&'a str, StoresError> {
    value
        .as_deref()
        .filter(|v| !v.trim().is_empty())
        .ok_or(StoresError::Missing { key })
}

fn api_key(env_name: &Option<String>, key: &'static str) -> Result<Option<String>, StoresError> {
    let Some(name) = env_name else {
        return Ok(None);
    };
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Ok(Some(value)),
        _ => Err(StoresError::MissingKey {
            key,
            variable: name.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataDir;

    #[tokio::test]
    async fn embedded_stores_check_the_model_of_the_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let stores = StoresConfig::default();
        let err = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Read,
        )
        .await
        .err()
        .expect("nothing indexed yet");
        assert!(
            matches!(err, StoresError::DataDir(DataDirError::Empty(_))),
            "{err}"
        );
        let opened = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Write,
        )
        .await
        .expect("created");
        assert!(opened.description.contains("embedded"));
        drop(opened);
        open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Read,
        )
        .await
        .expect("now it opens for reading");
        let err = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "other",
            8,
            StoreAccess::Read,
        )
        .await
        .err()
        .expect("another model");
        assert!(
            matches!(
                err,
                StoresError::DataDir(DataDirError::ModelMismatch { .. })
            ),
            "{err}"
        );
    }

    /// The rule for every combination of `[stores]`: while the writer of
    /// a generation (the embedder) holds an embedded store, readers open it
    /// read-only beside it, whether the other store is embedded or on a
    /// server; a second writer is told who holds the lock.
    #[tokio::test]
    async fn an_embedded_store_alone_is_read_beside_its_writer() {
        let dir = tempfile::tempdir().unwrap();
        let generation = DataDir::new(dir.path()).generation(1);
        generation.record_model("m", 8).unwrap();
        let qdrant_vectors = StoresConfig {
            vector: VectorStoreKind::Qdrant,
            qdrant_url: Some("http://127.0.0.1:9".into()),
            ..StoresConfig::default()
        };
        let (writer, _) = open_text_store(&qdrant_vectors, &generation, StoreAccess::Write)
            .await
            .expect("the embedder opens the text index");
        let (reader, at) = open_text_store(&qdrant_vectors, &generation, StoreAccess::Read)
            .await
            .expect("a reader opens it beside the writer");
        assert!(at.contains("text embedded in"), "{at}");
        assert_eq!(reader.count().await.unwrap(), writer.count().await.unwrap());
        let second = open_text_store(&qdrant_vectors, &generation, StoreAccess::Write)
            .await
            .err()
            .expect("one writer at a time");
        let message = weft_core::error_chain(&second);
        assert!(
            message.contains("is being written by this process"),
            "{message}"
        );
        assert!(!message.contains("remove"), "{message}");
        assert_eq!(second.kind(), weft_core::ErrorKind::Unavailable);

        let meili_text = StoresConfig {
            text: TextStoreKind::Meilisearch,
            meili_url: Some("http://127.0.0.1:9".into()),
            ..StoresConfig::default()
        };
        let (writer, _) = open_vector_store(&meili_text, &generation, 8, StoreAccess::Write)
            .await
            .expect("the embedder opens the vector index");
        writer.commit().await.unwrap();
        let (reader, at) = open_vector_store(&meili_text, &generation, 8, StoreAccess::Read)
            .await
            .expect("a reader opens it beside the writer");
        assert!(at.contains("vectors embedded in"), "{at}");
        assert_eq!(reader.count().await.unwrap(), 0);
        let second = open_vector_store(&meili_text, &generation, 8, StoreAccess::Write)
            .await
            .err()
            .expect("one writer at a time");
        let message = weft_core::error_chain(&second);
        assert!(
            message.contains("is being written by this process"),
            "{message}"
        );
        assert_eq!(second.kind(), weft_core::ErrorKind::Unavailable);
    }

    #[tokio::test]
    async fn server_stores_name_the_setting_that_fails() {
        let dir = tempfile::tempdir().unwrap();
        let stores = StoresConfig {
            vector: VectorStoreKind::Qdrant,
            qdrant_url: Some("http://127.0.0.1:9".into()),
            qdrant_api_key_env: Some("WEFT_TEST_SURELY_UNSET_KEY".into()),
            ..StoresConfig::default()
        };
        let err = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Write,
        )
        .await
        .err()
        .expect("the key variable is unset");
        let message = err.to_string();
        assert!(
            message.contains("stores.qdrant_api_key_env")
                && message.contains("WEFT_TEST_SURELY_UNSET_KEY"),
            "{message}"
        );
        let stores = StoresConfig {
            qdrant_api_key_env: None,
            ..stores
        };
        let message = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Write,
        )
        .await
        .err()
        .expect("nothing listens on port 9")
        .to_string();
        assert!(
            message.contains("qdrant") && message.contains("127.0.0.1:9"),
            "{message}"
        );

        let stores = StoresConfig {
            text: TextStoreKind::Meilisearch,
            vector: VectorStoreKind::Embedded,
            meili_url: Some("http://127.0.0.1:9".into()),
            ..StoresConfig::default()
        };
        let message = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Write,
        )
        .await
        .err()
        .expect("nothing listens on port 9")
        .to_string();
        assert!(
            message.contains("meilisearch") && message.contains("127.0.0.1:9"),
            "{message}"
        );

        // Reading with a search-only key: that key's variable, and an open
        // that only searches; writing keeps the write key.
        let stores = StoresConfig {
            meili_search_key_env: Some("WEFT_TEST_SURELY_UNSET_SEARCH_KEY".into()),
            ..stores
        };
        let message = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Read,
        )
        .await
        .err()
        .expect("the search key variable is unset")
        .to_string();
        assert!(message.contains("stores.meili_search_key_env"), "{message}");
        let message = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Write,
        )
        .await
        .err()
        .expect("nothing listens on port 9")
        .to_string();
        assert!(
            message.contains("set settings") || message.contains("open index"),
            "{message}"
        );
        assert!(!message.contains("for search"), "{message}");
        // A set variable (PATH stands in for a key): the search-only open,
        // and the key's value in no message.
        let stores = StoresConfig {
            meili_search_key_env: Some("PATH".into()),
            ..stores
        };
        let error = open_index_stores(
            &stores,
            &DataDir::new(dir.path()).generation(0),
            "m",
            8,
            StoreAccess::Read,
        )
        .await
        .err()
        .expect("nothing listens on port 9");
        // The server's answer is in the message, and not again as its
        // cause (`weft` prints each cause after the message).
        let message = error.to_string();
        assert!(message.contains("open index for search"), "{message}");
        assert!(std::error::Error::source(&error).is_none(), "{message}");
        let path = std::env::var("PATH").unwrap();
        assert!(!message.contains(&path), "{message}");
    }
}
