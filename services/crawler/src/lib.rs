//! # weft-crawler
//!
//! The first stage of the distributed pipeline (DESIGN §6): lists the
//! documents of each source — a directory, a git repository, a documentation
//! site — compares their content hashes with the catalog (a NATS key-value
//! bucket the embedders keep), and publishes only what is new or changed to
//! `weft.docs.<project>.<document_id>`, and a deletion (a document with no
//! content) for each catalogued document that is gone. One run handles the
//! sources given on the command line or a [`Manifest`] of many sources
//! across projects: the organisation-wide bulk re-index.

#![warn(missing_docs)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::ProgressBar;
use prost::Message as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use weft_config::WeftConfig;
use weft_core::DocumentId;
use weft_core::ports::{Catalog, ProjectState};
use weft_nats::trace::{TraceContext, TraceHeaders as _};
use weft_nats::{Jet, NatsCatalog, NatsError};
use weft_pipeline::Issue;
use weft_pipeline::sources::{self, DirSelection, GitPolicy, GitRepo, SourceSpec};
use weft_proto::v1;
use weft_telemetry::trace::{Kind, start_span};

/// Room left in a message for headers and the other fields.
const PAYLOAD_MARGIN: usize = 8192;
/// Publishes awaiting the stream's acknowledgement at once.
const PUBLISH_WINDOW: usize = 256;

/// Why a crawl stopped.
#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    /// NATS failed.
    #[error(transparent)]
    Nats(#[from] NatsError),
    /// The catalog failed.
    #[error(transparent)]
    Catalog(#[from] weft_core::ports::PortError),
    /// A source could not be listed at all.
    #[error("{source_name}: {message}")]
    Source {
        /// The source as given.
        source_name: String,
        /// What went wrong.
        message: String,
    },
    /// The manifest could not be read.
    #[error("{path}: {message}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, naming the entry.
        message: String,
    },
    /// A setting cannot work.
    #[error("{0}")]
    Config(String),
}

/// Many sources across projects, from a TOML file:
///
/// ```toml
/// [[sources]]
/// source = "https://github.com/google/guava.git"
/// project = "guava"              # default: derived from the source
///
/// [[sources]]
/// source = "https://nodejs.org/docs/latest-v18.x/api/"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The sources.
    #[serde(default)]
    pub sources: Vec<ManifestEntry>,
}

/// One source of a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// A directory, git URL or http(s) URL.
    pub source: String,
    /// The project; default: derived from the source.
    pub project: Option<String>,
}

impl Manifest {
    /// Reads and checks a manifest; errors name the file and the entry.
    pub fn load(path: &Path) -> Result<Vec<(SourceSpec, String)>, CrawlError> {
        let err = |message: String| CrawlError::Manifest {
            path: path.to_owned(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        if manifest.sources.is_empty() {
            return Err(err("lists no [[sources]]".into()));
        }
        manifest
            .sources
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let base = path.parent().unwrap_or(Path::new("."));
                if entry.source.chars().any(char::is_control) {
                    return Err(err(format!(
                        "sources[{i}].source: {:?} contains control characters",
                        entry.source
                    )));
                }
                // Relative directories are relative to the manifest, and stay
                // under its directory (an absolute path says where else).
                let arg = if entry.source.contains("://") || entry.source.starts_with("git@") {
                    entry.source.clone()
                } else {
                    let relative = Path::new(&entry.source);
                    if relative.is_relative()
                        && relative
                            .components()
                            .any(|c| matches!(c, std::path::Component::ParentDir))
                    {
                        return Err(err(format!(
                            "sources[{i}].source: {:?} leaves the manifest's directory; write an absolute path to index a directory elsewhere",
                            entry.source
                        )));
                    }
                    base.join(relative).display().to_string()
                };
                let spec = SourceSpec::parse(&arg)
                    .map_err(|e| err(format!("sources[{i}].source: {e}")))?;
                let project = entry
                    .project
                    .clone()
                    .unwrap_or_else(|| spec.default_project());
                if project.trim().is_empty() {
                    return Err(err(format!("sources[{i}].project: must not be empty")));
                }
                Ok((spec, project))
            })
            .collect()
    }
}

/// How to crawl.
#[derive(Debug, Clone)]
pub struct CrawlOptions {
    /// Publish every document, changed or not.
    pub reindex: bool,
    /// Where git sources are cloned.
    pub checkout_dir: PathBuf,
    /// Progress display.
    pub progress: ProgressBar,
}

