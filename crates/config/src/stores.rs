//! `[stores]`: which vector and text stores hold the index.

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::{bad, is_plain_name};

/// `[stores]`: where the index lives. `embedded` (the default) keeps the
/// vector index (qdrant-edge) and the text index (tantivy) under
/// `data.dir`; `qdrant` and `meilisearch` use servers, which every
/// embedder and query replica then shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoresConfig {
    /// `embedded` or `qdrant`.
    pub vector: VectorStoreKind,
    /// `embedded` or `meilisearch`.
    pub text: TextStoreKind,
    /// Qdrant's gRPC URL (`http://qdrant:6334`), for `vector = "qdrant"`.
    pub qdrant_url: Option<String>,
    /// The Qdrant collection (created on first use).
    pub qdrant_collection: String,
    /// Name of the environment variable holding Qdrant's API key; none
    /// sends no key.
    pub qdrant_api_key_env: Option<String>,
    /// Meilisearch's URL (`http://meilisearch:7700`), for `text = "meilisearch"`.
    pub meili_url: Option<String>,
    /// The Meilisearch index uid (created on first use).
    pub meili_index: String,
    /// Name of the environment variable holding Meilisearch's API key;
    /// none sends no key. The indexing side (`weft index`, the embedder)
    /// uses it; the query side too unless `meili_search_key_env` is set.
    pub meili_api_key_env: Option<String>,
    /// Name of the environment variable holding a Meilisearch key allowed
    /// only to search (actions `search`, plus `indexes.get` and
    /// `settings.get` to check the index): the query service and `weft
    /// search` use it instead of `meili_api_key_env`, and then never write
    /// to the index.
    pub meili_search_key_env: Option<String>,
}

impl StoresConfig {
    /// Whether either index is embedded, and so lives in the data directory.
    pub fn uses_data_dir(&self) -> bool {
        self.vector == VectorStoreKind::Embedded || self.text == TextStoreKind::Embedded
    }

    /// Checks the section: a server store needs its URL and a usable name.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.vector == VectorStoreKind::Qdrant {
            if self
                .qdrant_url
                .as_deref()
                .is_none_or(|u| u.trim().is_empty())
            {
                return bad(
                    "stores.qdrant_url",
                    "is required when stores.vector is qdrant",
                );
            }
            if self.qdrant_collection.trim().is_empty() {
                return bad("stores.qdrant_collection", "must not be empty");
            }
        }
        if self.text == TextStoreKind::Meilisearch {
            if self
                .meili_url
                .as_deref()
                .is_none_or(|u| u.trim().is_empty())
            {
                return bad(
                    "stores.meili_url",
                    "is required when stores.text is meilisearch",
                );
            }
            if !is_plain_name(&self.meili_index) {
                return bad(
                    "stores.meili_index",
                    format!(
                        "{:?} must be letters, digits, '-' or '_' (a Meilisearch index uid)",
                        self.meili_index
                    ),
                );
            }
        }
        Ok(())
    }
}

impl Default for StoresConfig {
    fn default() -> Self {
        Self {
            vector: VectorStoreKind::Embedded,
            text: TextStoreKind::Embedded,
            qdrant_url: None,
            qdrant_collection: "weft_chunks".into(),
            qdrant_api_key_env: None,
            meili_url: None,
            meili_index: "weft_chunks".into(),
            meili_api_key_env: None,
            meili_search_key_env: None,
        }
    }
}

/// Where vectors are stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorStoreKind {
    /// qdrant-edge under `data.dir`.
    #[default]
    Embedded,
    /// A Qdrant server.
    Qdrant,
}

/// Where the text index is stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextStoreKind {
    /// tantivy under `data.dir`.
    #[default]
    Embedded,
    /// A Meilisearch server.
    Meilisearch,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_refused, env, load_toml_with_env};

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_refused(&[
            ("[stores]\nvector = \"qdrant\"\n", "stores.qdrant_url"),
            ("[stores]\ntext = \"meilisearch\"\n", "stores.meili_url"),
            (
                "[stores]\ntext = \"meilisearch\"\nmeili_url = \"http://m:7700\"\nmeili_index = \"a b\"\n",
                "stores.meili_index",
            ),
            ("[stores]\nvector = \"pinecone\"\n", "pinecone"),
        ]);
    }

    #[test]
    fn stores_come_from_file_and_environment() {
        let stores = load_toml_with_env(
            "[stores]\nvector = \"qdrant\"\nqdrant_url = \"http://qdrant:6334\"\nqdrant_api_key_env = \"QDRANT_KEY\"\n",
            env(&[
                ("WEFT__STORES__TEXT", "meilisearch"),
                ("WEFT__STORES__MEILI_URL", "http://meili:7700"),
            ]),
        )
        .unwrap()
        .stores;
        assert_eq!(stores.vector, VectorStoreKind::Qdrant);
        assert_eq!(stores.qdrant_url.as_deref(), Some("http://qdrant:6334"));
        assert_eq!(stores.qdrant_collection, "weft_chunks");
        assert_eq!(stores.qdrant_api_key_env.as_deref(), Some("QDRANT_KEY"));
        assert_eq!(stores.text, TextStoreKind::Meilisearch);
        assert_eq!(stores.meili_url.as_deref(), Some("http://meili:7700"));
        assert_eq!(stores.meili_index, "weft_chunks");
    }
}
