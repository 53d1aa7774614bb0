//! `weft eval QUERIES.jsonl --corpus-dir D`: index every corpus the query
//! file names (one project per corpus and variant, reused when unchanged),
//! run every query and report the metrics of `shared/eval/README.md`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use weft_core::ports::Embedder;
use weft_core::query::SearchMode;
use weft_eval::{Aggregate, ContextStats, Report, RunOptions, Variant};
use weft_index::{IndexOptions, Indexer};
use weft_sources::SourceSpec;

use crate::context::{Context, StoreArgs};

/// Arguments of `weft eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Labelled queries, one JSON object per line (the format of
    /// shared/eval/queries/*.jsonl).
    #[arg(value_name = "QUERIES.jsonl")]
    pub queries: PathBuf,

    /// The directory the queries' `corpus_root` / `hard_root` are relative
    /// to (shared/eval/tools/prepare.sh writes ~/.cache/weft-eval).
    #[arg(long, value_name = "DIR")]
    pub corpus_dir: PathBuf,

    /// Which tree of each corpus to index: hard (doc comments blanked,
    /// headings masked) or docs (as published).
    #[arg(long, default_value = "hard")]
    pub variant: Variant,

    /// Retrievers: hybrid, vector or text.
    #[arg(long, default_value = "hybrid")]
    pub mode: SearchMode,

    /// Only search without neighbour expansion (by default every query runs
    /// with expansion off and on, to measure context coverage).
    #[arg(long)]
    pub no_expand: bool,

    /// At most N queries per corpus, spread evenly over the file.
    #[arg(long, value_name = "N")]
    pub limit_queries: Option<usize>,

    /// Only these corpora (repeatable; default: every corpus in the file).
    #[arg(long = "corpus", value_name = "NAME")]
    pub corpora: Vec<String>,

    /// Rebuild the corpora's projects from scratch.
    #[arg(long)]
    pub reindex: bool,

    /// Where the evaluation index lives (default: a `weft-eval` directory
    /// beside the default data directory, so your own index is untouched).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// The embedding model directory (as for `weft index`).
    #[arg(long, env = "WEFT_MODEL_DIR", value_name = "DIR")]
    pub model_dir: Option<PathBuf>,

    /// Also measure packing: each expanded top-10 response packed into
    /// 1000, 2000, 4000 and 8000 tokens (or --pack-budgets), reporting the
    /// share of queries whose whole target is inside the packed context and
    /// the tokens used, beside the unpacked spans.
    #[arg(long)]
    pub pack: bool,

    /// The budgets of --pack, comma-separated.
    #[arg(
        long,
        value_name = "N,N…",
        value_delimiter = ',',
        default_value = "1000,2000,4000,8000",
        requires = "pack"
    )]
    pub pack_budgets: Vec<usize>,

    /// How --pack spends the budget: hits-first (every span's hits, then
    /// their context; weft's packing) or spans-in-order (each span whole, by
    /// relevance), for comparison.
    #[arg(
        long,
        value_name = "STRATEGY",
        default_value = "hits-first",
        requires = "pack"
    )]
    pub pack_strategy: PackStrategyArg,

    /// Also write every query's outcome (rank, target, top chunks) to FILE,
    /// one JSON object per line.
    #[arg(long, value_name = "FILE")]
    pub details: Option<PathBuf>,

    /// Print JSON for machines instead of tables for people.
    #[arg(long)]
    pub json: bool,
}

/// `--pack-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PackStrategyArg {
    /// Every span's hits first, then their context.
    HitsFirst,
    /// Each span whole, by relevance.
    SpansInOrder,
}

impl From<PackStrategyArg> for weft_core::retrieval::PackStrategy {
    fn from(value: PackStrategyArg) -> Self {
        match value {
            PackStrategyArg::HitsFirst => Self::HitsFirst,
            PackStrategyArg::SpansInOrder => Self::SpansInOrder,
        }
    }
}

/// Hits per query in the metric definitions.
const LIMIT: usize = 10;

/// The evaluation data directory when none is given.
fn default_eval_dir() -> PathBuf {
    weft_config::default_data_dir().with_file_name("weft-eval")
}

