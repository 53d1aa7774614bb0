//! The one rule for a search that names projects: every project named must
//! be one the caller can search — indexed, and within its scope. A typo is
//! named with the projects there are, instead of answering as a query that
//! matched nothing. `weft search`, `weft mcp` and the gRPC API all ask
//! [`check_projects`].
//!
//! A caller limited to some projects (an API key) is told only about those:
//! a project outside its scope is answered exactly as one that does not
//! exist, and the projects listed are the indexed ones it may read, so the
//! answer reveals nothing about the others.

/// How many project names an [`UnknownProject`] lists; the rest are counted.
pub const MAX_LISTED_PROJECTS: usize = 20;

/// A search named a project the caller cannot search: not indexed, or
/// outside the caller's scope (answered alike).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {}", self.explain())]
pub struct UnknownProject {
    /// The request field that named it, as its caller knows it
    /// (`--project`, `projects`, `weft.v1.SearchRequest.projects`).
    pub field: String,
    /// The project named.
    pub project: String,
    /// The projects the caller can search, sorted: every indexed one, or
    /// for a caller with a scope the indexed ones within it. `None` where
    /// they cannot be listed ([`UnknownProject::unlisted`]).
    pub known: Option<Vec<String>>,
    /// Whether `known` was narrowed to the caller's scope.
    pub scoped: bool,
}

impl UnknownProject {
    /// The known project whose name is closest to the one asked for, when
    /// it is close enough to be a typo of it.
    pub fn suggestion(&self) -> Option<&str> {
        let asked = self.project.to_lowercase();
        let asked_len = asked.chars().count();
        self.known
            .iter()
            .flatten()
            // At most 3 edits: names of other lengths are not compared.
            .filter(|k| k.chars().count().abs_diff(asked_len) <= 3)
            .map(|k| (edit_distance(&asked, &k.to_lowercase()), k))
            .filter(|(d, k)| *d <= (k.chars().count() / 3).clamp(1, 3))
            .min_by_key(|(d, _)| *d)
            .map(|(_, k)| k.as_str())
    }

    fn explain(&self) -> String {
        let mut out = format!("project {:?} is not indexed", self.project);
        if let Some(s) = self.suggestion() {
            out.push_str(&format!(" (did you mean {s:?}?)"));
        }
        let whose = if self.scoped {
            "indexed projects this caller may read"
        } else {
            "indexed projects"
        };
        let Some(known) = &self.known else {
            return out;
        };
        if known.is_empty() {
            out.push_str(&format!("; {whose}: none"));
        } else {
            let shown: Vec<&str> = known
                .iter()
                .take(MAX_LISTED_PROJECTS)
                .map(String::as_str)
                .collect();
            out.push_str(&format!("; {whose}: {}", shown.join(", ")));
            if known.len() > shown.len() {
                out.push_str(&format!(" and {} more", known.len() - shown.len()));
            }
        }
        out
    }

    /// The error without its list: for a caller that could tell which of
    /// the projects asked for exist, but not list them all.
    pub fn unlisted(self) -> Self {
        Self {
            known: None,
            ..self
        }
    }
}

/// Checks the projects a search names (`requested`, from the request's
/// `field`) against `known`: the projects the caller can search — for a
/// caller with a scope (`scoped`), only the indexed projects within it.
/// Empty `requested` (every project) always passes. The first project not
/// known is the error, which lists `known`.
pub fn check_projects<S: AsRef<str>>(
    field: &str,
    requested: &[String],
    known: &[S],
    scoped: bool,
) -> Result<(), UnknownProject> {
    let Some(unknown) = requested
        .iter()
        .find(|p| !known.iter().any(|k| k.as_ref() == p.as_str()))
    else {
        return Ok(());
    };
    let mut known: Vec<String> = known.iter().map(|k| k.as_ref().to_owned()).collect();
    known.sort();
    known.dedup();
    Err(UnknownProject {
        field: field.to_owned(),
        project: unknown.clone(),
        known: Some(known),
        scoped,
    })
}

/// Edit distance over characters, a swap of two neighbours counting as one
/// edit (optimal string alignment: `dmeo` is one edit from `demo`), for
/// suggestions (names are at most [`crate::MAX_PROJECT_CHARS`] characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: the distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn known_projects_and_no_filter_pass() {
        let known = ["lexical-hard", "docs"];
        assert_eq!(check_projects("--project", &[], &known, false), Ok(()));
        assert_eq!(
            check_projects(
                "--project",
                &names(&["docs", "lexical-hard"]),
                &known,
                false
            ),
            Ok(())
        );
    }

    #[test]
    fn an_unknown_project_is_named_with_the_field_and_the_known_ones() {
        let err = check_projects(
            "--project",
            &names(&["lexical-hard", "nope"]),
            &["lexical-hard"],
            false,
        )
        .unwrap_err();
        assert_eq!(err.project, "nope");
        assert_eq!(
            err.to_string(),
            "--project: project \"nope\" is not indexed; indexed projects: lexical-hard"
        );
        let err = check_projects("projects", &names(&["x"]), &[] as &[&str], false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "projects: project \"x\" is not indexed; indexed projects: none"
        );
    }

    #[test]
    fn a_typo_gets_a_suggestion_and_a_stranger_none() {
        let known = ["lexical-hard", "guava", "docs"];
        let err =
            check_projects("--project", &names(&["lexical-hrad"]), &known, false).unwrap_err();
        assert_eq!(err.suggestion(), Some("lexical-hard"));
        assert!(
            err.to_string().contains("(did you mean \"lexical-hard\"?)"),
            "{err}"
        );
        let err = check_projects("--project", &names(&["Guava"]), &known, false).unwrap_err();
        assert_eq!(err.suggestion(), Some("guava"));
        let err = check_projects("--project", &names(&["nope"]), &known, false).unwrap_err();
        assert_eq!(err.suggestion(), None, "{err}");
    }

    #[test]
    fn a_scoped_caller_is_answered_alike_for_any_project_outside_what_it_sees() {
        // "beta" exists outside the scope, "nope" nowhere: the same answer.
        let in_scope = ["alpha"];
        let beta = check_projects("f", &names(&["beta"]), &in_scope, true).unwrap_err();
        let nope = check_projects("f", &names(&["nope"]), &in_scope, true).unwrap_err();
        assert_eq!(
            beta.to_string().replace("beta", "X"),
            nope.to_string().replace("nope", "X")
        );
        assert!(beta.to_string().contains("may read: alpha"), "{beta}");
    }

    #[test]
    fn an_unlisted_error_names_the_project_only() {
        let err = check_projects("f", &names(&["nope"]), &["demo"], false)
            .unwrap_err()
            .unlisted();
        assert_eq!(err.to_string(), "f: project \"nope\" is not indexed");
    }

    #[test]
    fn long_lists_are_cut() {
        let known: Vec<String> = (0..45).map(|i| format!("p{i:02}")).collect();
        let err = check_projects("f", &names(&["zzz-unrelated"]), &known, false).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("p19") && !text.contains("p20"), "{text}");
        assert!(text.ends_with(" and 25 more"), "{text}");
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("lexical-hrad", "lexical-hard"), 1);
        assert_eq!(edit_distance("dmeo", "demo"), 1);
        assert_eq!(edit_distance("abc", "abc"), 0);
    }
}
