//! `[nats]`: NATS JetStream, for the distributed services. The NATS
//! adapter (`weft-nats`) takes this type as its options.

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::{bad, is_plain_name};

/// `[nats]`: the JetStream streams, consumers and key-value bucket that join
/// the distributed services (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL(s), comma-separated.
    pub url: String,
    /// Work-queue stream of documents (`weft.docs.<project>.<document_id>`).
    pub docs_stream: String,
    /// Work-queue stream of chunk batches (`weft.chunks.<project>.<document_id>`).
    pub chunks_stream: String,
    /// Stream of messages that failed `max_deliver` times, with their error.
    pub dead_letter_stream: String,
    /// Key-value bucket of the catalog (what is indexed, by content hash);
    /// index generation N > 0 has its own, `<catalog_bucket>_g<N>`.
    pub catalog_bucket: String,
    /// Key-value bucket of the index generations record (which generation
    /// is live).
    pub generations_bucket: String,
    /// Messages a consumer may have unacknowledged at once.
    pub max_ack_pending: i64,
    /// Deliveries of one message before it goes to the dead-letter stream.
    pub max_deliver: i64,
    /// Seconds before an unacknowledged message is delivered again.
    pub ack_wait_secs: u64,
    /// Messages pulled per fetch.
    pub fetch_batch: usize,
    /// Servers each stream and key-value bucket is kept on (JetStream
    /// replicas, 1 to 5): 3 on a NATS cluster of three or more, so a
    /// server's restart loses nothing and stops nothing. Applies when a
    /// stream or bucket is created; change an existing one with the `nats`
    /// CLI (`nats stream edit --replicas`).
    pub replicas: usize,
}

impl Default for NatsConfig {
    fn default() -> Self {
        Self {
            url: "nats://127.0.0.1:4222".into(),
            docs_stream: "WEFT_DOCS".into(),
            chunks_stream: "WEFT_CHUNKS".into(),
            dead_letter_stream: "WEFT_DEAD".into(),
            catalog_bucket: "weft-catalog".into(),
            generations_bucket: "weft-generations".into(),
            max_ack_pending: 64,
            max_deliver: 5,
            ack_wait_secs: 60,
            fetch_batch: 16,
            replicas: 1,
        }
    }
}

impl NatsConfig {
    /// Checks the section: a URL, stream and bucket names NATS accepts,
    /// positive limits.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.url.trim().is_empty() {
            return bad("nats.url", "must not be empty");
        }
        for (key, name) in [
            ("nats.docs_stream", &self.docs_stream),
            ("nats.chunks_stream", &self.chunks_stream),
            ("nats.dead_letter_stream", &self.dead_letter_stream),
            ("nats.catalog_bucket", &self.catalog_bucket),
        ] {
            if !is_plain_name(name) {
                return bad(key, format!("{name:?} must be letters, digits, '-' or '_'"));
            }
        }
        if self.max_ack_pending < 1 {
            return bad("nats.max_ack_pending", "must be at least 1");
        }
        if self.max_deliver < 1 {
            return bad("nats.max_deliver", "must be at least 1");
        }
        if self.ack_wait_secs == 0 {
            return bad("nats.ack_wait_secs", "must be at least 1");
        }
        if self.fetch_batch == 0 {
            return bad("nats.fetch_batch", "must be at least 1");
        }
        if !(1..=5).contains(&self.replicas) {
            return bad("nats.replicas", "must be 1 to 5 (JetStream's limit)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_refused;

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_eq!(NatsConfig::default().validate(), Ok(()));
        assert_refused(&[
            ("[nats]\nmax_deliver = 0\n", "nats.max_deliver"),
            ("[nats]\ndocs_stream = \"a.b\"\n", "nats.docs_stream"),
            ("[nats]\nreplicas = 0\n", "nats.replicas"),
            ("[nats]\nreplicas = 7\n", "nats.replicas"),
        ]);
    }
}
