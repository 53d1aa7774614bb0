//! `weft-crawler SOURCE… | --manifest FILE`: the crawl job.

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::Duration;

use weft_sources::SourceSpec;

use crate::args::Args;

/// Crawls the sources of the command line and of `--manifest`, and prints
/// the job's summary.
pub async fn run(args: &Args, service: weft_startup::Service) -> anyhow::Result<ExitCode> {
    let mut work: Vec<(SourceSpec, String)> = Vec::new();
    for source in &args.crawl.sources {
        let spec = SourceSpec::parse(source).map_err(anyhow::Error::msg)?;
        let project = args
            .crawl
            .project
            .clone()
            .unwrap_or_else(|| spec.default_project());
        work.push((spec, project));
    }
    if let Some(manifest) = &args.crawl.manifest {
        work.extend(crate::Manifest::load(manifest)?);
    }
    if work.is_empty() {
        anyhow::bail!("nothing to crawl: give SOURCE arguments or --manifest FILE");
    }
    if args.crawl.concurrency == 0 {
        anyhow::bail!("--concurrency must be at least 1");
    }
    let locations = args.locations.resolve(&service.config);
    let checkout_dir = args
        .crawl
        .checkout_dir
        .clone()
        .unwrap_or_else(|| weft_wiring::DataDir::new(&locations.data_dir).sources_dir());
    let jet = service.connect_nats().await?;
    let crawler = crate::Crawler::new(jet.clone(), &service.config, checkout_dir).await?;
    if args.crawl.dry_run {
        let estimate = crawler
            .estimate(
                &work,
                &service.config,
                &locations,
                args.crawl.reindex,
                &indicatif::ProgressBar::hidden,
            )
            .await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&estimate)?);
        } else {
            for f in &estimate.failed {
                eprintln!("weft-crawler: {}: {}", f.source, f.error);
            }
            estimate.write_text(&mut std::io::stdout().lock())?;
        }
        return Ok(if estimate.failed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let options = crate::JobOptions {
        reindex: args.crawl.reindex,
        rebuild: args.crawl.rebuild,
        concurrency: args.crawl.concurrency,
        wait: Duration::from_secs(args.crawl.wait_secs),
        resume_within: Duration::from_secs(args.crawl.resume_within_secs),
        grace: Duration::from_secs(service.config.generations.grace_secs),
        progress: std::io::stderr().is_terminal() && !args.json,
        ..Default::default()
    };
    let summary = crawler
        .run_job(&work, &service.config, &locations, &options)
        .await?;
    super::print(args.json, &summary, &summary)?;
    Ok(ExitCode::from(summary.exit_code()))
}
