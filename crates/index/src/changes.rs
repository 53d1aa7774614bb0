//! What to index and what changed: one source listed and compared with the
//! catalog, the same way for `weft index` and for `weft-crawler`.
//!
//! [`ChangePlanner::plan`] lists a [`SourceSpec`] — a directory walk, a git
//! checkout (only the files changed since the last indexed commit when the
//! catalog's records allow it), a crawled documentation site — and returns a
//! [`ChangeSet`]. Iterating it reads each listed document, hashes it and
//! says whether it is new or changed ([`Change::Index`]), unchanged, or
//! unreadable; afterwards [`ChangeSet::removed`] gives the catalogued
//! documents the source no longer has.
//!
//! A document is unchanged when the catalog holds its content hash and an
//! [`IndexIdentity`] equal to the expected one, compared as values: all of it
//! ([`Compare::Everything`], the embedded pipeline, which also embeds), or
//! the chunker and embedded-text format ([`Compare::Chunking`], the crawler,
//! whose embedders answer for their own model).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use weft_config::{CrawlConfig, SourcesConfig};
use weft_core::overlays::{self, Overlay};
use weft_core::ports::{Catalog, DocumentRecord, PortError, ProjectState};
use weft_core::{DocumentId, IndexIdentity, content_hash};

use crate::Issue;
use weft_sources::{
    self as sources, CrawlError, DirSelection, FileIdentity, GitError, GitPolicy, GitRepo,
    SourceSpec,
};

/// Why a source could not be planned. Problems with single documents do
/// not stop a plan; they come out of the [`ChangeSet`] as
/// [`Change::Unreadable`] or in [`ChangeSet::errors`].
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The catalog could not be read.
    #[error(transparent)]
    Catalog(#[from] PortError),
    /// A `[sources]` glob does not compile.
    #[error("{0}")]
    Selection(String),
    /// The project name cannot be one ([`weft_core::project_problem`]).
    #[error("project name {project:?} {problem}")]
    Project {
        /// The name, as given.
        project: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A branch overlay cannot be planned: its name, or its base project.
    #[error("--branch {branch}: {problem}")]
    Branch {
        /// The branch, as given.
        branch: String,
        /// What is wrong.
        problem: String,
    },
    /// The repository could not be cloned, fetched or diffed.
    #[error("cannot read {source_name}")]
    Git {
        /// The source as given.
        source_name: String,
        /// What git said.
        #[source]
        error: GitError,
    },
    /// The site's start page could not be fetched.
    #[error("cannot crawl {source_name}")]
    Site {
        /// The source as given.
        source_name: String,
        /// Why.
        #[source]
        error: CrawlError,
    },
}

/// How a catalogued document is compared with what this run would write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Content hash and the whole [`IndexIdentity`]: the embedded pipeline,
    /// which chunks and embeds.
    Everything,
    /// Content hash, chunker and embedded-text format
    /// ([`IndexIdentity::same_chunking`]): the distributed crawler, whose
    /// embedders answer for the model.
    Chunking,
}

/// How to plan.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// What this run's chunks and vectors would be recorded with.
    pub expected: IndexIdentity,
    /// Which part of it must match.
    pub compare: Compare,
    /// Every listed document counts as changed, and git sources are read
    /// whole (a forced re-index).
    pub force: bool,
    /// Progress display (`ProgressBar::hidden()` for none).
    pub progress: ProgressBar,
}

/// Where a listed document's bytes are.
#[derive(Debug, Clone)]
enum Content {
    /// A file on disk, read when its turn comes, if it is still the file
    /// listed.
    File {
        path: PathBuf,
        listed: Option<FileIdentity>,
    },
    /// A fetched page, with its media type.
    Fetched {
        media_type: &'static str,
        body: Vec<u8>,
    },
}

/// A document as its source lists it.
#[derive(Debug, Clone)]
struct Listed {
    uri: String,
    content: Content,
}

