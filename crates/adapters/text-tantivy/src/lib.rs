//! # weft-text-tantivy
//!
//! The embedded text index: chunks in a [tantivy] index in a directory,
//! searched with BM25 over one field holding each chunk's path, section and
//! content (and, for code, its symbol path and declaration once more, at
//! [`SYMBOL_BOOST`]), using a code-aware tokenizer ([`CodeTokenizer`])
//! followed by English stemming, with the filters of [`SearchFilter`] and get-by-ids for
//! neighbour fetches.
//!
//! The index records its [`TEXT_FORMAT`] (how its terms were made) in a file
//! beside tantivy's; opening one in another format is
//! [`TextIndexError::OtherFormat`], since its terms would not match the
//! queries. The embedded data directory then rebuilds it from its chunks.
//!
//! ```no_run
//! # fn main() -> Result<(), weft_text_tantivy::TextIndexError> {
//! use weft_core::retrieval::SearchFilter;
//! use weft_text_tantivy::TantivyTextIndex;
//! # let chunks: Vec<weft_core::Chunk> = Vec::new();
//! let index = TantivyTextIndex::open_or_create(std::path::Path::new("data/text"))?;
//! index.upsert(&chunks)?;
//! index.commit()?;
//! let hits = index.search("rate limiter refill", &SearchFilter::default(), 10)?;
//! # Ok(()) }
//! ```
//!
//! [tantivy]: https://github.com/quickwit-oss/tantivy

#![warn(missing_docs)]

mod tokenizer;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, RangeQuery, TermQuery, TermSetQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing,
    TextOptions, Value,
};
use tantivy::tokenizer::{Language, Stemmer, TextAnalyzer, TokenStream, Tokenizer};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};
use weft_core::ports::{ErrorKind, PortError, PortResult, TextIndex};
use weft_core::retrieval::{ScoredChunk, SearchFilter};
use weft_core::{Chunk, ChunkId, ContentType, DocumentId};

pub use tokenizer::{CODE_TOKENIZER, CodeTokenizer};

/// The version of what the index's terms are: bump it whenever the analyzer
/// ([`CodeTokenizer`] and its filters) or the searched fields change, since
/// an index whose terms were made one way cannot be searched with queries
/// made another way.
///
/// 1: [`CodeTokenizer`] alone. 2: then English stemming. 3: code chunks'
/// symbol paths and declaration lines in a field of their own. 4: the
/// readable content ([`weft_core::Chunk::readable_content`]): no HTML
/// comments from markdown.
pub const TEXT_FORMAT: u32 = 4;

/// The file in the index directory that records its [`TEXT_FORMAT`]. An
/// index without it was written before formats were recorded: format 1.
const FORMAT_FILE: &str = "weft-text-format";

/// tantivy's writer lock file in an index directory (one writer at a time).
const WRITER_LOCK_FILE: &str = ".tantivy-writer.lock";

/// Memory for tantivy's indexing buffer.
const WRITER_HEAP_BYTES: usize = 64 * 1024 * 1024;

/// What went wrong with the text index.
#[derive(Debug, thiserror::Error)]
pub enum TextIndexError {
    /// The directory holds no readable index of this schema.
    #[error(
        "text index in {dir} cannot be opened ({source}); remove that directory and index again"
    )]
    Unreadable {
        /// The index directory.
        dir: PathBuf,
        /// What tantivy said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The index was written in another [`TEXT_FORMAT`]: its terms do not
    /// match what queries are analysed into. Rebuild it from the chunks
    /// (the embedded data directory does so from its vector store).
    #[error(
        "text index in {dir} is in text format {found}, this weft reads format {expected}; \
         it must be rebuilt from the indexed chunks"
    )]
    OtherFormat {
        /// The index directory.
        dir: PathBuf,
        /// The format recorded there.
        found: u32,
        /// [`TEXT_FORMAT`].
        expected: u32,
    },
    /// A read or write failed.
    #[error("text index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// A stored chunk could not be written or read back as JSON.
    #[error("text index: stored chunk is corrupt")]
    CorruptChunk(#[source] serde_json::Error),
    /// A stored document has no chunk payload.
    #[error("text index: a stored document has no chunk payload")]
    MissingPayload,
    /// A write to an index opened for reading only.
    #[error("text index: opened for reading only")]
    ReadOnly,
    /// Another writer holds the index's writer lock: a live process, not a
    /// damaged index.
    #[error(
        "text index in {dir} {}",
        weft_file_locks::written_elsewhere(holder.as_ref())
    )]
    Locked {
        /// The index directory.
        dir: PathBuf,
        /// The process holding the lock, when it can be seen.
        holder: Option<weft_file_locks::LockHolder>,
    },
}

