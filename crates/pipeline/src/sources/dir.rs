//! A local directory: every file, honouring `.gitignore` (in or out of a git
//! checkout), skipping hidden files, vendored and build directories, and
//! applying the configured include/exclude globs. Symlinks are followed;
//! loops are reported, not walked.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use weft_config::SourcesConfig;

use crate::Issue;

/// Which paths of a tree are indexed: compiled from [`SourcesConfig`].
#[derive(Debug, Clone)]
pub struct DirSelection {
    include: Option<GlobSet>,
    exclude: GlobSet,
    skip_dirs: Vec<String>,
}

impl DirSelection {
    /// Compiles the globs; a bad glob is named.
    pub fn new(config: &SourcesConfig) -> Result<Self, String> {
        let build = |globs: &[String], key: &str| -> Result<GlobSet, String> {
            let mut b = GlobSetBuilder::new();
            for g in globs {
                b.add(Glob::new(g).map_err(|e| format!("sources.{key}: {g:?}: {e}"))?);
            }
            b.build().map_err(|e| format!("sources.{key}: {e}"))
        };
        Ok(Self {
            include: if config.include.is_empty() {
                None
            } else {
                Some(build(&config.include, "include")?)
            },
            exclude: build(&config.exclude, "exclude")?,
            skip_dirs: config.skip_dirs.clone(),
        })
    }

    /// Whether the file at `uri` (relative, `/`-separated) is indexed.
    pub fn selects(&self, uri: &str) -> bool {
        self.include.as_ref().is_none_or(|g| g.is_match(uri)) && !self.exclude.is_match(uri)
    }
}

/// Every selected file under `root` in name order, as (uri, path), and the
/// entries that could not be walked.
pub fn walk_dir(root: &Path, selection: &DirSelection) -> (Vec<(String, PathBuf)>, Vec<Issue>) {
    let mut files = Vec::new();
    let mut issues = Vec::new();
    if root.is_file() {
        let uri = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        files.push((uri, root.to_owned()));
        return (files, issues);
    }
    let skip_dirs = selection.skip_dirs.clone();
    let walker = ignore::WalkBuilder::new(root)
        .follow_links(true)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            !(is_dir
                && entry.depth() > 0
                && skip_dirs
                    .iter()
                    .any(|d| entry.file_name().to_string_lossy() == d.as_str()))
        })
        .build();
    for entry in walker {
        match entry {
            Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) => {
                let uri = super::relative_uri(root, entry.path());
                if selection.selects(&uri) {
                    files.push((uri, entry.into_path()));
                }
            }
            Ok(_) => {}
            Err(e) => issues.push(Issue {
                uri: error_path(&e, root),
                reason: e.to_string(),
            }),
        }
    }
    (files, issues)
}

fn error_path(error: &ignore::Error, root: &Path) -> String {
    match error {
        ignore::Error::WithPath { path, .. } => super::relative_uri(root, path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err, root)
        }
        ignore::Error::Loop { child, .. } => super::relative_uri(root, child),
        _ => root.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendored_ignored_hidden_and_excluded_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "src/a.rs",
            "src/b.ts",
            "node_modules/x/index.js",
            "target/debug/out.rs",
            ".hidden/c.rs",
            "gen/skip.rs",
            "docs/guide.md",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "gen/\n").unwrap();
        let config = SourcesConfig {
            exclude: vec!["**/*.ts".into()],
            ..Default::default()
        };
        let (files, issues) = walk_dir(root, &DirSelection::new(&config).unwrap());
        let uris: Vec<&str> = files.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(uris, ["docs/guide.md", "src/a.rs"]);
        assert!(issues.is_empty());
        let only_docs = SourcesConfig {
            include: vec!["docs/**".into()],
            ..Default::default()
        };
        let (files, _) = walk_dir(root, &DirSelection::new(&only_docs).unwrap());
        assert_eq!(files.len(), 1);
    }
}
