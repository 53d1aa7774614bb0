//! Branches and worktrees as overlays: the one rule for what a search of
//! `P@B` reads.
//!
//! `weft index REPO --branch B` indexes branch `B` of project `P` as the
//! project `P@B`, holding only the documents whose content differs from
//! `P`'s, and records in the catalog ([`Overlay`], in
//! [`crate::ports::ProjectState::overlay`]) the paths the branch changed,
//! added or deleted. A search of `P@B` reads `P@B` and `P`, minus those documents
//! ([`resolve`]): the branch's files and the base's unchanged ones, never
//! the base's version of a file the branch changed or deleted.
//!
//! Names: `base@branch`, split at the first `@` after the name's first
//! character ([`split_overlay`]), so `@scope/pkg@next` is branch `next` of
//! `@scope/pkg`. A project name has at most that one `@`
//! ([`crate::project_problem`]), and a branch name is what git allows
//! and no `@` ([`branch_problem`]).

use std::collections::HashSet;

use crate::DocumentId;
use crate::ports::{Catalog, PortResult};
use crate::retrieval::SearchFilter;

/// What the catalog records of an overlay project `base@branch`.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Overlay {
    /// The project it overlays (the default branch's index).
    pub base: String,
    /// The branch (or worktree) name.
    pub branch: String,
    /// The base's commit the overlay was compared with, for git sources.
    #[serde(default)]
    pub base_revision: Option<String>,
    /// Paths the branch changed, added or deleted: the base's documents
    /// at these paths are never read through the overlay. Sorted.
    #[serde(default)]
    pub hidden: Vec<String>,
}

/// The project name of branch `branch` of `base`: `base@branch`.
pub fn overlay_name(base: &str, branch: &str) -> String {
    format!("{base}@{branch}")
}

/// `(base, branch)` when `name` is an overlay's name, `base@branch`: split
/// at the first `@` after the first character, both parts non-empty.
pub fn split_overlay(name: &str) -> Option<(&str, &str)> {
    let first = name.chars().next()?;
    let at = name[first.len_utf8()..].find('@')? + first.len_utf8();
    let (base, branch) = (&name[..at], &name[at + 1..]);
    (!branch.is_empty()).then_some((base, branch))
}

/// Why `branch` cannot name a branch (or worktree) overlay; `None` when it
/// can: what `git check-ref-format --branch` allows, without `@`, and not
/// starting with `-` (never read as an option).
pub fn branch_problem(branch: &str) -> Option<String> {
    if branch.is_empty() {
        return Some("is empty".into());
    }
    if branch.len() > 200 {
        return Some(format!(
            "is {} bytes long, over the limit of 200",
            branch.len()
        ));
    }
    if let Some(c) = branch
        .chars()
        .find(|c| c.is_control() || " ~^:?*[\\@".contains(*c))
    {
        return Some(format!("holds {c:?}, which a branch name here may not"));
    }
    if branch.starts_with('-') || branch.starts_with('/') || branch.ends_with('/') {
        return Some("may not start with '-' or '/', or end with '/'".into());
    }
    if branch.contains("..")
        || branch.contains("//")
        || branch.ends_with('.')
        || branch
            .split('/')
            .any(|part| part.starts_with('.') || part.ends_with(".lock"))
    {
        return Some(
            "is not a git branch name (no '..', '//', trailing '.', or parts starting with '.' or ending in '.lock')"
                .into(),
        );
    }
    None
}

/// The base documents a search must not return, because an overlay it
/// reads hides them; the engine asks its stores for `chunks` more hits so
/// that hiding them never shortens the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HiddenDocuments {
    /// The hidden documents.
    pub documents: HashSet<DocumentId>,
    /// How many chunks they are stored as.
    pub chunks: usize,
}

impl HiddenDocuments {
    /// Whether nothing is hidden.
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }
}

/// Reads the overlays a search's `filter` names, from the catalog's project
/// states: each overlay `P@B` named brings its base `P` into the filter,
/// and `P`'s documents the branch changed or deleted are hidden — unless
/// `P` itself is named too, which reads all of `P`. A filter naming no
/// project (every project) reads no overlay: it becomes every project that
/// is not one, so a branch never shows beside its base.
pub async fn resolve(
    catalog: &dyn Catalog,
    filter: &mut SearchFilter,
) -> PortResult<HiddenDocuments> {
    if filter.projects.is_empty() {
        let states = catalog.projects().await?;
        if states.iter().any(|(_, s)| s.overlay.is_some()) {
            filter.projects = states
                .into_iter()
                .filter(|(_, s)| s.overlay.is_none())
                .map(|(n, _)| n)
                .collect();
        }
        return Ok(HiddenDocuments::default());
    }
    let named: Vec<String> = filter.projects.clone();
    let mut hidden = HiddenDocuments::default();
    // Only a name of the form `P@B` can be an overlay: plain names cost
    // no lookup.
    for name in named.iter().filter(|n| split_overlay(n).is_some()) {
        let Some(overlay) = catalog.project(name).await?.and_then(|s| s.overlay) else {
            continue;
        };
        if !filter.projects.contains(&overlay.base) {
            filter.projects.push(overlay.base.clone());
        }
        if named.contains(&overlay.base) {
            continue;
        }
        for uri in &overlay.hidden {
            let id = DocumentId::new(&overlay.base, uri);
            if hidden.documents.contains(&id) {
                continue;
            }
            // The base may have been re-indexed since: its document's
            // current chunk count is what the stores hold.
            let chunks = catalog.document(&id).await?.map_or(0, |r| r.chunk_count);
            hidden.chunks += chunks as usize;
            hidden.documents.insert(id);
        }
    }
    Ok(hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_names_split_at_the_first_inner_at() {
        assert_eq!(split_overlay("weft@feature/x"), Some(("weft", "feature/x")));
        assert_eq!(
            split_overlay("@scope/pkg@next"),
            Some(("@scope/pkg", "next"))
        );
        assert_eq!(split_overlay("@scope/pkg"), None);
        assert_eq!(split_overlay("weft"), None);
        assert_eq!(split_overlay("weft@"), None);
        assert_eq!(overlay_name("weft", "b"), "weft@b");
    }

    #[test]
    fn branch_names_are_what_git_allows_and_never_an_option() {
        for ok in ["main", "feature/x-1", "release-2.0", "v1.2"] {
            assert_eq!(branch_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "-x",
            "--upload-pack=x",
            "a..b",
            "a b",
            "a@b",
            "x.lock",
            ".hidden",
            "a/",
            "a~1",
            "a:b",
        ] {
            assert!(branch_problem(bad).is_some(), "{bad:?}");
        }
    }
}
