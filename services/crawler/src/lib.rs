//! # weft-crawler
//!
//! The first stage of the distributed pipeline (DESIGN §6). For each source
//! — a directory, a git repository, a documentation site — the shared
//! [`ChangePlanner`] of `weft-index` (the same one `weft index` uses)
//! lists the documents and compares them with the catalog (a NATS key-value
//! bucket the embedders keep); a git source is read by diff from the last
//! indexed commit. The crawler publishes what is new or changed to
//! `weft.docs.<project>.<document_id>`, and a deletion (a document with no
//! content) for each catalogued document that is gone. One run handles the
//! sources given on the command line or a [`Manifest`] of many sources
//! across projects: the organisation-wide bulk re-index.

#![warn(missing_docs)]

mod args;
mod cmd;
mod program;

pub use program::main;

pub mod generations;
mod job;

pub use job::{FailedSource, JobOptions, JobSummary, RUNS_BUCKET, SwitchSummary};

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::ProgressBar;
use prost::Message as _;
use serde::{Deserialize, Serialize};
use weft_config::{InvalidSetting, WeftConfig};
use weft_core::IndexIdentity;
use weft_core::ports::Catalog;
use weft_index::{ChangePlanner, Compare, Issue, PlanError, PlanOptions};
use weft_nats::trace::{TraceContext, TraceHeaders as _};
use weft_nats::{Jet, NatsCatalog, NatsError};
use weft_proto::v1;
use weft_sources::{GitPolicy, SourceSpec};
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
    #[error(transparent)]
    Source(#[from] PlanError),
    /// The manifest could not be read.
    #[error("{path}: {message}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, naming the entry.
        message: String,
    },
    /// The manifest file could not be read.
    #[error("cannot read the manifest {path}")]
    ManifestUnreadable {
        /// The manifest file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not valid TOML of the expected shape.
    #[error("{path}")]
    ManifestSyntax {
        /// The manifest file.
        path: PathBuf,
        /// What the TOML parser says (line, column, key).
        #[source]
        source: toml::de::Error,
    },
    /// A setting cannot work.
    #[error(transparent)]
    Config(#[from] InvalidSetting),
    /// An index generation could not be begun, switched or removed.
    #[error("index generations")]
    Generations(#[from] weft_index::GenerationsError),
}

/// Many sources across projects, from a TOML file:
///
/// ```toml
/// [[sources]]
/// source = "https://github.com/google/guava.git"
/// project = "guava"              # default: derived from the source
///
/// [[sources]]
/// source = "https://github.com/acme/app.git"
/// branches = ["release-2.x"]      # each as an overlay app@release-2.x
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
    /// Branches of a git repository besides its default branch, each
    /// crawled as an overlay `project@branch` ([`weft_core::overlays`])
    /// after the projects: only what differs from the project is published.
    #[serde(default)]
    pub branches: Vec<String>,
}

impl Manifest {
    /// Reads and checks a manifest; errors name the file and the entry.
    /// Each branch an entry lists follows as its own work item, with the
    /// overlay's name as its project.
    pub fn load(path: &Path) -> Result<Vec<(SourceSpec, String)>, CrawlError> {
        let err = |message: String| CrawlError::Manifest {
            path: path.to_owned(),
            message,
        };
        let text =
            std::fs::read_to_string(path).map_err(|source| CrawlError::ManifestUnreadable {
                path: path.to_owned(),
                source,
            })?;
        let manifest: Manifest =
            toml::from_str(&text).map_err(|source| CrawlError::ManifestSyntax {
                path: path.to_owned(),
                source,
            })?;
        if manifest.sources.is_empty() {
            return Err(err("lists no [[sources]]".into()));
        }
        let entries: Vec<(SourceSpec, String)> = manifest
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
                if let Some((base, branch)) = weft_core::overlays::split_overlay(&project) {
                    return Err(err(format!(
                        "sources[{i}].project: {project:?} names a branch overlay; write project = {base:?} and branches = [{branch:?}]"
                    )));
                }
                if !entry.branches.is_empty() && !matches!(spec, SourceSpec::Git(_)) {
                    return Err(err(format!(
                        "sources[{i}].branches: only a git repository has branches"
                    )));
                }
                for (j, branch) in entry.branches.iter().enumerate() {
                    if let Some(problem) = weft_core::overlays::branch_problem(branch) {
                        return Err(err(format!("sources[{i}].branches[{j}]: {branch:?} {problem}")));
                    }
                }
                Ok(std::iter::once((spec.clone(), project.clone()))
                    .chain(entry.branches.iter().map(move |b| {
                        (spec.clone(), weft_core::overlays::overlay_name(&project, b))
                    }))
                    .collect::<Vec<_>>())
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        Ok(entries)
    }
}

/// How to crawl.
#[derive(Debug, Clone)]
pub struct CrawlOptions {
    /// Publish every document, changed or not, and read git sources whole.
    pub reindex: bool,
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
    /// For a git source read by diff: the last indexed commit it was
    /// diffed from (`None`: read whole).
    pub diffed_from: Option<String>,
    /// Documents listed (for a diffed git source: the changed files).
    pub documents_seen: usize,
    /// New or changed documents published.
    pub documents_published: usize,
    /// Documents whose content hash and chunker the catalog already has.
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

/// The index generation a crawl writes: its number (stamped on every
/// message) and its catalog (what the crawl compares with).
#[derive(Clone)]
pub struct Target {
    /// The generation.
    pub generation: u32,
    /// Its catalog.
    pub catalog: NatsCatalog,
}

/// Publishes documents of sources whose content the catalog does not have.
pub struct Crawler {
    jet: Jet,
    planner: ChangePlanner,
    /// What the configured chunkers cut with: a document recorded as cut
    /// by another chunker (or embedded-text format) is published again.
    expected: IndexIdentity,
}

impl Crawler {
    /// A crawler publishing through `jet`; git sources are cloned under
    /// `checkout_dir`.
    pub async fn new(
        jet: Jet,
        config: &WeftConfig,
        checkout_dir: impl Into<PathBuf>,
    ) -> Result<Self, CrawlError> {
        // What git may do here: `crawl.git_protocols`, public addresses.
        let git_policy = GitPolicy::from_crawl_config(&config.crawl)?;
        let planner = ChangePlanner::for_config(config, checkout_dir)?.with_git_policy(git_policy);
        let chunker = weft_chunking::Chunker::new(config.chunking.clone())?;
        Ok(Self {
            jet,
            planner,
            // The embedder part is not compared ([`Compare::Chunking`]).
            expected: IndexIdentity::new("", chunker.fingerprint()),
        })
    }

    /// The connection.
    pub fn jet(&self) -> &Jet {
        &self.jet
    }

    /// The target of index generation `generation`: its catalog opened.
    pub async fn target(&self, generation: u32) -> Result<Target, CrawlError> {
        Ok(Target {
            generation,
            catalog: self.jet.catalog_of(generation).await?,
        })
    }

    /// What crawling `work` would do (`weft-crawler --dry-run`): each source
    /// planned against the live generation's catalog as a crawl plans it,
    /// cut by the configured chunker, and its chunks looked up in the live
    /// generation's vector index (when `embedding.dimension` says how to
    /// open it without calling the embedding API): the documents, chunks
    /// and tokens the embedders would embed. Nothing is published, and no
    /// store is written.
    pub async fn estimate(
        &self,
        work: &[(SourceSpec, String)],
        config: &WeftConfig,
        locations: &weft_config::Locations,
        force: bool,
        progress: &(dyn Fn() -> indicatif::ProgressBar + Sync),
    ) -> Result<weft_index::RunEstimate, CrawlError> {
        use weft_core::ports::GenerationRegistry as _;
        let live = self
            .jet
            .registry()
            .await?
            .load()
            .await?
            .live_number()
            .unwrap_or(0);
        let catalog = self.jet.catalog_of(live).await?;
        let model = weft_wiring::configured_model_id(&config.embedding, &locations.model_dir);
        let mut notes = Vec::new();
        let vectors = match config.embedding.dimension {
            Some(dimension) => {
                let generation = weft_wiring::DataDir::new(&locations.data_dir).generation(live);
                match weft_wiring::open_index_stores(
                    &config.stores,
                    &generation,
                    &model,
                    dimension,
                    weft_wiring::StoreAccess::Read,
                )
                .await
                {
                    Ok(stores) => Some(stores.vectors),
                    Err(e) => {
                        notes.push(format!(
                            "stored vectors were not looked up: {}",
                            weft_core::error_chain(&e)
                        ));
                        None
                    }
                }
            }
            None => {
                notes.push(weft_index::estimate::NO_DIMENSION.into());
                None
            }
        };
        notes.push(format!(
            "planned against index generation {live}; the time assumes one embedder at the stated rate"
        ));
        let basis = weft_index::EstimateBasis {
            catalog: &catalog,
            vectors,
            compare: Compare::Chunking,
            planner: self.planner.clone(),
            measured: Vec::new(),
            notes,
        };
        weft_index::estimate_with(config, &model, basis, work, force, None, progress)
            .await
            .map_err(|e| match e {
                weft_index::IndexError::Port(e) => CrawlError::Catalog(e),
                weft_index::IndexError::Plan(e) => CrawlError::Source(e),
                weft_index::IndexError::Config(e) => CrawlError::Config(e),
            })
    }

    /// Crawls one source as `project` into `target`.
    pub async fn crawl(
        &self,
        spec: &SourceSpec,
        project: &str,
        target: &Target,
        options: &CrawlOptions,
    ) -> Result<SourceSummary, CrawlError> {
        let started = Instant::now();
        let plan = PlanOptions {
            expected: self.expected.clone(),
            compare: Compare::Chunking,
            force: options.reindex,
            progress: options.progress.clone(),
        };
        let mut changes = self
            .planner
            .plan(&target.catalog, spec, project, &plan)
            .await?;
        let mut summary = SourceSummary {
            project: project.to_owned(),
            source: changes.source.clone(),
            revision: changes.revision.clone(),
            diffed_from: changes.diffed_from.clone(),
            documents_seen: changes.listed(),
            skipped: std::mem::take(&mut changes.skipped),
            ..Default::default()
        };
        let revision = summary.revision.clone().unwrap_or_default();
        let limit = self.jet.max_payload().saturating_sub(PAYLOAD_MARGIN);
        let progress = &options.progress;
        progress.set_length(changes.listed() as u64);
        progress.set_position(0);
        progress.set_message(project.to_owned());
        let mut acks = Vec::new();
        while let Some(document) = changes.next_document() {
            if document.content.len() > limit {
                summary.skipped.push(Issue {
                    uri: document.uri,
                    reason: format!(
                        "{} bytes is over what one NATS message carries here ({limit} bytes; raise max_payload in nats-server's configuration)",
                        document.content.len()
                    ),
                });
                continue;
            }
            summary.bytes_published += document.content.len() as u64;
            let message = v1::Document {
                project: project.to_owned(),
                uri: document.uri,
                document_id: document.document_id.as_str().to_owned(),
                content: Some(document.content),
                content_hash: document.content_hash,
                media_type: document.media_type.to_owned(),
                revision: revision.clone(),
                generation: target.generation,
            };
            acks.push(self.publish(&message).await?);
            summary.documents_published += 1;
            if acks.len() >= PUBLISH_WINDOW {
                for ack in acks.drain(..) {
                    ack.await?;
                }
            }
        }
        summary.documents_unchanged = changes.unchanged;
        summary.errors.append(&mut changes.errors);
        for record in changes.removed() {
            let message = v1::Document {
                project: project.to_owned(),
                uri: record.uri,
                document_id: record.document_id.as_str().to_owned(),
                content: None,
                content_hash: String::new(),
                media_type: String::new(),
                revision: revision.clone(),
                generation: target.generation,
            };
            acks.push(self.publish(&message).await?);
            summary.documents_deleted += 1;
        }
        for ack in acks {
            ack.await?;
        }
        if changes.gone {
            // A branch gone from the remote: its documents' deletions are
            // published above; the project goes too.
            tracing::info!(
                project,
                "the branch is gone from the remote: its overlay is dropped"
            );
            target.catalog.remove_project(project).await?;
        } else {
            target
                .catalog
                .put_project(project, &changes.project_state())
                .await?;
        }
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
        let subject = weft_nats::docs_subject(
            document.generation,
            &document.project,
            &document.document_id,
        );
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
