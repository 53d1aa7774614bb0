//! The index generations record of the distributed deployment: one entry
//! (`generations`) of a key-value bucket, replaced by compare-and-swap on
//! its revision, so the switch of the live generation is one atomic write
//! that every service sees.

use async_nats::jetstream::{self, kv};
use async_trait::async_trait;
use weft_core::generations::{GenerationError, Generations};
use weft_core::ports::{
    GenerationChange, GenerationRegistry, PortError, PortResult, RegistryError,
};

use crate::NatsError;

const COMPONENT: &str = "index generations (NATS key-value)";
const KEY: &str = "generations";
/// Read-modify-write attempts before giving up on a contended record.
const ATTEMPTS: u32 = 32;

/// A call to NATS that failed: the server unreachable, timed out or
/// refusing, for now.
fn port(error: impl std::fmt::Display) -> PortError {
    PortError::unavailable(COMPONENT, error.to_string())
}

/// The generations record in a NATS key-value bucket shared by the crawler,
/// the embedders and the query services. A deployment that never recorded
/// one reads as generation 0 live: the unnumbered stores it has always used.
#[derive(Clone)]
pub struct NatsRegistry {
    store: kv::Store,
    bucket: String,
    /// `<bucket>-readers`: which generation each reader (a query replica)
    /// read when it last said so; entries older than [`READER_TTL`] go.
    readers: kv::Store,
    /// Where the generations' catalogs are: the stream context, the
    /// catalog bucket (generation 0's name) and its replicas.
    catalogs: Option<(jetstream::Context, String, usize)>,
}

/// How long a reader's word counts.
pub const READER_TTL: std::time::Duration = std::time::Duration::from_secs(90);

impl NatsRegistry {
    /// Opens `bucket`, creating it (on `replicas` servers) when missing.
    pub async fn open(
        js: &jetstream::Context,
        bucket: &str,
        replicas: usize,
    ) -> Result<Self, NatsError> {
        let store = crate::catalog::open_bucket(
            js,
            bucket,
            "weft index generations: which one is live",
            replicas,
        )
        .await?;
        let readers = crate::catalog::open_bucket_with_age(
            js,
            &format!("{bucket}-readers"),
            "weft index generations: which one each query replica reads",
            Some(READER_TTL),
            replicas,
        )
        .await?;
        Ok(Self {
            store,
            bucket: bucket.to_owned(),
            readers,
            catalogs: None,
        })
    }

    /// The same registry, answering [`GenerationRegistry::catalog_of`]
    /// with the catalog buckets named after `catalog_bucket` (generation
    /// 0's; `<bucket>_g<N>` after), as [`crate::Jet::catalog_of`] opens them.
    pub fn with_catalogs(
        mut self,
        js: &jetstream::Context,
        catalog_bucket: &str,
        replicas: usize,
    ) -> Self {
        self.catalogs = Some((js.clone(), catalog_bucket.to_owned(), replicas));
        self
    }

    /// The record and its revision (`None`: never written).
    async fn read(&self) -> PortResult<(Generations, Option<u64>)> {
        match self.store.entry(KEY).await.map_err(port)? {
            Some(entry) if entry.operation == kv::Operation::Put => {
                let record: Generations = serde_json::from_slice(&entry.value).map_err(|e| {
                    PortError::internal(
                        COMPONENT,
                        format!("{}/{KEY} is not a generations record: {e}", self.bucket),
                    )
                })?;
                Ok((record, Some(entry.revision)))
            }
            _ => Ok((Generations::legacy(None, None), None)),
        }
    }
}

#[async_trait]
impl GenerationRegistry for NatsRegistry {
    async fn load(&self) -> PortResult<Generations> {
        Ok(self.read().await?.0)
    }

    async fn catalog_of(
        &self,
        generation: u32,
    ) -> PortResult<Option<std::sync::Arc<dyn weft_core::ports::Catalog>>> {
        let Some((js, bucket, replicas)) = &self.catalogs else {
            return Ok(None);
        };
        let bucket = weft_core::generations::store_name(bucket, generation);
        let catalog = crate::NatsCatalog::open(js, &bucket, *replicas)
            .await
            .map_err(|e| PortError::new(e.kind(), "catalog (NATS)", e))?;
        Ok(Some(std::sync::Arc::new(catalog)))
    }

    async fn update(&self, change: &GenerationChange<'_>) -> Result<Generations, RegistryError> {
        for _ in 0..ATTEMPTS {
            let (mut record, revision) = self.read().await?;
            change(&mut record)?;
            let bytes = serde_json::to_vec(&record)
                .map_err(|e| PortError::internal(COMPONENT, e.to_string()))?;
            // Only a lost race is retried: another writer's change landed
            // first, so read again and re-apply. Anything else is an error.
            let raced = match revision {
                Some(revision) => match self.store.update(KEY, bytes.into(), revision).await {
                    Ok(_) => return Ok(record),
                    Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => true,
                    Err(e) => return Err(port(format!("{}/{KEY}: {e}", self.bucket)).into()),
                },
                None => match self.store.create(KEY, bytes.into()).await {
                    Ok(_) => return Ok(record),
                    Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => true,
                    Err(e) => return Err(port(format!("{}/{KEY}: {e}", self.bucket)).into()),
                },
            };
            if raced {
                tracing::debug!("generations record changed meanwhile; applying the change again");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Err(GenerationError::Contended(ATTEMPTS).into())
    }

    async fn reading(&self, reader: &str, generation: u32) -> PortResult<()> {
        self.readers
            .put(reader, generation.to_string().into())
            .await
            .map_err(port)?;
        Ok(())
    }

    async fn read_generations(&self) -> PortResult<Vec<u32>> {
        use futures::StreamExt as _;
        let mut keys = match self.readers.keys().await {
            Ok(keys) => keys,
            Err(e) => return Err(port(e)),
        };
        let mut out = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.map_err(port)?;
            if let Some(value) = self.readers.get(&key).await.map_err(port)?
                && let Ok(n) = std::str::from_utf8(&value).unwrap_or("").parse()
            {
                out.push(n);
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}
