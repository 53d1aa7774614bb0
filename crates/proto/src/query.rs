//! Conversions of the query API (`weft/v1/query.proto`) to and from the
//! query types of `weft-core`.

use weft_core::ContentType;
use weft_core::query::{SearchMode, SearchRequest, SearchResponse};
use weft_core::retrieval::{AdjacencyConfig, Component, DocumentResult, SearchFilter};

use crate::{ConversionError, v1};

/// The hits a request gets when it leaves `limit` at 0.
pub const DEFAULT_LIMIT: u32 = 10;
/// The most hits one request may ask for.
pub const MAX_LIMIT: u32 = 100;

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

/// Turns a wire search request into a domain one; unset expansion fields
/// take their values from `adjacency` (the server's configuration).
pub fn search_request(
    request: v1::SearchRequest,
    adjacency: &AdjacencyConfig,
) -> Result<SearchRequest, ConversionError> {
    if request.query.trim().is_empty() {
        return Err(invalid("query", "is empty"));
    }
    let limit = match request.limit {
        0 => DEFAULT_LIMIT,
        n if n > MAX_LIMIT => {
            return Err(invalid(
                "limit",
                format!("{n} is over the maximum {MAX_LIMIT}"),
            ));
        }
        n => n,
    };
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
        limit: limit as usize,
        mode,
        expand: request.expand.unwrap_or(true),
        adjacency: override_adjacency,
        rerank: request.rerank,
    })
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
        let r = search_request(request("rate limiter"), &AdjacencyConfig::default()).unwrap();
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
    fn bad_requests_name_the_field() {
        let a = AdjacencyConfig::default();
        let e = search_request(request("  "), &a).unwrap_err();
        assert_eq!(e.field, "query");
        let e = search_request(
            v1::SearchRequest {
                limit: 1000,
                ..request("q")
            },
            &a,
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
        )
        .unwrap_err();
        assert_eq!(e.field, "mode");
        let e = search_request(
            v1::SearchRequest {
                content_types: vec![0],
                ..request("q")
            },
            &a,
        )
        .unwrap_err();
        assert_eq!(e.field, "content_types");
    }
}
