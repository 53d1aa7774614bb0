//! # weft-chunking
//!
//! Splits a document into ordered, faithful chunks, choosing the chunker by
//! file type:
//!
//! | files | chunker |
//! |---|---|
//! | Java, TypeScript/TSX, JavaScript, Python, Rust, Go, C, C++, C#, Ruby, PHP, shell (sh/bash), Kotlin | tree-sitter: one chunk per definition, large classes into header + members, large functions into parts; `section` is the symbol path (`Outer.Inner.method`) |
//! | Markdown | heading sections with a breadcrumb; front matter alone; fenced code never split |
//! | reStructuredText (`.rst`, `.rest`, `.rst.txt`, and `.txt` that reads as reST) | sections from the title adornments (levels in the order styles first appear) with a breadcrumb; directives, literal blocks and tables never split |
//! | AsciiDoc (`.adoc`, `.asciidoc`, `.asc`, and `.txt` that reads as AsciiDoc) | sections from `=` titles (and two-line titles) with a breadcrumb; delimited blocks never split; attribute lines stay with their title |
//! | HTML | main content to markdown, then as markdown |
//! | plain text | paragraphs merged to a target size, with overlap |
//! | anything else | 50-line windows with 10 lines of overlap |
//!
//! The markup chunkers share the `markdown.*` sizes: a section over
//! `markdown.max_chars` splits at block boundaries into "(Part i/n)", and
//! README/index documents stay whole up to `markdown.index_max_chars`.
//! [`Chunker::section_titles`] lists a markup document's sections as these
//! chunkers find them (for `weft eval --derive`).
//! Languages are a grammar plus a table of node kinds (`languages.rs`);
//! the code chunker is the same for all of them.
//!
//! Every result satisfies [`weft_core::invariants::check`]: chunk `content`
//! is the exact source slice, chunks are in order, and every non-blank line
//! lies in some chunk.
//!
//! ```
//! use weft_chunking::{Chunker, ChunkingConfig};
//!
//! let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
//! let source = "package a;\n\n/** Adds. */\nclass Sum {\n  int add(int x, int y) { return x + y; }\n}\n";
//! let doc = chunker.chunk_bytes("demo", "src/a/Sum.java", source.as_bytes()).unwrap();
//! assert_eq!(doc.chunks.len(), 1);
//! assert_eq!(doc.chunks[0].node_type, "class_declaration");
//! assert_eq!(doc.chunks[0].section, "Sum");
//! weft_core::invariants::check(source, &doc.chunks).unwrap();
//! ```

#![warn(missing_docs)]

/// The version of what the chunkers cut from a given input. It goes up with
/// every change that moves a chunk boundary or changes a chunk's fields for
/// some input, so that indexes built by an older weft are cut again (it is
/// part of [`Chunker::fingerprint`], which [`weft_core::index_tag`] records).
/// 1: the first versioned chunker, with the TypeScript type-parameter and
/// overload-signature rewrite.
/// 2: reStructuredText and AsciiDoc by sections (`.rst`, `.adoc`, and `.txt`
/// that reads as either); C, C++, C#, Ruby, PHP, shell and Kotlin by
/// definitions (were line windows).
/// 3: AsciiDoc: a long section is cut between definition-list entries, each
/// part named by its terms; `= text` wrapped inside a paragraph is not a
/// title; inline anchors left out of titles. Hostile input: a code parse
/// over its work budget falls back to line windows, and an HTML page nested
/// over 256 deep is taken as plain text.
/// 4: code: a definition of at least ten non-blank lines stands alone —
/// no other definition merges into its chunk, nor it into another's
/// (comments, fields, imports and class headers still join it; smaller
/// pieces merge as before) — so a class of 14-line methods just under
/// `code.min_chars` is one chunk per method in every language (Ruby's and
/// Go's merged up to `code.max_chars`); Go's `const` and `var`
/// declarations and shell variable assignments count as data (fields),
/// not definitions.
pub const CHUNKER_VERSION: u32 = 4;

