//! # weft-nats
//!
//! NATS JetStream for weft's distributed pipeline (DESIGN §6):
//!
//! - [`Jet`] connects and makes sure the streams exist: documents on
//!   `weft.docs.<project>.<document_id>` (work queue, one message per
//!   subject, so a newer version of a document replaces an unprocessed older
//!   one), chunk batches on `weft.chunks.<project>.<document_id>` (work
//!   queue), and the dead-letter stream `weft.dead.<stage>.…`;
//! - [`run_worker`] pulls from a durable consumer shared by every worker of a
//!   stage, hands batches of messages to a [`Handler`], acknowledges what
//!   succeeded, retries what failed with backoff, and after `max_deliver`
//!   attempts moves a message to the dead-letter stream with its error —
//!   at once when the error's kind is `Invalid` ([`Failure`]);
//! - [`NatsCatalog`] is the catalog port over a key-value bucket;
//! - [`trace`] carries W3C trace context in message headers.

#![warn(missing_docs)]

mod catalog;
mod registry;
#[doc(hidden)]
pub mod testing;
pub mod trace;
mod worker;

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use weft_config::NatsConfig;

pub use catalog::NatsCatalog;
pub use registry::NatsRegistry;
pub use worker::{Delivery, Failure, Handler, Outcome, WorkerOptions, WorkerStats, run_worker};

/// Header naming why a message was dead-lettered.
pub const ERROR_HEADER: &str = "Weft-Error";
/// Header naming the kind of that error (`invalid`, `unavailable`, …:
/// [`weft_core::ErrorKind::as_str`]).
pub const ERROR_KIND_HEADER: &str = "Weft-Error-Kind";
/// Header naming the stage that gave up on a message.
pub const STAGE_HEADER: &str = "Weft-Stage";
/// Header with the subject a dead-lettered message was published on.
pub const SUBJECT_HEADER: &str = "Weft-Original-Subject";
/// Header with how often a dead-lettered message was delivered.
pub const DELIVERIES_HEADER: &str = "Weft-Deliveries";

