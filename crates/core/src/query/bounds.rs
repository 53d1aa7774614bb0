//! What one search may ask for: the bounds every surface (the gRPC query
//! API, the MCP tools, `weft search`) holds a [`SearchRequest`] to, written
//! once. A surface converts its arguments to a [`SearchRequest`], then calls
//! [`SearchRequest::checked`]; a request out of bounds is refused with a
//! [`RequestError`] naming the field, as the query API names it.
//!
//! ```
//! use weft_core::query::{RequestBounds, RequestErrorKind, SearchRequest};
//!
//! let bounds = RequestBounds::default();
//! let request = SearchRequest { query: "retry backoff".into(), ..Default::default() };
//! // An unset limit (0) becomes the default.
//! assert_eq!(request.checked(&bounds).unwrap().limit, 10);
//!
//! let greedy = SearchRequest { query: "q".into(), limit: 1000, ..Default::default() };
//! let e = greedy.check(&bounds).unwrap_err();
//! assert_eq!((e.field, e.kind), ("limit", RequestErrorKind::OutOfRange));
//! assert_eq!(e.to_string(), "limit: 1000 is over the maximum 100 (query.max_limit)");
//! ```

use super::SearchRequest;
use crate::retrieval::AdjacencyConfig;

/// The hits a request gets when it leaves `limit` unset (0).
pub const DEFAULT_LIMIT: usize = 10;
/// The most hits one request may ask for, unless `query.max_limit` says otherwise.
pub const MAX_LIMIT: usize = 100;
/// The longest query text, in characters, unless `query.max_query_chars`
/// says otherwise.
pub const MAX_QUERY_CHARS: usize = 4096;
/// The largest token budget one request may pack into (`max_tokens`).
pub const MAX_PACK_TOKENS: usize = 1_000_000;
/// The most values one filter list (`projects`, `languages`) may hold.
pub const MAX_FILTER_VALUES: usize = 100;
/// The longest value in a filter list, in characters.
pub const MAX_FILTER_VALUE_CHARS: usize = 256;
/// The longest `path_prefix`, in bytes (a document uri's limit).
pub const MAX_PATH_PREFIX_BYTES: usize = crate::MAX_URI_BYTES;
/// The widest neighbour window a request may ask for, on each side.
pub const MAX_WINDOW: u32 = 100;
/// The most chunks a request may ask to get back (`expansion.max_chunks`).
pub const MAX_RESPONSE_CHUNKS: usize = 1000;

/// What one search request may ask for. [`Default`] gives the constants of
/// this module; a server takes `max_query_chars` and `max_limit` from its
/// `[query]` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBounds {
    /// The hits a request that leaves `limit` unset gets (at most `max_limit`).
    pub default_limit: usize,
    /// The most hits (`limit`, and `expansion.expand_hits`).
    pub max_limit: usize,
    /// The longest query text, in characters.
    pub max_query_chars: usize,
    /// The largest token budget (`max_tokens`).
    pub max_tokens: usize,
    /// The most values in one filter list.
    pub max_filter_values: usize,
    /// The longest value in a filter list, in characters.
    pub max_filter_value_chars: usize,
    /// The longest `path_prefix`, in bytes.
    pub max_path_prefix_bytes: usize,
    /// The widest neighbour window, on each side.
    pub max_window: u32,
    /// The most chunks in one response (`expansion.max_chunks`).
    pub max_response_chunks: usize,
}

impl Default for RequestBounds {
    fn default() -> Self {
        Self {
            default_limit: DEFAULT_LIMIT,
            max_limit: MAX_LIMIT,
            max_query_chars: MAX_QUERY_CHARS,
            max_tokens: MAX_PACK_TOKENS,
            max_filter_values: MAX_FILTER_VALUES,
            max_filter_value_chars: MAX_FILTER_VALUE_CHARS,
            max_path_prefix_bytes: MAX_PATH_PREFIX_BYTES,
            max_window: MAX_WINDOW,
            max_response_chunks: MAX_RESPONSE_CHUNKS,
        }
    }
}

/// What kind of wrong a refused request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestErrorKind {
    /// Not a value the field can hold, whatever the bounds: an empty query,
    /// a control character, a path prefix out of the tree.
    InvalidArgument,
    /// A value past one of the [`RequestBounds`]: too long, too many, too
    /// large, or zero where at least 1 is needed.
    OutOfRange,
}

