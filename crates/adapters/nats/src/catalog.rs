//! The catalog port over a JetStream key-value bucket: `doc.<document_id>`
//! holds a document's record, `project.<hex name>` a project's state.

use async_nats::jetstream::{self, kv};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use weft_core::DocumentId;
use weft_core::ports::{Catalog, DocumentRecord, PortError, PortResult, ProjectState};

use crate::NatsError;

const COMPONENT: &str = "catalog (NATS key-value)";

/// A call to NATS that failed: the server unreachable, timed out or
/// refusing, for now.
fn port(error: impl std::fmt::Display) -> PortError {
    PortError::unavailable(COMPONENT, error.to_string())
}

/// A stored value that does not decode, or one that does not encode.
fn corrupt(error: serde_json::Error) -> PortError {
    PortError::internal(COMPONENT, error.to_string())
}

fn doc_key(id: &DocumentId) -> String {
    format!("doc.{}", id.as_str())
}

/// Project names can hold characters keys cannot: hex-encode them.
fn project_key(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("project.{hex}")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct NamedProject {
    name: String,
    state: ProjectState,
}

/// Opens the key-value `bucket`, creating it (one revision per key) when
/// missing.
pub(crate) async fn open_bucket(
    js: &jetstream::Context,
    bucket: &str,
    description: &str,
    replicas: usize,
) -> Result<kv::Store, NatsError> {
    open_bucket_with_age(js, bucket, description, None, replicas).await
}

/// [`open_bucket`], with entries older than `max_age` dropped by the server.
pub(crate) async fn open_bucket_with_age(
    js: &jetstream::Context,
    bucket: &str,
    description: &str,
    max_age: Option<std::time::Duration>,
    replicas: usize,
) -> Result<kv::Store, NatsError> {
    if js.get_key_value(bucket).await.is_err() {
        // The bucket's stream, made by hand with the key-value layout:
        // async-nats 0.51's `create_key_value` sends settings that
        // nats-server 2.9 answers in a shape it cannot parse.
        let created = js
            .get_or_create_stream(jetstream::stream::Config {
                name: format!("KV_{bucket}"),
                description: Some(description.into()),
                subjects: vec![format!("$KV.{bucket}.>")],
                max_messages_per_subject: 1,
                discard: jetstream::stream::DiscardPolicy::New,
                allow_rollup: true,
                deny_delete: true,
                allow_direct: true,
                max_age: max_age.unwrap_or_default(),
                storage: jetstream::stream::StorageType::File,
                num_replicas: replicas,
                ..Default::default()
            })
            .await;
        // Services starting together race to create it: what matters is
        // that it exists now.
        if let Err(e) = created
            && js.get_key_value(bucket).await.is_err()
        {
            return Err(NatsError::js(
                format!("create key-value bucket {bucket}"),
                e,
            ));
        }
    }
    js.get_key_value(bucket)
        .await
        .map_err(|e| NatsError::js(format!("open key-value bucket {bucket}"), e))
}

/// What is indexed, in a NATS key-value bucket shared by every service.
#[derive(Clone)]
pub struct NatsCatalog {
    store: kv::Store,
}

impl NatsCatalog {
    /// Opens `bucket`, creating it (one revision per key, on `replicas`
    /// servers) when missing.
    pub async fn open(
        js: &jetstream::Context,
        bucket: &str,
        replicas: usize,
    ) -> Result<Self, NatsError> {
        let store = open_bucket(
            js,
            bucket,
            "weft catalog: indexed documents by content hash",
            replicas,
        )
        .await?;
        Ok(Self { store })
    }

    /// Every value whose key matches `pattern` (a key with wildcards).
    async fn values(&self, pattern: &str) -> PortResult<Vec<Bytes>> {
        let mut out = Vec::new();
        let mut watch = self.store.watch_with_history(pattern).await.map_err(port)?;
        // The watch first replays the current values; `delta` counts down to
        // 0 at the last of them. An empty bucket replays nothing, so a short
        // timeout ends the wait.
        loop {
            let next = tokio::time::timeout(std::time::Duration::from_millis(500), watch.next());
            let Ok(entry) = next.await else { break };
            let Some(entry) = entry else { break };
            let entry = entry.map_err(port)?;
            if entry.operation == kv::Operation::Put {
                out.push(entry.value.clone());
            }
            if entry.delta == 0 {
                break;
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl Catalog for NatsCatalog {
    async fn document(&self, id: &DocumentId) -> PortResult<Option<DocumentRecord>> {
        match self.store.get(doc_key(id)).await.map_err(port)? {
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(corrupt)?)),
            None => Ok(None),
        }
    }

    async fn put_documents(&self, records: &[DocumentRecord]) -> PortResult<()> {
        for record in records {
            let value = serde_json::to_vec(record).map_err(corrupt)?;
            self.store
                .put(doc_key(&record.document_id), value.into())
                .await
                .map_err(port)?;
        }
        Ok(())
    }

    async fn remove_documents(&self, ids: &[DocumentId]) -> PortResult<()> {
        for id in ids {
            self.store.purge(doc_key(id)).await.map_err(port)?;
        }
        Ok(())
    }

    async fn documents(&self, project: Option<&str>) -> PortResult<Vec<DocumentRecord>> {
        let mut out = Vec::new();
        for value in self.values("doc.*").await? {
            let record: DocumentRecord = serde_json::from_slice(&value).map_err(corrupt)?;
            if project.is_none_or(|p| record.project == p) {
                out.push(record);
            }
        }
        Ok(out)
    }

    async fn project(&self, name: &str) -> PortResult<Option<ProjectState>> {
        match self.store.get(project_key(name)).await.map_err(port)? {
            Some(bytes) => {
                let named: NamedProject = serde_json::from_slice(&bytes).map_err(corrupt)?;
                Ok(Some(named.state))
            }
            None => Ok(None),
        }
    }

    async fn put_project(&self, name: &str, state: &ProjectState) -> PortResult<()> {
        let value = serde_json::to_vec(&NamedProject {
            name: name.to_owned(),
            state: state.clone(),
        })
        .map_err(corrupt)?;
        self.store
            .put(project_key(name), value.into())
            .await
            .map_err(port)?;
        Ok(())
    }

    async fn projects(&self) -> PortResult<Vec<(String, ProjectState)>> {
        let mut out = Vec::new();
        for value in self.values("project.*").await? {
            let named: NamedProject = serde_json::from_slice(&value).map_err(corrupt)?;
            out.push((named.name, named.state));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    async fn remove_project(&self, name: &str) -> PortResult<()> {
        self.store.purge(project_key(name)).await.map_err(port)?;
        Ok(())
    }
}