mod asciidoc;
mod code;
mod detect;
pub mod html;
mod languages;
mod markdown;
mod outline;
mod rst;
mod sections;
mod span;
mod text;
mod typescript;

use globset::{Glob, GlobSet, GlobSetBuilder};
use weft_core::{Chunk, DocumentId};

pub use code::parse;
pub use detect::{FileKind, Strategy};
pub use languages::CodeLanguage;
pub use outline::SectionTitle;
pub use weft_config::{
    ChunkingConfig, CodeConfig, InvalidSetting, LinesConfig, MarkdownConfig, TextConfig,
};

use span::{DocumentMeta, Piece};

/// Why a file was not chunked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The file holds a NUL byte: binary, not text.
    #[error("{uri}: {}", self.reason())]
    Binary {
        /// The file.
        uri: String,
        /// Where the first NUL byte is.
        offset: usize,
    },
    /// The file is not valid UTF-8.
    #[error("{uri}: {}", self.reason())]
    NotUtf8 {
        /// The file.
        uri: String,
        /// Where the first invalid byte is.
        offset: usize,
    },
    /// The file is over `chunking.max_file_bytes`.
    #[error("{uri}: {}", self.reason())]
    TooLarge {
        /// The file.
        uri: String,
        /// Its size in bytes.
        size: u64,
        /// The configured limit.
        limit: u64,
    },
}

impl ChunkError {
    /// The reason alone, without the file's name.
    pub fn reason(&self) -> String {
        match self {
            ChunkError::Binary { offset, .. } => {
                format!("binary file (NUL byte at offset {offset}), not chunked")
            }
            ChunkError::NotUtf8 { offset, .. } => {
                format!("not valid UTF-8 (invalid byte at offset {offset}), not chunked")
            }
            ChunkError::TooLarge { size, limit, .. } => {
                format!("{size} bytes is over chunking.max_file_bytes ({limit}), not chunked")
            }
        }
    }
}

/// The page kind ([`Chunker::chunk_page`]) of a media type: `html`,
/// `markdown` or `text`; `None` for anything else (chunk it as a file).
pub fn page_kind(media_type: &str) -> Option<&'static str> {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "text/html" | "application/xhtml+xml" => Some("html"),
        "text/markdown" | "text/x-markdown" => Some("markdown"),
        "text/plain" => Some("text"),
        _ => None,
    }
}

/// The media type of a page kind, the inverse of [`page_kind`].
pub fn page_media_type(kind: &str) -> &'static str {
    match kind {
        "markdown" => "text/markdown",
        "text" => "text/plain",
        _ => "text/html",
    }
}

/// The chunks of one document, and what the chunker noticed on the way.
#[derive(Debug, Clone)]
pub struct ChunkedDocument {
    /// The document's id.
    pub document_id: DocumentId,
    /// What the file was taken for.
    pub kind: FileKind,
    /// The document's title.
    pub title: String,
    /// The chunks, in order.
    pub chunks: Vec<Chunk>,
    /// Problems that did not stop chunking (syntax errors, fallbacks).
    pub warnings: Vec<String>,
    /// For HTML: the extracted markdown that chunk offsets refer to. `None`
    /// when the offsets refer to the source text itself.
    pub extracted_text: Option<String>,
}

impl ChunkedDocument {
    /// The text the chunks' byte ranges refer to: the extracted text for
    /// HTML, else `source`.
    pub fn text<'a>(&'a self, source: &'a str) -> &'a str {
        self.extracted_text.as_deref().unwrap_or(source)
    }
}

/// Chunks documents according to a validated [`ChunkingConfig`].
///
/// A `Chunker` is cheap to share between threads; tree-sitter parsers are
/// kept per thread.
#[derive(Debug, Clone)]
pub struct Chunker {
    config: ChunkingConfig,
    api_reference: GlobSet,
    fingerprint: String,
}

