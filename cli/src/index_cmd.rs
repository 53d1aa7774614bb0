//! `weft index SOURCE…`: index directories, git repositories and
//! documentation sites into the data directory, incrementally.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use weft_index::{GenerationOutcome, IndexSummary, RunOptions, RunSource, index_sources};
use weft_sources::SourceSpec;

use crate::context::{Context, StoreArgs};

/// Arguments of `weft index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Directories, git URLs (ending in .git, or git@…, ssh://, file://) or
    /// http(s) URLs of documentation sites.
    #[arg(required_unless_present = "drop", value_name = "PATH|URL")]
    pub sources: Vec<String>,

    /// Project name (default: the directory's or repository's name, or the
    /// site's host). Only with a single source.
    #[arg(long)]
    pub project: Option<String>,

    /// Index branch B of the repository (or, for a directory, the worktree
    /// it holds, named B) as an overlay of the project's default branch,
    /// indexed before: only the files that differ from it are read,
    /// chunked and stored, and texts embedded before keep their vectors.
    /// Searched as `--project PROJECT@B`. A branch gone from the remote is
    /// dropped. Only with a single source.
    #[arg(long, value_name = "B")]
    pub branch: Option<String>,

    /// Drop the branch overlay PROJECT@B (its chunks and records; the
    /// project is untouched), e.g. after its worktree was removed.
    #[arg(long, value_name = "PROJECT@B")]
    pub drop: Vec<String>,

    /// Chunk and write every document again, changed or not, into a new
    /// index generation switched to when complete: searches meanwhile read
    /// the old one; texts embedded before keep their vectors. With another
    /// embedding model than the index's, every project is indexed again.
    #[arg(long)]
    pub reindex: bool,

    /// List what the run would do and stop: documents new, changed,
    /// unchanged, removed and skipped, chunks, the tokens the model would
    /// embed after reusing stored vectors, the time (from the throughput
    /// the last run here measured) and, with
    /// `embedding.price_per_million_tokens`, the cost. Loads no model and
    /// writes nothing to the data directory.
    #[arg(long)]
    pub dry_run: bool,

    /// Refuse the run, before anything is embedded, if it would embed more
    /// than N tokens (one per four characters). Overrides
    /// `embedding.max_embed_tokens`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_embed_tokens: Option<u64>,

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
    if args.branch.is_some() && specs.len() != 1 {
        anyhow::bail!("--branch names one branch: give one source with it");
    }
    if let Some(branch) = &args.branch
        && let Some(problem) = weft_core::overlays::branch_problem(branch)
    {
        anyhow::bail!("--branch {branch:?} {problem}");
    }
    if let (Some(project), Some(_)) = (&args.project, &args.branch)
        && let Some((base, branch)) = weft_core::overlays::split_overlay(project)
    {
        anyhow::bail!(
            "--project {project:?} already names branch {branch:?} of {base:?}: give --project {base} --branch B"
        );
    }
    for name in &args.drop {
        if weft_core::overlays::split_overlay(name).is_none() {
            anyhow::bail!("--drop {name:?}: only a branch overlay (project@branch) can be dropped");
        }
    }
    if !args.drop.is_empty() && args.dry_run {
        anyhow::bail!("--drop and --dry-run: a dry run drops nothing; leave out --drop");
    }
    let ctx = Context::load(config_file, &args.store)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let sources: Vec<RunSource> = specs
            .into_iter()
            .map(|spec| {
                let project = match &args.branch {
                    Some(branch) => Some(weft_core::overlays::overlay_name(
                        &args
                            .project
                            .clone()
                            .unwrap_or_else(|| spec.default_project()),
                        branch,
                    )),
                    None => args.project.clone(),
                };
                RunSource { spec, project }
            })
            .collect();
        if args.dry_run {
            return dry_run(&ctx, &sources, args).await;
        }
        let data_dir = ctx.locations.data_dir.clone();
        let json = args.json;
        let outcome = index_sources(
            &ctx.config,
            &ctx.locations,
            sources,
            RunOptions {
                rebuild: args.reindex,
                max_embed_tokens: args.max_embed_tokens,
                drop: args.drop.clone(),
                ..Default::default()
            },
            &progress_bar,
            || {
                eprintln!(
                    "weft: another weft index is writing {}; waiting for it to finish",
                    data_dir.display()
                )
            },
            &mut |summary| {
                if !json && let Err(e) = print_summary(summary, &data_dir) {
                    tracing::warn!("cannot print the summary: {e}");
                }
            },
        )
        .await
        .map_err(|e| ctx.run_hint(e))?;
        let failed: Vec<serde_json::Value> = outcome
            .failed
            .iter()
            .map(|(source, e)| {
                let error = weft_core::error_chain(e);
                serde_json::json!({"source": source, "error": error})
            })
            .collect();
        if args.json {
            let out = serde_json::json!({
                "data_dir": ctx.locations.data_dir,
                "runs": outcome.summaries,
                "failed": failed,
                "generation": outcome.generation,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            for f in &failed {
                eprintln!(
                    "weft: {}: {}",
                    f["source"].as_str().unwrap_or_default(),
                    f["error"].as_str().unwrap_or_default()
                );
            }
            print_generation(&outcome.generation);
        }
        Ok(if failed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}

/// `--dry-run`: what the run would do, printed; nothing indexed.
async fn dry_run(
    ctx: &Context,
    sources: &[RunSource],
    args: &IndexArgs,
) -> anyhow::Result<ExitCode> {
    let estimate = weft_index::estimate_sources(
        &ctx.config,
        &ctx.locations,
        sources,
        &RunOptions {
            rebuild: args.reindex,
            max_embed_tokens: args.max_embed_tokens,
            ..Default::default()
        },
        &|| documents_bar("reading"),
    )
    .await
    .map_err(|e| ctx.run_hint(e))?;
    if args.json {
        let out = serde_json::json!({
            "dry_run": true,
            "data_dir": ctx.locations.data_dir,
            "estimate": estimate,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for f in &estimate.failed {
            eprintln!("weft: {}: {}", f.source, f.error);
        }
        estimate.write_text(&mut std::io::stdout().lock())?;
    }
    Ok(if estimate.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_generation(g: &GenerationOutcome) {
    if g.switched {
        let from = match g.previous {
            Some(p) => format!(" (was {p})"),
            None => String::new(),
        };
        println!(
            "index generation {} is live{from}",
            g.live.map(|n| n.to_string()).unwrap_or_default()
        );
    }
    if !g.collected.still_read.is_empty() {
        println!(
            "  generation(s) {:?} are still read by another process and are removed by a later run",
            g.collected.still_read
        );
    }
}

pub fn print_summary(s: &IndexSummary, data_dir: &Path) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} documents seen, {} indexed, {} unchanged, {} deleted, {} skipped; \
         {} chunks written ({} with stored vectors of the same text, ~{} tokens embedded), {} deleted; {} errors; {:.1}s ({:.1}s in the model)",
        s.project,
        s.documents_seen,
        s.documents_indexed,
        s.documents_unchanged,
        s.documents_deleted,
        s.documents_skipped,
        s.chunks_written,
        s.vectors_reused,
        s.tokens_embedded,
        s.chunks_deleted,
        s.errors.len(),
        s.elapsed_ms as f64 / 1000.0,
        s.embedding_ms as f64 / 1000.0
    )?;
    if let Some(rev) = &s.revision {
        writeln!(out, "  revision {rev}")?;
    }
    if let Some(o) = &s.overlay {
        if o.dropped {
            writeln!(
                out,
                "  branch overlay dropped: {} is searched without branch {}",
                o.base, o.branch
            )?;
        } else {
            writeln!(
                out,
                "  branch {} over {}{}: holds the files that differ from it; hides it at {} paths (changed, added or deleted); search with --project {}",
                o.branch,
                o.base,
                o.base_revision
                    .as_deref()
                    .map(|r| format!(" at {}", &r[..r.len().min(12)]))
                    .unwrap_or_default(),
                o.hidden,
                s.project
            )?;
        }
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
    documents_bar("indexing")
}

/// A bar of documents done, for `doing` them ("indexing", "reading").
fn documents_bar(doing: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{spinner}} {doing} [{{bar:30}}] {{pos}}/{{len}} documents {{elapsed}}, ETA {{eta}} {{wide_msg}}"
    )) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