/// What one source's crawl did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceSummary {
    /// The project.
    pub project: String,
    /// The source as given.
    pub source: String,
    /// The git commit, for repositories.
    pub revision: Option<String>,
    /// Documents listed.
    pub documents_seen: usize,
    /// New or changed documents published.
    pub documents_published: usize,
    /// Documents whose content hash the catalog already has.
    pub documents_unchanged: usize,
    /// Deletions published (catalogued documents gone from the source).
    pub documents_deleted: usize,
    /// Documents not published, with reasons.
    pub skipped: Vec<Issue>,
    /// Documents that could not be read.
    pub errors: Vec<Issue>,
    /// Bytes published.
    pub bytes_published: u64,
    /// Wall time.
    pub elapsed_ms: u64,
}

enum Listed {
    File {
        uri: String,
        path: PathBuf,
    },
    Page {
        uri: String,
        kind: &'static str,
        body: String,
    },
}

/// Publishes documents of sources whose content the catalog does not have.
pub struct Crawler {
    jet: Jet,
    catalog: NatsCatalog,
    config: WeftConfig,
    selection: DirSelection,
    /// The fingerprint of the chunker the configuration describes: a
    /// document recorded as cut by another is published again.
    chunker: String,
    /// What git may do here: `crawl.git_protocols`, public addresses.
    git_policy: GitPolicy,
}

impl Crawler {
    /// A crawler publishing through `jet`.
    pub async fn new(jet: Jet, config: WeftConfig) -> Result<Self, CrawlError> {
        let catalog = jet.catalog().await?;
        let selection = DirSelection::new(&config.sources).map_err(CrawlError::Config)?;
        let chunker = weft_chunking::Chunker::new(config.chunking.clone())
            .map_err(|e| CrawlError::Config(format!("{}: {}", e.key, e.message)))?
            .fingerprint()
            .to_owned();
        let git_policy = GitPolicy::from_crawl_config(&config.crawl)
            .map_err(|e| CrawlError::Config(format!("{}: {}", e.key, e.message)))?;
        Ok(Self {
            jet,
            catalog,
            config,
            selection,
            chunker,
            git_policy,
        })
    }

