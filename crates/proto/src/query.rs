//! Conversions of the query API (`weft/v1/query.proto`) to and from the
//! query types of `weft-core`.

use weft_core::ContentType;
use weft_core::query::{SearchMode, SearchRequest, SearchResponse};
use weft_core::retrieval::{
    AdjacencyConfig, Component, ContextPack, DocumentResult, PackOptions, PackedSpan, Reference,
    ResultChunk, SearchFilter, Span,
};
use weft_core::{Chunk, DocumentId};

use crate::{ConversionError, v1};

/// The hits a request gets when it leaves `limit` at 0.
pub const DEFAULT_LIMIT: u32 = 10;
/// The most hits one request may ask for, unless `query.max_limit` says otherwise.
pub const MAX_LIMIT: u32 = 100;
/// The longest query text, in characters, unless `query.max_query_chars`
/// says otherwise.
pub const MAX_QUERY_CHARS: usize = 4096;
/// The largest token budget one request may pack into.
pub const MAX_PACK_TOKENS: u32 = 1_000_000;
/// The most values one filter (`projects`, `languages`) may list.
pub const MAX_FILTER_VALUES: usize = 100;
/// The longest value in a filter list, in characters.
pub const MAX_FILTER_VALUE_CHARS: usize = 256;
/// The longest `path_prefix`, in bytes (a document uri's limit).
pub const MAX_PATH_PREFIX_BYTES: usize = weft_core::MAX_URI_BYTES;
/// The widest neighbour window a request may ask for, on each side.
pub const MAX_WINDOW: u32 = 100;
/// The most chunks a request may ask to get back (`expansion.max_chunks`).
pub const MAX_RESPONSE_CHUNKS: u32 = 1000;

/// What one search request may ask for: the query API's bounds. The first
/// two are settings (`query.max_query_chars`, `query.max_limit`); the rest
/// are the constants above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBounds {
    /// The longest query text, in characters.
    pub max_query_chars: usize,
    /// The most hits (`limit`, and `expansion.expand_hits`).
    pub max_limit: u32,
}

impl Default for RequestBounds {
    fn default() -> Self {
        Self {
            max_query_chars: MAX_QUERY_CHARS,
            max_limit: MAX_LIMIT,
        }
    }
}

fn invalid(field: &'static str, problem: impl Into<String>) -> ConversionError {
    ConversionError {
        message: "weft.v1.SearchRequest",
        field,
        problem: problem.into(),
    }
}

/// The domain form of a wire content type, naming the field when it is not
/// one of the three.
pub fn content_type(value: i32, field: &'static str) -> Result<ContentType, ConversionError> {
    match v1::ContentType::try_from(value) {
        Ok(v1::ContentType::Prose) => Ok(ContentType::Prose),
        Ok(v1::ContentType::Code) => Ok(ContentType::Code),
        Ok(v1::ContentType::ApiReference) => Ok(ContentType::ApiReference),
        Ok(v1::ContentType::Unspecified) | Err(_) => Err(ConversionError {
            message: "weft.v1.ContentType",
            field,
            problem: format!("{value} is not prose, code or api_reference"),
        }),
    }
}

/// Checks one value of a filter list: not empty, not too long, no control
/// characters.
fn filter_values(values: &[String], field: &'static str) -> Result<(), ConversionError> {
    if values.len() > MAX_FILTER_VALUES {
        return Err(invalid(
            field,
            format!(
                "{} values is over the maximum {MAX_FILTER_VALUES}",
                values.len()
            ),
        ));
    }
    for (i, value) in values.iter().enumerate() {
        let chars = value.chars().count();
        let problem = if value.trim().is_empty() {
            Some("is empty".to_owned())
        } else if chars > MAX_FILTER_VALUE_CHARS {
            Some(format!(
                "is {chars} characters long, over the maximum {MAX_FILTER_VALUE_CHARS}"
            ))
        } else {
            weft_core::control_character(value)
        };
        if let Some(problem) = problem {
            return Err(invalid(field, format!("value {i} {problem}")));
        }
    }
    Ok(())
}

