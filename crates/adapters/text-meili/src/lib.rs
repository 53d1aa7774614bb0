//! # weft-text-meili
//!
//! The [`TextIndex`] port on a Meilisearch server, through meilisearch-sdk.
//!
//! One index holds the chunks of every project, with the primary key given
//! explicitly (`id`, the chunk's UUID: with `document_id` beside it,
//! inference is ambiguous and documents silently fail to index, DESIGN §8).
//! Each document is the chunk plus `search_text` (path, section and
//! [readable content](Chunk::readable_content): as in the embedded tantivy
//! index), `identifier_words` (camelCase
//! identifiers split into words, searchable after `search_text`) and
//! `path_scopes` (for path-prefix filters). `id`, `project`, `document_id`,
//! `chunk_index`, `content_type`, `language` and `path_scopes` are
//! filterable. Every write waits for its task and surfaces the task's error.

#![warn(missing_docs)]

use std::time::Duration;

use async_trait::async_trait;
use meilisearch_sdk::client::Client;
use meilisearch_sdk::documents::{DocumentDeletionQuery, DocumentsQuery};
use meilisearch_sdk::errors::{Error as MeiliError, ErrorCode, ErrorType, MeilisearchError};
use meilisearch_sdk::indexes::Index;
use meilisearch_sdk::settings::Settings;
use meilisearch_sdk::task_info::TaskInfo;
use meilisearch_sdk::tasks::Task;
use serde::{Deserialize, Serialize};
use weft_core::ports::{ErrorKind, PortError, PortResult, TextIndex};
use weft_core::retrieval::{ScoredChunk, SearchFilter, path_scopes};
use weft_core::{Chunk, ChunkId, DocumentId};

/// Documents per write request.
const WRITE_BATCH: usize = 1000;
/// How long a task may take before the write is reported as failed.
const TASK_TIMEOUT: Duration = Duration::from_secs(300);
const FILTERABLE: [&str; 7] = [
    "id",
    "project",
    "document_id",
    "chunk_index",
    "content_type",
    "language",
    "path_scopes",
];

/// What went wrong with Meilisearch.
#[derive(Debug, thiserror::Error)]
pub enum MeiliIndexError {
    /// A request failed (unreachable, refused, bad key).
    #[error("Meilisearch {what} on index {index}: {message}")]
    Request {
        /// What was asked.
        what: &'static str,
        /// The index.
        index: String,
        /// What kind of failure it is.
        kind: ErrorKind,
        /// What the server or client said.
        message: String,
    },
    /// A task was accepted but failed.
    #[error("Meilisearch task {task} ({what}) on index {index} failed: {message}")]
    Task {
        /// The task uid.
        task: u32,
        /// What it was.
        what: &'static str,
        /// The index.
        index: String,
        /// What kind of failure it is (from Meilisearch's error type and code).
        kind: ErrorKind,
        /// Meilisearch's error message and code.
        message: String,
    },
}

impl MeiliIndexError {
    /// What kind of failure it is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MeiliIndexError::Request { kind, .. } | MeiliIndexError::Task { kind, .. } => *kind,
        }
    }
}

/// The kind of an error Meilisearch answered with: a refused key is
/// `PermissionDenied`, a missing index or document `NotFound`, a full
/// disk `ResourceExhausted`, a request it calls invalid `Invalid`; its
/// internal errors are the server failing: `Unavailable`.
fn kind_of_meili(e: &MeilisearchError) -> ErrorKind {
    match (e.error_type, &e.error_code) {
        (ErrorType::Auth, _) => ErrorKind::PermissionDenied,
        (_, ErrorCode::IndexNotFound | ErrorCode::DocumentNotFound | ErrorCode::TaskNotFound) => {
            ErrorKind::NotFound
        }
        (
            _,
            ErrorCode::DatabaseSizeLimitReached
            | ErrorCode::NoSpaceLeftOnDevice
            | ErrorCode::TooManyOpenFiles,
        ) => ErrorKind::ResourceExhausted,
        (ErrorType::InvalidRequest, _) => ErrorKind::Invalid,
        _ => ErrorKind::Unavailable,
    }
}

/// The kind of an error of the client: the server's answer when there is
/// one (its HTTP status when it sent no error object), a request that
/// could not be made `Invalid`, an answer that does not parse `Internal`;
/// anything else (unreachable, timed out) `Unavailable`.
fn kind_of(e: &MeiliError) -> ErrorKind {
    match e {
        MeiliError::Meilisearch(e) => kind_of_meili(e),
        MeiliError::MeilisearchCommunication(e) => ErrorKind::of_http_status(e.status_code),
        MeiliError::HttpError(e) => e.status().map_or(ErrorKind::Unavailable, |s| {
            ErrorKind::of_http_status(s.as_u16())
        }),
        MeiliError::InvalidRequest | MeiliError::CantUseWithoutApiKey(_) => ErrorKind::Invalid,
        MeiliError::ParseError(_) => ErrorKind::Internal,
        _ => ErrorKind::Unavailable,
    }
}

