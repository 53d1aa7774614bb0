//! Conversions of the query API (`weft/v1/query.proto`) to and from the
//! query types of `weft-core`. Conversion only: what a request may ask for
//! is `weft_core::query::RequestBounds`, checked on the domain request
//! (`SearchRequest::checked`) by the server, as by every other surface.

use weft_core::ContentType;
use weft_core::query::{SearchMode, SearchRequest, SearchResponse};
use weft_core::retrieval::{
    AdjacencyConfig, Component, ContextPack, DocumentResult, PackedSpan, Reference, ResultChunk,
    SearchFilter, Span,
};
use weft_core::{Chunk, DocumentId};

use crate::{ConversionError, v1};

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

/// The wire form of a domain search request: what a client of the query
/// service sends for it, and what [`search_request`] turns back.
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

/// Turns a wire search request into a domain one, unchecked: a `limit` of
/// 0 stays 0 (unset), an empty `path_prefix` is none, and unset expansion
/// fields take their values from `adjacency` (the server's configuration).
/// Only what does not convert is refused here (a content type or mode that
/// does not exist), naming the field; the bounds are
/// `weft_core::query::SearchRequest::checked`'s.
pub fn search_request(
    request: v1::SearchRequest,
    adjacency: &AdjacencyConfig,
) -> Result<SearchRequest, ConversionError> {
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
    let override_adjacency = request.expansion.map(|e| {
        let mut a = adjacency.clone();
        if let Some(v) = e.expand_hits {
            a.expand_hits = v as usize;
        }
        if let Some(v) = e.prose_window {
            a.prose_window = v;
        }
        if let Some(v) = e.code_window {
            a.code_window = v;
        }
        if let Some(v) = e.api_reference_window {
            a.api_reference_window = v;
        }
        if let Some(v) = e.whole_units {
            a.whole_units = v;
        }
        if let Some(v) = e.max_chunks {
            a.max_chunks = v as usize;
        }
        a
    });
    let path_prefix = Some(request.path_prefix).filter(|p| !p.trim().is_empty());
    Ok(SearchRequest {
        query: request.query,
        filter: SearchFilter {
            projects: request.projects,
            content_types,
            languages: request.languages,
            path_prefix,
        },
        limit: request.limit as usize,
        mode,
        expand: request.expand.unwrap_or(true),
        adjacency: override_adjacency,
        rerank: request.rerank,
        max_tokens: request.max_tokens.map(|n| n as usize),
        // The server sets it from the caller's key, never the wire.
        cache_partition: None,
        hidden: Default::default(),
    })
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
    use weft_core::retrieval::PackOptions;

    fn request(query: &str) -> v1::SearchRequest {
        v1::SearchRequest {
            query: query.into(),
            ..Default::default()
        }
    }

    #[test]
    fn unset_fields_stay_unset() {
        let r = search_request(request("rate limiter"), &AdjacencyConfig::default()).unwrap();
        assert_eq!(r.limit, 0, "unset: the check sets the default");
        assert_eq!(r.mode, SearchMode::Hybrid);
        assert!(r.expand);
        assert!(r.adjacency.is_none());
        assert_eq!(r.max_tokens, None);
        assert_eq!(r.filter, SearchFilter::default());
        let blank = v1::SearchRequest {
            path_prefix: "  ".into(),
            ..request("q")
        };
        let r = search_request(blank, &AdjacencyConfig::default()).unwrap();
        assert_eq!(r.filter.path_prefix, None);
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
            cache_partition: Some("a-key".into()),
            hidden: Default::default(),
        };
        let back = search_request(
            v1::SearchRequest::from(&domain),
            &AdjacencyConfig::default(),
        )
        .unwrap();
        assert_eq!(back.query, domain.query);
        assert_eq!(back.filter, domain.filter);
        assert_eq!(back.limit, domain.limit);
        assert_eq!(
            back.cache_partition, None,
            "the wire never names a cache partition"
        );
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
    fn a_pack_goes_over_the_wire_and_back() {
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
    fn what_does_not_convert_is_named() {
        let a = AdjacencyConfig::default();
        let e = search_request(
            v1::SearchRequest {
                mode: 9,
                ..request("q")
            },
            &a,
        )
        .unwrap_err();
        assert_eq!(e.field, "mode");
        for bad in [0, 99, -1] {
            let e = search_request(
                v1::SearchRequest {
                    content_types: vec![1, bad],
                    ..request("q")
                },
                &a,
            )
            .unwrap_err();
            assert_eq!(e.field, "content_types");
            assert!(e.to_string().contains(&bad.to_string()), "{e}");
        }
    }

    #[test]
    fn out_of_bounds_values_convert_for_the_check_to_refuse() {
        use weft_core::query::RequestBounds;
        let wire = v1::SearchRequest {
            limit: 1_000_000_000,
            max_tokens: Some(0),
            expansion: Some(v1::Expansion {
                code_window: Some(u32::MAX),
                max_chunks: Some(0),
                ..Default::default()
            }),
            ..request("q")
        };
        let r = search_request(wire, &AdjacencyConfig::default()).unwrap();
        assert_eq!(r.limit, 1_000_000_000);
        assert_eq!(r.max_tokens, Some(0));
        let a = r.adjacency.as_ref().unwrap();
        assert_eq!((a.code_window, a.max_chunks), (u32::MAX, 0));
        let e = r.check(&RequestBounds::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "limit: 1000000000 is over the maximum 100 (query.max_limit)"
        );
    }
}