/// A search request that is refused: the field at fault, named as the query
/// API names it (`query`, `limit`, `max_tokens`, `projects`, `languages`,
/// `path_prefix`, `expansion.code_window`, …), and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct RequestError {
    /// The field at fault.
    pub field: &'static str,
    /// What kind of wrong it is.
    pub kind: RequestErrorKind,
    /// What is wrong with it, e.g. `is empty` or `1000 is over the maximum 100`.
    pub problem: String,
}

impl RequestError {
    fn invalid(field: &'static str, problem: impl Into<String>) -> Self {
        Self {
            field,
            kind: RequestErrorKind::InvalidArgument,
            problem: problem.into(),
        }
    }

    fn out_of_range(field: &'static str, problem: impl Into<String>) -> Self {
        Self {
            field,
            kind: RequestErrorKind::OutOfRange,
            problem: problem.into(),
        }
    }
}

impl RequestBounds {
    /// The limit of a request that leaves it unset.
    pub fn default_limit(&self) -> usize {
        self.default_limit.min(self.max_limit)
    }

    /// Checks a token budget: at least 1, at most `max_tokens`. For a
    /// budget given apart from a search (MCP's `get_context`).
    pub fn check_max_tokens(&self, max_tokens: usize) -> Result<usize, RequestError> {
        if max_tokens == 0 {
            return Err(RequestError::out_of_range(
                "max_tokens",
                "must be at least 1",
            ));
        }
        if max_tokens > self.max_tokens {
            return Err(RequestError::out_of_range(
                "max_tokens",
                format!("{max_tokens} is over the maximum {}", self.max_tokens),
            ));
        }
        Ok(max_tokens)
    }