impl TextIndexError {
    /// What kind of failure it is: a directory that does not read as an
    /// index, or a stored chunk that does not decode, `Internal`; an index
    /// of another format, or a write to a read-only one,
    /// `FailedPrecondition`; tantivy's own errors by what they say (I/O
    /// `Unavailable`, corrupt data `Internal`).
    pub fn kind(&self) -> ErrorKind {
        match self {
            TextIndexError::Unreadable { .. }
            | TextIndexError::CorruptChunk(_)
            | TextIndexError::MissingPayload => ErrorKind::Internal,
            TextIndexError::OtherFormat { .. } | TextIndexError::ReadOnly => {
                ErrorKind::FailedPrecondition
            }
            TextIndexError::Locked { .. } => ErrorKind::Unavailable,
            TextIndexError::Tantivy(e) => kind_of_tantivy(e),
        }
    }
}

/// The kind of a tantivy error: I/O, a directory that cannot be opened or
/// a lock held by another writer `Unavailable` (a full disk
/// `ResourceExhausted`); corrupt or incompatible data `Internal`; an
/// invalid argument `Invalid`; anything else (a poisoned lock, a panicked
/// thread) `Internal`.
fn kind_of_tantivy(e: &tantivy::TantivyError) -> ErrorKind {
    use tantivy::TantivyError as T;
    match e {
        T::IoError(e) => match ErrorKind::of_io(e.kind()) {
            ErrorKind::ResourceExhausted => ErrorKind::ResourceExhausted,
            _ => ErrorKind::Unavailable,
        },
        T::OpenDirectoryError(_)
        | T::OpenReadError(_)
        | T::OpenWriteError(_)
        | T::LockFailure(..)
        | T::SystemError(_) => ErrorKind::Unavailable,
        T::InvalidArgument(_) => ErrorKind::Invalid,
        _ => ErrorKind::Internal,
    }
}

#[derive(Clone, Copy)]
struct Fields {
    id: Field,
    document_id: Field,
    chunk_index: Field,
    project: Field,
    content_type: Field,
    language: Field,
    uri: Field,
    uri_text: Field,
    section: Field,
    symbol: Field,
    content: Field,
    payload: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(CODE_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        id: b.add_text_field("id", STRING | STORED),
        document_id: b.add_text_field("document_id", STRING),
        chunk_index: b.add_u64_field("chunk_index", INDEXED | FAST),
        project: b.add_text_field("project", STRING),
        content_type: b.add_text_field("content_type", STRING),
        language: b.add_text_field("language", STRING),
        uri: b.add_text_field("uri", STRING),
        uri_text: b.add_text_field("uri_text", text.clone()),
        section: b.add_text_field("section", text.clone()),
        symbol: b.add_text_field("symbol", text.clone()),
        content: b.add_text_field("content", text),
        payload: b.add_text_field("payload", STORED),
    };
    (b.build(), fields)
}

/// Words dropped from text queries: English function words that match
/// nearly every comment and say nothing about the code. Only queries lose
/// them; the index keeps every token.
pub const QUERY_STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "if", "in", "is", "it", "of",
    "on", "or", "that", "the", "this", "to", "with",
];

/// The weight of a query word found in a code chunk's symbol path or
/// declaration line, on top of its BM25 weight in the text. Measured with
/// `eval-sweep` on guava (hard variant, nDCG@10 of hybrid search; symbol
/// path alone): 0.15 → 0.567, 0.3 → 0.571, 0.5 → 0.572, 1.0 → 0.563, none
/// 0.560; with the declaration line, 0.3 → 0.573, 0.5 → 0.576, 0.8 → 0.574
/// (bench/RESULTS.md).
pub const SYMBOL_BOOST: f32 = 0.5;