/// A NATS or JetStream failure, naming what was being done.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    /// The server could not be reached.
    #[error("cannot connect to NATS at {url}: {source}")]
    Connect {
        /// The configured URL.
        url: String,
        /// What the client said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A JetStream call failed.
    #[error("NATS JetStream: {what}: {source}")]
    JetStream {
        /// What was being done.
        what: String,
        /// What the server or client said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl NatsError {
    /// What kind of failure it is: a server that refuses weft's
    /// credentials `PermissionDenied`, a server address that does not
    /// parse `Invalid`; anything else (unreachable, timed
    /// out, a JetStream call refused) `Unavailable`.
    pub fn kind(&self) -> weft_core::ErrorKind {
        match self {
            NatsError::Connect { source, .. } => {
                match source.downcast_ref::<async_nats::ConnectError>() {
                    Some(e)
                        if matches!(
                            e.kind(),
                            async_nats::ConnectErrorKind::Authentication
                                | async_nats::ConnectErrorKind::AuthorizationViolation
                        ) =>
                    {
                        weft_core::ErrorKind::PermissionDenied
                    }
                    Some(e) if e.kind() == async_nats::ConnectErrorKind::ServerParse => {
                        weft_core::ErrorKind::Invalid
                    }
                    _ => weft_core::ErrorKind::Unavailable,
                }
            }
            NatsError::JetStream { .. } => weft_core::ErrorKind::Unavailable,
        }
    }

    pub(crate) fn js(
        what: impl Into<String>,
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::JetStream {
            what: what.into(),
            source: error.into(),
        }
    }
}

/// A subject token for a project name: NATS tokens cannot hold `.`, `*`,
/// `>` or whitespace, so anything but letters, digits, `-` and `_` becomes `_`.
/// (Subjects stay unique: the document id that follows includes the project.)
pub fn subject_token(project: &str) -> String {
    let token: String = project
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if token.is_empty() { "_".into() } else { token }
}

/// The subject of a document for index generation `generation`:
/// `weft.docs.g<generation>.<project>.<document_id>`. One pending message
/// per subject: a newer version replaces an unprocessed older one of the
/// same generation, never a rebuild's message an incremental crawl's.
pub fn docs_subject(generation: u32, project: &str, document_id: &str) -> String {
    format!(
        "weft.docs.g{generation}.{}.{document_id}",
        subject_token(project)
    )
}

/// The subject of a document's chunk batches for index generation
/// `generation`: `weft.chunks.g<generation>.<project>.<document_id>`.
pub fn chunks_subject(generation: u32, project: &str, document_id: &str) -> String {
    format!(
        "weft.chunks.g{generation}.{}.{document_id}",
        subject_token(project)
    )
}

/// How long to wait before reconnect attempt `attempts` (counted from 1):
/// 100 ms doubling to at most 5 s, so a restarted server is found again
/// within seconds and a long outage costs one attempt every 5 s.
pub fn reconnect_delay(attempts: usize) -> Duration {
    let exponent = attempts.saturating_sub(1).min(6) as u32;
    Duration::from_millis(100 * 2u64.pow(exponent)).min(Duration::from_secs(5))
}

/// A connection to NATS with weft's streams in place.
#[derive(Clone)]
pub struct Jet {
    client: async_nats::Client,
    js: jetstream::Context,
    config: NatsConfig,
}

impl Jet {
    /// Connects and creates the streams and the catalog bucket when missing.
    /// `config` is `[nats]` of weft.toml.
    pub async fn connect(config: &NatsConfig) -> Result<Self, NatsError> {
        let client = async_nats::ConnectOptions::new()
            .name("weft")
            .retry_on_initial_connect()
            // A server restarted, or moved by its cluster, is waited for
            // for as long as it takes: a service that gave up would stay
            // up and do nothing (a query pod answering SERVING without
            // following generations). The query service says NOT_SERVING
            // meanwhile.
            .max_reconnects(None)
            .reconnect_delay_callback(reconnect_delay)
            .connection_timeout(Duration::from_secs(5))
            .connect(config.url.as_str())
            .await
            .map_err(|e| NatsError::Connect {
                url: config.url.clone(),
                source: e.into(),
            })?;
        // `retry_on_initial_connect` returns at once: wait for the server so
        // that a dead NATS is an error now, not a hang later.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while client.connection_state() != async_nats::connection::State::Connected {
            if tokio::time::Instant::now() > deadline {
                return Err(NatsError::Connect {
                    url: config.url.clone(),
                    source: "no server answered within 10 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let js = jetstream::new(client.clone());
        let jet = Self {
            client,
            js,
            config: config.clone(),
        };
        jet.ensure_streams().await?;
        Ok(jet)
    }

    async fn ensure_streams(&self) -> Result<(), NatsError> {
        let c = &self.config;
        let work_queue = |name: &str, subject: &str, per_subject: i64| stream::Config {
            name: name.to_owned(),
            subjects: vec![subject.to_owned()],
            retention: stream::RetentionPolicy::WorkQueue,
            max_messages_per_subject: per_subject,
            discard: stream::DiscardPolicy::Old,
            storage: stream::StorageType::File,
            num_replicas: c.replicas,
            ..Default::default()
        };
        for config in [
            work_queue(&c.docs_stream, "weft.docs.>", 1),
            work_queue(&c.chunks_stream, "weft.chunks.>", -1),
            stream::Config {
                name: c.dead_letter_stream.clone(),
                subjects: vec!["weft.dead.>".into()],
                retention: stream::RetentionPolicy::Limits,
                max_age: Duration::from_secs(14 * 24 * 3600),
                storage: stream::StorageType::File,
                num_replicas: c.replicas,
                ..Default::default()
            },
        ] {
            let name = config.name.clone();
            if let Err(e) = self.js.get_or_create_stream(config).await {
                // Services starting together race to create the streams;
                // the loser is told "subjects overlap" or "name in use".
                // What matters is that the stream exists now.
                if self.js.get_stream(&name).await.is_err() {
                    let what = if c.replicas > 1 {
                        format!(
                            "create stream {name} (nats.replicas = {} needs a NATS cluster of at least that many JetStream servers)",
                            c.replicas
                        )
                    } else {
                        format!("create stream {name}")
                    };
                    return Err(NatsError::js(what, e));
                }
            }
        }
        Ok(())
    }

    /// The `[nats]` settings.
    pub fn config(&self) -> &NatsConfig {
        &self.config
    }

    /// The JetStream context.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// The largest message the server accepts, in bytes.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// Publishes and waits for the stream to store the message.
    pub async fn publish(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<(), NatsError> {
        self.publish_later(subject, headers, payload).await?.await
    }

    /// Publishes; the returned future waits for the stream's acknowledgement,
    /// so many publishes can be in flight.
    pub async fn publish_later(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<impl std::future::Future<Output = Result<(), NatsError>> + use<>, NatsError> {
        let ack = self
            .js
            .publish_with_headers(subject.clone(), headers, payload)
            .await
            .map_err(|e| NatsError::js(format!("publish to {subject}"), e))?;
        Ok(async move {
            ack.await
                .map(|_| ())
                .map_err(|e| NatsError::js(format!("publish to {subject}"), e))
        })
    }

    /// Messages stored in `stream` (for a work queue: not yet acknowledged).
    pub async fn stream_messages(&self, stream: &str) -> Result<u64, NatsError> {
        let mut s = self
            .js
            .get_stream(stream)
            .await
            .map_err(|e| NatsError::js(format!("get stream {stream}"), e))?;
        let info = s
            .info()
            .await
            .map_err(|e| NatsError::js(format!("stream info {stream}"), e))?;
        Ok(info.state.messages)
    }

    /// Messages stored in `stream` on subjects matching `subjects` (a
    /// subject with wildcards): for a work queue, those not yet handled.
    pub async fn stream_messages_on(&self, stream: &str, subjects: &str) -> Result<u64, NatsError> {
        use futures::StreamExt as _;
        let s = self
            .js
            .get_stream(stream)
            .await
            .map_err(|e| NatsError::js(format!("get stream {stream}"), e))?;
        let mut counts = s
            .info_with_subjects(subjects)
            .await
            .map_err(|e| NatsError::js(format!("stream info {stream} {subjects}"), e))?;
        let mut total = 0u64;
        while let Some(item) = counts.next().await {
            let (_, n) =
                item.map_err(|e| NatsError::js(format!("stream info {stream} {subjects}"), e))?;
            total += n as u64;
        }
        Ok(total)
    }

    /// A key-value bucket of its own (created when missing), e.g. for a
    /// service's run records.
    pub async fn bucket(
        &self,
        name: &str,
        description: &str,
    ) -> Result<async_nats::jetstream::kv::Store, NatsError> {
        catalog::open_bucket(&self.js, name, description, self.config.replicas).await
    }

    /// The catalog of generation 0 in the configured key-value bucket
    /// (created when missing).
    pub async fn catalog(&self) -> Result<NatsCatalog, NatsError> {
        self.catalog_of(0).await
    }

    /// The catalog of index generation `generation`: the configured bucket
    /// for 0, `<bucket>_g<N>` after (created when missing).
    pub async fn catalog_of(&self, generation: u32) -> Result<NatsCatalog, NatsError> {
        let bucket = weft_core::generations::store_name(&self.config.catalog_bucket, generation);
        NatsCatalog::open(&self.js, &bucket, self.config.replicas).await
    }

    /// Removes the catalog bucket of `generation` (not 0's while it may be
    /// live: the caller decides). A missing bucket is not an error.
    pub async fn delete_catalog_of(&self, generation: u32) -> Result<(), NatsError> {
        let bucket = weft_core::generations::store_name(&self.config.catalog_bucket, generation);
        match self.js.delete_stream(format!("KV_{bucket}")).await {
            Ok(_) => Ok(()),
            Err(e) if self.js.get_stream(format!("KV_{bucket}")).await.is_err() => {
                tracing::debug!("catalog bucket {bucket} already gone: {e}");
                Ok(())
            }
            Err(e) => Err(NatsError::js(
                format!("delete key-value bucket {bucket}"),
                e,
            )),
        }
    }

    /// The index generations record (its bucket created when missing).
    pub async fn registry(&self) -> Result<NatsRegistry, NatsError> {
        Ok(NatsRegistry::open(
            &self.js,
            &self.config.generations_bucket,
            self.config.replicas,
        )
        .await?
        .with_catalogs(&self.js, &self.config.catalog_bucket, self.config.replicas))
    }

    /// Flushes what the client buffered.
    pub async fn flush(&self) -> Result<(), NatsError> {
        self.client
            .flush()
            .await
            .map_err(|e| NatsError::js("flush", e))
    }
}