/// The project a branch overlay is planned over: its state and its
/// documents by uri.
#[derive(Debug, Clone)]
struct Base {
    project: String,
    branch: String,
    revision: Option<String>,
    records: HashMap<String, DocumentRecord>,
}

/// A new or changed document, read, ready to be chunked.
#[derive(Debug, Clone)]
pub struct ChangedDocument {
    /// Its id in the project.
    pub document_id: DocumentId,
    /// Its uri (repo-relative path or URL).
    pub uri: String,
    /// The media type of a fetched page (`text/html`…); empty for files,
    /// which are judged by their uri and bytes.
    pub media_type: &'static str,
    /// Its bytes.
    pub content: Vec<u8>,
    /// sha256 of `content`.
    pub content_hash: String,
    /// What the catalog recorded for it, if anything.
    pub previous: Option<DocumentRecord>,
}

/// One step of a [`ChangeSet`].
#[derive(Debug, Clone)]
pub enum Change {
    /// New or changed: chunk and index it.
    Index(Box<ChangedDocument>),
    /// The catalog holds this content with the expected identity.
    Unchanged {
        /// The document's uri.
        uri: String,
    },
    /// It is listed but could not be read.
    Unreadable(Issue),
}

/// Lists sources and compares them with the catalog.
#[derive(Debug, Clone)]
pub struct ChangePlanner {
    selection: DirSelection,
    skip_dirs: Vec<String>,
    crawl: CrawlConfig,
    checkouts: sources::CheckoutCache,
    git_policy: GitPolicy,
    max_file_bytes: u64,
}

impl ChangePlanner {
    /// A planner selecting files as `[sources]` says, crawling sites as
    /// `[crawl]` says; git checkouts are kept under `checkout_root`, within
    /// `crawl.max_checkout_bytes`.
    pub fn new(
        sources: &SourcesConfig,
        crawl: &CrawlConfig,
        checkout_root: impl Into<PathBuf>,
    ) -> Result<Self, PlanError> {
        Ok(Self {
            selection: DirSelection::new(sources).map_err(PlanError::Selection)?,
            skip_dirs: sources.skip_dirs.clone(),
            crawl: crawl.clone(),
            checkouts: sources::CheckoutCache::new(checkout_root, crawl.max_checkout_bytes),
            git_policy: GitPolicy::local(),
            max_file_bytes: u64::MAX,
        })
    }

    /// The planner of a run configured by `config`: `[sources]`, `[crawl]`
    /// and `chunking.max_file_bytes`, with the user's own git
    /// ([`ChangePlanner::with_git_policy`] narrows it); git checkouts under
    /// `checkout_root`.
    pub fn for_config(
        config: &weft_config::WeftConfig,
        checkout_root: impl Into<PathBuf>,
    ) -> Result<Self, PlanError> {
        Ok(Self::new(&config.sources, &config.crawl, checkout_root)?
            .with_max_file_bytes(config.chunking.max_file_bytes))
    }

    /// The same planner, reading no file larger than `limit` bytes
    /// (`chunking.max_file_bytes`): a larger one is reported, not read, and
    /// what was indexed of it stays.
    pub fn with_max_file_bytes(mut self, limit: u64) -> Self {
        self.max_file_bytes = limit;
        self
    }

    /// The same planner, with git limited to what `policy` allows (the
    /// distributed crawler's is `crawl.git_protocols` and public addresses;
    /// `weft index` trusts the user's own git, [`GitPolicy::local`]).
    pub fn with_git_policy(mut self, policy: GitPolicy) -> Self {
        self.git_policy = policy;
        self
    }

    /// The checkout cache git sources are kept in.
    pub fn checkouts(&self) -> &sources::CheckoutCache {
        &self.checkouts
    }

    /// Where the checkout of `project`'s git source is kept.
    pub fn checkout_dir(&self, project: &str) -> PathBuf {
        self.checkouts.dir(project)
    }