/// What a code chunk's `symbol` field holds: its symbol path and the line
/// that declares its definition (the first line naming it: its signature,
/// parameter and return types), when it has one.
fn symbol_text(chunk: &Chunk) -> String {
    let declaration = chunk
        .node_name
        .as_deref()
        .filter(|name| !name.is_empty())
        .and_then(|name| chunk.content.lines().find(|line| line.contains(name)));
    match declaration {
        Some(line) => format!("{}\n{}", chunk.section, line.trim()),
        None => chunk.section.clone(),
    }
}

/// The analyzer of every text field and of queries: [`CodeTokenizer`], then
/// English stemming, so "removes" and "removeAllListeners" share `remov`.
fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(CodeTokenizer::default())
        .filter(Stemmer::new(Language::English))
        .build()
}

/// A tantivy text index of chunks in one directory.
#[derive(Clone)]
pub struct TantivyTextIndex {
    reader: IndexReader,
    /// `None`: opened read-only ([`TantivyTextIndex::open_read_only`]).
    writer: Option<Arc<Mutex<IndexWriter>>>,
    fields: Fields,
}

impl TantivyTextIndex {
    /// The [`TEXT_FORMAT`] of the index in `dir`, or `None` when there is
    /// no index there.
    pub fn format_in(dir: &Path) -> Result<Option<u32>, TextIndexError> {
        let unreadable = |message: String| TextIndexError::Unreadable {
            dir: dir.to_owned(),
            source: message.into(),
        };
        if !dir.join("meta.json").exists() {
            return Ok(None);
        }
        let path = dir.join(FORMAT_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse().map(Some).map_err(|_| {
                unreadable(format!(
                    "{} holds {:?}, not a format number",
                    path.display(),
                    text.trim()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(1)),
            Err(e) => Err(unreadable(format!("{}: {e}", path.display()))),
        }
    }

    /// Whether `dir` holds an index of this [`TEXT_FORMAT`]: `false` when it
    /// holds none, [`TextIndexError::OtherFormat`] for another format.
    fn has_this_format(dir: &Path) -> Result<bool, TextIndexError> {
        match Self::format_in(dir)? {
            Some(found) if found != TEXT_FORMAT => Err(TextIndexError::OtherFormat {
                dir: dir.to_owned(),
                found,
                expected: TEXT_FORMAT,
            }),
            Some(_) => Ok(true),
            None => Ok(false),
        }
    }

    /// Opens the index in `dir`, creating it (and the directory) if absent.
    /// An index in another [`TEXT_FORMAT`] is
    /// [`TextIndexError::OtherFormat`].
    pub fn open_or_create(dir: &Path) -> Result<Self, TextIndexError> {
        let unreadable = |e: &dyn std::fmt::Display| TextIndexError::Unreadable {
            dir: dir.to_owned(),
            source: e.to_string().into(),
        };
        if !Self::has_this_format(dir)? {
            std::fs::create_dir_all(dir).map_err(|e| unreadable(&e))?;
            std::fs::write(dir.join(FORMAT_FILE), format!("{TEXT_FORMAT}\n"))
                .map_err(|e| unreadable(&e))?;
        }
        let (schema, fields) = schema();
        let directory = tantivy::directory::MmapDirectory::open(dir).map_err(|e| unreadable(&e))?;
        let index = Index::open_or_create(directory, schema).map_err(|e| unreadable(&e))?;
        index.tokenizers().register(CODE_TOKENIZER, analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| unreadable(&e))?;
        let writer = index.writer(WRITER_HEAP_BYTES).map_err(|e| match e {
            tantivy::TantivyError::LockFailure(
                tantivy::directory::error::LockError::LockBusy,
                _,
            ) => TextIndexError::Locked {
                dir: dir.to_owned(),
                holder: weft_file_locks::holder_of(&dir.join(WRITER_LOCK_FILE)),
            },
            other => unreadable(&other),
        })?;
        Ok(TantivyTextIndex {
            reader,
            writer: Some(Arc::new(Mutex::new(writer))),
            fields,
        })
    }

    /// Opens the index in `dir` for searching only: no writer, so any
    /// number of processes read it at once (and a writer elsewhere is not
    /// blocked). Writes fail with [`TextIndexError::ReadOnly`]. An index in
    /// another [`TEXT_FORMAT`], or none, is an error.
    pub fn open_read_only(dir: &Path) -> Result<Self, TextIndexError> {
        let unreadable = |e: &dyn std::fmt::Display| TextIndexError::Unreadable {
            dir: dir.to_owned(),
            source: e.to_string().into(),
        };
        if !Self::has_this_format(dir)? {
            return Err(unreadable(&"no text index here"));
        }
        let directory = tantivy::directory::MmapDirectory::open(dir).map_err(|e| unreadable(&e))?;
        let index = Index::open(directory).map_err(|e| unreadable(&e))?;
        index.tokenizers().register(CODE_TOKENIZER, analyzer());
        let (_, fields) = schema();
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| unreadable(&e))?;
        Ok(TantivyTextIndex {
            reader,
            writer: None,
            fields,
        })
    }

    fn writer(&self) -> Result<std::sync::MutexGuard<'_, IndexWriter>, TextIndexError> {
        // A panic while holding the lock leaves the writer usable: tantivy
        // discards uncommitted operations on the next commit or rollback.
        Ok(self
            .writer
            .as_ref()
            .ok_or(TextIndexError::ReadOnly)?
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Adds or replaces chunks (by id). Visible after [`Self::commit`].
    pub fn upsert(&self, chunks: &[Chunk]) -> Result<(), TextIndexError> {
        let f = self.fields;
        let writer = self.writer()?;
        for c in chunks {
            let id = c.id().to_string();
            writer.delete_term(Term::from_field_text(f.id, &id));
            let mut doc = TantivyDocument::default();
            doc.add_text(f.id, &id);
            doc.add_text(f.document_id, c.document_id.as_str());
            doc.add_u64(f.chunk_index, u64::from(c.chunk_index));
            doc.add_text(f.project, &c.project);
            doc.add_text(f.content_type, c.content_type.as_str());
            doc.add_text(f.language, &c.language);
            doc.add_text(f.uri, &c.uri);
            doc.add_text(f.uri_text, &c.uri);
            doc.add_text(f.section, &c.section);
            if c.content_type == ContentType::Code {
                doc.add_text(f.symbol, symbol_text(c));
            }
            // One searched field: a word in the path or the heading counts
            // like a word of the text, under one length normalisation.
            // (Separately boosted short fields let a path or breadcrumb word
            // outscore the text: measured with `eval-sweep`, nDCG@10 of text
            // search on guava 0.34 → 0.44, on the Node.js docs 0.47 → 0.60.)
            doc.add_text(
                f.content,
                format!("{}\n{}\n{}", c.uri, c.section, c.readable_content()),
            );
            let payload = serde_json::to_string(c).map_err(TextIndexError::CorruptChunk)?;
            doc.add_text(f.payload, &payload);
            writer.add_document(doc)?;
        }
        Ok(())
    }

    /// Deletes the chunks of `document` from index `from` on: a changed
    /// document's surplus chunks (`from` = its new chunk count), or the whole
    /// document (`from` = 0). Visible after [`Self::commit`].
    pub fn delete_document_from(
        &self,
        document: &DocumentId,
        from: u32,
    ) -> Result<(), TextIndexError> {
        let f = self.fields;
        let doc_term: Box<dyn Query> = Box::new(TermQuery::new(
            Term::from_field_text(f.document_id, document.as_str()),
            IndexRecordOption::Basic,
        ));
        let range: Box<dyn Query> = Box::new(RangeQuery::new(
            Bound::Included(Term::from_field_u64(f.chunk_index, u64::from(from))),
            Bound::Unbounded,
        ));
        self.writer()?
            .delete_query(Box::new(BooleanQuery::new(vec![
                (Occur::Must, doc_term),
                (Occur::Must, range),
            ])))?;
        Ok(())
    }

    /// Deletes every chunk of `project`. Visible after [`Self::commit`].
    pub fn delete_project(&self, project: &str) -> Result<(), TextIndexError> {
        self.writer()?
            .delete_term(Term::from_field_text(self.fields.project, project));
        Ok(())
    }

    /// Makes every change so far durable and visible to searches.
    pub fn commit(&self) -> Result<(), TextIndexError> {
        if self.writer.is_some() {
            self.writer()?.commit()?;
        }
        self.reader.reload()?;
        Ok(())
    }

    /// The best `limit` chunks for `query` (BM25 over content, section and
    /// path, plus [`SYMBOL_BOOST`] for words of a code chunk's symbol path
    /// and declaration) that pass `filter`, best first. The query is words, not a query
    /// language: every term the code tokenizer finds in it counts, stemmed
    /// as the indexed text was, except English function words
    /// ([`QUERY_STOP_WORDS`]).
    pub fn search(
        &self,
        query: &str,
        filter: &SearchFilter,
        limit: usize,
    ) -> Result<Vec<ScoredChunk>, TextIndexError> {
        let f = self.fields;
        let mut terms: Vec<String> = Vec::new();
        let mut tokenizer = CodeTokenizer::default();
        let mut stemmer = analyzer();
        let mut stream = tokenizer.token_stream(query);
        while stream.advance() {
            let text = &stream.token().text;
            if QUERY_STOP_WORDS.contains(&text.as_str()) {
                continue;
            }
            let mut stemmed = stemmer.token_stream(text);
            while stemmed.advance() {
                let term = &stemmed.token().text;
                if !terms.contains(term) {
                    terms.push(term.clone());
                }
            }
        }
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let mut words: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|term| {
                let query: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(f.content, term),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, query)
            })
            .collect();
        // In code, a word of the symbol path (`ByteStreams.createBuffer`) or
        // the declaration counts once more, at SYMBOL_BOOST: the name and
        // the signature say what the code is for. Not in prose, where the
        // section is a breadcrumb of headings.
        for term in &terms {
            let in_symbol: Box<dyn Query> = Box::new(BoostQuery::new(
                Box::new(TermQuery::new(
                    Term::from_field_text(f.symbol, term),
                    IndexRecordOption::WithFreqs,
                )),
                SYMBOL_BOOST,
            ));
            words.push((Occur::Should, in_symbol));
        }
        let searcher = self.reader.searcher();
        let filters = self.filter_clauses(&searcher, filter)?;
        // Words alone are a disjunction of term queries, which tantivy
        // searches with block-max WAND: it skips the blocks of a long
        // posting list that cannot reach the top `limit`. Under a filter it
        // scores every chunk that holds a word, several times slower on a
        // large index, so filters every chunk passes are left out.
        let query: Box<dyn Query> = if filters.is_empty() {
            Box::new(BooleanQuery::new(words))
        } else {
            let mut clauses: Vec<(Occur, Box<dyn Query>)> =
                vec![(Occur::Must, Box::new(BooleanQuery::new(words)))];
            clauses.extend(filters.into_iter().map(|q| (Occur::Must, q)));
            Box::new(BooleanQuery::new(clauses))
        };
        let top = searcher.search(
            query.as_ref(),
            &TopDocs::with_limit(limit.max(1)).order_by_score(),
        )?;
        top.into_iter()
            .map(|(score, address)| {
                Ok(ScoredChunk {
                    chunk: self.chunk_at(&searcher, address)?,
                    score,
                })
            })
            .collect()
    }

    /// The chunks with these ids that exist, in no particular order: one
    /// lookup whatever their number.
    pub fn get(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>, TextIndexError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let f = self.fields;
        let query = TermSetQuery::new(
            ids.iter()
                .map(|id| Term::from_field_text(f.id, &id.to_string())),
        );
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(ids.len()).order_by_score())?;
        top.into_iter()
            .map(|(_, address)| self.chunk_at(&searcher, address))
            .collect()
    }

