//! What one caller may read: a search's project and content-type filters
//! are checked against its [`Scope`] (refused outside it) or set to it when
//! the request gives none; results and chunk answers are filtered by it
//! once more, so no chunk of another project leaves the server, whatever
//! the stores return.

use std::collections::BTreeSet;

use weft_core::query::SearchRequest;
use weft_core::retrieval::{DocumentResult, SearchFilter};
use weft_core::{Chunk, ContentType};

use crate::AuthError;

/// What one caller may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The key, for logs; `None` without authentication.
    pub key_id: Option<String>,
    /// The projects; `None`: every project.
    pub projects: Option<BTreeSet<String>>,
    /// The content types; `None`: all.
    pub content_types: Option<Vec<ContentType>>,
    /// May index (write), not only read: a key's `index = true`, or a
    /// caller no key is asked of.
    pub may_index: bool,
}

impl Scope {
    /// Everything: the scope of every caller when `query.auth = "none"`.
    pub fn everything() -> Self {
        Self {
            key_id: None,
            projects: None,
            content_types: None,
            may_index: true,
        }
    }

    /// Nothing: the scope of a caller no authentication let through.
    pub fn nothing() -> Self {
        Self {
            key_id: None,
            projects: Some(BTreeSet::new()),
            content_types: Some(Vec::new()),
            may_index: false,
        }
    }

    /// Whether the scope covers the project `name`. A branch overlay
    /// `P@B` ([`weft_core::overlays`]) is covered by its base `P`: it reads
    /// `P`'s documents, so a key reads a branch exactly when it reads the
    /// project.
    pub fn allows_project(&self, name: &str) -> bool {
        let base = weft_core::overlays::split_overlay(name).map_or(name, |(base, _)| base);
        self.projects.as_ref().is_none_or(|p| p.contains(base))
    }

    /// Holds a search to the scope ([`Scope::restrict`] of its filter)
    /// and to the caller's partition of the query-embedding cache.
    pub fn apply(&self, request: &mut SearchRequest) -> Result<(), AuthError> {
        self.restrict(&mut request.filter)?;
        request.cache_partition = self.key_id.clone();
        Ok(())
    }

    /// Checks a search's filter against the scope and narrows it to the
    /// scope: no project filter becomes the key's projects. A project
    /// outside the scope is [`AuthError::NotFound`], as one that is not
    /// indexed ([`weft_core::projects`]; callers check the projects with
    /// their list first); a content type outside it is
    /// [`AuthError::PermissionDenied`].
    pub fn restrict(&self, filter: &mut SearchFilter) -> Result<(), AuthError> {
        if let Some(allowed) = &self.projects {
            // An empty filter means every project: never the widening of
            // a scope of none.
            if allowed.is_empty() {
                return Err(AuthError::PermissionDenied(
                    "this caller may read no project".into(),
                ));
            }
            if filter.projects.is_empty() {
                filter.projects = allowed.iter().cloned().collect();
            } else {
                let covered: Vec<&String> = filter
                    .projects
                    .iter()
                    .filter(|p| self.allows_project(p))
                    .collect();
                weft_core::projects::check_projects("projects", &filter.projects, &covered, true)
                    .map_err(|e| AuthError::NotFound(e.unlisted().to_string()))?;
            }
        }
        if let Some(allowed) = &self.content_types {
            if filter.content_types.is_empty() {
                filter.content_types = allowed.to_vec();
            } else if let Some(t) = filter.content_types.iter().find(|t| !allowed.contains(*t)) {
                return Err(AuthError::PermissionDenied(format!(
                    "this API key may not read content type {t}"
                )));
            }
        }
        Ok(())
    }

    /// Whether the scope covers `chunk`.
    pub fn allows(&self, chunk: &Chunk) -> bool {
        self.allows_project(&chunk.project)
            && self
                .content_types
                .as_ref()
                .is_none_or(|t| t.contains(&chunk.content_type))
    }

    /// Drops from `results` every chunk the scope does not cover, and spans
    /// and documents left empty; returns how many chunks were dropped (0
    /// unless a store returned what the filter excludes).
    pub fn retain(&self, results: &mut Vec<DocumentResult>) -> usize {
        if self.projects.is_none() && self.content_types.is_none() {
            return 0;
        }
        let mut dropped = 0;
        for document in results.iter_mut() {
            for span in &mut document.spans {
                let before = span.chunks.len();
                span.chunks.retain(|c| self.allows(&c.chunk));
                dropped += before - span.chunks.len();
            }
            document.spans.retain(|s| !s.chunks.is_empty());
        }
        results.retain(|d| !d.spans.is_empty());
        if dropped > 0 {
            tracing::warn!(
                key = self.key_id.as_deref().unwrap_or("-"),
                dropped,
                "chunks outside the API key's scope came back from the stores and were dropped"
            );
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::ErrorKind;

    #[test]
    fn nothing_covers_no_project_and_everything_every_project() {
        assert!(!Scope::nothing().allows_project("demo"));
        assert!(Scope::everything().allows_project("demo"));
        let mut filter = SearchFilter::default();
        assert_eq!(
            Scope::nothing().restrict(&mut filter).unwrap_err().kind(),
            ErrorKind::PermissionDenied
        );
        let chunk = weft_core::retrieval::example_chunks().remove(0);
        assert!(!Scope::nothing().allows(&chunk));
        assert!(Scope::everything().allows(&chunk));
    }

    #[test]
    fn a_scope_narrows_filters_and_refuses_what_it_does_not_cover() {
        let scope = Scope {
            key_id: Some("k".into()),
            projects: Some(BTreeSet::from(["a".to_owned(), "b".to_owned()])),
            content_types: Some(vec![ContentType::Prose]),
            may_index: false,
        };
        let mut filter = SearchFilter::default();
        scope.restrict(&mut filter).unwrap();
        assert_eq!(filter.projects, ["a", "b"]);
        assert_eq!(filter.content_types, [ContentType::Prose]);
        let mut filter = SearchFilter {
            projects: vec!["a".into(), "c".into()],
            ..Default::default()
        };
        let refused = scope.restrict(&mut filter).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::NotFound);
        assert_eq!(
            refused.message(),
            "projects: project \"c\" is not indexed",
            "{refused:?}"
        );
        let mut filter = SearchFilter {
            content_types: vec![ContentType::Code],
            ..Default::default()
        };
        assert_eq!(
            scope.restrict(&mut filter).unwrap_err().kind(),
            ErrorKind::PermissionDenied
        );
        let mut filter = SearchFilter {
            projects: vec!["b".into()],
            ..Default::default()
        };
        scope.restrict(&mut filter).unwrap();
        assert_eq!(filter.projects, ["b"]);
    }

    #[test]
    fn a_key_reads_the_branches_of_its_projects_and_no_other_branch() {
        let scope = Scope {
            key_id: Some("k".into()),
            projects: Some(BTreeSet::from(["a".to_owned()])),
            content_types: None,
            may_index: false,
        };
        assert!(scope.allows_project("a@feature/x"));
        assert!(!scope.allows_project("b@feature/x"));
        assert!(!scope.allows_project("ab"));
        let mut filter = SearchFilter {
            projects: vec!["a@feature/x".into()],
            ..Default::default()
        };
        scope.restrict(&mut filter).unwrap();
        let mut filter = SearchFilter {
            projects: vec!["b@a".into()],
            ..Default::default()
        };
        assert_eq!(
            scope.restrict(&mut filter).unwrap_err().kind(),
            ErrorKind::NotFound,
            "b's branch named a is b's"
        );
    }
}