    /// Lists `spec` as `project` and prepares the comparison with what
    /// `catalog` records for the project.
    ///
    /// A project named `P@B` is branch `B` of `P`, planned as its overlay
    /// ([`weft_core::overlays`]): `P` must be indexed from the same source;
    /// a git source checks out `B` and is diffed from `P`'s commit; a
    /// directory (a worktree) is read whole. A document is new or changed
    /// only where its content differs from `P`'s; what `P` holds unchanged
    /// is not read into the overlay.
    ///
    /// A git source is diffed against the last indexed commit when the
    /// catalog recorded one for the same URL, the commit still exists, no
    /// document is recorded with another identity and the plan is not
    /// forced; otherwise its checkout is walked whole.
    pub async fn plan(
        &self,
        catalog: &dyn Catalog,
        spec: &SourceSpec,
        project: &str,
        options: &PlanOptions,
    ) -> Result<ChangeSet, PlanError> {
        if let Some(problem) = weft_core::project_problem(project) {
            return Err(PlanError::Project {
                project: project.to_owned(),
                problem,
            });
        }
        // `P@B` is branch B of P: planned as an overlay of P.
        let base = match overlays::split_overlay(project) {
            Some((base, branch)) => Some(self.base(catalog, spec, base, branch).await?),
            None => None,
        };
        let is_overlay = base.is_some();
        let known: HashMap<DocumentId, DocumentRecord> = catalog
            .documents(Some(project))
            .await?
            .into_iter()
            .map(|r| (r.document_id.clone(), r))
            .collect();
        let previous_state = catalog.project(project).await?;
        let mut set = ChangeSet {
            project: project.to_owned(),
            source: spec.display(),
            revision: None,
            diffed_from: None,
            outdated: known
                .values()
                .filter(|r| !options.matches_identity(&r.identity))
                .count(),
            errors: Vec::new(),
            unchanged: 0,
            skipped: Vec::new(),
            listed: Vec::new().into_iter(),
            listed_count: 0,
            complete: true,
            deleted_uris: Vec::new(),
            known,
            seen: HashSet::new(),
            options: options.clone(),
            max_file_bytes: self.max_file_bytes,
            checkout: None,
            base: None,
            gone: false,
            listed_uris: HashSet::new(),
            hidden: std::collections::BTreeSet::new(),
        };
        let progress = &options.progress;
        let listed: Vec<Listed> = match spec {
            SourceSpec::Dir(path) => self.walk(path, &mut set),
            SourceSpec::Git(url) => {
                let git_error = |error| PlanError::Git {
                    source_name: spec.display(),
                    error,
                };
                // Held by the change set while its files are read: the
                // cache removes no checkout a crawl is reading.
                let lease = self.checkouts.lease(project);
                let repo = GitRepo::with_policy(url, lease.dir(), self.git_policy.clone())
                    .with_branch(base.as_ref().map(|b| b.branch.clone()));
                progress.set_message(format!("fetching {}", spec.display()));
                let head = match repo.sync() {
                    Ok(head) => head,
                    // The branch is gone from the remote: its overlay lists
                    // nothing, so every document it held is removed, and
                    // so is the project ([`ChangeSet::gone`]).
                    Err(GitError::NoBranch { .. }) if is_overlay && previous_state.is_some() => {
                        set.gone = true;
                        set.base = base;
                        return Ok(set);
                    }
                    Err(error) => return Err(git_error(error)),
                };
                lease.record_sync();
                set.checkout = Some(lease);
                set.revision = Some(head.clone());
                // An overlay is diffed from its base's commit: the diff is
                // every file that differs from the base as indexed.
                let diff_from = match &base {
                    Some(base) => base.revision.clone(),
                    None => previous_state
                        .filter(|s| s.source == spec.display())
                        .and_then(|s| s.revision),
                };
                let diff_from = diff_from
                    .filter(|rev| !options.force && set.outdated == 0 && repo.has_commit(rev));
                match diff_from {
                    Some(diff_from) => {
                        let changes = repo.changes(&diff_from, &head).map_err(git_error)?;
                        // An overlay's diff lists all it holds: what it no
                        // longer lists now reads as the base.
                        set.complete = is_overlay;
                        set.deleted_uris = changes.deleted;
                        set.diffed_from = Some(diff_from);
                        changes
                            .changed
                            .into_iter()
                            .filter(|uri| self.selects_changed_path(uri))
                            .map(|uri| {
                                let path = repo.dir().join(&uri);
                                Listed {
                                    content: Content::File {
                                        listed: FileIdentity::of(&path),
                                        path,
                                    },
                                    uri,
                                }
                            })
                            .collect()
                    }
                    None => self.walk(repo.dir(), &mut set),
                }
            }
            SourceSpec::Site(url) => {
                progress.set_message(format!("crawling {}", spec.display()));
                let (pages, issues) =
                    sources::crawl(url, &self.crawl, progress)
                        .await
                        .map_err(|error| PlanError::Site {
                            source_name: spec.display(),
                            error,
                        })?;
                set.skipped = issues;
                pages
                    .into_iter()
                    .map(|page| Listed {
                        uri: page.url.to_string(),
                        content: Content::Fetched {
                            media_type: weft_chunking::page_media_type(page.kind),
                            body: page.body.into_bytes(),
                        },
                    })
                    .collect()
            }
        };
        // One rule for every uri, whatever listed it (a walk, a git diff, a
        // crawl): a name that could not be a uri is reported, not read.
        let (listed, refused): (Vec<Listed>, Vec<Listed>) = listed
            .into_iter()
            .partition(|l| weft_core::uri_problem(&l.uri).is_none());
        set.skipped.extend(refused.into_iter().map(|l| Issue {
            reason: format!(
                "its path {}: not read",
                weft_core::uri_problem(&l.uri).unwrap_or_default()
            ),
            uri: l.uri.escape_debug().to_string(),
        }));
        set.listed_count = listed.len();
        if base.is_some() {
            set.listed_uris = listed.iter().map(|l| l.uri.clone()).collect();
        }
        set.base = base;
        set.listed = listed.into_iter();
        Ok(set)
    }