    /// How many chunks are indexed (as of the last commit).
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Whether no chunk is indexed (as of the last commit).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queries a chunk must match to pass `filter`, leaving out those
    /// every chunk of the index matches (one project, or every language).
    fn filter_clauses(
        &self,
        searcher: &tantivy::Searcher,
        filter: &SearchFilter,
    ) -> Result<Vec<Box<dyn Query>>, TextIndexError> {
        let f = self.fields;
        // Every chunk holds exactly one project, content type and language,
        // so a set of distinct values that together occur in as many
        // documents as the index holds (deleted ones included, on both
        // sides) lets every chunk through.
        let stored: u64 = searcher
            .segment_readers()
            .iter()
            .map(|s| u64::from(s.max_doc()))
            .sum();
        let any_of = |field: Field, values: Vec<&str>| -> tantivy::Result<Option<Box<dyn Query>>> {
            if values.is_empty() {
                return Ok(None);
            }
            let mut terms: Vec<Term> = values
                .into_iter()
                .map(|v| Term::from_field_text(field, v))
                .collect();
            terms.sort();
            terms.dedup();
            let mut holding = 0u64;
            for term in &terms {
                holding += searcher.doc_freq(term)?;
            }
            if holding >= stored {
                return Ok(None);
            }
            Ok(Some(Box::new(TermSetQuery::new(terms)) as Box<dyn Query>))
        };
        let mut out: Vec<Box<dyn Query>> = Vec::new();
        out.extend(any_of(
            f.project,
            filter.projects.iter().map(String::as_str).collect(),
        )?);
        out.extend(any_of(
            f.content_type,
            filter.content_types.iter().map(|t| t.as_str()).collect(),
        )?);
        out.extend(any_of(
            f.language,
            filter.languages.iter().map(String::as_str).collect(),
        )?);
        if let Some(scope) = filter.path_scope() {
            let exact: Box<dyn Query> = Box::new(TermQuery::new(
                Term::from_field_text(f.uri, scope),
                IndexRecordOption::Basic,
            ));
            let below: Box<dyn Query> = Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_text(f.uri, &format!("{scope}/"))),
                Bound::Excluded(Term::from_field_text(f.uri, &format!("{scope}/\u{10ffff}"))),
            ));
            out.push(Box::new(BooleanQuery::new(vec![
                (Occur::Should, exact),
                (Occur::Should, below),
            ])));
        }
        Ok(out)
    }

    fn chunk_at(
        &self,
        searcher: &tantivy::Searcher,
        address: tantivy::DocAddress,
    ) -> Result<Chunk, TextIndexError> {
        let doc: TantivyDocument = searcher.doc(address)?;
        let payload = doc
            .get_first(self.fields.payload)
            .and_then(|v| v.as_str())
            .ok_or(TextIndexError::MissingPayload)?;
        serde_json::from_str(payload).map_err(TextIndexError::CorruptChunk)
    }
}

