//! What a job did: the JSON summary a Kubernetes Job leaves in its log,
//! its text for people, and its exit code.

use serde::Serialize;

use crate::{CrawlError, SourceSummary};

/// A source that failed as a whole.
#[derive(Debug, Clone, Serialize)]
pub struct FailedSource {
    /// Its project.
    pub project: String,
    /// The source as given.
    pub source: String,
    /// Why.
    pub error: String,
}

/// The switch at the end of a rebuild.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchSummary {
    /// The generation live before.
    pub from: Option<u32>,
    /// The generation live now.
    pub to: u32,
    /// Documents its catalog records.
    pub documents: u64,
    /// Chunks its catalog records.
    pub chunks: u64,
    /// Chunks its indexes hold, where the crawler can count them
    /// (server stores, or embedded ones in a data directory it can read).
    pub indexed_chunks: Option<(u64, u64)>,
    /// How long the embedders took after the last publish.
    pub waited_ms: u64,
    /// Whether the Qdrant alias now names the new collection (`None`: no Qdrant).
    pub alias: Option<bool>,
}

/// What a job did: the JSON summary a Kubernetes Job leaves in its log.
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    /// The run's key.
    pub run: String,
    /// Whether an unfinished run was continued.
    pub resumed: bool,
    /// Whether it rebuilt.
    pub rebuild: bool,
    /// The generation written.
    pub generation: u32,
    /// Each source crawled now.
    pub sources: Vec<SourceSummary>,
    /// Sources an earlier, interrupted attempt of the run finished.
    pub already_done: Vec<String>,
    /// Sources that failed.
    pub failed: Vec<FailedSource>,
    /// The switch, when a rebuild made one.
    pub switch: Option<SwitchSummary>,
    /// Why a rebuild did not switch.
    pub not_switched: Option<String>,
    /// Whether the rebuild's generation was aborted (by the operator).
    pub aborted: bool,
    /// Old generations removed at the end.
    pub removed_generations: Vec<u32>,
    /// Wall time.
    pub elapsed_ms: u64,
}

impl JobSummary {
    /// The exit code a Kubernetes Job understands: 0 when the job did its
    /// work — even when some sources failed (they are listed; the next run
    /// tries them again) — and 1 when it did not: every source failed, or a
    /// rebuild did not switch.
    pub fn exit_code(&self) -> u8 {
        let nothing_worked =
            !self.failed.is_empty() && self.sources.is_empty() && self.already_done.is_empty();
        // An operator's abort is not the job failing (and a retried pod
        // must not start another rebuild).
        let rebuild_failed = self.rebuild && self.switch.is_none() && !self.aborted;
        u8::from(nothing_worked || rebuild_failed)
    }
}

impl JobSummary {
    /// The summary of a job begun: run `run` (continued: `resumed`) writing
    /// `generation`; `already_done` its sources an earlier attempt finished.
    pub(super) fn new(
        run: String,
        resumed: bool,
        rebuild: bool,
        generation: u32,
        already_done: Vec<String>,
    ) -> Self {
        Self {
            run,
            resumed,
            rebuild,
            generation,
            sources: Vec::new(),
            already_done,
            failed: Vec::new(),
            switch: None,
            not_switched: None,
            aborted: false,
            removed_generations: Vec::new(),
            elapsed_ms: 0,
        }
    }

    /// Adds each source's result: `(project, source, result)`.
    pub(super) fn add_results(
        &mut self,
        results: Vec<(String, String, Result<SourceSummary, CrawlError>)>,
    ) {
        for (project, source, result) in results {
            match result {
                Ok(s) => self.sources.push(s),
                Err(e) => self.failed.push(FailedSource {
                    project,
                    source,
                    error: weft_core::error_chain(&e),
                }),
            }
        }
    }
}

/// The summary as people read it: a line per source (with what it skipped
/// or failed on), then the switch of a rebuild and the generations removed.
impl std::fmt::Display for JobSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for s in &self.sources {
            let read = match &s.diffed_from {
                Some(base) => format!(" (git diff from {})", base.get(..12).unwrap_or(base)),
                None => String::new(),
            };
            writeln!(
                f,
                "{}: {} documents{read}, {} published, {} unchanged, {} deleted, {} skipped, {} errors ({:.1} s)",
                s.project,
                s.documents_seen,
                s.documents_published,
                s.documents_unchanged,
                s.documents_deleted,
                s.skipped.len(),
                s.errors.len(),
                s.elapsed_ms as f64 / 1000.0
            )?;
            for issue in s.skipped.iter().chain(&s.errors) {
                writeln!(f, "  {}: {}", issue.uri, issue.reason)?;
            }
        }
        for source in &self.already_done {
            writeln!(f, "{source}: done by an earlier attempt of this run")?;
        }
        for failed in &self.failed {
            writeln!(f, "{}: FAILED: {}", failed.project, failed.error)?;
        }
        if let Some(s) = &self.switch {
            writeln!(
                f,
                "index generation {} is live (was {}): {} documents, {} chunks; the embedders finished {:.1} s after the last publish",
                s.to,
                s.from
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "none".into()),
                s.documents,
                s.chunks,
                s.waited_ms as f64 / 1000.0
            )?;
        }
        if let Some(why) = &self.not_switched {
            writeln!(f, "not switched: {why}")?;
        }
        if !self.removed_generations.is_empty() {
            writeln!(f, "removed old generations {:?}", self.removed_generations)?;
        }
        Ok(())
    }
}