    /// The base of the overlay of `branch` over `project`: indexed, from
    /// the same source, not itself an overlay.
    async fn base(
        &self,
        catalog: &dyn Catalog,
        spec: &SourceSpec,
        project: &str,
        branch: &str,
    ) -> Result<Base, PlanError> {
        let problem = |problem: String| PlanError::Branch {
            branch: branch.to_owned(),
            problem,
        };
        if let Some(p) = overlays::branch_problem(branch) {
            return Err(problem(format!("the branch name {p}")));
        }
        match spec {
            SourceSpec::Site(_) => {
                return Err(problem("a documentation site has no branches".into()));
            }
            // A directory is the branch's worktree, read as it is on disk:
            // one with another branch checked out is not that branch.
            SourceSpec::Dir(dir) => {
                if let Some(other) = sources::checked_out_branch(dir).filter(|b| b != branch) {
                    return Err(problem(format!(
                        "{} has branch {other:?} checked out; check {branch:?} out in a worktree (git worktree add DIR {branch}) and index that, or index the repository's URL (file://…) with --branch",
                        dir.display()
                    )));
                }
            }
            SourceSpec::Git(_) => {}
        }
        let state = catalog.project(project).await?.ok_or_else(|| {
            problem(format!(
                "project {project:?} is not indexed; index its default branch first (weft index {} --project {project})",
                spec.display()
            ))
        })?;
        if state.overlay.is_some() {
            return Err(problem(format!(
                "project {project:?} is itself a branch overlay; name the base project"
            )));
        }
        if matches!(spec, SourceSpec::Git(_)) && state.source != spec.display() {
            return Err(problem(format!(
                "project {project:?} was indexed from {}, not from {}",
                state.source,
                spec.display()
            )));
        }
        let records = catalog
            .documents(Some(project))
            .await?
            .into_iter()
            .map(|r| (r.uri.clone(), r))
            .collect();
        Ok(Base {
            project: project.to_owned(),
            branch: branch.to_owned(),
            revision: state.revision,
            records,
        })
    }

