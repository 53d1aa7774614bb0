//! `weft eval QUERIES.jsonl --corpus-dir D`: index every corpus the query
//! file names (one project per corpus and variant, reused when unchanged),
//! run every query and report the metrics of `shared/eval/README.md`.
//!
//! `--derive PATH` first writes the query file from a tree's own doc
//! comments and headings (`derive.rs`); `--baseline`, `--derive` or
//! `--config` given more than once make the run a comparison, printed side
//! by side with the BM25 line-window baseline (`compare.rs`).

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

mod compare;
mod derive;

/// Arguments of `weft eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Labelled queries, one JSON object per line (the format of
    /// shared/eval/queries/*.jsonl). With --derive: where the derived set
    /// is written (default: <eval dir>/derived/<name>.jsonl), its hard copy
    /// beside it in <file stem>.hard/.
    #[arg(value_name = "QUERIES.jsonl", required_unless_present = "derive")]
    pub queries: Option<PathBuf>,

    /// Derive the queries from this repository or docs tree, the way
    /// shared/eval derives its sets: doc comments ask for their
    /// definitions, headings for their sections; the hard copy that is
    /// indexed blanks the doc comments and masks the asked headings. Then
    /// run them, beside a BM25 line-window baseline.
    #[arg(long, value_name = "PATH")]
    pub derive: Option<PathBuf>,

    /// With --derive: the corpus name (default: the tree's directory name).
    #[arg(long, value_name = "NAME", requires = "derive")]
    pub name: Option<String>,

    /// With --derive: write the set and its hard copy, and stop.
    #[arg(long, requires = "derive")]
    pub derive_only: bool,

    /// Also run the BM25 line-window baseline (40 lines of code, 30 of
    /// prose) on the same queries, judged the same way (always on with
    /// --derive or several --config).
    #[arg(long)]
    pub baseline: bool,

    /// The directory the queries' `corpus_root` / `hard_root` are relative
    /// to (shared/eval/tools/prepare.sh writes ~/.cache/weft-eval; default:
    /// the query file's directory).
    #[arg(long, value_name = "DIR")]
    pub corpus_dir: Option<PathBuf>,

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
    /// With several --config, each gets a directory of its own in it.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// The embedding model directory (as for `weft index`).
    #[arg(long, env = "WEFT_MODEL_DIR", value_name = "DIR")]
    pub model_dir: Option<PathBuf>,

    /// Also measure packing: each expanded top-10 response packed into
    /// 1000, 2000, 4000 and 8000 tokens (or --pack-budgets), reporting the
    /// share of queries whose whole target is inside the packed context and
    /// the tokens used, beside the unpacked spans. Comparisons (--derive,
    /// --baseline, several --config) always pack, into 2000 by default.
    #[arg(long)]
    pub pack: bool,

    /// The budgets of --pack, comma-separated.
    #[arg(long, value_name = "N,N…", value_delimiter = ',')]
    pub pack_budgets: Option<Vec<usize>>,

    /// How --pack spends the budget: hits-first (every span's hits, then
    /// their context; weft's packing) or spans-in-order (each span whole, by
    /// relevance), for comparison.
    #[arg(long, value_name = "STRATEGY", default_value = "hits-first")]
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

/// The budgets comparisons pack into when none is given.
const COMPARE_BUDGETS: &[usize] = &[2000];
/// The budgets of `--pack` when none is given.
const PACK_BUDGETS: &[usize] = &[1000, 2000, 4000, 8000];

/// One corpus to run: its name, project, root and queries.
struct Corpus {
    name: String,
    project: String,
    root: PathBuf,
    queries: Vec<weft_eval::EvalQuery>,
}

/// What one configuration scored.
struct ConfigRun {
    /// The configuration file (`None`: weft.toml or the defaults).
    config: Option<PathBuf>,
    data_dir: PathBuf,
    retrieval: serde_json::Value,
    index: Vec<weft_index::IndexSummary>,
    outcomes: Vec<(String, Vec<weft_eval::QueryOutcome>)>,
}