impl Chunker {
    /// A chunker with `config`, which is validated first.
    pub fn new(config: ChunkingConfig) -> Result<Self, InvalidSetting> {
        config.validate()?;
        let mut builder = GlobSetBuilder::new();
        for (i, glob) in config.api_reference_paths.iter().enumerate() {
            let glob = Glob::new(glob).map_err(|e| InvalidSetting {
                key: format!("chunking.api_reference_paths[{i}]"),
                message: e.to_string(),
            })?;
            builder.add(glob);
        }
        let api_reference = builder.build().map_err(|e| InvalidSetting {
            key: "chunking.api_reference_paths".into(),
            message: e.to_string(),
        })?;
        // serde_json writes a struct's fields in declaration order: the same
        // settings always give the same text.
        let settings = serde_json::to_string(&config).unwrap_or_default();
        let fingerprint = format!(
            "chunker-{CHUNKER_VERSION}-{}",
            &weft_core::content_hash(&settings)[..12]
        );
        Ok(Chunker {
            config,
            api_reference,
            fingerprint,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &ChunkingConfig {
        &self.config
    }

    /// Names what this chunker cuts: `chunker-{CHUNKER_VERSION}-` and 12 hex
    /// digits of a hash of its settings. Two chunkers with the same
    /// fingerprint cut every input the same way; indexes record it per
    /// document so that a changed setting or a newer weft re-cuts them.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// What the file at `uri` is taken for.
    pub fn detect(&self, uri: &str) -> FileKind {
        detect::detect(uri, &self.api_reference)
    }

    /// Chunks the raw bytes of the file at `uri` in `project`, refusing
    /// binary, non-UTF-8 and oversize files with a reason.
    pub fn chunk_bytes(
        &self,
        project: &str,
        uri: &str,
        bytes: &[u8],
    ) -> Result<ChunkedDocument, ChunkError> {
        let size = bytes.len() as u64;
        if size > self.config.max_file_bytes {
            return Err(ChunkError::TooLarge {
                uri: uri.to_owned(),
                size,
                limit: self.config.max_file_bytes,
            });
        }
        if let Some(offset) = bytes.iter().position(|&b| b == 0) {
            return Err(ChunkError::Binary {
                uri: uri.to_owned(),
                offset,
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| ChunkError::NotUtf8 {
            uri: uri.to_owned(),
            offset: e.valid_up_to(),
        })?;
        Ok(self.chunk_text(project, uri, text))
    }

    /// Chunks a document as the pipeline receives it: a fetched page when
    /// `media_type` names a page kind ([`page_kind`]: HTML, markdown, plain
    /// text) and its bytes are UTF-8, else a file judged by its `uri` and
    /// bytes ([`Chunker::chunk_bytes`]: binary, non-UTF-8 and oversize
    /// files are refused with a reason). `weft index` and the distributed
    /// chunker both cut documents through here.
    pub fn chunk_document(
        &self,
        project: &str,
        uri: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<ChunkedDocument, ChunkError> {
        if let Some(kind) = page_kind(media_type)
            && bytes.len() as u64 <= self.config.max_file_bytes
            && let Ok(text) = std::str::from_utf8(bytes)
        {
            return Ok(self.chunk_page(project, uri, kind, text));
        }
        self.chunk_bytes(project, uri, bytes)
    }

    /// Chunks a fetched web page (or any document whose kind a media type
    /// gives): `kind` is `html`, `markdown` or `text` (see
    /// [`page_kind`]); the content is prose whatever the URL looks like.
    pub fn chunk_page(&self, project: &str, uri: &str, kind: &str, body: &str) -> ChunkedDocument {
        let mut file_kind = self.detect(uri);
        file_kind.strategy = match kind {
            "markdown" => Strategy::Markdown,
            "text" => Strategy::Text,
            _ => Strategy::Html,
        };
        file_kind.language = kind.to_owned();
        file_kind.content_type = weft_core::ContentType::Prose;
        // A Sphinx site serves its sources (`_sources/*.rst.txt`) as text.
        if kind == "text" {
            file_kind = match self.detect(uri).strategy {
                strategy @ (Strategy::Rst | Strategy::AsciiDoc) => FileKind {
                    strategy,
                    language: (if strategy == Strategy::Rst {
                        "rst"
                    } else {
                        "asciidoc"
                    })
                    .into(),
                    ..file_kind
                },
                _ => detect::refine(file_kind, uri, body),
            };
        }
        self.chunk_text_as(project, uri, body, file_kind)
    }

    /// What the file at `uri` with content `text` is taken for: as
    /// [`Chunker::detect`], except that a `.txt` file that reads as
    /// reStructuredText or AsciiDoc is chunked as such, and a `.h` header
    /// that reads as C++ as C++.
    pub fn detect_text(&self, uri: &str, text: &str) -> FileKind {
        detect::refine(self.detect(uri), uri, text)
    }

    /// Chunks `text`, the content of the file at `uri` in `project`.
    pub fn chunk_text(&self, project: &str, uri: &str, text: &str) -> ChunkedDocument {
        let kind = self.detect_text(uri, text);
        self.chunk_text_as(project, uri, text, kind)
    }

    /// Chunks `text` as a file of `kind` (when the kind is known otherwise,
    /// e.g. from an HTTP content type).
    pub fn chunk_text_as(
        &self,
        project: &str,
        uri: &str,
        text: &str,
        kind: FileKind,
    ) -> ChunkedDocument {
        let file_name = uri
            .trim_end_matches('/')
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(uri)
            .to_owned();
        let mut warnings = Vec::new();
        let mut title = None;
        let mut extracted_text = None;
        let pieces: Vec<Piece> = match kind.strategy {
            Strategy::Code(language) => self.code(language, text, &mut warnings),
            Strategy::Markdown => {
                let out =
                    markdown::chunk(text, &self.config.markdown, kind.is_index_doc, &file_name);
                title = out.title;
                out.pieces
            }
            Strategy::Html => {
                let page = html::extract(text);
                warnings.extend(page.warning.clone());
                let out = markdown::chunk(
                    &page.markdown,
                    &self.config.markdown,
                    kind.is_index_doc,
                    &file_name,
                );
                title = page.title.or(out.title);
                extracted_text = Some(page.markdown);
                out.pieces
            }
            Strategy::Rst => {
                let out = rst::chunk(text, &self.config.markdown, kind.is_index_doc, &file_name);
                title = out.title;
                out.pieces
            }
            Strategy::AsciiDoc => {
                let out =
                    asciidoc::chunk(text, &self.config.markdown, kind.is_index_doc, &file_name);
                title = out.title;
                out.pieces
            }
            Strategy::Text => text::paragraphs(text, &self.config.text, ""),
            Strategy::Lines => text::line_windows(text, &self.config.lines, ""),
        };
        let title = title.unwrap_or(file_name);
        let document_id = DocumentId::new(project, uri);
        let meta = DocumentMeta {
            document_id: &document_id,
            project,
            uri,
            title: &title,
            content_type: kind.content_type,
            language: &kind.language,
            is_index_doc: kind.is_index_doc,
        };
        let chunks = span::assemble(&meta, extracted_text.as_deref().unwrap_or(text), pieces);
        ChunkedDocument {
            document_id,
            kind,
            title,
            chunks,
            warnings,
            extracted_text,
        }
    }

    fn code(&self, language: CodeLanguage, text: &str, warnings: &mut Vec<String>) -> Vec<Piece> {
        if text.len() as u64 > self.config.code.max_parse_bytes {
            warnings.push(format!(
                "{} bytes is over chunking.code.max_parse_bytes ({}); chunked as line windows",
                text.len(),
                self.config.code.max_parse_bytes
            ));
            return text::line_windows(text, &self.config.lines, "");
        }
        match code::chunk(language, text, &self.config.code) {
            code::CodeOutcome::Chunked { pieces, warning } => {
                warnings.extend(warning);
                pieces
            }
            code::CodeOutcome::Unparsable { reason } => {
                warnings.push(format!("{reason}; chunked as line windows"));
                text::line_windows(text, &self.config.lines, "")
            }
        }
    }
}