    fn walk(&self, root: &Path, set: &mut ChangeSet) -> Vec<Listed> {
        let walk = sources::walk_dir(root, &self.selection);
        set.errors.extend(walk.errors);
        set.skipped.extend(walk.skipped);
        walk.files
            .into_iter()
            .map(|(uri, path)| Listed {
                uri,
                content: Content::File {
                    listed: walk.identities.get(&path).copied(),
                    path,
                },
            })
            .collect()
    }

    /// Whether a path a git diff names is one a walk of the checkout would
    /// list: selected by the globs, not hidden, not under a skipped
    /// directory. (Ignored files are not in git.) So a diffed re-index and a
    /// full one index the same files.
    fn selects_changed_path(&self, uri: &str) -> bool {
        let parts: Vec<&str> = uri.split('/').collect();
        let hidden = parts.iter().any(|p| p.starts_with('.'));
        let skipped = parts[..parts.len().saturating_sub(1)]
            .iter()
            .any(|p| self.skip_dirs.iter().any(|d| d == p));
        !hidden && !skipped && self.selection.selects(uri)
    }
}

impl PlanOptions {
    fn matches_identity(&self, recorded: &IndexIdentity) -> bool {
        match self.compare {
            Compare::Everything => *recorded == self.expected,
            Compare::Chunking => recorded.same_chunking(&self.expected),
        }
    }
}

/// The documents of one source compared with the catalog: an iterator of
/// [`Change`]s (each listed document read in turn), then
/// [`ChangeSet::removed`].
#[derive(Debug)]
pub struct ChangeSet {
    /// The project.
    pub project: String,
    /// The source as recorded in the catalog.
    pub source: String,
    /// The checked-out commit, for git sources.
    pub revision: Option<String>,
    /// For a git source read by diff: the last indexed commit it was
    /// diffed from. `None` when the source was read whole.
    pub diffed_from: Option<String>,
    /// How many catalogued documents of the project have another identity
    /// than the expected one (they are indexed again, and a git source is
    /// read whole).
    pub outdated: usize,
    /// Entries that could not be listed (unreadable directories, symlink
    /// loops) and, once [`ChangeSet::next_document`] has passed them,
    /// documents that could not be read.
    pub errors: Vec<Issue>,
    /// Documents [`ChangeSet::next_document`] passed as unchanged.
    pub unchanged: usize,
    /// Documents the source declined to give (robots.txt, not HTML…).
    pub skipped: Vec<Issue>,
    listed: std::vec::IntoIter<Listed>,
    listed_count: usize,
    complete: bool,
    deleted_uris: Vec<String>,
    known: HashMap<DocumentId, DocumentRecord>,
    seen: HashSet<DocumentId>,
    options: PlanOptions,
    max_file_bytes: u64,
    checkout: Option<sources::CheckoutLease>,
    /// For a branch overlay: its base, the uris listed, and the base's
    /// uris it hides (changed), filled as documents are read.
    base: Option<Base>,
    /// The overlay's branch is gone from the remote: the set lists nothing,
    /// [`ChangeSet::removed`] is every document the overlay holds, and the
    /// caller removes the project instead of recording its state.
    pub gone: bool,
    listed_uris: HashSet<String>,
    hidden: std::collections::BTreeSet<String>,
}

impl ChangeSet {
    /// How many documents the source listed (for a diffed git source: the
    /// changed files).
    pub fn listed(&self) -> usize {
        self.listed_count
    }

    /// What the catalog records for the project's source after this run.
    pub fn project_state(&self) -> ProjectState {
        ProjectState {
            source: self.source.clone(),
            revision: self.revision.clone(),
            indexed_at: ProjectState::now(),
            overlay: self.overlay(),
        }
    }