    /// Crawls one source as `project`.
    pub async fn crawl(
        &self,
        spec: &SourceSpec,
        project: &str,
        options: &CrawlOptions,
    ) -> Result<SourceSummary, CrawlError> {
        let started = Instant::now();
        let mut summary = SourceSummary {
            project: project.to_owned(),
            source: spec.display(),
            ..Default::default()
        };
        let source_error = |message: String| CrawlError::Source {
            source_name: spec.display(),
            message,
        };
        let listed: Vec<Listed> = match spec {
            SourceSpec::Dir(path) => {
                let (files, issues) = sources::walk_dir(path, &self.selection);
                summary.errors.extend(issues);
                files
                    .into_iter()
                    .map(|(uri, path)| Listed::File { uri, path })
                    .collect()
            }
            SourceSpec::Git(url) => {
                let repo = GitRepo::with_policy(
                    url,
                    &options.checkout_dir.join(sources::checkout_name(project)),
                    self.git_policy.clone(),
                );
                options
                    .progress
                    .set_message(format!("fetching {}", spec.display()));
                let head = repo.sync().map_err(|e| source_error(e.to_string()))?;
                summary.revision = Some(head);
                let (files, issues) = sources::walk_dir(repo.dir(), &self.selection);
                summary.errors.extend(issues);
                files
                    .into_iter()
                    .map(|(uri, path)| Listed::File { uri, path })
                    .collect()
            }
            SourceSpec::Site(url) => {
                options
                    .progress
                    .set_message(format!("crawling {}", spec.display()));
                let (pages, issues) = sources::crawl(url, &self.config.crawl, &options.progress)
                    .await
                    .map_err(|e| source_error(e.to_string()))?;
                summary.skipped.extend(issues);
                pages
                    .into_iter()
                    .map(|p| Listed::Page {
                        uri: p.url.to_string(),
                        kind: p.kind,
                        body: p.body,
                    })
                    .collect()
            }
        };
        // Each known document's content hash, and whether the chunker that
        // cut it is the one configured here.
        let cut_by = format!("/{}", self.chunker);
        let known: HashMap<DocumentId, (String, bool)> = self
            .catalog
            .documents(Some(project))
            .await?
            .into_iter()
            .map(|r| {
                let same_chunker = r.embedding.ends_with(&cut_by);
                (r.document_id, (r.content_hash, same_chunker))
            })
            .collect();
        let limit = self.jet.max_payload().saturating_sub(PAYLOAD_MARGIN);
        let progress = &options.progress;
        progress.set_length(listed.len() as u64);
        progress.set_position(0);
        progress.set_message(project.to_owned());
        summary.documents_seen = listed.len();
        let mut seen: HashSet<DocumentId> = HashSet::new();
        let mut acks = Vec::new();
        for item in listed {
            progress.inc(1);
            let (uri, bytes, media_type) = match item {
                Listed::File { uri, path } => match std::fs::read(&path) {
                    Ok(bytes) => (uri, bytes, String::new()),
                    Err(e) => {
                        summary.errors.push(Issue {
                            uri,
                            reason: format!("cannot be read: {e}"),
                        });
                        continue;
                    }
                },
                Listed::Page { uri, kind, body } => (
                    uri,
                    body.into_bytes(),
                    weft_chunking::page_media_type(kind).to_owned(),
                ),
            };
            let id = DocumentId::new(project, &uri);
            seen.insert(id.clone());
            let hash = hex::encode(Sha256::digest(&bytes));
            let unchanged = known
                .get(&id)
                .is_some_and(|(known_hash, same_chunker)| *known_hash == hash && *same_chunker);
            if !options.reindex && unchanged {
                summary.documents_unchanged += 1;
                continue;
            }
            if bytes.len() > limit {
                summary.skipped.push(Issue {
                    uri,
                    reason: format!(
                        "{} bytes is over what one NATS message carries here ({limit} bytes; raise max_payload in nats-server's configuration)",
                        bytes.len()
                    ),
                });
                continue;
            }
            summary.bytes_published += bytes.len() as u64;
            let document = v1::Document {
                project: project.to_owned(),
                uri,
                document_id: id.as_str().to_owned(),
                content: Some(bytes),
                content_hash: hash,
                media_type,
                revision: summary.revision.clone().unwrap_or_default(),
            };
            acks.push(self.publish(&document).await?);
            summary.documents_published += 1;
            if acks.len() >= PUBLISH_WINDOW {
                for ack in acks.drain(..) {
                    ack.await?;
                }
            }
        }
        // Catalogued documents the source no longer has.
        for id in known.keys().filter(|id| !seen.contains(*id)) {
            let record = self.catalog.document(id).await?;
            let uri = record.map(|r| r.uri).unwrap_or_default();
            let document = v1::Document {
                project: project.to_owned(),
                uri,
                document_id: id.as_str().to_owned(),
                content: None,
                content_hash: String::new(),
                media_type: String::new(),
                revision: summary.revision.clone().unwrap_or_default(),
            };
            acks.push(self.publish(&document).await?);
            summary.documents_deleted += 1;
        }
        for ack in acks {
            ack.await?;
        }
        self.catalog
            .put_project(
                project,
                &ProjectState {
                    source: spec.display(),
                    revision: summary.revision.clone(),
                },
            )
            .await?;
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        let metrics = weft_telemetry::metrics();
        for (outcome, n) in [
            ("published", summary.documents_published),
            ("unchanged", summary.documents_unchanged),
            ("deleted", summary.documents_deleted),
            ("skipped", summary.skipped.len()),
        ] {
            metrics
                .documents
                .with_label_values(&["crawler", outcome])
                .inc_by(n as u64);
        }
        Ok(summary)
    }

    async fn publish(
        &self,
        document: &v1::Document,
    ) -> Result<impl std::future::Future<Output = Result<(), NatsError>> + use<>, CrawlError> {
        let subject = weft_nats::docs_subject(&document.project, &document.document_id);
        let trace = TraceContext::new_root();
        tracing::debug!(uri = %document.uri, trace_id = %trace.trace_id, "publish");
        // The root of the document's trace; the chunker's span is its child.
        let _span = start_span(
            "crawler publish",
            Kind::Producer,
            &trace,
            None,
            &[
                ("messaging.system", "nats".into()),
                ("messaging.destination.name", subject.clone()),
                ("weft.project", document.project.clone()),
                ("weft.uri", document.uri.clone()),
                ("weft.document_id", document.document_id.clone()),
            ],
        );
        Ok(self
            .jet
            .publish_later(subject, trace.headers(), document.encode_to_vec().into())
            .await?)
    }
}
