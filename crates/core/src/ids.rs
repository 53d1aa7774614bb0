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

/// The most bytes a document uri may have.
pub const MAX_URI_BYTES: usize = 4096;

/// Why `uri` cannot be a document's uri; `None` when it can.
///
/// Every uri that enters weft — listed from a directory or a git checkout,
/// named by a git diff, crawled, or received in a NATS message — passes
/// this one rule:
///
/// - not empty, at most [`MAX_URI_BYTES`] bytes;
/// - no control characters (NUL, line breaks, escape sequences…: a uri is
///   printed in summaries, logs and citations);
/// - a URL (`scheme://…`), or a relative path whose components are neither
///   empty, `.` nor `..` and that does not start with `/` (or a Windows drive
///   or `\\`): a uri is never a way out of the directory it was listed in.
///
/// A uri is an id and a label, never joined onto a path to be read; this
/// rule makes sure it could not escape one if it were.
pub fn uri_problem(uri: &str) -> Option<String> {
    if uri.is_empty() {
        return Some("is empty".into());
    }
    if uri.len() > MAX_URI_BYTES {
        return Some(format!(
            "is {} bytes long, over the limit of {MAX_URI_BYTES}",
            uri.len()
        ));
    }
    if let Some(problem) = control_character(uri) {
        return Some(problem);
    }
    if is_url(uri) {
        return None;
    }
    let bytes = uri.as_bytes();
    if uri.starts_with('/') || uri.starts_with('\\') {
        return Some(format!(
            "{uri:?} is an absolute path; a uri is relative to its source"
        ));
    }
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Some(format!(
            "{uri:?} starts with a drive letter; a uri is relative to its source"
        ));
    }
    if let Some(part) = uri
        .split(['/', '\\'])
        .find(|p| p.is_empty() || *p == "." || *p == "..")
    {
        let what = if part.is_empty() { "an empty" } else { "a" };
        return Some(format!(
            "{uri:?} has {what} {part:?} path component; a uri names a file below its source"
        ));
    }
    None
}

/// The longest project name, in characters.
pub const MAX_PROJECT_CHARS: usize = 256;

/// Why `project` cannot be a project name; `None` when it can: not empty
/// (or blank), at most [`MAX_PROJECT_CHARS`] characters, no control
/// characters, and at most one `@` after its first character, which names
/// a branch overlay `project@branch` ([`crate::overlays`]). Every project name that enters weft passes this rule: given
/// to `weft index` or a crawler manifest, or received in a NATS message.
pub fn project_problem(project: &str) -> Option<String> {
    if project.trim().is_empty() {
        return Some("is empty".into());
    }
    let chars = project.chars().count();
    if chars > MAX_PROJECT_CHARS {
        return Some(format!(
            "is {chars} characters long, over the limit of {MAX_PROJECT_CHARS}"
        ));
    }
    if let Some(problem) = control_character(project) {
        return Some(problem);
    }
    // One `@` after the first character at most: it separates a project
    // from its branch (`crate::overlays`).
    if let Some((_, branch)) = crate::overlays::split_overlay(project) {
        if let Some(problem) = crate::overlays::branch_problem(branch) {
            return Some(format!("names branch {branch:?}, which {problem}"));
        }
    } else if project.len() > 1 && project[1..].ends_with('@') {
        return Some("ends with '@' (a branch overlay is named project@branch)".into());
    }
    None
}

/// A text's first control character (NUL, line breaks, escapes, DEL, C1),
/// described with its position; `None` when it has none.
pub fn control_character(text: &str) -> Option<String> {
    text.char_indices()
        .find(|(_, c)| c.is_control())
        .map(|(i, c)| {
            format!(
                "holds a control character (U+{:04X}) at byte {i}",
                u32::from(c)
            )
        })
}

/// Whether `uri` is a URL: `scheme://…` with a scheme of letters, digits,
/// `+`, `-` and `.` that starts with a letter.
fn is_url(uri: &str) -> bool {
    uri.split_once("://").is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
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

    #[test]
    fn hostile_uris_are_refused_with_the_reason() {
        for ok in [
            "a.rs",
            "src/main/java/A.java",
            "docs/guide.md",
            "weird name with spaces/ünïcode.md",
            "..hidden-dots/x..y.md",
            "https://docs.example.org/guide/install.html",
            "https://docs.example.org/a/../b",
        ] {
            assert_eq!(uri_problem(ok), None, "{ok}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("../etc/passwd", "\"..\""),
            ("a/../../etc/passwd", "\"..\""),
            ("./a.rs", "\".\""),
            ("a//b.rs", "empty"),
            ("a/b/", "empty"),
            ("/etc/passwd", "absolute"),
            ("\\\\server\\share", "absolute"),
            ("C:\\Windows\\win.ini", "drive"),
            ("a\\..\\..\\b", "\"..\""),
            ("a\0b.rs", "U+0000"),
            ("a\nb.rs", "U+000A"),
            ("a\u{1b}[31mred.rs", "U+001B"),
            ("a\u{7f}.rs", "U+007F"),
            ("a\u{85}.rs", "U+0085"),
            ("https://x.org/a\nb", "U+000A"),
            ("1http://x", "empty"),
        ] {
            let problem = uri_problem(bad).unwrap_or_else(|| panic!("{bad:?} passed"));
            assert!(problem.contains(says), "{bad:?}: {problem}");
        }
        let long = "a/".repeat(MAX_URI_BYTES / 2) + "b";
        assert!(uri_problem(&long).unwrap().contains("4096"));
    }
}