/// A chunk as stored in Meilisearch.
#[derive(Debug, Serialize, Deserialize)]
struct MeiliChunk {
    id: String,
    search_text: String,
    identifier_words: String,
    path_scopes: Vec<String>,
    #[serde(flatten)]
    chunk: Chunk,
}

/// The words of each camelCase or PascalCase identifier in `text`
/// (`loadValue` → `load Value`), once each: Meilisearch's tokenizer keeps
/// such identifiers whole, and a query in words should still find them
/// (as the embedded tantivy index does, with its identifier tokenizer).
fn identifier_words(text: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut out = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() || !seen.insert(word) {
            continue;
        }
        let split = weft_core::split_camel_case(word);
        if split != word {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&split);
        }
    }
    out
}

impl MeiliChunk {
    fn of(chunk: &Chunk) -> Self {
        let readable = chunk.readable_content();
        Self {
            id: chunk.id().to_string(),
            search_text: format!("{}\n{}\n{readable}", chunk.uri, chunk.section),
            identifier_words: identifier_words(&readable),
            path_scopes: path_scopes(&chunk.uri),
            chunk: chunk.clone(),
        }
    }
}

/// A text index in one Meilisearch index.
#[derive(Clone)]
pub struct MeiliTextIndex {
    client: Client,
    index: Index,
}

/// A filter value in Meilisearch's filter syntax: a double-quoted string.
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

fn any_of(field: &str, values: &[String]) -> String {
    let list: Vec<String> = values.iter().map(|v| quoted(v)).collect();
    format!("{field} IN [{}]", list.join(", "))
}

/// The filter expression of a [`SearchFilter`]; `None` when it selects everything.
pub fn to_filter(filter: &SearchFilter) -> Option<String> {
    let mut parts = Vec::new();
    if !filter.projects.is_empty() {
        parts.push(any_of("project", &filter.projects));
    }
    if !filter.content_types.is_empty() {
        let types: Vec<String> = filter
            .content_types
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect();
        parts.push(any_of("content_type", &types));
    }
    if !filter.languages.is_empty() {
        parts.push(any_of("language", &filter.languages));
    }
    if let Some(scope) = filter.path_scope() {
        parts.push(format!("path_scopes = {}", quoted(scope)));
    }
    (!parts.is_empty()).then(|| parts.join(" AND "))
}

/// How a failed request to the server at `url` about index `uid` is reported.
fn request_error(url: &str, uid: &str) -> impl Fn(&'static str, MeiliError) -> MeiliIndexError {
    let (url, uid) = (url.to_owned(), uid.to_owned());
    move |what, e| MeiliIndexError::Request {
        what,
        index: uid.clone(),
        kind: kind_of(&e),
        message: format!("{e} ({url})"),
    }
}

impl MeiliTextIndex {
    /// A handle on index `uid` of the server at `url`; nothing is asked of
    /// the server yet.
    fn handle(url: &str, key: Option<String>, uid: &str) -> Result<Self, MeiliIndexError> {
        let client = Client::new(url, key).map_err(|e| request_error(url, uid)("connect", e))?;
        Ok(Self {
            index: client.index(uid),
            client,
        })
    }

    /// Connects to `url` and opens index `uid`, creating it (primary key
    /// `id`) when missing, and applies the searchable and filterable
    /// attributes, waiting for every task.
    pub async fn connect(
        url: &str,
        api_key: Option<String>,
        uid: &str,
    ) -> Result<Self, MeiliIndexError> {
        let request = request_error(url, uid);
        let this = Self::handle(url, api_key, uid)?;
        match this.client.get_index(uid).await {
            Ok(existing) => {
                if existing.primary_key.as_deref().is_some_and(|k| k != "id") {
                    return Err(MeiliIndexError::Request {
                        what: "open index",
                        index: uid.to_owned(),
                        kind: ErrorKind::FailedPrecondition,
                        message: format!(
                            "its primary key is {:?}, not \"id\": use another index",
                            existing.primary_key
                        ),
                    });
                }
            }
            Err(MeiliError::Meilisearch(e)) if e.error_code == ErrorCode::IndexNotFound => {
                let task = this
                    .client
                    .create_index(uid, Some("id"))
                    .await
                    .map_err(|e| request("create index", e))?;
                this.wait(task, "create index").await?;
            }
            Err(e) => return Err(request("open index", e)),
        }
        let settings = Settings::new()
            .with_searchable_attributes(["search_text", "identifier_words"])
            .with_filterable_attributes(FILTERABLE);
        let task = this
            .index
            .set_settings(&settings)
            .await
            .map_err(|e| request("set settings", e))?;
        this.wait(task, "set settings").await?;
        Ok(this)
    }

