//! `[embedder]`: the embedder service's batching across documents.

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::bad;

/// `[embedder]`: how the embedder service batches chunks across documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedderServiceConfig {
    /// At most this many estimated tokens (4 characters each) per embedding call.
    pub max_batch_tokens: usize,
    /// How long to wait for more chunk batches before embedding a partial batch.
    pub linger_ms: u64,
}

impl Default for EmbedderServiceConfig {
    fn default() -> Self {
        Self {
            max_batch_tokens: 16_384,
            linger_ms: 100,
        }
    }
}

impl EmbedderServiceConfig {
    /// Checks the section: a batch holds at least one token.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.max_batch_tokens < 1 {
            return bad("embedder.max_batch_tokens", "must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::assert_refused;

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_refused(&[(
            "[embedder]\nmax_batch_tokens = 0\n",
            "embedder.max_batch_tokens",
        )]);
    }
}
