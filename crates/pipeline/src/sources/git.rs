//! A git repository given by URL: cloned into the data directory on first
//! use, fetched afterwards. A re-index reads only the files changed between
//! the last indexed commit and the new one (`git diff --name-status`).
//! Uses the `git` command, so credentials and proxies work as they do for
//! the user.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a git operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` is not installed.
    #[error("`git` could not be run ({0}); install git to index repositories by URL")]
    NotInstalled(std::io::Error),
    /// A git command failed.
    #[error("`git {args}` failed: {stderr}")]
    Failed {
        /// The arguments.
        args: String,
        /// What git printed.
        stderr: String,
    },
}

/// A local checkout of a remote repository.
#[derive(Debug, Clone)]
pub struct GitRepo {
    url: String,
    dir: PathBuf,
}

/// What changed between two commits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitChanges {
    /// Added or modified paths.
    pub changed: Vec<String>,
    /// Deleted paths.
    pub deleted: Vec<String>,
}

impl GitRepo {
    /// The checkout of `url` kept in `dir`.
    pub fn new(url: &str, dir: &Path) -> Self {
        Self {
            url: url.to_owned(),
            dir: dir.to_owned(),
        }
    }

    /// The working tree.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Clones or fetches, checks out the remote's default branch, and
    /// returns its commit.
    pub fn sync(&self) -> Result<String, GitError> {
        if self.dir.join(".git").exists() {
            self.git(&["fetch", "--quiet", "origin", "HEAD"])?;
            self.git(&["reset", "--quiet", "--hard", "FETCH_HEAD"])?;
        } else {
            if let Some(parent) = self.dir.parent() {
                std::fs::create_dir_all(parent).map_err(GitError::NotInstalled)?;
            }
            let dir = self.dir.to_string_lossy().into_owned();
            run(None, &["clone", "--quiet", &self.url, &dir])?;
        }
        self.head()
    }

    /// The checked-out commit.
    pub fn head(&self) -> Result<String, GitError> {
        Ok(self.git(&["rev-parse", "HEAD"])?.trim().to_owned())
    }

    /// Whether `commit` exists locally (a force-push may have dropped it).
    pub fn has_commit(&self, commit: &str) -> bool {
        self.git(&["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .is_ok()
    }

    /// Paths changed and deleted from `old` to `new`.
    pub fn changes(&self, old: &str, new: &str) -> Result<GitChanges, GitError> {
        let out = self.git(&["diff", "--name-status", "--no-renames", "-z", old, new])?;
        let mut changes = GitChanges::default();
        let mut fields = out.split('\0').filter(|f| !f.is_empty());
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            if status.starts_with('D') {
                changes.deleted.push(path.to_owned());
            } else {
                changes.changed.push(path.to_owned());
            }
        }
        Ok(changes)
    }

    fn git(&self, args: &[&str]) -> Result<String, GitError> {
        run(Some(&self.dir), args)
    }
}

fn run(dir: Option<&Path>, args: &[&str]) -> Result<String, GitError> {
    let mut command = Command::new("git");
    if let Some(dir) = dir {
        command.arg("-C").arg(dir);
    }
    let output = command
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(GitError::NotInstalled)?;
    if !output.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
