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

fn port(error: impl std::fmt::Display) -> PortError {
    PortError::new(COMPONENT, error.to_string())
}

/// The generations record in a NATS key-value bucket shared by the crawler,
/// the embedders and the query services. A deployment that never recorded
/// one reads as generation 0 live: the unnumbered stores it has always used.
#[derive(Clone)]
pub struct NatsRegistry {
    store: kv::Store,
    bucket: String,
}

impl NatsRegistry {
    /// Opens `bucket`, creating it when missing.
    pub async fn open(js: &jetstream::Context, bucket: &str) -> Result<Self, NatsError> {
        let store =
            crate::catalog::open_bucket(js, bucket, "weft index generations: which one is live")
                .await?;
        Ok(Self {
            store,
            bucket: bucket.to_owned(),
        })
    }

    /// The record and its revision (`None`: never written).
    async fn read(&self) -> PortResult<(Generations, Option<u64>)> {
        match self.store.entry(KEY).await.map_err(port)? {
            Some(entry) if entry.operation == kv::Operation::Put => {
                let record: Generations = serde_json::from_slice(&entry.value).map_err(|e| {
                    port(format!(
                        "{}/{KEY} is not a generations record: {e}",
                        self.bucket
                    ))
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

    async fn update(&self, change: &GenerationChange<'_>) -> Result<Generations, RegistryError> {
        for _ in 0..ATTEMPTS {
            let (mut record, revision) = self.read().await?;
            change(&mut record)?;
            let bytes = serde_json::to_vec(&record).map_err(port)?;
            let written = match revision {
                Some(revision) => self
                    .store
                    .update(KEY, bytes.into(), revision)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                None => self
                    .store
                    .create(KEY, bytes.into())
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            };
            match written {
                Ok(()) => return Ok(record),
                // Another writer got there first: read again and re-apply.
                Err(e) => tracing::debug!("generations record changed meanwhile ({e}); retrying"),
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Err(GenerationError::Contended(ATTEMPTS).into())
    }
}