    /// Opens the existing index `uid` for searching only, with a key that
    /// may only search (Meilisearch's `search` action): nothing is created
    /// or changed. One empty search checks that the index exists and that
    /// the key may search it. Writing through it fails with Meilisearch's
    /// refusal.
    pub async fn open_for_search(
        url: &str,
        search_key: Option<String>,
        uid: &str,
    ) -> Result<Self, MeiliIndexError> {
        let request = request_error(url, uid);
        let this = Self::handle(url, search_key, uid)?;
        let probe = this
            .index
            .search()
            .with_query("")
            .with_limit(0)
            .execute::<serde_json::Value>()
            .await;
        match probe {
            Ok(_) => Ok(this),
            Err(MeiliError::Meilisearch(e)) if e.error_code == ErrorCode::IndexNotFound => {
                Err(MeiliIndexError::Request {
                    what: "open index for search",
                    index: uid.to_owned(),
                    kind: ErrorKind::NotFound,
                    message: format!(
                        "it does not exist ({url}); the query side's search-only key cannot create it: index something first"
                    ),
                })
            }
            Err(e) => Err(request("open index for search", e)),
        }
    }

    /// Removes index `uid` of the server at `url` without creating
    /// anything (an index generation no longer served), waiting for the
    /// task: `false` when there was none.
    pub async fn drop_index(
        url: &str,
        api_key: Option<String>,
        uid: &str,
    ) -> Result<bool, MeiliIndexError> {
        let request = request_error(url, uid);
        let this = Self::handle(url, api_key, uid)?;
        match this.client.get_index(uid).await {
            Ok(_) => {}
            Err(MeiliError::Meilisearch(e)) if e.error_code == ErrorCode::IndexNotFound => {
                return Ok(false);
            }
            Err(e) => return Err(request("open index", e)),
        }
        this.delete_index().await?;
        Ok(true)
    }

    /// The index's uid.
    pub fn uid(&self) -> &str {
        &self.index.uid
    }

    /// Deletes the whole index and every document in it (for tests and for
    /// dropping an index generation that is no longer served).
    pub async fn delete_index(&self) -> Result<(), MeiliIndexError> {
        let task = self
            .index
            .clone()
            .delete()
            .await
            .map_err(|e| self.request("delete index", e))?;
        self.wait(task, "delete index").await
    }

    fn request(&self, what: &'static str, error: MeiliError) -> MeiliIndexError {
        MeiliIndexError::Request {
            what,
            index: self.index.uid.clone(),
            kind: kind_of(&error),
            message: error.to_string(),
        }
    }

    /// Waits for `task`; a failed task is an error carrying Meilisearch's message.
    async fn wait(&self, task: TaskInfo, what: &'static str) -> Result<(), MeiliIndexError> {
        let uid = task.task_uid;
        let done = task
            .wait_for_completion(
                &self.client,
                Some(Duration::from_millis(50)),
                Some(TASK_TIMEOUT),
            )
            .await
            .map_err(|e| self.request(what, e))?;
        if let Task::Failed { content } = done {
            return Err(MeiliIndexError::Task {
                task: uid,
                what,
                index: self.index.uid.clone(),
                kind: kind_of_meili(&content.error),
                message: format!(
                    "{} ({:?})",
                    content.error.error_message, content.error.error_code
                ),
            });
        }
        Ok(())
    }

    fn port(&self, error: MeiliIndexError) -> PortError {
        PortError::new(
            error.kind(),
            format!("text index (Meilisearch {})", self.index.uid),
            error,
        )
    }

    async fn delete_where(&self, filter: &str) -> Result<(), MeiliIndexError> {
        let mut query = DocumentDeletionQuery::new(&self.index);
        query.with_filter(filter);
        let task = self
            .index
            .delete_documents_with(&query)
            .await
            .map_err(|e| self.request("delete documents", e))?;
        self.wait(task, "delete documents").await
    }
}

#[async_trait]
impl TextIndex for MeiliTextIndex {
    async fn upsert(&self, chunks: &[Chunk]) -> PortResult<()> {
        for batch in chunks.chunks(WRITE_BATCH) {
            let docs: Vec<MeiliChunk> = batch.iter().map(MeiliChunk::of).collect();
            let task = self
                .index
                .add_or_replace(&docs, Some("id"))
                .await
                .map_err(|e| self.port(self.request("add documents", e)))?;
            self.wait(task, "add documents")
                .await
                .map_err(|e| self.port(e))?;
        }
        Ok(())
    }

