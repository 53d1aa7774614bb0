//! A job's bookkeeping: the record of a run (`weft-crawler-runs`), keyed
//! by what the run does; whether an unfinished run is continued (the
//! resume policy); each source recorded as done as it ends.

use std::sync::Mutex;

use async_nats::jetstream::kv;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use weft_core::generations::now_secs;
use weft_index::GenerationManager;
use weft_index::generations::{Begin, Resume};
use weft_nats::Jet;
use weft_sources::SourceSpec;

use super::JobOptions;
use crate::{CrawlError, SourceSummary};

/// The key-value bucket of the runs' records.
pub const RUNS_BUCKET: &str = "weft-crawler-runs";

/// The record of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct RunRecord {
    started_at: u64,
    pub(super) generation: u32,
    rebuild: bool,
    /// `project\nsource` of every source finished.
    done: Vec<String>,
    finished: bool,
    /// Documents the finished sources left in the generation (published
    /// or found unchanged), for a rebuild's completeness check.
    #[serde(default)]
    pub(super) expected_documents: u64,
}

fn source_key(spec: &SourceSpec, project: &str) -> String {
    format!("{project}\n{}", spec.display())
}

/// The key of a run: what it does.
fn run_key(work: &[(SourceSpec, String)], rebuild: bool, reindex: bool) -> String {
    let mut hash = sha2::Sha256::new();
    let mode = match (rebuild, reindex) {
        (true, _) => "rebuild\n",
        (false, true) => "reindex\n",
        (false, false) => "crawl\n",
    };
    hash.update(mode.as_bytes());
    for (spec, project) in work {
        hash.update(source_key(spec, project).as_bytes());
        hash.update(b"\0");
    }
    hex::encode(&hash.finalize()[..8])
}

fn nats_error(what: &str, e: impl std::fmt::Display) -> CrawlError {
    CrawlError::Nats(weft_nats::NatsError::JetStream {
        what: what.to_owned(),
        source: e.to_string().into(),
    })
}

/// The run a job starts: continued or new.
pub(super) struct Start {
    /// Its record.
    pub(super) run: RunRecord,
    /// Whether an unfinished run is continued.
    pub(super) resumed: bool,
}

/// The record of one run.
pub(super) struct Runs {
    store: kv::Store,
    key: String,
}

impl Runs {
    /// The record of the run that does `work` as `options` say.
    pub(super) async fn open(
        jet: &Jet,
        work: &[(SourceSpec, String)],
        options: &JobOptions,
    ) -> Result<Self, CrawlError> {
        Ok(Self {
            store: jet
                .bucket(RUNS_BUCKET, "weft-crawler runs: what each job finished")
                .await?,
            key: run_key(work, options.rebuild, options.reindex),
        })
    }

    /// The run's key.
    pub(super) fn key(&self) -> &str {
        &self.key
    }

    async fn load(&self) -> Result<Option<RunRecord>, CrawlError> {
        let entry = self
            .store
            .entry(&self.key)
            .await
            .map_err(|e| nats_error("read the run record", e))?;
        Ok(match entry {
            Some(e) if e.operation == kv::Operation::Put => serde_json::from_slice(&e.value).ok(),
            _ => None,
        })
    }

    async fn save(&self, record: &RunRecord) -> Result<(), CrawlError> {
        let bytes =
            serde_json::to_vec(record).map_err(|e| nats_error("encode the run record", e))?;
        self.store
            .put(&self.key, bytes.into())
            .await
            .map_err(|e| nats_error("write the run record", e))?;
        Ok(())
    }

    /// Starts the run (the resume policy): an unfinished run started less
    /// than `options.resume_within` ago is continued — an incremental one
    /// while its generation is still live, a rebuild while its generation
    /// is still building (the manager decides that). Else a new run: an
    /// incremental one writes the live generation, a rebuild begins one.
    pub(super) async fn start(
        &self,
        manager: &GenerationManager<'_>,
        options: &JobOptions,
    ) -> Result<Start, CrawlError> {
        let now = now_secs();
        let unfinished = self.load().await?.filter(|r| {
            !r.finished && now.saturating_sub(r.started_at) < options.resume_within.as_secs()
        });
        let (generation, resumed) = if options.rebuild {
            let own = unfinished
                .as_ref()
                .filter(|r| r.rebuild)
                .map(|r| r.generation);
            let begun = manager
                .begin(&Begin {
                    model: None,
                    model_changed: false,
                    resume: Resume::Own(own),
                })
                .await?;
            (begun.number, begun.resumed)
        } else {
            let live = manager.record().await?.live_number();
            let continued = unfinished
                .as_ref()
                .is_some_and(|r| !r.rebuild && live == Some(r.generation));
            (live.unwrap_or(0), continued)
        };
        let run = match unfinished {
            Some(run) if resumed => run,
            _ => RunRecord {
                started_at: now,
                generation,
                rebuild: options.rebuild,
                ..Default::default()
            },
        };
        self.save(&run).await?;
        Ok(Start { run, resumed })
    }
}

/// What a job records as it goes: each source done, in the run's record
/// and, for a rebuild, in the generation (what it published so far).
pub(super) struct Bookkeeping<'a> {
    runs: &'a Runs,
    manager: &'a GenerationManager<'a>,
    state: Mutex<RunRecord>,
    rebuild: bool,
}

impl<'a> Bookkeeping<'a> {
    /// The bookkeeping of `run`.
    pub(super) fn new(runs: &'a Runs, manager: &'a GenerationManager<'a>, run: RunRecord) -> Self {
        Self {
            runs,
            manager,
            rebuild: run.rebuild,
            state: Mutex::new(run),
        }
    }

    /// The run's record now.
    pub(super) fn record(&self) -> RunRecord {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `work` split into the sources an earlier attempt of the run finished
    /// (as given) and those left to crawl.
    pub(super) fn split<'w>(
        &self,
        work: &'w [(SourceSpec, String)],
    ) -> (Vec<String>, Vec<&'w (SourceSpec, String)>) {
        let run = self.record();
        let (done, todo): (Vec<_>, Vec<_>) = work
            .iter()
            .partition(|(spec, project)| run.done.contains(&source_key(spec, project)));
        (done.iter().map(|(spec, _)| spec.display()).collect(), todo)
    }

    /// Records that `project` from `spec` is done (`summary`): in the run's
    /// record, and for a rebuild what it has published so far, for
    /// `generations list` and a switch by hand. A failed write is logged.
    pub(super) async fn source_done(
        &self,
        spec: &SourceSpec,
        project: &str,
        summary: &SourceSummary,
    ) {
        let snapshot = {
            let mut run = self.state.lock().unwrap_or_else(|p| p.into_inner());
            run.done.push(source_key(spec, project));
            run.expected_documents +=
                (summary.documents_published + summary.documents_unchanged) as u64;
            run.clone()
        };
        if let Err(e) = self.runs.save(&snapshot).await {
            tracing::warn!("cannot record {project} as done: {e}");
        }
        if self.rebuild
            && let Err(e) = self
                .manager
                .record_published(snapshot.generation, snapshot.expected_documents, false)
                .await
        {
            tracing::warn!("cannot record the rebuild's progress: {e}");
        }
    }

    /// Records the run as finished: it is not continued.
    pub(super) async fn finish(&self) -> Result<(), CrawlError> {
        let run = {
            let mut run = self.state.lock().unwrap_or_else(|p| p.into_inner());
            run.finished = true;
            run.clone()
        };
        self.runs.save(&run).await
    }
}
