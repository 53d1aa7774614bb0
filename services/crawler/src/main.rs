//! `weft-crawler`: publishes the new, changed and deleted documents of
//! sources to the distributed pipeline, then exits (a Kubernetes Job).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use weft_pipeline::sources::SourceSpec;

/// Crawl sources into weft's distributed pipeline: lists each source's
/// documents, compares them with the catalog in NATS and publishes what is
/// new, changed or gone. Settings: defaults, then the config file, then
/// WEFT__… variables (e.g. WEFT__NATS__URL).
#[derive(Debug, Parser)]
#[command(name = "weft-crawler", version)]
struct Args {
    /// Directories, git URLs or documentation-site URLs.
    #[arg(value_name = "SOURCE")]
    sources: Vec<String>,
    /// The project of the sources given as arguments (default: derived from each).
    #[arg(long)]
    project: Option<String>,
    /// A TOML file listing many sources across projects ([[sources]] with
    /// `source` and optional `project`).
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// Publish every document, changed or not.
    #[arg(long)]
    reindex: bool,
    /// Where git sources are cloned (default: <data dir>/sources).
    #[arg(long, value_name = "DIR")]
    checkout_dir: Option<PathBuf>,
    #[command(flatten)]
    nats: weft_service::NatsArgs,
    #[command(flatten)]
    config: weft_service::ConfigArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    weft_service::run_with(
        "weft-crawler",
        "warn",
        &args.config,
        |config| args.nats.apply(config),
        |service| crawl(&args, service),
    )
}

async fn crawl(args: &Args, service: weft_service::Service) -> anyhow::Result<ExitCode> {
    let mut work: Vec<(SourceSpec, String)> = Vec::new();
    for source in &args.sources {
        let spec = SourceSpec::parse(source).map_err(anyhow::Error::msg)?;
        let project = args
            .project
            .clone()
            .unwrap_or_else(|| spec.default_project());
        work.push((spec, project));
    }
    if let Some(manifest) = &args.manifest {
        work.extend(weft_crawler::Manifest::load(manifest)?);
    }
    if work.is_empty() {
        anyhow::bail!("nothing to crawl: give SOURCE arguments or --manifest FILE");
    }
    let checkout_dir = args.checkout_dir.clone().unwrap_or_else(|| {
        weft_pipeline::Locations::resolve(&service.config, None, None)
            .data()
            .sources_dir()
    });
    let jet = service.connect_nats().await?;
    let crawler = weft_crawler::Crawler::new(jet.clone(), &service.config, checkout_dir).await?;
    let progress = if std::io::stderr().is_terminal() && !args.json {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} {per_sec}")
                .context("progress template")?,
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let options = weft_crawler::CrawlOptions {
        reindex: args.reindex,
        progress: progress.clone(),
    };
    let mut summaries = Vec::new();
    let mut failed = Vec::new();
    for (spec, project) in &work {
        match crawler.crawl(spec, project, &options).await {
            Ok(summary) => summaries.push(summary),
            // One bad source does not stop an organisation-wide crawl.
            Err(e) => failed.push(serde_json::json!({
                "project": project,
                "source": spec.display(),
                "error": format!("{:#}", anyhow::Error::from(e)),
            })),
        }
    }
    jet.flush().await?;
    progress.finish_and_clear();
    if args.json {
        let out = serde_json::json!({ "sources": summaries, "failed": failed });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for s in &summaries {
            let read = match &s.diffed_from {
                Some(base) => format!(" (git diff from {})", &base[..base.len().min(12)]),
                None => String::new(),
            };
            println!(
                "{}: {} documents{read}, {} published, {} unchanged, {} deleted, {} skipped, {} errors ({:.1} s)",
                s.project,
                s.documents_seen,
                s.documents_published,
                s.documents_unchanged,
                s.documents_deleted,
                s.skipped.len(),
                s.errors.len(),
                s.elapsed_ms as f64 / 1000.0
            );
            for issue in s.skipped.iter().chain(&s.errors) {
                println!("  {}: {}", issue.uri, issue.reason);
            }
        }
        for f in &failed {
            println!("{}: FAILED: {}", f["project"], f["error"]);
        }
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