/// Checks a path prefix: relative, whole path components, no control
/// characters — the shape of a document uri, which it is compared with.
fn path_prefix(prefix: &str) -> Result<Option<String>, ConversionError> {
    if prefix.trim().is_empty() {
        return Ok(None);
    }
    if prefix.len() > MAX_PATH_PREFIX_BYTES {
        return Err(invalid(
            "path_prefix",
            format!(
                "is {} bytes long, over the maximum {MAX_PATH_PREFIX_BYTES}",
                prefix.len()
            ),
        ));
    }
    // A prefix may end in `/` ("src/"); the rest must be a valid uri.
    let scope = prefix.trim_end_matches('/');
    let problem = if scope.is_empty() {
        Some(format!(
            "{prefix:?} is the root: leave path_prefix empty for everything"
        ))
    } else {
        weft_core::uri_problem(scope)
    };
    match problem {
        Some(problem) => Err(invalid("path_prefix", problem)),
        None => Ok(Some(prefix.to_owned())),
    }
}

/// Checks one expansion override against `max`.
fn bounded(value: u32, field: &'static str, max: u32) -> Result<u32, ConversionError> {
    if value > max {
        Err(invalid(field, format!("{value} is over the maximum {max}")))
    } else {
        Ok(value)
    }
}

/// The wire form of a domain search request: what a client of the query
/// service sends for it, and what [`search_request`] checks and turns back.
/// Expansion overrides are sent as the fields a request may set.
impl From<&SearchRequest> for v1::SearchRequest {
    fn from(request: &SearchRequest) -> Self {
        let saturate = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        v1::SearchRequest {
            query: request.query.clone(),
            projects: request.filter.projects.clone(),
            content_types: request
                .filter
                .content_types
                .iter()
                .map(|&t| v1::ContentType::from(t) as i32)
                .collect(),
            languages: request.filter.languages.clone(),
            path_prefix: request.filter.path_prefix.clone().unwrap_or_default(),
            mode: match request.mode {
                SearchMode::Hybrid => v1::SearchMode::Hybrid,
                SearchMode::Vector => v1::SearchMode::Vector,
                SearchMode::Text => v1::SearchMode::Text,
            } as i32,
            limit: saturate(request.limit),
            expand: Some(request.expand),
            expansion: request.adjacency.as_ref().map(|a| v1::Expansion {
                expand_hits: Some(saturate(a.expand_hits)),
                prose_window: Some(a.prose_window),
                code_window: Some(a.code_window),
                api_reference_window: Some(a.api_reference_window),
                whole_units: Some(a.whole_units),
                max_chunks: Some(saturate(a.max_chunks)),
            }),
            rerank: request.rerank,
            explain: false,
            max_tokens: request.max_tokens.map(saturate),
        }
    }
}

