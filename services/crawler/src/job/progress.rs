//! A job's sources crawled a few at a time, each shown as it goes (a
//! progress bar on a terminal, else a log line as it ends) and recorded as
//! done.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use weft_sources::SourceSpec;

use super::JobOptions;
use super::runs::Bookkeeping;
use crate::{CrawlError, CrawlOptions, Crawler, SourceSummary, Target};

/// What each source's crawl gave: `(project, source, result)`.
pub(super) type Results = Vec<(String, String, Result<SourceSummary, CrawlError>)>;

impl Crawler {
    /// Crawls `todo` into `target`, `options.concurrency` sources at once,
    /// recording each one done in `book`.
    pub(super) async fn crawl_all(
        &self,
        todo: Vec<&(SourceSpec, String)>,
        target: &Target,
        book: &Bookkeeping<'_>,
        options: &JobOptions,
    ) -> Results {
        let bars = options.progress.then(MultiProgress::new);
        let total = todo.len();
        let finished = AtomicUsize::new(0);
        futures::stream::iter(todo)
            .map(|(spec, project)| {
                let bar = new_bar(bars.as_ref());
                let crawl_options = CrawlOptions {
                    reindex: options.reindex,
                    progress: bar.clone(),
                };
                let finished = &finished;
                async move {
                    let result = self.crawl(spec, project, target, &crawl_options).await;
                    bar.finish_and_clear();
                    let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
                    match &result {
                        Ok(s) => {
                            log_done(n, total, project, s);
                            book.source_done(spec, project, s).await;
                        }
                        Err(e) => tracing::warn!(
                            "[{n}/{total}] {project}: FAILED: {}",
                            weft_core::error_chain(e)
                        ),
                    }
                    (project.clone(), spec.display(), result)
                }
            })
            .buffer_unordered(options.concurrency.max(1))
            .collect()
            .await
    }
}

/// A source's progress bar: in `bars` on a terminal, else hidden.
fn new_bar(bars: Option<&MultiProgress>) -> ProgressBar {
    let Some(bars) = bars else {
        return ProgressBar::hidden();
    };
    let bar = bars.add(ProgressBar::new(0));
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {msg:24} [{bar:30}] {pos}/{len} {per_sec}")
    {
        bar.set_style(style);
    }
    bar
}

/// The line a source leaves in the log when it ends (the `n`th of `total`).
fn log_done(n: usize, total: usize, project: &str, s: &SourceSummary) {
    tracing::info!(
        "[{n}/{total}] {project}: {} documents, {} published, {} unchanged, {} deleted, {} errors",
        s.documents_seen,
        s.documents_published,
        s.documents_unchanged,
        s.documents_deleted,
        s.errors.len()
    );
}
