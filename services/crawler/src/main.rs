//! `weft-crawler`: publishes the new, changed and deleted documents of
//! sources to the distributed pipeline, then exits (a Kubernetes Job); and
//! `weft-crawler generations …`, the operator's view of index generations.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use weft_core::ports::GenerationRegistry;
use weft_pipeline::sources::SourceSpec;

/// Crawl sources into weft's distributed pipeline: lists each source's
/// documents, compares them with the catalog in NATS and publishes what is
/// new, changed or gone. A job over many sources (--manifest) crawls a few at
/// a time, continues where a killed run stopped, and exits 0 unless it could
/// not do its work (every source failed, or a --rebuild did not switch).
/// Settings: defaults, then the config file, then WEFT__… variables
/// (e.g. WEFT__NATS__URL).
#[derive(Debug, Parser)]
#[command(name = "weft-crawler", version, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
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
    #[arg(long, conflicts_with = "rebuild")]
    reindex: bool,
    /// Crawl every source into a new index generation, beside the live one
    /// (queries keep reading it), and switch to the new one when the
    /// embedders have written all of it and its counts agree.
    #[arg(long)]
    rebuild: bool,
    /// Sources crawled at once.
    #[arg(long, default_value_t = 4, value_name = "N")]
    concurrency: usize,
    /// How long --rebuild waits for the embedders, in seconds.
    #[arg(long, default_value_t = 6 * 3600, value_name = "SECS")]
    wait_secs: u64,
    /// A run cut short (killed; the same sources, the same mode) that
    /// started less than this many seconds ago is continued: sources it
    /// finished are not crawled again. A rebuild that did not switch is
    /// continued too.
    #[arg(long, default_value_t = 12 * 3600, value_name = "SECS")]
    resume_within_secs: u64,
    /// Where git sources are cloned (default: <data dir>/sources).
    #[arg(long, value_name = "DIR")]
    checkout_dir: Option<PathBuf>,
    #[command(flatten)]
    nats: weft_service::NatsArgs,
    #[command(flatten)]
    locations: weft_service::LocationArgs,
    #[command(flatten)]
    config: weft_service::ConfigArgs,
    /// Print the summary as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Index generations: list them, switch, abort a rebuild, remove old ones.
    Generations {
        #[command(subcommand)]
        action: GenerationsAction,
    },
}

#[derive(Debug, Subcommand)]
enum GenerationsAction {
    /// Every generation: state, model, when it was made and switched, and
    /// for the live and building ones what their catalog and indexes hold
    /// and what is still queued for them (a rebuild's progress).
    List,
    /// Make the building generation N live (after the completeness check a
    /// rebuild makes, unless --force); the live one is retired.
    Switch {
        /// The generation.
        number: u32,
        /// Switch even if it looks incomplete.
        #[arg(long)]
        force: bool,
    },
    /// Abort the building generation N and remove its stores; the live one
    /// stays.
    Abort {
        /// The generation.
        number: u32,
    },
    /// Remove aborted generations, and retired ones older than
    /// `generations.grace_secs` (or --grace-secs).
    Gc {
        /// Override the grace period, in seconds.
        #[arg(long, value_name = "SECS")]
        grace_secs: Option<u64>,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    weft_service::run_with(
        "weft-crawler",
        "warn,weft_crawler=info",
        &args.config,
        |config| args.nats.apply(config),
        |service| async {
            match &args.command {
                Some(Command::Generations { action }) => generations(&args, action, service).await,
                None => crawl(&args, service).await,
            }
        },
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
    if args.concurrency == 0 {
        anyhow::bail!("--concurrency must be at least 1");
    }
    let locations = args.locations.resolve(&service.config);
    let checkout_dir = args
        .checkout_dir
        .clone()
        .unwrap_or_else(|| locations.data().sources_dir());
    let jet = service.connect_nats().await?;
    let crawler = weft_crawler::Crawler::new(jet.clone(), &service.config, checkout_dir).await?;
    let options = weft_crawler::JobOptions {
        reindex: args.reindex,
        rebuild: args.rebuild,
        concurrency: args.concurrency,
        wait: Duration::from_secs(args.wait_secs),
        resume_within: Duration::from_secs(args.resume_within_secs),
        grace: Duration::from_secs(service.config.generations.grace_secs),
        progress: std::io::stderr().is_terminal() && !args.json,
        ..Default::default()
    };
    let summary = crawler
        .run_job(&work, &service.config, &locations, &options)
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary);
    }
    Ok(ExitCode::from(summary.exit_code()))
}