const COMPONENT: &str = "text index (tantivy)";

async fn blocking<T: Send + 'static>(
    index: &TantivyTextIndex,
    f: impl FnOnce(&TantivyTextIndex) -> Result<T, TextIndexError> + Send + 'static,
) -> PortResult<T> {
    let index = index.clone();
    tokio::task::spawn_blocking(move || f(&index))
        .await
        // The thread panicked.
        .map_err(|e| PortError::internal(COMPONENT, e))?
        .map_err(|e| PortError::new(e.kind(), COMPONENT, e))
}

/// The text index port over [`TantivyTextIndex`]: each call runs on tokio's
/// blocking pool.
#[async_trait::async_trait]
impl TextIndex for TantivyTextIndex {
    async fn upsert(&self, chunks: &[Chunk]) -> PortResult<()> {
        let chunks = chunks.to_vec();
        blocking(self, move |i| i.upsert(&chunks)).await
    }
    async fn delete_document_from(&self, document: &DocumentId, from_index: u32) -> PortResult<()> {
        let document = document.clone();
        blocking(self, move |i| i.delete_document_from(&document, from_index)).await
    }
    async fn delete_project(&self, project: &str) -> PortResult<()> {
        let project = project.to_owned();
        blocking(self, move |i| i.delete_project(&project)).await
    }
    async fn search(
        &self,
        query: &str,
        filter: &SearchFilter,
        limit: usize,
    ) -> PortResult<Vec<ScoredChunk>> {
        let (query, filter) = (query.to_owned(), filter.clone());
        blocking(self, move |i| i.search(&query, &filter, limit)).await
    }
    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>> {
        let ids = ids.to_vec();
        blocking(self, move |i| i.get(&ids)).await
    }
    async fn count(&self) -> PortResult<u64> {
        Ok(self.len())
    }
    async fn commit(&self) -> PortResult<()> {
        blocking(self, |i| i.commit()).await
    }
}