pub fn run(config_files: &[PathBuf], args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    if args.limit_queries == Some(0) {
        bail!("--limit-queries must be at least 1");
    }
    let compare = args.derive.is_some() || args.baseline || config_files.len() > 1;
    let packing = args.pack || args.pack_budgets.is_some() || compare;
    if packing && args.no_expand {
        bail!(
            "packing (--pack, --pack-budgets, or a comparison) packs the expanded results: it cannot be combined with --no-expand"
        );
    }
    let budgets: Vec<usize> = match &args.pack_budgets {
        Some(b) => b.clone(),
        None if packing && !args.pack => COMPARE_BUDGETS.to_vec(),
        None if packing => PACK_BUDGETS.to_vec(),
        None => Vec::new(),
    };
    if budgets.contains(&0) {
        bail!("--pack-budgets: every budget must be at least 1");
    }
    let eval_dir = args.data_dir.clone().unwrap_or_else(default_eval_dir);
    for file in config_files {
        if !file.is_file() {
            bail!("--config {}: no such file", file.display());
        }
    }

    // The query file: derived now, or given.
    let derived = match &args.derive {
        Some(root) => Some(derive::derive(
            config_files.first().map(PathBuf::as_path),
            root,
            args.name.as_deref(),
            args.queries.as_deref(),
            &eval_dir,
        )?),
        None => None,
    };
    let queries_file = match (&derived, &args.queries) {
        (Some(d), _) => d.queries_file.clone(),
        (None, Some(q)) => q.clone(),
        (None, None) => bail!("give QUERIES.jsonl, or --derive PATH"),
    };
    if let Some(d) = &derived {
        if !args.json || args.derive_only {
            derive::print(d, args.json)?;
        }
        if args.derive_only {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let corpus_dir = match &args.corpus_dir {
        Some(dir) => dir.clone(),
        None => queries_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    let corpora = corpora(&queries_file, &corpus_dir, args)?;

    let configs: Vec<Option<PathBuf>> = if config_files.is_empty() {
        vec![None]
    } else {
        config_files.iter().cloned().map(Some).collect()
    };
    let mut runs = Vec::new();
    for config in &configs {
        let data_dir = if configs.len() > 1 {
            eval_dir.join(config_dir_name(config.as_deref())?)
        } else {
            eval_dir.clone()
        };
        if compare && !args.json {
            eprintln!(
                "weft eval: {} (index in {})",
                config_label(config.as_deref()),
                data_dir.display()
            );
        }
        runs.push(evaluate(
            config.as_deref(),
            data_dir,
            &corpora,
            args,
            &budgets,
        )?);
    }
    let baseline = compare
        .then(|| {
            baseline(
                config_files.first().map(PathBuf::as_path),
                &corpora,
                args,
                &budgets,
            )
        })
        .transpose()?;

    if let Some(path) = &args.details {
        write_details(path, &corpora, &runs[0].outcomes)
            .with_context(|| format!("--details {}", path.display()))?;
    }
    if compare {
        let report = compare::Comparison::new(&corpora_queries(&corpora), baseline, &runs);
        if args.json {
            let out = json!({
                "queries_file": queries_file,
                "corpus_dir": corpus_dir,
                "variant": args.variant,
                "mode": args.mode,
                "limit": LIMIT,
                "pack_budgets": budgets,
                "derived": derived.as_ref().map(derive::to_json),
                "baseline": report.baseline_json(),
                "configs": report.configs_json(),
                "elapsed_ms": started.elapsed().as_millis() as u64,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            report.print(&queries_file, args, &budgets, started)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let run = runs.remove(0);
    let report = Report::new(&run.outcomes);
    if args.json {
        let out = json!({
            "queries_file": queries_file,
            "variant": args.variant,
            "mode": args.mode,
            "expansion": if args.no_expand { "off" } else { "off and on" },
            "pack_strategy": packing.then_some(format!("{:?}", args.pack_strategy)),
            "limit": LIMIT,
            "data_dir": run.data_dir,
            "retrieval": run.retrieval,
            "index": run.index,
            "corpora": report.corpora,
            "overall": report.overall,
            "elapsed_ms": started.elapsed().as_millis() as u64,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_report(&report, &queries_file, args, started)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Each corpus's queries, by name.
fn corpora_queries(corpora: &[Corpus]) -> Vec<(String, Vec<weft_eval::EvalQuery>)> {
    corpora
        .iter()
        .map(|c| (c.name.clone(), c.queries.clone()))
        .collect()
}

/// The corpora of the query file, each with its root, checked before
/// anything is indexed.
fn corpora(queries_file: &Path, corpus_dir: &Path, args: &EvalArgs) -> anyhow::Result<Vec<Corpus>> {
    let queries = weft_eval::load_queries(queries_file)?;
    let selected = weft_eval::select_queries(queries, &args.corpora, args.limit_queries);
    for name in &args.corpora {
        if !selected.contains_key(name) {
            bail!(
                "--corpus {name}: no query of {} is about it",
                queries_file.display()
            );
        }
    }
    let mut corpora = Vec::new();
    for (name, queries) in selected {
        let root = queries
            .iter()
            .find_map(|q| q.root(args.variant))
            .with_context(|| {
                format!(
                    "{}: the queries of corpus {name} have no {} root ({})",
                    queries_file.display(),
                    args.variant.name(),
                    match args.variant {
                        Variant::Hard => "hard_root",
                        Variant::Docs => "corpus_root",
                    }
                )
            })?;
        let root = corpus_dir.join(root);
        if !root.is_dir() {
            bail!(
                "corpus {name}: {} is not a directory (run shared/eval/tools/prepare.sh {}, derive the set again with --derive, or fix --corpus-dir)",
                root.display(),
                corpus_dir.display()
            );
        }
        corpora.push(Corpus {
            project: format!("{name}-{}", args.variant.name()),
            name,
            root,
            queries,
        });
    }
    Ok(corpora)
}

/// How a configuration is named in reports.
fn config_label(config: Option<&Path>) -> String {
    match config {
        Some(path) => path.display().to_string(),
        None => "the default configuration".to_owned(),
    }
}

/// The data directory of one of several configurations: named by the
/// file and what it says, so that an edited file gets a fresh index.
fn config_dir_name(config: Option<&Path>) -> anyhow::Result<String> {
    let Some(path) = config else {
        return Ok("default".to_owned());
    };
    let text = std::fs::read(path).with_context(|| format!("--config {}", path.display()))?;
    let stem: String = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let hash = weft_core::content_hash(&text);
    Ok(format!("config-{stem}-{}", &hash[..8]))
}

/// Indexes the corpora with one configuration and runs every query.
fn evaluate(
    config_file: Option<&Path>,
    data_dir: PathBuf,
    corpora: &[Corpus],
    args: &EvalArgs,
    budgets: &[usize],
) -> anyhow::Result<ConfigRun> {
    let store = StoreArgs {
        data_dir: Some(data_dir),
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
        for corpus in corpora {
            let options = IndexOptions {
                project: Some(corpus.project.clone()),
                reindex: args.reindex,
                progress: crate::index_cmd::progress_bar(),
            };
            let spec = SourceSpec::Dir(corpus.root.clone());
            let summary = indexer
                .index(&spec, &options)
                .await
                .with_context(|| format!("indexing {}", corpus.root.display()))?;
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
        for corpus in corpora {
            let bar = query_bar(&corpus.name, corpus.queries.len());
            let options = RunOptions {
                project: corpus.project.clone(),
                mode: args.mode,
                limit: LIMIT,
                expansion_off: true,
                expansion_on: !args.no_expand,
                pack_budgets: budgets.to_vec(),
                pack_limit: None,
                pack_strategy: args.pack_strategy.into(),
            };
            let result =
                weft_eval::run_queries(&engine, &corpus.queries, &options, || bar.inc(1)).await;
            bar.finish_and_clear();
            outcomes.push((corpus.name.clone(), result?));
        }
        anyhow::Ok(ConfigRun {
            config: config_file.map(Path::to_path_buf),
            data_dir: ctx.locations.data_dir.clone(),
            retrieval: serde_json::to_value(&ctx.config.retrieval)?,
            index: index_runs,
            outcomes,
        })
    })
}

/// The BM25 line-window baseline over each corpus's tree (the files the
/// configuration's `[sources]` selects), judged like the runs.
fn baseline(
    config_file: Option<&Path>,
    corpora: &[Corpus],
    args: &EvalArgs,
    budgets: &[usize],
) -> anyhow::Result<Vec<(String, Vec<weft_eval::QueryOutcome>)>> {
    let config = weft_config::load(config_file)?.config;
    let selection = weft_sources::DirSelection::new(&config.sources).map_err(anyhow::Error::msg)?;
    let mut out = Vec::new();
    for corpus in corpora {
        let walk = weft_sources::walk_dir(&corpus.root, &selection);
        let mut files = Vec::new();
        for (uri, path) in &walk.files {
            // Text files only, as an index would read them.
            if let Ok(text) = std::fs::read_to_string(path)
                && !text.contains('\0')
            {
                files.push((uri.clone(), text));
            }
        }
        let windows =
            weft_eval::LineWindows::new(files.iter().map(|(u, t)| (u.as_str(), t.as_str())));
        let outcomes = weft_eval::run_baseline(
            &windows,
            &corpus.queries,
            LIMIT,
            budgets,
            args.pack_strategy.into(),
        );
        out.push((corpus.name.clone(), outcomes));
    }
    Ok(out)
}

fn write_details(
    path: &Path,
    corpora: &[Corpus],
    outcomes: &[(String, Vec<weft_eval::QueryOutcome>)],
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for (corpus, (_, results)) in corpora.iter().zip(outcomes) {
        let name = &corpus.name;
        for (query, outcome) in corpus.queries.iter().zip(results) {
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

fn print_report(
    report: &Report,
    queries_file: &Path,
    args: &EvalArgs,
    started: Instant,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\n{} — {} variant, {:?} mode, top {LIMIT}",
        queries_file.display(),
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