/// Turns a wire search request into a domain one; unset expansion fields
/// take their values from `adjacency` (the server's configuration). Every
/// field is checked against `bounds` and the constants of this module; a
/// field out of bounds is named in the error.
pub fn search_request(
    request: v1::SearchRequest,
    adjacency: &AdjacencyConfig,
    bounds: &RequestBounds,
) -> Result<SearchRequest, ConversionError> {
    if request.query.trim().is_empty() {
        return Err(invalid("query", "is empty"));
    }
    // Counting stops past the bound: a 16 MB query is not walked whole.
    let chars = request
        .query
        .chars()
        .take(bounds.max_query_chars.saturating_add(1))
        .count();
    if chars > bounds.max_query_chars {
        return Err(invalid(
            "query",
            format!(
                "is longer than {} characters (query.max_query_chars)",
                bounds.max_query_chars
            ),
        ));
    }
    if let Some(problem) = request
        .query
        .char_indices()
        .find(|(_, c)| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        .map(|(i, c)| {
            format!(
                "holds a control character (U+{:04X}) at byte {i}",
                u32::from(c)
            )
        })
    {
        return Err(invalid("query", problem));
    }
    let limit = match request.limit {
        0 => DEFAULT_LIMIT.min(bounds.max_limit),
        n if n > bounds.max_limit => {
            return Err(invalid(
                "limit",
                format!(
                    "{n} is over the maximum {} (query.max_limit)",
                    bounds.max_limit
                ),
            ));
        }
        n => n,
    };
    filter_values(&request.projects, "projects")?;
    filter_values(&request.languages, "languages")?;
    let path_prefix = path_prefix(&request.path_prefix)?;
    let mode = match v1::SearchMode::try_from(request.mode) {
        Ok(v1::SearchMode::Unspecified | v1::SearchMode::Hybrid) => SearchMode::Hybrid,
        Ok(v1::SearchMode::Vector) => SearchMode::Vector,
        Ok(v1::SearchMode::Text) => SearchMode::Text,
        Err(_) => {
            return Err(invalid(
                "mode",
                format!("{} is not a search mode", request.mode),
            ));
        }
    };
    let content_types = request
        .content_types
        .iter()
        .map(|&t| content_type(t, "content_types"))
        .collect::<Result<Vec<_>, _>>()?;
    let override_adjacency = match request.expansion {
        None => None,
        Some(e) => {
            let mut a = adjacency.clone();
            if let Some(v) = e.expand_hits {
                a.expand_hits = bounded(v, "expansion.expand_hits", bounds.max_limit)? as usize;
            }
            if let Some(v) = e.prose_window {
                a.prose_window = bounded(v, "expansion.prose_window", MAX_WINDOW)?;
            }
            if let Some(v) = e.code_window {
                a.code_window = bounded(v, "expansion.code_window", MAX_WINDOW)?;
            }
            if let Some(v) = e.api_reference_window {
                a.api_reference_window = bounded(v, "expansion.api_reference_window", MAX_WINDOW)?;
            }
            if let Some(v) = e.whole_units {
                a.whole_units = v;
            }
            if let Some(v) = e.max_chunks {
                if v == 0 {
                    return Err(invalid("expansion.max_chunks", "must be at least 1"));
                }
                a.max_chunks = bounded(v, "expansion.max_chunks", MAX_RESPONSE_CHUNKS)? as usize;
            }
            Some(a)
        }
    };
    Ok(SearchRequest {
        query: request.query,
        filter: SearchFilter {
            projects: request.projects,
            content_types,
            languages: request.languages,
            path_prefix,
        },
        limit: limit as usize,
        mode,
        expand: request.expand.unwrap_or(true),
        adjacency: override_adjacency,
        rerank: request.rerank,
        max_tokens: request.max_tokens.map(|n| n as usize),
    })
}

/// The packing a request asks for: `None` when `max_tokens` is unset.
pub fn pack_options(request: &v1::SearchRequest) -> Result<Option<PackOptions>, ConversionError> {
    match request.max_tokens {
        None => Ok(None),
        Some(0) => Err(invalid("max_tokens", "must be at least 1")),
        Some(n) if n > MAX_PACK_TOKENS => Err(invalid(
            "max_tokens",
            format!("{n} is over the maximum {MAX_PACK_TOKENS}"),
        )),
        Some(n) => Ok(Some(PackOptions {
            max_tokens: n as usize,
        })),
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl From<ContextPack> for v1::ContextPack {
    fn from(pack: ContextPack) -> Self {
        let markdown = pack.to_markdown();
        v1::ContextPack {
            max_tokens: saturating_u32(pack.max_tokens),
            used_tokens: saturating_u32(pack.used_tokens),
            tokenizer: pack.tokenizer,
            markdown,
            spans: pack
                .spans
                .into_iter()
                .map(|s| v1::PackedSpan {
                    citation: s.citation,
                    project: s.project,
                    revision: s.revision,
                    document_id: s.document_id,
                    uri: s.uri,
                    title: s.title,
                    section: s.section,
                    symbol: s.symbol,
                    language: s.language,
                    content_type: v1::ContentType::from(s.content_type) as i32,
                    start_line: s.start_line,
                    end_line: s.end_line,
                    first_chunk: s.first_chunk,
                    last_chunk: s.last_chunk,
                    score: s.score,
                    tokens: saturating_u32(s.tokens),
                    trimmed_from: s.trimmed_from,
                    content: s.content,
                })
                .collect(),
            references: pack
                .references
                .into_iter()
                .map(|r| v1::Reference {
                    citation: r.citation,
                    project: r.project,
                    revision: r.revision,
                    document_id: r.document_id,
                    uri: r.uri,
                    section: r.section,
                    start_line: r.start_line,
                    end_line: r.end_line,
                    score: r.score,
                    tokens: saturating_u32(r.tokens),
                })
                .collect(),
        }
    }
}

impl TryFrom<v1::ContextPack> for ContextPack {
    type Error = ConversionError;

    fn try_from(pack: v1::ContextPack) -> Result<Self, Self::Error> {
        let spans = pack
            .spans
            .into_iter()
            .map(|s| {
                Ok(PackedSpan {
                    content_type: content_type(s.content_type, "spans.content_type").map_err(
                        |e| ConversionError {
                            message: "weft.v1.PackedSpan",
                            ..e
                        },
                    )?,
                    citation: s.citation,
                    project: s.project,
                    revision: s.revision,
                    document_id: s.document_id,
                    uri: s.uri,
                    title: s.title,
                    section: s.section,
                    symbol: s.symbol,
                    language: s.language,
                    start_line: s.start_line,
                    end_line: s.end_line,
                    first_chunk: s.first_chunk,
                    last_chunk: s.last_chunk,
                    score: s.score,
                    tokens: s.tokens as usize,
                    trimmed_from: s.trimmed_from,
                    content: s.content,
                })
            })
            .collect::<Result<Vec<_>, ConversionError>>()?;
        Ok(ContextPack {
            max_tokens: pack.max_tokens as usize,
            used_tokens: pack.used_tokens as usize,
            tokenizer: pack.tokenizer,
            spans,
            references: pack
                .references
                .into_iter()
                .map(|r| Reference {
                    citation: r.citation,
                    project: r.project,
                    revision: r.revision,
                    document_id: r.document_id,
                    uri: r.uri,
                    section: r.section,
                    start_line: r.start_line,
                    end_line: r.end_line,
                    score: r.score,
                    tokens: r.tokens as usize,
                })
                .collect(),
        })
    }
}

fn component(c: Option<Component>) -> Option<v1::Component> {
    c.map(|c| v1::Component {
        rank: c.rank,
        score: c.score,
    })
}

fn document(d: DocumentResult, explain: bool) -> v1::DocumentResult {
    let project = d
        .spans
        .first()
        .and_then(|s| s.chunks.first())
        .map(|c| c.chunk.project.clone())
        .unwrap_or_default();
    v1::DocumentResult {
        document_id: d.document_id.as_str().to_owned(),
        uri: d.uri,
        title: d.title,
        project,
        score: d.score,
        spans: d
            .spans
            .into_iter()
            .map(|s| v1::Span {
                start_line: s.start_line,
                end_line: s.end_line,
                rerank_score: s.rerank_score,
                chunks: s
                    .chunks
                    .into_iter()
                    .map(|c| v1::ResultChunk {
                        matched: c.matched,
                        score: c.score,
                        vector: if explain { component(c.vector) } else { None },
                        text: if explain { component(c.text) } else { None },
                        boost: if explain { c.boost } else { 0.0 },
                        chunk: Some(c.chunk.into()),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The documents of a wire search response in their domain form, for
/// clients of the query API (e.g. to pack them themselves).
pub fn document_results(
    response: v1::SearchResponse,
) -> Result<Vec<DocumentResult>, ConversionError> {
    let bad = |field: &'static str, problem: String| ConversionError {
        message: "weft.v1.DocumentResult",
        field,
        problem,
    };
    response
        .results
        .into_iter()
        .map(|d| {
            let document_id = DocumentId::parse(&d.document_id).ok_or_else(|| {
                bad(
                    "document_id",
                    format!("{:?} is not 16 lowercase hex characters", d.document_id),
                )
            })?;
            let spans = d
                .spans
                .into_iter()
                .map(|s| {
                    let chunks = s
                        .chunks
                        .into_iter()
                        .map(|c| {
                            let chunk = c
                                .chunk
                                .ok_or_else(|| bad("spans.chunks.chunk", "is missing".into()))?;
                            Ok(ResultChunk {
                                chunk: Chunk::try_from(chunk)?,
                                score: c.score,
                                matched: c.matched,
                                vector: c.vector.map(|v| Component {
                                    rank: v.rank,
                                    score: v.score,
                                }),
                                text: c.text.map(|v| Component {
                                    rank: v.rank,
                                    score: v.score,
                                }),
                                boost: if c.boost == 0.0 { 1.0 } else { c.boost },
                            })
                        })
                        .collect::<Result<Vec<_>, ConversionError>>()?;
                    Ok(Span {
                        start_line: s.start_line,
                        end_line: s.end_line,
                        chunks,
                        rerank_score: s.rerank_score,
                    })
                })
                .collect::<Result<Vec<_>, ConversionError>>()?;
            Ok(DocumentResult {
                document_id,
                uri: d.uri,
                title: d.title,
                score: d.score,
                spans,
            })
        })
        .collect()
}

/// The wire form of a search response; components and boosts only under `explain`.
pub fn search_response(response: SearchResponse, explain: bool) -> v1::SearchResponse {
    let t = &response.timings;
    v1::SearchResponse {
        timings: Some(v1::Timings {
            embed_ms: t.embed_ms,
            search_ms: t.search_ms,
            fetch_ms: t.fetch_ms,
            rerank_ms: t.rerank_ms,
            total_ms: t.total_ms,
        }),
        neighbours_requested: response.neighbours_requested as u32,
        cached_embedding: response.cached_embedding,
        context: None,
        generation: 0,
        results: response
            .results
            .into_iter()
            .map(|d| document(d, explain))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(query: &str) -> v1::SearchRequest {
        v1::SearchRequest {
            query: query.into(),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_are_filled_in() {
        let r = search_request(
            request("rate limiter"),
            &AdjacencyConfig::default(),
            &RequestBounds::default(),
        )
        .unwrap();
        assert_eq!(r.limit, DEFAULT_LIMIT as usize);
        assert_eq!(r.mode, SearchMode::Hybrid);
        assert!(r.expand);
        assert!(r.adjacency.is_none());
        assert_eq!(r.filter, SearchFilter::default());
    }

    #[test]
    fn expansion_overrides_only_what_is_set() {
        let base = AdjacencyConfig::default();
        let r = search_request(
            v1::SearchRequest {
                expansion: Some(v1::Expansion {
                    code_window: Some(4),
                    whole_units: Some(false),
                    ..Default::default()
                }),
                content_types: vec![v1::ContentType::Code as i32],
                path_prefix: "src/".into(),
                mode: v1::SearchMode::Text as i32,
                limit: 7,
                expand: Some(true),
                ..request("q")
            },
            &base,
            &RequestBounds::default(),
        )
        .unwrap();
        let a = r.adjacency.unwrap();
        assert_eq!(a.code_window, 4);
        assert!(!a.whole_units);
        assert_eq!(a.prose_window, base.prose_window);
        assert_eq!(a.expand_hits, base.expand_hits);
        assert_eq!(r.filter.content_types, vec![ContentType::Code]);
        assert_eq!(r.filter.path_prefix.as_deref(), Some("src/"));
        assert_eq!((r.mode, r.limit), (SearchMode::Text, 7));
    }

    #[test]
    fn a_domain_request_goes_over_the_wire_and_back_unchanged() {
        let adjacency = AdjacencyConfig {
            code_window: 3,
            whole_units: false,
            ..AdjacencyConfig::default()
        };
        let domain = SearchRequest {
            query: "retry backoff".into(),
            filter: SearchFilter {
                projects: vec!["guava".into()],
                content_types: vec![ContentType::Code, ContentType::Prose],
                languages: vec!["java".into()],
                path_prefix: Some("src/".into()),
            },
            limit: 20,
            mode: SearchMode::Vector,
            expand: true,
            adjacency: Some(adjacency.clone()),
            rerank: true,
            max_tokens: Some(2000),
        };
        let back = search_request(
            v1::SearchRequest::from(&domain),
            &AdjacencyConfig::default(),
            &RequestBounds::default(),
        )
        .unwrap();
        assert_eq!(back.query, domain.query);
        assert_eq!(back.filter, domain.filter);
        assert_eq!(back.limit, domain.limit);
        assert_eq!(back.mode, domain.mode);
        assert_eq!(back.expand, domain.expand);
        assert_eq!(back.rerank, domain.rerank);
        assert_eq!(back.max_tokens, domain.max_tokens);
        let a = back.adjacency.unwrap();
        assert_eq!(
            (a.code_window, a.whole_units, a.prose_window, a.max_chunks),
            (3, false, adjacency.prose_window, adjacency.max_chunks)
        );
    }

    #[test]
    fn max_tokens_is_checked_and_a_pack_goes_over_the_wire_and_back() {
        assert_eq!(pack_options(&request("q")).unwrap(), None);
        let r = v1::SearchRequest {
            max_tokens: Some(2000),
            ..request("q")
        };
        assert_eq!(pack_options(&r).unwrap().unwrap().max_tokens, 2000);
        for bad in [0, MAX_PACK_TOKENS + 1] {
            let r = v1::SearchRequest {
                max_tokens: Some(bad),
                ..request("q")
            };
            assert_eq!(pack_options(&r).unwrap_err().field, "max_tokens");
        }
        let chunks = weft_core::retrieval::example_chunks();
        let hits = weft_core::retrieval::fuse(
            vec![weft_core::retrieval::ScoredChunk {
                chunk: chunks[1].clone(),
                score: 1.0,
            }],
            Vec::new(),
            &Default::default(),
        );
        let results = weft_core::retrieval::assemble(hits, &Default::default(), Vec::new());
        let pack = weft_core::retrieval::pack(
            &results,
            &std::collections::HashMap::from([("p".to_owned(), "abc".to_owned())]),
            &PackOptions { max_tokens: 300 },
            &weft_core::retrieval::ApproxTokenCounter,
        );
        let wire_results = search_response(
            weft_core::query::SearchResponse {
                results: results.clone(),
                cached_embedding: false,
                neighbours_requested: 0,
                timings: Default::default(),
            },
            true,
        );
        assert_eq!(document_results(wire_results).unwrap(), results);
        let wire = v1::ContextPack::from(pack.clone());
        assert_eq!(wire.markdown, pack.to_markdown());
        assert_eq!(ContextPack::try_from(wire).unwrap(), pack);
    }

    #[test]
    fn bad_requests_name_the_field() {
        let a = AdjacencyConfig::default();
        let b = RequestBounds::default();
        let e = search_request(request("  "), &a, &b).unwrap_err();
        assert_eq!(e.field, "query");
        let e = search_request(
            v1::SearchRequest {
                limit: 1000,
                ..request("q")
            },
            &a,
            &b,
        )
        .unwrap_err();
        assert_eq!(e.field, "limit");
        assert!(e.to_string().contains("1000"), "{e}");
        let e = search_request(
            v1::SearchRequest {
                mode: 9,
                ..request("q")
            },
            &a,
            &b,
        )
        .unwrap_err();
        assert_eq!(e.field, "mode");
        let e = search_request(
            v1::SearchRequest {
                content_types: vec![0],
                ..request("q")
            },
            &a,
            &b,
        )
        .unwrap_err();
        assert_eq!(e.field, "content_types");
    }

    #[test]
    fn hostile_requests_are_refused_naming_the_field() {
        let a = AdjacencyConfig::default();
        let b = RequestBounds {
            max_query_chars: 50,
            max_limit: 20,
        };
        let expansion = |e: v1::Expansion| v1::SearchRequest {
            expansion: Some(e),
            ..request("q")
        };
        let cases: Vec<(v1::SearchRequest, &str, &str)> = vec![
            (request(&"x".repeat(51)), "query", "query.max_query_chars"),
            (request(&"é".repeat(51)), "query", "50 characters"),
            (request("a\0b"), "query", "U+0000"),
            (request("a\u{1b}[2Jb"), "query", "U+001B"),
            (
                v1::SearchRequest {
                    limit: 1_000_000_000,
                    ..request("q")
                },
                "limit",
                "query.max_limit",
            ),
            (
                v1::SearchRequest {
                    limit: 21,
                    ..request("q")
                },
                "limit",
                "maximum 20",
            ),
            (
                v1::SearchRequest {
                    content_types: vec![1, 99],
                    ..request("q")
                },
                "content_types",
                "99",
            ),
            (
                v1::SearchRequest {
                    content_types: vec![-1],
                    ..request("q")
                },
                "content_types",
                "-1",
            ),
            (
                v1::SearchRequest {
                    projects: vec!["".into()],
                    ..request("q")
                },
                "projects",
                "empty",
            ),
            (
                v1::SearchRequest {
                    projects: vec!["ok".into(), "x".repeat(300)],
                    ..request("q")
                },
                "projects",
                "value 1",
            ),
            (
                v1::SearchRequest {
                    projects: vec!["p".into(); MAX_FILTER_VALUES + 1],
                    ..request("q")
                },
                "projects",
                "101 values",
            ),
            (
                v1::SearchRequest {
                    languages: vec!["java\nrust".into()],
                    ..request("q")
                },
                "languages",
                "U+000A",
            ),
            (
                v1::SearchRequest {
                    path_prefix: "../secrets".into(),
                    ..request("q")
                },
                "path_prefix",
                "\"..\"",
            ),
            (
                v1::SearchRequest {
                    path_prefix: "/etc".into(),
                    ..request("q")
                },
                "path_prefix",
                "absolute",
            ),
            (
                v1::SearchRequest {
                    path_prefix: "src/\0".into(),
                    ..request("q")
                },
                "path_prefix",
                "U+0000",
            ),
            (
                v1::SearchRequest {
                    path_prefix: "a/".repeat(3000),
                    ..request("q")
                },
                "path_prefix",
                "bytes long",
            ),
            (
                v1::SearchRequest {
                    path_prefix: "///".into(),
                    ..request("q")
                },
                "path_prefix",
                "root",
            ),
            (
                expansion(v1::Expansion {
                    code_window: Some(u32::MAX),
                    ..Default::default()
                }),
                "expansion.code_window",
                "maximum 100",
            ),
            (
                expansion(v1::Expansion {
                    prose_window: Some(101),
                    ..Default::default()
                }),
                "expansion.prose_window",
                "101",
            ),
            (
                expansion(v1::Expansion {
                    api_reference_window: Some(1_000_000_000),
                    ..Default::default()
                }),
                "expansion.api_reference_window",
                "1000000000",
            ),
            (
                expansion(v1::Expansion {
                    expand_hits: Some(21),
                    ..Default::default()
                }),
                "expansion.expand_hits",
                "maximum 20",
            ),
            (
                expansion(v1::Expansion {
                    max_chunks: Some(0),
                    ..Default::default()
                }),
                "expansion.max_chunks",
                "at least 1",
            ),
            (
                expansion(v1::Expansion {
                    max_chunks: Some(MAX_RESPONSE_CHUNKS + 1),
                    ..Default::default()
                }),
                "expansion.max_chunks",
                "1001",
            ),
        ];
        for (r, field, says) in cases {
            let e =
                search_request(r.clone(), &a, &b).expect_err(&format!("{r:?} should be refused"));
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(says), "{e} should say {says:?}");
        }
        // At the bounds: accepted.
        let r = search_request(
            v1::SearchRequest {
                limit: 20,
                projects: vec!["p".into(); MAX_FILTER_VALUES],
                path_prefix: "src/main/".into(),
                expansion: Some(v1::Expansion {
                    code_window: Some(MAX_WINDOW),
                    max_chunks: Some(MAX_RESPONSE_CHUNKS),
                    expand_hits: Some(20),
                    ..Default::default()
                }),
                ..request(&format!("{}\ttabs\nand lines", "é".repeat(30)))
            },
            &a,
            &b,
        )
        .unwrap();
        assert_eq!(r.limit, 20);
        assert_eq!(r.filter.path_prefix.as_deref(), Some("src/main/"));
        // limit 0 is the default, within the bound.
        let r = search_request(request("q"), &a, &b).unwrap();
        assert_eq!(r.limit, DEFAULT_LIMIT as usize);
        let tight = RequestBounds { max_limit: 5, ..b };
        assert_eq!(search_request(request("q"), &a, &tight).unwrap().limit, 5);
    }
}
