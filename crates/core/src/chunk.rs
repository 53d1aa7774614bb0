//! The [`Chunk`]: one ordered, faithful piece of a document.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{ChunkId, DocumentId};

/// The version of the text that is embedded for a chunk (see
/// [`Chunk::embedding_text`]). A change of this string re-embeds everything.
pub const EMBEDDING_FORMAT: &str = "weft-ctx-v3";

/// What produced a document's chunks and vectors, as the catalog records it
/// per document: the embedder (the model and whatever else changes its
/// vectors, e.g. `all-MiniLM-L6-v2@256`), the embedded-text format
/// ([`EMBEDDING_FORMAT`]) and the chunker's fingerprint
/// (`weft_chunking::Chunker::fingerprint`). Compared field by field: a
/// document recorded with another identity is cut or embedded again.
///
/// Stored as one string, `{embedder}/{format}/{chunker}` (see
/// [`IndexIdentity::tag`]), which is what older catalogs hold too.
///
/// ```
/// use weft_core::IndexIdentity;
///
/// let id = IndexIdentity::new("http:BAAI/bge-small", "chunker-1-abc");
/// let parsed: IndexIdentity = id.tag().parse().unwrap();
/// assert_eq!(parsed, id);
/// assert!(parsed.same_chunking(&IndexIdentity::new("other-model", "chunker-1-abc")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct IndexIdentity {
    /// The embedder: model id and what else changes its vectors.
    pub embedder: String,
    /// The embedded-text format ([`EMBEDDING_FORMAT`] when written now).
    pub format: String,
    /// The chunker's fingerprint (version and settings); empty when unknown.
    pub chunker: String,
}

impl IndexIdentity {
    /// The identity of chunks cut by `chunker` and embedded now by `embedder`.
    pub fn new(embedder: impl Into<String>, chunker: impl Into<String>) -> Self {
        Self {
            embedder: embedder.into(),
            format: EMBEDDING_FORMAT.to_owned(),
            chunker: chunker.into(),
        }
    }

    /// Whether chunks of `other` were cut the same way and would be
    /// embedded from the same text (same chunker and format), whatever
    /// embedded them.
    pub fn same_chunking(&self, other: &IndexIdentity) -> bool {
        self.chunker == other.chunker && self.format == other.format
    }

    /// The stored form: `{embedder}/{format}/{chunker}` (without the last
    /// part when the chunker is unknown).
    pub fn tag(&self) -> String {
        if self.chunker.is_empty() {
            format!("{}/{}", self.embedder, self.format)
        } else {
            format!("{}/{}/{}", self.embedder, self.format, self.chunker)
        }
    }
}

impl fmt::Display for IndexIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.tag())
    }
}

/// A stored identity that is not `{embedder}/weft-ctx-…[/chunker-…]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an index identity ({{embedder}}/weft-ctx-…/chunker-…)")]
pub struct ParseIdentityError(pub String);

impl FromStr for IndexIdentity {
    type Err = ParseIdentityError;

    /// Parses [`IndexIdentity::tag`]. The embedder may itself hold `/`
    /// (`http:BAAI/bge-small`): the format is found as the last
    /// `/weft-ctx-` part.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let error = || ParseIdentityError(s.to_owned());
        let at = s.rfind("/weft-ctx-").ok_or_else(error)?;
        let (embedder, rest) = (&s[..at], &s[at + 1..]);
        let (format, chunker) = match rest.split_once('/') {
            Some((format, chunker)) => (format, chunker),
            None => (rest, ""),
        };
        if embedder.is_empty() || chunker.contains('/') {
            return Err(error());
        }
        Ok(Self {
            embedder: embedder.to_owned(),
            format: format.to_owned(),
            chunker: chunker.to_owned(),
        })
    }
}

impl Serialize for IndexIdentity {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.tag())
    }
}

