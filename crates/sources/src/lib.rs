//! # weft-sources
//!
//! Where documents come from: a local directory, a git repository, or a
//! documentation website. Each source lists the documents of one project.
//!
//! | module | holds |
//! |---|---|
//! | `checkouts` | the checkout cache: git checkouts kept run after run within `crawl.max_checkout_bytes`, least recently synced removed first ([`CheckoutCache`]) |
//! | `dir` | listing a directory: `.gitignore`, skips, globs, the traps of a hostile tree ([`walk_dir`], [`DirSelection`]) |
//! | `git` | cloning and fetching a repository, diffing two commits, the git policy ([`GitRepo`], [`GitPolicy`]) |
//! | `site` | crawling a documentation site from its start page ([`crawl`]) |
//! | [`net`] | the network policy every fetch obeys: public addresses only unless configured, checked on the address connected to |
//!
//! What a source yields is planned into changes by `weft-index`; nothing
//! here reads the catalog or a store.

#![warn(missing_docs)]

mod checkouts;
pub(crate) mod dir;
mod git;
pub mod net;
mod site;

use std::path::{Path, PathBuf};

pub use checkouts::{CheckoutCache, CheckoutLease, disk_usage};
pub use dir::{DirSelection, FileIdentity, Walk, read_listed_file, walk_dir};
pub use git::{
    GitChanges, GitError, GitPolicy, GitRepo, checked_out_branch, is_safe_relative_path, redact_url,
};
pub use site::{CrawlError, CrawledPage, crawl, crawl_with};

/// A document that was skipped or failed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Issue {
    /// The document's uri (path or URL).
    pub uri: String,
    /// What happened.
    pub reason: String,
}

/// A source named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A local directory (or one file), read as it is on disk.
    Dir(PathBuf),
    /// A git repository to clone or fetch: a URL (`https://…/x.git`,
    /// `git@host:x.git`, `ssh://…`, `git://…`, `file://…`).
    Git(String),
    /// A documentation website, crawled from this start URL.
    Site(url::Url),
}

impl SourceSpec {
    /// Classifies a command-line argument. `http(s)` URLs ending in `.git`
    /// are repositories; other `http(s)` URLs are sites; anything else
    /// that is not a URL is a path.
    ///
    /// A site URL holding a user name or password is refused (they would
    /// become part of every page's uri; credentials for sites go in
    /// `crawl.site_credentials`), and no error repeats a password or token
    /// of `arg`.
    pub fn parse(arg: &str) -> Result<Self, String> {
        let is_git_url = arg.starts_with("git@")
            || arg.starts_with("ssh://")
            || arg.starts_with("git://")
            || arg.starts_with("file://")
            || ((arg.starts_with("http://") || arg.starts_with("https://"))
                && arg.trim_end_matches('/').ends_with(".git"));
        if is_git_url {
            return Ok(Self::Git(arg.to_owned()));
        }
        if arg.starts_with("http://") || arg.starts_with("https://") {
            let url = url::Url::parse(arg)
                .map_err(|e| format!("{} is not a valid URL: {e}", redact_url(arg)))?;
            if site::has_userinfo(&url) {
                return Err(userinfo_refusal(&redact_url(arg)));
            }
            return Ok(Self::Site(url));
        }
        let path = Path::new(arg);
        if !path.exists() {
            return Err(format!(
                "{} does not exist (expected a directory, a git URL or an http(s) URL)",
                redact_url(arg)
            ));
        }
        Ok(Self::Dir(path.to_owned()))
    }

    /// The project name used when none is given: the directory's name, the
    /// repository's name, or the site's host.
    pub fn default_project(&self) -> String {
        let name = match self {
            Self::Dir(path) => {
                let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                let dir = if path.is_file() {
                    path.parent().map(Path::to_path_buf).unwrap_or_default()
                } else {
                    path
                };
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }
            Self::Git(url) => url
                .trim_end_matches('/')
                .trim_end_matches(".git")
                .rsplit(['/', ':'])
                .next()
                .unwrap_or_default()
                .to_owned(),
            Self::Site(url) => url.host_str().unwrap_or_default().to_owned(),
        };
        if name.is_empty() {
            "default".into()
        } else {
            name
        }
    }

    /// The source as recorded in the catalog.
    pub fn display(&self) -> String {
        match self {
            Self::Dir(p) => std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string(),
            Self::Git(u) => redact_url(u),
            Self::Site(u) => redact_url(u.as_str()),
        }
    }
}

/// Why a site URL holding a user name or password (`shown` redacted) is
/// not crawled, and where credentials go instead.
pub(crate) fn userinfo_refusal(shown: &str) -> String {
    format!(
        "{shown}: a site URL may not hold a user name or password (it would be stored in every crawled page's uri); \
         give a site's credentials in crawl.site_credentials (origin, username and password_env or password_file, or token_env or token_file: \
         sent to that origin only); to index a git repository, give its URL ending in .git (https://user:token@host/group/repo.git)"
    )
}

/// A directory name for a project's git checkout: the name with anything
/// but letters, digits, `-`, `_` and `.` replaced by `_`. A name that had to
/// change gets a hash of the project, so that two projects never share a
/// checkout, and a name of dots only (`.`, `..`) or none is never a path
/// outside the sources directory.
pub fn checkout_name(project: &str) -> String {
    let name: String = project
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name == project && !name.is_empty() && !name.chars().all(|c| c == '.') {
        return name;
    }
    let hash = weft_core::content_hash(project);
    let name = name.replace('.', "_");
    format!("{name}-{}", &hash[..8])
}

/// `path` relative to `root`, with `/` separators.
pub fn relative_uri(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_classified() {
        assert_eq!(
            SourceSpec::parse("https://github.com/google/guava.git"),
            Ok(SourceSpec::Git(
                "https://github.com/google/guava.git".into()
            ))
        );
        assert!(matches!(
            SourceSpec::parse("git@github.com:a/b.git"),
            Ok(SourceSpec::Git(_))
        ));
        assert!(matches!(
            SourceSpec::parse("https://docs.rs/x/"),
            Ok(SourceSpec::Site(_))
        ));
        assert!(matches!(SourceSpec::parse("."), Ok(SourceSpec::Dir(_))));
        let err = SourceSpec::parse("/no/such/dir").unwrap_err();
        assert!(err.contains("/no/such/dir"), "{err}");
    }

    #[test]
    fn default_projects() {
        assert_eq!(
            SourceSpec::Git("https://h/o/guava.git".into()).default_project(),
            "guava"
        );
        assert_eq!(
            SourceSpec::Git("git@h:o/zod.git".into()).default_project(),
            "zod"
        );
        let site = SourceSpec::parse("https://docs.example.org/a/").unwrap();
        assert_eq!(site.default_project(), "docs.example.org");
    }
}