    fn check_query(&self, query: &str) -> Result<(), RequestError> {
        if query.trim().is_empty() {
            return Err(RequestError::invalid("query", "is empty"));
        }
        // Counting stops past the bound: a 16 MB query is not walked whole.
        let chars = query
            .chars()
            .take(self.max_query_chars.saturating_add(1))
            .count();
        if chars > self.max_query_chars {
            return Err(RequestError::out_of_range(
                "query",
                format!(
                    "is longer than {} characters (query.max_query_chars)",
                    self.max_query_chars
                ),
            ));
        }
        // Tabs and line breaks are text; other control characters are not.
        match query
            .char_indices()
            .find(|(_, c)| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        {
            Some((i, c)) => Err(RequestError::invalid(
                "query",
                format!(
                    "holds a control character (U+{:04X}) at byte {i}",
                    u32::from(c)
                ),
            )),
            None => Ok(()),
        }
    }

    fn check_limit(&self, limit: usize) -> Result<(), RequestError> {
        if limit > self.max_limit {
            return Err(RequestError::out_of_range(
                "limit",
                format!(
                    "{limit} is over the maximum {} (query.max_limit)",
                    self.max_limit
                ),
            ));
        }
        Ok(())
    }

    /// Checks one filter list: not too many values, each not empty, not too
    /// long, without control characters.
    fn check_filter_values(
        &self,
        values: &[String],
        field: &'static str,
    ) -> Result<(), RequestError> {
        if values.len() > self.max_filter_values {
            return Err(RequestError::out_of_range(
                field,
                format!(
                    "{} values is over the maximum {}",
                    values.len(),
                    self.max_filter_values
                ),
            ));
        }
        for (i, value) in values.iter().enumerate() {
            let chars = value.chars().count();
            let refused = if value.trim().is_empty() {
                Some(RequestError::invalid(field, "is empty"))
            } else if chars > self.max_filter_value_chars {
                Some(RequestError::out_of_range(
                    field,
                    format!(
                        "is {chars} characters long, over the maximum {}",
                        self.max_filter_value_chars
                    ),
                ))
            } else {
                crate::control_character(value).map(|p| RequestError::invalid(field, p))
            };
            if let Some(mut e) = refused {
                e.problem = format!("value {i} {}", e.problem);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Checks a path prefix: relative, whole path components, no control
    /// characters — the shape of a document uri, which it is compared with.
    fn check_path_prefix(&self, prefix: &str) -> Result<(), RequestError> {
        const FIELD: &str = "path_prefix";
        if prefix.len() > self.max_path_prefix_bytes {
            return Err(RequestError::out_of_range(
                FIELD,
                format!(
                    "is {} bytes long, over the maximum {}",
                    prefix.len(),
                    self.max_path_prefix_bytes
                ),
            ));
        }
        // A prefix may end in `/` ("src/"); the rest must be a valid uri.
        let scope = prefix.trim_end_matches('/');
        if scope.is_empty() {
            return Err(RequestError::invalid(
                FIELD,
                format!("{prefix:?} is the root: leave path_prefix empty for everything"),
            ));
        }
        match crate::uri_problem(scope) {
            Some(problem) => Err(RequestError::invalid(FIELD, problem)),
            None => Ok(()),
        }
    }

    /// Checks a request's own expansion settings.
    fn check_expansion(&self, a: &AdjacencyConfig) -> Result<(), RequestError> {
        let over = |field: &'static str, value: usize, max: usize| {
            if value > max {
                Err(RequestError::out_of_range(
                    field,
                    format!("{value} is over the maximum {max}"),
                ))
            } else {
                Ok(())
            }
        };
        let window = |field, value: u32| over(field, value as usize, self.max_window as usize);
        over("expansion.expand_hits", a.expand_hits, self.max_limit)?;
        window("expansion.prose_window", a.prose_window)?;
        window("expansion.code_window", a.code_window)?;
        window("expansion.api_reference_window", a.api_reference_window)?;
        if a.max_chunks == 0 {
            return Err(RequestError::out_of_range(
                "expansion.max_chunks",
                "must be at least 1",
            ));
        }
        over(
            "expansion.max_chunks",
            a.max_chunks,
            self.max_response_chunks,
        )
    }
}

impl SearchRequest {
    /// Checks every field against `bounds`; the first field out of bounds
    /// is named in the error. A `limit` of 0 is unset (see [`Self::checked`]);
    /// an `adjacency` override (`expansion.*`) is held to the window, hit
    /// and chunk bounds; an unset one is the engine's configuration and is
    /// not checked.
    pub fn check(&self, bounds: &RequestBounds) -> Result<(), RequestError> {
        bounds.check_query(&self.query)?;
        bounds.check_limit(self.limit)?;
        bounds.check_filter_values(&self.filter.projects, "projects")?;
        bounds.check_filter_values(&self.filter.languages, "languages")?;
        if let Some(prefix) = &self.filter.path_prefix {
            bounds.check_path_prefix(prefix)?;
        }
        if let Some(adjacency) = &self.adjacency {
            bounds.check_expansion(adjacency)?;
        }
        if let Some(max_tokens) = self.max_tokens {
            bounds.check_max_tokens(max_tokens)?;
        }
        Ok(())
    }

    /// This request checked against `bounds` ([`Self::check`]), with an
    /// unset `limit` (0) set to the default ([`RequestBounds::default_limit`]):
    /// the request a surface hands to the engine.
    pub fn checked(mut self, bounds: &RequestBounds) -> Result<Self, RequestError> {
        self.check(bounds)?;
        if self.limit == 0 {
            self.limit = bounds.default_limit();
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::SearchFilter;

    fn request(query: &str) -> SearchRequest {
        SearchRequest {
            query: query.into(),
            expand: true,
            ..Default::default()
        }
    }

    #[test]
    fn an_unset_limit_is_the_default_within_the_maximum() {
        let bounds = RequestBounds::default();
        let r = request("rate limiter").checked(&bounds).unwrap();
        assert_eq!(r.limit, DEFAULT_LIMIT);
        let tight = RequestBounds {
            max_limit: 5,
            ..bounds
        };
        assert_eq!(request("q").checked(&tight).unwrap().limit, 5);
        let seven = SearchRequest {
            limit: 7,
            ..request("q")
        };
        assert_eq!(seven.checked(&bounds).unwrap().limit, 7);
    }

    #[test]
    fn max_tokens_is_at_least_one_and_at_most_the_bound() {
        let bounds = RequestBounds::default();
        assert_eq!(bounds.check_max_tokens(2000), Ok(2000));
        assert_eq!(
            bounds.check_max_tokens(MAX_PACK_TOKENS),
            Ok(MAX_PACK_TOKENS)
        );
        for bad in [0, MAX_PACK_TOKENS + 1] {
            let e = SearchRequest {
                max_tokens: Some(bad),
                ..request("q")
            }
            .check(&bounds)
            .unwrap_err();
            assert_eq!(
                (e.field, e.kind),
                ("max_tokens", RequestErrorKind::OutOfRange)
            );
        }
        assert_eq!(
            bounds.check_max_tokens(0).unwrap_err().to_string(),
            "max_tokens: must be at least 1"
        );
    }

    #[test]
    fn hostile_requests_are_refused_naming_the_field_and_kind() {
        use RequestErrorKind::{InvalidArgument as Invalid, OutOfRange as Range};
        let bounds = RequestBounds {
            max_query_chars: 50,
            max_limit: 20,
            ..RequestBounds::default()
        };
        let filter = |f: SearchFilter| SearchRequest {
            filter: f,
            ..request("q")
        };
        let prefix = |p: &str| {
            filter(SearchFilter {
                path_prefix: Some(p.into()),
                ..Default::default()
            })
        };
        let expansion = |f: fn(&mut AdjacencyConfig)| {
            let mut a = AdjacencyConfig::default();
            f(&mut a);
            SearchRequest {
                adjacency: Some(a),
                ..request("q")
            }
        };
        let cases: Vec<(SearchRequest, &str, RequestErrorKind, &str)> = vec![
            (request("  "), "query", Invalid, "query: is empty"),
            (
                request(&"x".repeat(51)),
                "query",
                Range,
                "is longer than 50 characters (query.max_query_chars)",
            ),
            (request(&"é".repeat(51)), "query", Range, "50 characters"),
            (request("a\0b"), "query", Invalid, "U+0000) at byte 1"),
            (request("a\u{1b}[2Jb"), "query", Invalid, "U+001B"),
            (
                SearchRequest {
                    limit: 1_000_000_000,
                    ..request("q")
                },
                "limit",
                Range,
                "limit: 1000000000 is over the maximum 20 (query.max_limit)",
            ),
            (
                filter(SearchFilter {
                    projects: vec!["".into()],
                    ..Default::default()
                }),
                "projects",
                Invalid,
                "projects: value 0 is empty",
            ),
            (
                filter(SearchFilter {
                    projects: vec!["ok".into(), "x".repeat(300)],
                    ..Default::default()
                }),
                "projects",
                Range,
                "value 1 is 300 characters long, over the maximum 256",
            ),
            (
                filter(SearchFilter {
                    projects: vec!["p".into(); MAX_FILTER_VALUES + 1],
                    ..Default::default()
                }),
                "projects",
                Range,
                "101 values is over the maximum 100",
            ),
            (
                filter(SearchFilter {
                    languages: vec!["java\nrust".into()],
                    ..Default::default()
                }),
                "languages",
                Invalid,
                "value 0 holds a control character (U+000A)",
            ),
            (prefix("../secrets"), "path_prefix", Invalid, "\"..\""),
            (prefix("/etc"), "path_prefix", Invalid, "absolute"),
            (prefix("src/\0"), "path_prefix", Invalid, "U+0000"),
            (
                prefix(&"a/".repeat(3000)),
                "path_prefix",
                Range,
                "bytes long",
            ),
            (prefix("///"), "path_prefix", Invalid, "root"),
            (
                expansion(|a| a.code_window = u32::MAX),
                "expansion.code_window",
                Range,
                "4294967295 is over the maximum 100",
            ),
            (
                expansion(|a| a.prose_window = 101),
                "expansion.prose_window",
                Range,
                "101",
            ),
            (
                expansion(|a| a.api_reference_window = 1_000_000_000),
                "expansion.api_reference_window",
                Range,
                "1000000000",
            ),
            (
                expansion(|a| a.expand_hits = 21),
                "expansion.expand_hits",
                Range,
                "maximum 20",
            ),
            (
                expansion(|a| a.max_chunks = 0),
                "expansion.max_chunks",
                Range,
                "must be at least 1",
            ),
            (
                expansion(|a| a.max_chunks = MAX_RESPONSE_CHUNKS + 1),
                "expansion.max_chunks",
                Range,
                "1001",
            ),
        ];
        for (r, field, kind, says) in cases {
            let e = r
                .check(&bounds)
                .expect_err(&format!("{r:?} should be refused"));
            assert_eq!((e.field, e.kind), (field, kind), "{e}");
            assert!(e.to_string().contains(says), "{e} should say {says:?}");
        }
        // At the bounds: accepted.
        let r = SearchRequest {
            limit: 20,
            filter: SearchFilter {
                projects: vec!["p".into(); MAX_FILTER_VALUES],
                path_prefix: Some("src/main/".into()),
                ..Default::default()
            },
            adjacency: Some(AdjacencyConfig {
                code_window: MAX_WINDOW,
                max_chunks: MAX_RESPONSE_CHUNKS,
                expand_hits: 20,
                ..Default::default()
            }),
            max_tokens: Some(MAX_PACK_TOKENS),
            ..request(&format!("{}\ttabs\nand lines", "é".repeat(30)))
        };
        assert_eq!(r.checked(&bounds).unwrap().limit, 20);
    }
}