impl<'de> Deserialize<'de> for IndexIdentity {
    /// A stored string that does not parse becomes an identity that equals
    /// no current one (its whole text as the embedder), so the document is
    /// simply indexed again.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(text.parse().unwrap_or(IndexIdentity {
            embedder: text,
            format: String::new(),
            chunker: String::new(),
        }))
    }
}

/// What kind of material a chunk holds. It decides the adjacency window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentType {
    /// Documentation and other natural-language text.
    Prose,
    /// Source code.
    Code,
    /// Reference material for an API: type declarations (`.d.ts`) and
    /// configured API-doc paths.
    ApiReference,
}

impl ContentType {
    /// The snake_case name used in JSON, payloads and filters.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Prose => "prose",
            ContentType::Code => "code",
            ContentType::ApiReference => "api_reference",
        }
    }
}

impl fmt::Display for ContentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`ContentType`] from an unknown name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown content type {0:?}: expected prose, code or api_reference")]
pub struct ParseContentTypeError(pub String);

impl FromStr for ContentType {
    type Err = ParseContentTypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "prose" => Ok(ContentType::Prose),
            "code" => Ok(ContentType::Code),
            "api_reference" => Ok(ContentType::ApiReference),
            other => Err(ParseContentTypeError(other.to_owned())),
        }
    }
}

/// The hex sha256 of some content: a chunk's (what decides whether it is
/// re-embedded) or a whole document's (what decides whether it is re-indexed).
pub fn content_hash(content: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(content.as_ref()))
}

/// The key of a vector: the embedder that made it (its identity tag: model,
/// and what changes its vectors, such as where it cuts texts) and the text
/// it embedded ([`Chunk::embedding_text`]). Vector indexes store it with
/// each vector, so that a text embedded once — in another document,
/// project, fork or an earlier cut — is found and never sent to the model
/// again.
pub fn embedding_key(embedder: &str, embedding_text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(embedder.as_bytes());
    hasher.update([0]);
    hasher.update(embedding_text.as_bytes());
    hex::encode(hasher.finalize())
}

/// The tokens embedding `embedding_text` costs, as weft counts them before
/// and during a run (`weft index --dry-run`, `embedding.max_embed_tokens`,
/// the tokens a run reports): one per four characters, rounded up, the
/// measure [`crate::retrieval::ApproxTokenCounter`] counts context in.
/// Within about 5% of the BPE tokenizers embedding APIs bill by, on code and
/// prose (bench/RESULTS.md); the local model's own word pieces run 13–28%
/// more but stop at `embedding.max_tokens`.
pub fn embedding_tokens(embedding_text: &str) -> u64 {
    use crate::retrieval::TokenCounter as _;
    crate::retrieval::ApproxTokenCounter.count(embedding_text) as u64
}

/// One chunk of a document, with every field of DESIGN §3.
///
/// The chunks of a document tile it in source order: `content` is exactly
/// `text[start_byte..end_byte]`, ranges never go backwards, and only the
/// `overlap_bytes` at the start of a chunk may repeat the previous one.
/// [`crate::invariants::check`] verifies all of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// The document this chunk belongs to.
    pub document_id: DocumentId,
    /// 0-based position in the document, in source order.
    pub chunk_index: u32,
    /// How many chunks the document has.
    pub total_chunks: u32,
    /// The project (repository, docs site…) the document belongs to.
    pub project: String,
    /// Repo-relative path or URL of the document.
    pub uri: String,
    /// Title of the document (first heading, front matter title, or file name).
    pub title: String,
    /// Where in the document: a heading path (`"Guide > Install > Linux"`) or
    /// a symbol path (`"Outer.Inner.method"`), with `" (Part i/n)"` when a
    /// section or definition was split.
    pub section: String,
    /// Prose, code or API reference.
    pub content_type: ContentType,
    /// Language of the content: `java`, `typescript`, `markdown`, `text`…
    pub language: String,
    /// What the chunk is: a tree-sitter node kind (`method_declaration`),
    /// `section`, `front_matter`, `paragraphs` or `lines`.
    pub node_type: String,
    /// The name of the definition, where there is one.
    pub node_name: Option<String>,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
    /// Byte offset of the first byte in the document text.
    pub start_byte: u64,
    /// Byte offset one past the last byte.
    pub end_byte: u64,
    /// The text: exactly the document slice `start_byte..end_byte`.
    pub content: String,
    /// [`content_hash`] of `content`.
    pub content_hash: String,
    /// Whether the document is a README or index page.
    pub is_index_doc: bool,
    /// Version of the embedded-text format ([`EMBEDDING_FORMAT`]).
    pub embedding_format: String,
    /// How many leading bytes of `content` repeat the end of the previous
    /// chunk (prose and line-window overlap); 0 for tiling chunks.
    #[serde(default)]
    pub overlap_bytes: u32,
    /// Extra context for the embedded text only, never part of `content`:
    /// for the header chunk of a split class, an outline of its members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outline: Option<String>,
}

