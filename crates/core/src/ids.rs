//! Stable identifiers: [`DocumentId`] and [`ChunkId`].

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The namespace of weft's UUIDv5 chunk ids (a fixed, random UUID).
///
/// Changing it changes every chunk id of every index, so it never changes.
const CHUNK_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6c1f_7a0e_93d4_4b5e_9a1c_2f0d_5e7b_8c31);

/// The stable id of a document: the first 16 hex characters of
/// `sha256(project + "\n" + canonical_uri(uri))`.
///
/// The same project and source give the same id on every run and machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DocumentId(String);

impl DocumentId {
    /// Computes the id of the document at `uri` in `project`.
    ///
    /// The uri is canonicalised first (see [`canonical_uri`]), so `./a/b.rs`
    /// and `a\b.rs` name the same document.
    pub fn new(project: &str, uri: &str) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(project.as_bytes());
        hasher.update(b"\n");
        hasher.update(canonical_uri(uri).as_bytes());
        let digest = hasher.finalize();
        let mut hex = hex::encode(digest);
        hex.truncate(16);
        DocumentId(hex)
    }

    /// Wraps an id that was computed earlier (read back from a store).
    ///
    /// Returns `None` unless `id` is exactly 16 lowercase hex characters.
    pub fn parse(id: &str) -> Option<Self> {
        let valid = id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        valid.then(|| DocumentId(id.to_owned()))
    }

    /// The 16 hex characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DocumentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of one chunk: a UUIDv5 over `"<document_id>/<chunk_index>"`.
///
/// Because it is computed, the ids of a hit's neighbours are known without a
/// lookup, and adjacency is one batched get-by-ids call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChunkId(Uuid);

impl ChunkId {
    /// The id of chunk `chunk_index` (0-based) of `document`.
    pub fn new(document: &DocumentId, chunk_index: u32) -> Self {
        let name = format!("{}/{}", document.as_str(), chunk_index);
        ChunkId(Uuid::new_v5(&CHUNK_ID_NAMESPACE, name.as_bytes()))
    }

    /// The UUID, as vector stores want it.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl std::str::FromStr for ChunkId {
    type Err = uuid::Error;

    /// Reads a chunk id back from its UUID text.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(ChunkId)
    }
}

impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The canonical form of a source uri, the input of [`DocumentId::new`].
///
/// - URLs (`scheme://…`): scheme and host lowercased, fragment dropped.
/// - Paths: backslashes become `/`, leading `./` and duplicate or trailing
///   `/` are removed. Case is kept: file systems differ.
pub fn canonical_uri(uri: &str) -> String {
    let uri = uri.trim();
    if let Some((scheme, rest)) = uri.split_once("://") {
        let rest = rest.split('#').next().unwrap_or("");
        let (host, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let path = if path.is_empty() { "/" } else { path };
        return format!(
            "{}://{}{}",
            scheme.to_ascii_lowercase(),
            host.to_ascii_lowercase(),
            path
        );
    }
    let slashed = uri.replace('\\', "/");
    let mut out = String::with_capacity(slashed.len());
    let absolute = slashed.starts_with('/');
    for part in slashed.split('/') {
        if part.is_empty() || part == "." {
            continue;
        }
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(part);
    }
    if absolute {
        out.insert(0, '/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_ids_read_back_from_their_text() {
        let id = ChunkId::new(&DocumentId::new("p", "a.rs"), 3);
        assert_eq!(id.to_string().parse::<ChunkId>().unwrap(), id);
        assert!("not-a-uuid".parse::<ChunkId>().is_err());
    }

    #[test]
    fn document_id_is_the_sha256_prefix_of_project_newline_uri() {
        // `printf 'p\nsrc/a.rs' | sha256sum | cut -c1-16`
        let id = DocumentId::new("p", "src/a.rs");
        assert_eq!(id.as_str(), "598b03daea387461");
    }

    #[test]
    fn equivalent_uris_give_one_document_id() {
        let a = DocumentId::new("p", "src/a.rs");
        assert_eq!(a, DocumentId::new("p", "./src/a.rs"));
        assert_eq!(a, DocumentId::new("p", "src\\a.rs"));
        assert_eq!(a, DocumentId::new("p", "src//a.rs/"));
        assert_ne!(a, DocumentId::new("q", "src/a.rs"));
        assert_ne!(a, DocumentId::new("p", "src/A.rs"));
    }

    #[test]
    fn urls_are_canonicalised() {
        assert_eq!(
            canonical_uri("HTTPS://Docs.Example.com/a/B#frag"),
            "https://docs.example.com/a/B"
        );
        assert_eq!(canonical_uri("https://example.com"), "https://example.com/");
    }

    #[test]
    fn chunk_ids_are_uuid_v5_and_distinct_per_index() {
        let doc = DocumentId::new("p", "a.md");
        let id = ChunkId::new(&doc, 0);
        assert_eq!(id.as_uuid().get_version_num(), 5);
        assert_eq!(id, ChunkId::new(&doc, 0));
        assert_ne!(id, ChunkId::new(&doc, 1));
        assert_ne!(id, ChunkId::new(&DocumentId::new("p", "b.md"), 0));
    }

    #[test]
    fn parse_accepts_only_16_lowercase_hex() {
        let doc = DocumentId::new("p", "a.md");
        assert_eq!(DocumentId::parse(doc.as_str()), Some(doc));
        assert_eq!(DocumentId::parse("ABCDEF0123456789"), None);
        assert_eq!(DocumentId::parse("abc"), None);
    }
}
