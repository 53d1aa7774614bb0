//! The keys file: `[[keys]]` entries, each an id, the projects (and
//! content types) it may read, a salt and `sha256(salt ‖ key)` — never the
//! key — and optionally its own rate limit.
//!
//! A plain salted SHA-256 is the right hash here, unlike for passwords: a
//! key is 32 random bytes made by [`mint`](crate::mint()), so there is
//! nothing to guess and no dictionary to slow down; a slow password hash
//! (argon2, bcrypt) would only cost every request time. The salt makes
//! equal keys hash differently and precomputed tables useless; the digest
//! is compared in constant time.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use weft_core::ContentType;

use crate::rate::RateLimit;
use crate::scope::Scope;

/// The keys file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeysFileError {
    /// It could not be read.
    #[error("query.api_keys_file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Anyone may write it: whoever can add a line there holds a key.
    #[error(
        "query.api_keys_file {path}: others may write it (mode {mode:o}); \
         an API keys file must be writable by its owner only (chmod o-w)"
    )]
    WorldWritable {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It is not a keys file. The message never quotes the file's text.
    #[error("query.api_keys_file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line or the key's id.
        message: String,
    },
}

/// The keys file: `[[keys]]` entries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysFile {
    /// The keys.
    #[serde(default)]
    pub keys: Vec<KeyEntry>,
}

/// One API key, as the keys file holds it: never the key itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// A name for the key (who holds it), unique in the file; logged with
    /// each refusal, never the key.
    pub id: String,
    /// The projects it may read; `"*"` alone: every project.
    pub projects: Vec<String>,
    /// The content types it may read; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content_types: Vec<ContentType>,
    /// 16 random bytes, hex.
    pub salt: String,
    /// SHA-256 of the salt's bytes followed by the key's, hex.
    pub sha256: String,
    /// Requests per second (token bucket); unset: `query.rate_limit_per_sec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_sec: Option<f64>,
    /// The bucket's size; unset: `query.rate_limit_burst`, else the rate
    /// rounded up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// May index (the MCP `index` tool of `weft mcp --allow-index`), not
    /// only read: a permission of its own, off unless set. Only a key for
    /// every project and content type may hold it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub index: bool,
}

/// `sha256(salt ‖ key)`.
pub(crate) fn digest(salt: &[u8], key: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(key.as_bytes());
    hasher.finalize().into()
}

/// A key of the file, decoded.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    pub(crate) id: String,
    salt: Vec<u8>,
    sha256: [u8; 32],
    pub(crate) scope: Scope,
    pub(crate) rate: Option<RateLimit>,
}

impl Key {
    /// Checks an entry and decodes it; the error names the key, never its
    /// hash.
    pub(crate) fn from_entry(entry: &KeyEntry) -> Result<Self, String> {
        let id = &entry.id;
        if id.trim().is_empty() || id.chars().any(char::is_control) {
            return Err("a key's id must be a non-empty name".into());
        }
        let salt = hex::decode(&entry.salt)
            .ok()
            .filter(|s| s.len() >= 8)
            .ok_or_else(|| format!("key {id:?}: salt must be at least 8 bytes in hex"))?;
        let sha256: [u8; 32] = hex::decode(&entry.sha256)
            .ok()
            .and_then(|d| d.try_into().ok())
            .ok_or_else(|| format!("key {id:?}: sha256 must be 64 hex characters"))?;
        if entry.projects.is_empty() || entry.projects.iter().any(|p| p.trim().is_empty()) {
            return Err(format!(
                "key {id:?}: projects must name at least one project (or \"*\" for all)"
            ));
        }
        let projects = if entry.projects.iter().any(|p| p == "*") {
            if entry.projects.len() > 1 {
                return Err(format!(
                    "key {id:?}: projects holds \"*\" (every project) and names too"
                ));
            }
            None
        } else {
            Some(entry.projects.iter().cloned().collect())
        };
        let content_types = if entry.content_types.is_empty() {
            None
        } else {
            let mut types = entry.content_types.clone();
            types.sort_by_key(|t| t.as_str());
            types.dedup();
            Some(types)
        };
        if entry.index && (projects.is_some() || content_types.is_some()) {
            return Err(format!(
                "key {id:?}: index = true needs projects = [\"*\"] and every content type \
                 (an indexing key writes projects of any name)"
            ));
        }
        let rate = match (entry.rate_per_sec, entry.burst) {
            (Some(rate), _) if !(rate.is_finite() && rate > 0.0) => {
                return Err(format!("key {id:?}: rate_per_sec must be positive"));
            }
            (_, Some(0)) => return Err(format!("key {id:?}: burst must be at least 1")),
            (Some(rate), burst) => Some(RateLimit::new(rate, burst)),
            (None, _) => None,
        };
        Ok(Self {
            id: id.clone(),
            salt,
            sha256,
            scope: Scope {
                key_id: Some(id.clone()),
                projects,
                content_types,
                may_index: entry.index,
            },
            rate,
        })
    }

    /// Whether `presented` is this key: the digest compared in constant time.
    pub(crate) fn matches(&self, presented: &str) -> bool {
        digest(&self.salt, presented).ct_eq(&self.sha256).into()
    }
}

/// Parses a keys file's text; errors name the line or the key, never
/// quoting the text.
pub(crate) fn parse_keys(path: &Path, text: &str) -> Result<Vec<Key>, KeysFileError> {
    let invalid = |message: String| KeysFileError::Invalid {
        path: path.to_owned(),
        message,
    };
    let file: KeysFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| {
            text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        });
        invalid(match line {
            Some(line) => format!("line {line}: {}", e.message()),
            None => e.message().to_owned(),
        })
    })?;
    let mut ids = BTreeSet::new();
    let mut keys = Vec::with_capacity(file.keys.len());
    for entry in &file.keys {
        if !ids.insert(entry.id.clone()) {
            return Err(invalid(format!("key id {:?} appears twice", entry.id)));
        }
        keys.push(Key::from_entry(entry).map_err(invalid)?);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KEY_PREFIX;

    #[test]
    fn the_dev_overlay_key_is_the_one_its_file_documents() {
        let text = include_str!("../../../deploy/k8s/overlays/dev/query-keys.toml");
        let key = text
            .lines()
            .filter_map(|l| l.strip_prefix('#'))
            .map(str::trim)
            .find(|l| l.starts_with(KEY_PREFIX))
            .expect("the dev key in a comment");
        let keys = parse_keys(Path::new("query-keys.toml"), text).unwrap();
        assert_eq!(keys.len(), 1);
        assert!(keys[0].matches(key));
        // Scoped to the example organisation's projects, never `*`.
        let org = include_str!("../../../deploy/k8s/base/org.toml");
        let projects: BTreeSet<String> = org
            .lines()
            .filter_map(|l| l.trim().strip_prefix("project = "))
            .map(|p| p.trim_matches('"').to_owned())
            .collect();
        assert!(!projects.is_empty(), "base/org.toml names projects");
        assert_eq!(keys[0].scope.projects, Some(projects));
    }
}