impl Chunk {
    /// The chunk's id, computed from `document_id` and `chunk_index`.
    pub fn id(&self) -> ChunkId {
        ChunkId::new(&self.document_id, self.chunk_index)
    }

    /// The ids of the neighbours within `window` chunks on either side that
    /// exist, nearest first on each side (before, then after).
    pub fn neighbour_ids(&self, window: u32) -> Vec<ChunkId> {
        let first = self.chunk_index.saturating_sub(window);
        let last = self
            .chunk_index
            .saturating_add(window)
            .min(self.total_chunks.saturating_sub(1));
        (first..=last)
            .filter(|&i| i != self.chunk_index)
            .map(|i| ChunkId::new(&self.document_id, i))
            .collect()
    }

    /// The text to embed: a short context header (path, section, language)
    /// and, for split classes, the member outline, then the content, with
    /// camelCase identifiers split into words (`parseHttpURL` → `parse Http
    /// URL`): word-piece models read words, not identifiers. The content is
    /// the [readable content](Self::readable_content): HTML comments in
    /// markdown would take the model's token budget from the text.
    ///
    /// Its shape is versioned by [`EMBEDDING_FORMAT`].
    pub fn embedding_text(&self) -> String {
        let mut text = String::with_capacity(self.content.len() + 128);
        text.push_str(&self.uri);
        if !self.section.is_empty() {
            text.push_str(" | ");
            text.push_str(&self.section);
        }
        text.push_str(" | ");
        text.push_str(&self.language);
        text.push('\n');
        if let Some(outline) = &self.outline {
            text.push_str(outline);
            text.push('\n');
        }
        text.push_str(&self.readable_content());
        split_camel_case(&text)
    }

    /// The content as a reader sees it: in markdown, without HTML comments
    /// (`<!-- … -->`: metadata such as Node.js's YAML history blocks, lint
    /// directives), which a rendered page never shows; other content as it
    /// is. What is embedded and what the text index searches.
    pub fn readable_content(&self) -> Cow<'_, str> {
        if self.language == "markdown" {
            without_html_comments(&self.content)
        } else {
            Cow::Borrowed(&self.content)
        }
    }
}