    /// For a branch overlay, what it is over and the paths at which it
    /// hides its base: every path whose content differs from the base's
    /// (changed or added on the branch), and every path the branch deleted
    /// (for a whole listing, each base document not listed; for a diff, the
    /// paths it names deleted, whether or not the base's record of them is
    /// written yet). Complete once the iteration has ended.
    pub fn overlay(&self) -> Option<Overlay> {
        let base = self.base.as_ref()?;
        let mut hidden = self.hidden.clone();
        if self.diffed_from.is_none() {
            hidden.extend(
                base.records
                    .keys()
                    .filter(|uri| !self.listed_uris.contains(*uri))
                    .cloned(),
            );
        } else {
            hidden.extend(self.deleted_uris.iter().cloned());
        }
        Some(Overlay {
            base: base.project.clone(),
            branch: base.branch.clone(),
            base_revision: base.revision.clone(),
            hidden: hidden.into_iter().collect(),
        })
    }

    /// The catalogued documents the source no longer has: for a whole
    /// listing, every record not listed; for a git diff, the deleted paths
    /// that were indexed. Complete once the iteration has ended.
    pub fn removed(&self) -> Vec<DocumentRecord> {
        let mut gone: Vec<DocumentRecord> = if self.complete {
            self.known
                .values()
                .filter(|r| !self.seen.contains(&r.document_id))
                .cloned()
                .collect()
        } else {
            self.deleted_uris
                .iter()
                .filter_map(|uri| self.known.get(&DocumentId::new(&self.project, uri)))
                .filter(|r| !self.seen.contains(&r.document_id))
                .cloned()
                .collect()
        };
        gone.sort_by(|a, b| a.uri.cmp(&b.uri));
        gone
    }

    /// The next document to index: unchanged documents are counted in
    /// [`ChangeSet::unchanged`] and unreadable ones added to
    /// [`ChangeSet::errors`] on the way.
    pub fn next_document(&mut self) -> Option<ChangedDocument> {
        loop {
            match self.next()? {
                Change::Index(document) => return Some(*document),
                Change::Unchanged { .. } => self.unchanged += 1,
                Change::Unreadable(issue) => self.errors.push(issue),
            }
        }
    }

    fn up_to_date(&self, record: &DocumentRecord, hash: &str) -> bool {
        !self.options.force
            && record.content_hash == hash
            && self.options.matches_identity(&record.identity)
    }
}

impl Iterator for ChangeSet {
    type Item = Change;

    fn next(&mut self) -> Option<Change> {
        let Listed { uri, content } = self.listed.next()?;
        self.options.progress.inc(1);
        let document_id = DocumentId::new(&self.project, &uri);
        self.seen.insert(document_id.clone());
        let (content, media_type) = match content {
            Content::File { path, listed } => {
                match sources::read_listed_file(&path, listed, self.max_file_bytes) {
                    Ok(bytes) => (bytes, ""),
                    Err(reason) => {
                        return Some(Change::Unreadable(Issue { uri, reason }));
                    }
                }
            }
            Content::Fetched { media_type, body } => (body, media_type),
        };
        let hash = content_hash(&content);
        if let Some(base) = &self.base {
            // The base's own content: read through the overlay from the
            // base, so the overlay keeps no copy.
            if base
                .records
                .get(&uri)
                .is_some_and(|r| r.content_hash == hash)
            {
                self.seen.remove(&document_id);
                return Some(Change::Unchanged { uri });
            }
            // Held by the overlay: the base's document at this path (if it
            // has one, now or once it is written) is never read through it.
            self.hidden.insert(uri.clone());
        }
        let previous = self.known.get(&document_id);
        if previous.is_some_and(|r| self.up_to_date(r, &hash)) {
            return Some(Change::Unchanged { uri });
        }
        Some(Change::Index(Box::new(ChangedDocument {
            previous: previous.cloned(),
            document_id,
            uri,
            media_type,
            content,
            content_hash: hash,
        })))
    }
}