pub fn run(config_file: Option<&Path>, args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    if args.limit_queries == Some(0) {
        bail!("--limit-queries must be at least 1");
    }
    if args.pack && args.no_expand {
        bail!("--pack packs the expanded results: it cannot be combined with --no-expand");
    }
    if args.pack && args.pack_budgets.contains(&0) {
        bail!("--pack-budgets: every budget must be at least 1");
    }
    let queries = weft_eval::load_queries(&args.queries)?;
    let selected = weft_eval::select_queries(queries, &args.corpora, args.limit_queries);
    for name in &args.corpora {
        if !selected.contains_key(name) {
            bail!(
                "--corpus {name}: no query of {} is about it",
                args.queries.display()
            );
        }
    }
    // Each corpus's root, checked before anything is indexed.
    let mut corpora = Vec::new();
    for (name, queries) in &selected {
        let root = queries
            .iter()
            .find_map(|q| q.root(args.variant))
            .with_context(|| {
                format!(
                    "{}: the queries of corpus {name} have no {} root ({})",
                    args.queries.display(),
                    args.variant.name(),
                    match args.variant {
                        Variant::Hard => "hard_root",
                        Variant::Docs => "corpus_root",
                    }
                )
            })?;
        let root = args.corpus_dir.join(root);
        if !root.is_dir() {
            bail!(
                "corpus {name}: {} is not a directory (run shared/eval/tools/prepare.sh {}, or fix --corpus-dir)",
                root.display(),
                args.corpus_dir.display()
            );
        }
        let project = format!("{name}-{}", args.variant.name());
        corpora.push((name.clone(), project, root, queries.clone()));
    }

    let store = StoreArgs {
        data_dir: Some(args.data_dir.clone().unwrap_or_else(default_eval_dir)),
        model_dir: args.model_dir.clone(),
    };
    let ctx = Context::load(config_file, &store)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    // One writer of a data directory at a time, as for `weft index`.
    let _writing = ctx.data_dir().lock_writer(|| {
        eprintln!(
            "weft: waiting for another weft index of {} to finish…",
            ctx.locations.data_dir.display()
        )
    })?;
    runtime.block_on(async {
        let (stores, embedder) = ctx.open_for_indexing().await?;
        let indexer = Indexer::new(
            stores.clone(),
            embedder.clone(),
            &ctx.config,
            ctx.data_dir().sources_dir(),
        )?;
        let mut index_runs = Vec::new();
        for (_, project, root, _) in &corpora {
            let options = IndexOptions {
                project: Some(project.clone()),
                reindex: args.reindex,
                progress: crate::index_cmd::progress_bar(),
            };
            let spec = SourceSpec::Dir(root.clone());
            let summary = indexer
                .index(&spec, &options)
                .await
                .with_context(|| format!("indexing {}", root.display()))?;
            if !args.json {
                crate::index_cmd::print_summary(&summary, &ctx.locations.data_dir)?;
            }
            index_runs.push(summary);
        }

        let query_embedder: Option<Arc<dyn Embedder>> = match args.mode {
            SearchMode::Text => None,
            _ => Some(embedder),
        };
        let engine = weft_wiring::query_engine(
            &ctx.config,
            stores.vectors.clone(),
            stores.text.clone(),
            query_embedder,
        )?;
        let mut outcomes = Vec::new();
        for (name, project, _, queries) in &corpora {
            let bar = query_bar(name, queries.len());
            let options = RunOptions {
                project: project.clone(),
                mode: args.mode,
                limit: LIMIT,
                expansion_off: true,
                expansion_on: !args.no_expand,
                pack_budgets: if args.pack {
                    args.pack_budgets.clone()
                } else {
                    Vec::new()
                },
                pack_limit: None,
                pack_strategy: args.pack_strategy.into(),
            };
            let result = weft_eval::run_queries(&engine, queries, &options, || bar.inc(1)).await;
            bar.finish_and_clear();
            outcomes.push((name.clone(), result?));
        }
        if let Some(path) = &args.details {
            write_details(path, &corpora, &outcomes)
                .with_context(|| format!("--details {}", path.display()))?;
        }
        let report = Report::new(&outcomes);
        if args.json {
            let out = json!({
                "queries_file": args.queries,
                "variant": args.variant,
                "mode": args.mode,
                "expansion": if args.no_expand { "off" } else { "off and on" },
                "pack_strategy": args.pack.then_some(format!("{:?}", args.pack_strategy)),
                "limit": LIMIT,
                "data_dir": ctx.locations.data_dir,
                "retrieval": ctx.config.retrieval,
                "index": index_runs,
                "corpora": report.corpora,
                "overall": report.overall,
                "elapsed_ms": started.elapsed().as_millis() as u64,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print_report(&report, args, started)?;
        }
        anyhow::Ok(ExitCode::SUCCESS)
    })
}

fn write_details(
    path: &Path,
    corpora: &[(String, String, PathBuf, Vec<weft_eval::EvalQuery>)],
    outcomes: &[(String, Vec<weft_eval::QueryOutcome>)],
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for ((name, _, _, queries), (_, results)) in corpora.iter().zip(outcomes) {
        for (query, outcome) in queries.iter().zip(results) {
            let line = json!({
                "id": query.id,
                "corpus": name,
                "query": query.query,
                "target": format!("{}:{}-{}", query.path, query.start_line, query.end_line),
                "long": outcome.long,
                "rank": outcome.main().rank,
                "top": outcome.main().top,
                "coverage_off": outcome.off.as_ref().and_then(|j| j.coverage),
                "coverage_on": outcome.on.as_ref().and_then(|j| j.coverage),
                "packed": outcome.packed,
            });
            writeln!(out, "{line}")?;
        }
    }
    out.flush()?;
    Ok(())
}

fn query_bar(corpus: &str, len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} querying {msg} [{bar:30}] {pos}/{len} {elapsed} (eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(corpus.to_owned());
    bar
}

fn print_report(report: &Report, args: &EvalArgs, started: Instant) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\n{} — {} variant, {:?} mode, top {LIMIT}",
        args.queries.display(),
        args.variant.name(),
        args.mode
    )?;
    writeln!(
        out,
        "\n{:<22} {:>7} {:>6} {:>6} {:>6} {:>7} {:>8}",
        "corpus", "queries", "R@1", "R@5", "R@10", "MRR@10", "nDCG@10"
    )?;
    let rows = report
        .corpora
        .iter()
        .map(|c| (c.corpus.as_str(), &c.figures))
        .chain(std::iter::once(("overall", &report.overall)));
    for (name, a) in rows.clone() {
        writeln!(
            out,
            "{:<22} {:>7} {:>6.3} {:>6.3} {:>6.3} {:>7.3} {:>8.3}",
            name,
            a.queries,
            a.recall_at_1,
            a.recall_at_5,
            a.recall_at_10,
            a.mrr_at_10,
            a.ndcg_at_10
        )?;
    }
    writeln!(
        out,
        "\nLong targets (code > 50 lines, markdown sections > 256 tokens): coverage of the target by the rank-1 hit's span"
    )?;
    writeln!(
        out,
        "{:<22} {:>6} {:>6} | {:>8} {:>9} {:>8} | {:>8} {:>9} {:>8}",
        "corpus", "long", "top1", "cov off", "complete", "tokens", "cov on", "complete", "tokens"
    )?;
    let stats = |s: &Option<ContextStats>| match s {
        Some(s) => format!(
            "{:>8.3} {:>8.1}% {:>8.0}",
            s.coverage_mean,
            100.0 * s.complete_share,
            s.context_tokens_mean
        ),
        None => format!("{:>8} {:>9} {:>8}", "-", "-", "-"),
    };
    for (name, a) in rows {
        let a: &Aggregate = a;
        let top1 = a
            .long_expansion_on
            .as_ref()
            .or(a.long_expansion_off.as_ref())
            .map_or(0, |s| s.top1_hits);
        writeln!(
            out,
            "{:<22} {:>6} {:>6} | {} | {}",
            name,
            a.long_queries,
            top1,
            stats(&a.long_expansion_off),
            stats(&a.long_expansion_on)
        )?;
    }
    if !report.overall.packing.is_empty() {
        print_packing(&mut out, report, args)?;
    }
    writeln!(
        out,
        "\nMean context per query: {:.0} tokens. {:.1}s.",
        report.overall.context_tokens_mean,
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// The packing table: answer-in-context and tokens per budget, beside R@10
/// and the unpacked spans.
fn print_packing(out: &mut impl Write, report: &Report, args: &EvalArgs) -> anyhow::Result<()> {
    let budgets = &report.overall.packing;
    writeln!(
        out,
        "\nPacked context ({:?}; top 10, expanded; whole target inside one packed span; tokens = chars/4 with headers)",
        args.pack_strategy
    )?;
    write!(out, "{:<22} {:>6}", "corpus", "R@10")?;
    for p in budgets {
        let name = p.budget.map_or("unpacked".to_owned(), |b| b.to_string());
        write!(out, " | {name:>8} {:>7}", "tokens")?;
    }
    writeln!(out)?;
    let rows = report
        .corpora
        .iter()
        .map(|c| (c.corpus.as_str(), &c.figures))
        .chain(std::iter::once(("overall", &report.overall)));
    for (name, a) in rows {
        write!(out, "{:<22} {:>6.3}", name, a.recall_at_10)?;
        for p in &a.packing {
            write!(
                out,
                " | {:>8.3} {:>7.0}",
                p.answer_in_context, p.tokens_mean
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}