/// `text` without its HTML comments; an unterminated `<!--` is kept, with
/// what follows it.
fn without_html_comments(text: &str) -> Cow<'_, str> {
    if !text.contains("<!--") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("<!--") {
        let Some(close) = rest[open + 4..].find("-->") else {
            break;
        };
        out.push_str(&rest[..open]);
        rest = &rest[open + 4 + close + 3..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Puts a space inside camelCase and PascalCase words: before an upper-case
/// letter that follows a lower-case letter or digit, and before the last
/// capital of an acronym followed by a lower-case letter (`HTMLParser` →
/// `HTML Parser`). Everything else is kept as it is.
pub fn split_camel_case(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push(' ');
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(index: u32, total: u32) -> Chunk {
        Chunk {
            document_id: DocumentId::new("p", "a.java"),
            chunk_index: index,
            total_chunks: total,
            project: "p".into(),
            uri: "a.java".into(),
            title: "a.java".into(),
            section: "A.run".into(),
            content_type: ContentType::Code,
            language: "java".into(),
            node_type: "method_declaration".into(),
            node_name: Some("run".into()),
            start_line: 1,
            end_line: 1,
            start_byte: 0,
            end_byte: 4,
            content: "void".into(),
            content_hash: content_hash("void"),
            is_index_doc: false,
            embedding_format: EMBEDDING_FORMAT.into(),
            overlap_bytes: 0,
            outline: None,
        }
    }

    #[test]
    fn markdown_html_comments_are_not_embedded() {
        let mut c = chunk(0, 1);
        c.language = "markdown".into();
        c.content = "## Section 3\n\n<!-- YAML\nadded: v0.11.3\n-->\n\nReturns the servers.\n<!-- eslint-disable -->\nEnd <!-- open".into();
        let text = c.embedding_text();
        assert!(text.contains("Returns the servers."), "{text}");
        assert!(!text.contains("YAML") && !text.contains("eslint"), "{text}");
        assert!(
            text.ends_with("End <!-- open"),
            "an unterminated comment stays: {text}"
        );
        assert!(c.content.contains("added: v0.11.3"), "content is untouched");
        // Code keeps everything: `<!--` there is not a comment.
        let mut code = chunk(0, 1);
        code.content = "let s = \"<!-- x -->\";".into();
        assert!(code.embedding_text().contains("<!-- x -->"));
    }

    #[test]
    fn neighbour_ids_stay_inside_the_document() {
        let c = chunk(1, 3);
        let doc = &c.document_id;
        assert_eq!(
            c.neighbour_ids(3),
            vec![ChunkId::new(doc, 0), ChunkId::new(doc, 2)]
        );
        assert!(chunk(0, 1).neighbour_ids(2).is_empty());
    }

    #[test]
    fn json_uses_the_snake_case_names_of_design_section_3() {
        let value = serde_json::to_value(chunk(0, 1)).unwrap();
        for field in [
            "document_id",
            "chunk_index",
            "total_chunks",
            "project",
            "uri",
            "title",
            "section",
            "content_type",
            "language",
            "node_type",
            "node_name",
            "start_line",
            "end_line",
            "start_byte",
            "end_byte",
            "content",
            "content_hash",
            "is_index_doc",
            "embedding_format",
        ] {
            assert!(value.get(field).is_some(), "missing {field}");
        }
        assert_eq!(value["content_type"], "code");
        let back: Chunk = serde_json::from_value(value).unwrap();
        assert_eq!(back, chunk(0, 1));
    }

    #[test]
    fn embedding_text_has_header_and_outline_but_content_stays_a_slice() {
        let mut c = chunk(0, 1);
        c.outline = Some("members: run, stop".into());
        let text = c.embedding_text();
        assert!(text.starts_with("a.java | A.run | java\nmembers: run, stop\n"));
        assert!(text.ends_with("void"));
        assert_eq!(c.content, "void");
        c.section = "HTMLParser.parseHttpURL".into();
        c.content = "int maxRetries2Times = x;".into();
        let text = c.embedding_text();
        assert!(text.contains("| HTML Parser.parse Http URL |"), "{text}");
        assert!(text.ends_with("int max Retries2 Times = x;"), "{text}");
        assert_eq!(c.content, "int maxRetries2Times = x;");
    }

    #[test]
    fn content_type_round_trips_through_its_name() {
        for t in [
            ContentType::Prose,
            ContentType::Code,
            ContentType::ApiReference,
        ] {
            assert_eq!(t.as_str().parse::<ContentType>(), Ok(t));
        }
        assert!("docs".parse::<ContentType>().is_err());
    }
}
