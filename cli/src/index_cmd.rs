//! `weft index SOURCE…`: index directories, git repositories and
//! documentation sites into the data directory, incrementally.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use weft_pipeline::sources::SourceSpec;
use weft_pipeline::{IndexOptions, IndexSummary, Indexer};

use crate::context::{Context, StoreArgs};

/// Arguments of `weft index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Directories, git URLs (ending in .git, or git@…, ssh://, file://) or
    /// http(s) URLs of documentation sites.
    #[arg(required = true, value_name = "PATH|URL")]
    pub sources: Vec<String>,

    /// Project name (default: the directory's or repository's name, or the
    /// site's host). Only with a single source.
    #[arg(long)]
    pub project: Option<String>,

    /// Chunk and write every document again, changed or not. The project
    /// stays searchable meanwhile; texts embedded before keep their vectors.
    #[arg(long)]
    pub reindex: bool,

    #[command(flatten)]
    pub store: StoreArgs,

    /// Print JSON for machines instead of text for people.
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_file: Option<&Path>, args: &IndexArgs) -> anyhow::Result<ExitCode> {
    let specs = args
        .sources
        .iter()
        .map(|s| SourceSpec::parse(s).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if args.project.is_some() && specs.len() > 1 {
        anyhow::bail!(
            "--project names one project: give one source with it, or run once per source"
        );
    }
    let ctx = Context::load(config_file, &args.store)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (stores, embedder) = ctx.open_for_indexing().await?;
        let indexer = Indexer::new(stores, embedder, &ctx.config, ctx.data_dir().sources_dir())?;
        let mut summaries = Vec::new();
        let mut failed = Vec::new();
        for spec in &specs {
            let options = IndexOptions {
                project: args.project.clone(),
                reindex: args.reindex,
                progress: progress_bar(),
            };
            match indexer.index(spec, &options).await {
                Ok(summary) => {
                    if !args.json {
                        print_summary(&summary, &ctx.locations.data_dir)?;
                    }
                    summaries.push(summary);
                }
                Err(e) => {
                    options.progress.finish_and_clear();
                    let error = format!("{:#}", anyhow::Error::from(e));
                    eprintln!("weft: {}: {error}", spec.display());
                    failed.push(serde_json::json!({"source": spec.display(), "error": error}));
                }
            }
        }
        if args.json {
            let out = serde_json::json!({
                "data_dir": ctx.locations.data_dir,
                "runs": summaries,
                "failed": failed,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Ok(if failed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}

pub fn print_summary(s: &IndexSummary, data_dir: &Path) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} documents seen, {} indexed, {} unchanged, {} deleted, {} skipped; \
         {} chunks written ({} with stored vectors of the same text), {} deleted; {} errors; {:.1}s ({:.1}s in the model)",
        s.project,
        s.documents_seen,
        s.documents_indexed,
        s.documents_unchanged,
        s.documents_deleted,
        s.documents_skipped,
        s.chunks_written,
        s.vectors_reused,
        s.chunks_deleted,
        s.errors.len(),
        s.elapsed_ms as f64 / 1000.0,
        s.embedding_ms as f64 / 1000.0
    )?;
    if let Some(rev) = &s.revision {
        writeln!(out, "  revision {rev}")?;
    }
    for issue in &s.errors {
        writeln!(out, "  error    {}: {}", issue.uri, issue.reason)?;
    }
    const SHOWN: usize = 10;
    for issue in s.skipped.iter().take(SHOWN) {
        writeln!(out, "  skipped  {}: {}", issue.uri, issue.reason)?;
    }
    if s.skipped.len() > SHOWN {
        writeln!(
            out,
            "  … and {} more skipped (see --json)",
            s.skipped.len() - SHOWN
        )?;
    }
    writeln!(out, "  data directory: {}", data_dir.display())?;
    Ok(())
}

pub fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} indexing [{bar:30}] {pos}/{len} documents {elapsed}, ETA {eta} {wide_msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