fn print_summary(summary: &weft_crawler::JobSummary) {
    for s in &summary.sources {
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
    for source in &summary.already_done {
        println!("{source}: done by an earlier attempt of this run");
    }
    for f in &summary.failed {
        println!("{}: FAILED: {}", f.project, f.error);
    }
    if let Some(s) = &summary.switch {
        println!(
            "index generation {} is live (was {}): {} documents, {} chunks; the embedders finished {:.1} s after the last publish",
            s.to,
            s.from
                .map(|n| n.to_string())
                .unwrap_or_else(|| "none".into()),
            s.documents,
            s.chunks,
            s.waited_ms as f64 / 1000.0
        );
    }
    if let Some(why) = &summary.not_switched {
        println!("not switched: {why}");
    }
    if !summary.removed_generations.is_empty() {
        println!("removed old generations {:?}", summary.removed_generations);
    }
}

async fn generations(
    args: &Args,
    action: &GenerationsAction,
    service: weft_service::Service,
) -> anyhow::Result<ExitCode> {
    let locations = args.locations.resolve(&service.config);
    let jet = service.connect_nats().await?;
    let registry = jet.registry().await?;
    let config = &service.config;
    use weft_crawler::generations as g;
    match action {
        GenerationsAction::List => {
            let (record, list) = g::list(&registry, &jet, config, &locations).await?;
            if args.json {
                let out = serde_json::json!({"live": record.live, "generations": list});
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                for s in &list {
                    let generation = &s.generation;
                    let counts = s
                        .counts
                        .map(|c| {
                            let indexed = c
                                .indexed
                                .map(|(v, t)| format!(", indexes {v}/{t}"))
                                .unwrap_or_default();
                            format!(
                                "; {} documents, {} chunks{indexed}; queued {} documents, {} batches",
                                c.documents, c.catalog_chunks, c.queued.0, c.queued.1
                            )
                        })
                        .unwrap_or_default();
                    let expected = generation
                        .expected_documents
                        .map(|e| format!(" (of {e} expected)"))
                        .unwrap_or_default();
                    println!(
                        "{:>4}  {:<8} {}{counts}{expected}",
                        generation.number,
                        generation.state.to_string(),
                        generation.model.as_deref().unwrap_or("-"),
                    );
                }
                if list.is_empty() {
                    println!(
                        "no generations recorded: generation 0 (the unnumbered stores) is live"
                    );
                }
            }
        }
        GenerationsAction::Switch { number, force } => {
            let record = g::switch(&registry, &jet, config, &locations, *number, *force).await?;
            report(args, &record, &format!("generation {number} is live"))?;
        }
        GenerationsAction::Abort { number } => {
            let removed = g::abort(&registry, &jet, config, &locations, *number).await?;
            let record = registry.load().await?;
            report(
                args,
                &record,
                &format!("generation {number} aborted; removed {removed:?}"),
            )?;
        }
        GenerationsAction::Gc { grace_secs } => {
            let grace = Duration::from_secs(grace_secs.unwrap_or(config.generations.grace_secs));
            let removed = g::collect(&registry, &jet, config, &locations, grace).await?;
            let record = registry.load().await?;
            report(args, &record, &format!("removed {removed:?}"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn report(
    args: &Args,
    record: &weft_core::generations::Generations,
    text: &str,
) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(record)?);
    } else {
        println!("{text}");
    }
    Ok(())
}