    async fn delete_document_from(&self, document: &DocumentId, from_index: u32) -> PortResult<()> {
        let filter = format!(
            "document_id = {} AND chunk_index >= {from_index}",
            quoted(document.as_str())
        );
        self.delete_where(&filter).await.map_err(|e| self.port(e))
    }

    async fn delete_project(&self, project: &str) -> PortResult<()> {
        let filter = format!("project = {}", quoted(project));
        self.delete_where(&filter).await.map_err(|e| self.port(e))
    }

    async fn search(
        &self,
        query: &str,
        filter: &SearchFilter,
        limit: usize,
    ) -> PortResult<Vec<ScoredChunk>> {
        let filter = to_filter(filter);
        let mut search = self.index.search();
        search
            .with_query(query)
            .with_limit(limit)
            .with_show_ranking_score(true);
        if let Some(filter) = &filter {
            search.with_filter(filter);
        }
        let results = search
            .execute::<MeiliChunk>()
            .await
            .map_err(|e| self.port(self.request("search", e)))?;
        Ok(results
            .hits
            .into_iter()
            .map(|hit| ScoredChunk {
                score: hit.ranking_score.unwrap_or(0.0) as f32,
                chunk: hit.result.chunk,
            })
            .collect())
    }

    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        let filter = any_of("id", &list);
        let mut query = DocumentsQuery::new(&self.index);
        query.with_filter(&filter).with_limit(ids.len());
        let found = self
            .index
            .get_documents_with::<MeiliChunk>(&query)
            .await
            .map_err(|e| self.port(self.request("get documents", e)))?;
        Ok(found.results.into_iter().map(|d| d.chunk).collect())
    }

    async fn count(&self) -> PortResult<u64> {
        let stats = self
            .index
            .get_stats()
            .await
            .map_err(|e| self.port(self.request("stats", e)))?;
        Ok(stats.number_of_documents as u64)
    }

    async fn commit(&self) -> PortResult<()> {
        // Every write waited for its task.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::ContentType;

    #[test]
    fn errors_have_the_kind_meilisearch_says() {
        let meili = |error_type, error_code| {
            MeiliError::Meilisearch(MeilisearchError {
                error_message: "m".into(),
                error_code,
                error_type,
                error_link: String::new(),
            })
        };
        assert_eq!(
            kind_of(&meili(ErrorType::InvalidRequest, ErrorCode::IndexNotFound)),
            ErrorKind::NotFound
        );
        assert_eq!(
            kind_of(&meili(ErrorType::Auth, ErrorCode::InvalidApiKey)),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            kind_of(&meili(
                ErrorType::InvalidRequest,
                ErrorCode::InvalidSearchFilter
            )),
            ErrorKind::Invalid
        );
        assert_eq!(
            kind_of(&meili(ErrorType::Internal, ErrorCode::NoSpaceLeftOnDevice)),
            ErrorKind::ResourceExhausted
        );
        assert_eq!(
            kind_of(&meili(ErrorType::Internal, ErrorCode::InternalError)),
            ErrorKind::Unavailable
        );
        let status = |status_code| {
            MeiliError::MeilisearchCommunication(
                meilisearch_sdk::errors::MeilisearchCommunicationError {
                    status_code,
                    message: None,
                    url: "http://m".into(),
                },
            )
        };
        assert_eq!(kind_of(&status(401)), ErrorKind::PermissionDenied);
        assert_eq!(kind_of(&status(502)), ErrorKind::Unavailable);
        assert_eq!(kind_of(&MeiliError::Timeout), ErrorKind::Unavailable);
    }

    #[test]
    fn filters_are_quoted_and_joined() {
        let filter = SearchFilter {
            projects: vec!["a\"b".into(), "c".into()],
            content_types: vec![ContentType::Code],
            languages: vec![],
            path_prefix: Some("src/x/".into()),
        };
        assert_eq!(
            to_filter(&filter).unwrap(),
            r#"project IN ["a\"b", "c"] AND content_type IN ["code"] AND path_scopes = "src/x""#
        );
        assert_eq!(to_filter(&SearchFilter::default()), None);
    }

    #[test]
    fn identifiers_are_split_into_words_once() {
        assert_eq!(
            identifier_words("String loadValue(key) { loadValue(k); HTTPServer plain_words }"),
            "load Value\nHTTP Server"
        );
        assert_eq!(identifier_words("no identifiers here"), "");
    }
}
