//! `weft index --dry-run` and the token budget ([`weft_index::estimate_sources`],
//! `embedding.max_embed_tokens`) against real runs with the real model: the
//! estimate touches nothing, loads no model, and predicts exactly the chunks
//! and tokens the run then embeds, on a first index and on an update; a run
//! over its budget is refused before anything is embedded or written.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use weft_config::{Locations, WeftConfig};
use weft_index::estimate::TimeBasis;
use weft_index::{RunError, RunEstimate, RunOptions, RunOutcome, RunSource, estimate_sources};
use weft_sources::SourceSpec;
use weft_wiring::DataDir;

fn sources(dir: &Path) -> Vec<RunSource> {
    vec![RunSource {
        spec: SourceSpec::parse(dir.to_str().unwrap()).unwrap(),
        project: Some("handbook".into()),
    }]
}

/// A documentation tree of `pages` markdown pages of three sections each,
/// and a file that is not indexed.
fn write_pages(root: &Path, pages: usize) {
    std::fs::create_dir_all(root).unwrap();
    for page in 0..pages {
        let mut text = format!("# Page {page}: the handbook\n\n");
        for section in 0..3 {
            text.push_str(&format!(
                "## Topic {page}.{section}\n\nThis section explains procedure {page}-{section}: \
                 how the team rotates the on-call pager, files incident {section} reports and \
                 reviews the runbook for service {page}. Every step is written down so that a \
                 newcomer can follow it without asking.\n\n"
            ));
        }
        std::fs::write(root.join(format!("page{page:02}.md")), text).unwrap();
    }
    // Not indexed: binary.
    std::fs::write(
        root.join("logo.png"),
        [0x89u8, b'P', b'N', b'G', 0, 0, 1, 2],
    )
    .unwrap();
}

/// Every file under `dir` with its length and a hash of its bytes. (Not
/// its modification time: qdrant-edge rewrites some segment metadata, byte
/// for byte the same, when any reader opens or closes a shard.)
fn snapshot(dir: &Path) -> Snapshot {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(entry.path()).unwrap().hash(&mut hasher);
                out.insert(entry.path(), (meta.len(), hasher.finish()));
            }
        }
    }
    out
}

type Snapshot = BTreeMap<PathBuf, (u64, u64)>;

/// That no file was added, removed or written between two snapshots.
fn assert_unchanged(before: &Snapshot, after: &Snapshot, what: &str) {
    let differ: Vec<&PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .collect();
    assert!(
        differ.is_empty(),
        "{what} changed the data directory: {differ:?}"
    );
}

async fn estimate(
    config: &WeftConfig,
    locations: &Locations,
    dir: &Path,
    budget: Option<u64>,
) -> RunEstimate {
    estimate_sources(
        config,
        locations,
        &sources(dir),
        &RunOptions {
            max_embed_tokens: budget,
            ..Default::default()
        },
        &indicatif::ProgressBar::hidden,
    )
    .await
    .expect("estimate")
}

async fn run(
    config: &WeftConfig,
    locations: &Locations,
    dir: &Path,
) -> Result<RunOutcome, RunError> {
    weft_index::index_sources(
        config,
        locations,
        sources(dir),
        RunOptions::default(),
        &indicatif::ProgressBar::hidden,
        || {},
        &mut |_| {},
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_predicts_what_the_run_embeds_and_a_budget_refuses_before_embedding() {
    let tmp = tempfile::tempdir().unwrap();
    let (docs, data) = (tmp.path().join("handbook"), tmp.path().join("data"));
    write_pages(&docs, 80);
    let config = WeftConfig::default();
    let real = Locations {
        data_dir: data.clone(),
        model_dir: common::model_dir(),
    };
    // A model directory of the same name that does not exist: an estimate
    // that tried to load the model would fail.
    let no_model = Locations {
        data_dir: data.clone(),
        model_dir: tmp.path().join("absent").join(common::model().model_id()),
    };

    // A first index: everything new, nothing looked up, nothing written.
    let first = estimate(&config, &no_model, &docs, None).await;
    assert!(!data.exists(), "a dry run created the data directory");
    let s = &first.sources[0];
    assert_eq!(
        (s.documents.listed, s.documents.new, s.documents.skipped),
        (81, 80, 1),
        "{s:?}"
    );
    assert!(s.skipped.iter().any(|i| i.uri == "logo.png"), "{s:?}");
    assert_eq!(s.chunks, s.chunks_to_embed + s.vectors_reused);
    assert_eq!(s.chunks_stored, 0);
    assert!(
        first.tokens_to_embed > 0 && first.chunks_to_embed >= 80,
        "{s:?}"
    );
    assert!(matches!(first.time, TimeBasis::Default { .. }));

    let outcome = run(&config, &real, &docs).await.expect("first run");
    let summary = &outcome.summaries[0];
    assert_eq!(
        summary.chunks_written - summary.vectors_reused,
        first.chunks_to_embed
    );
    assert_eq!(summary.tokens_embedded, first.tokens_to_embed);

    // The run measured its throughput; the next estimate uses it.
    let measured = weft_index::estimate::load_throughputs(&DataDir::new(&data).throughput_path());
    assert_eq!(measured.len(), 1, "{measured:?}");
    assert_eq!(measured[0].tokens, first.tokens_to_embed);

    // An update: one page changed, one added, one removed (the binary is
    // recorded too, as skipped, and stays unchanged).
    let changed = docs.join("page03.md");
    let mut text = std::fs::read_to_string(&changed).unwrap();
    text.push_str("## Added later\n\nA new section on rotating credentials after an incident.\n");
    std::fs::write(&changed, text).unwrap();
    std::fs::remove_file(docs.join("page04.md")).unwrap();
    std::fs::write(
        docs.join("page99.md"),
        "# Page 99\n\n## Fresh\n\nA page written after the first run, on backups.\n",
    )
    .unwrap();

    let before = snapshot(&data);
    let update = estimate(&config, &no_model, &docs, None).await;
    assert_unchanged(&before, &snapshot(&data), "a dry run");
    assert!(update.looked_up_stored);
    let s = &update.sources[0];
    let d = &s.documents;
    assert_eq!(
        (d.new, d.changed, d.removed, d.unchanged),
        (1, 1, 1, 79),
        "{s:?}"
    );
    // The changed page's first sections keep their vectors (their chunks
    // are written again: the page's chunk count changed); the new page and
    // the added section are embedded.
    assert!(s.chunks_stored + s.vectors_reused >= 1, "{s:?}");
    assert!(s.chunks_to_embed >= 2 && s.chunks_to_embed < 6, "{s:?}");
    assert!(s.chunks_removed >= 1, "{s:?}");
    match &update.time {
        TimeBasis::Measured(m) => assert!(m.tokens_per_second() > 0.0),
        other => panic!("the measured throughput was not used: {other:?}"),
    }

    // With a price, a cost.
    let mut priced = config.clone();
    priced.embedding.price_per_million_tokens = Some(0.02);
    let with_cost = estimate(&priced, &no_model, &docs, None).await;
    let cost = with_cost.cost.expect("a cost");
    assert!((cost - 0.02 * with_cost.tokens_to_embed as f64 / 1e6).abs() < 1e-12);

    // A budget below what the update needs: refused, nothing changes.
    let mut tight = config.clone();
    tight.embedding.max_embed_tokens = Some(update.tokens_to_embed - 1);
    let before = snapshot(&data);
    let refused = run(&tight, &real, &docs).await;
    match refused {
        Err(RunError::OverBudget { tokens, budget, .. }) => {
            assert_eq!(tokens, update.tokens_to_embed);
            assert_eq!(budget, update.tokens_to_embed - 1);
        }
        other => panic!("not refused: {other:?}"),
    }
    assert_unchanged(&before, &snapshot(&data), "a refused run");
    assert!(
        estimate(&config, &no_model, &docs, Some(update.tokens_to_embed - 1))
            .await
            .over_budget
    );

    // Within the budget: the run embeds what the estimate said.
    let mut enough = config.clone();
    enough.embedding.max_embed_tokens = Some(update.tokens_to_embed);
    let outcome = run(&enough, &real, &docs).await.expect("update run");
    let summary = &outcome.summaries[0];
    assert_eq!(
        summary.chunks_written - summary.vectors_reused,
        update.chunks_to_embed
    );
    assert_eq!(summary.tokens_embedded, update.tokens_to_embed);
    assert_eq!(summary.documents_deleted, 1);

    // Nothing left to do.
    let done = estimate(&config, &no_model, &docs, None).await;
    assert_eq!(done.chunks_to_embed, 0);
    // 80 pages and the skipped binary, recorded as such.
    assert_eq!(done.sources[0].documents.unchanged, 81);
}

/// The budget's estimate trusts git as the run does: for a source a remote
/// caller names (the MCP `index` tool, [`weft_index::GitTrust::Crawl`]),
/// `[crawl]`'s transports and addresses, not the user's own git.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_estimate_trusts_git_as_the_run_does() {
    let tmp = tempfile::tempdir().unwrap();
    let locations = Locations {
        data_dir: tmp.path().join("data"),
        model_dir: tmp.path().join("absent").join("all-MiniLM-L6-v2"),
    };
    let repo = tmp.path().join("repo.git");
    let sources = vec![RunSource {
        spec: SourceSpec::parse(&format!("file://{}", repo.display())).unwrap(),
        project: Some("repo".into()),
    }];
    let crawl_trust = RunOptions {
        git: weft_index::GitTrust::Crawl,
        max_embed_tokens: Some(1_000),
        ..Default::default()
    };
    let estimate = estimate_sources(
        &WeftConfig::default(),
        &locations,
        &sources,
        &crawl_trust,
        &indicatif::ProgressBar::hidden,
    )
    .await
    .expect("estimate");
    assert_eq!(estimate.failed.len(), 1, "{estimate:?}");
    assert!(
        estimate.failed[0].error.contains("crawl.git_protocols"),
        "{estimate:?}"
    );
    // A run with a budget estimates first, under the same trust: the source
    // fails on the policy, not on a clone.
    let real = Locations {
        data_dir: locations.data_dir.clone(),
        model_dir: common::model_dir(),
    };
    let outcome = weft_index::index_sources(
        &WeftConfig::default(),
        &real,
        sources,
        crawl_trust,
        &indicatif::ProgressBar::hidden,
        || {},
        &mut |_| {},
    )
    .await
    .expect("the run itself reports the source as failed");
    assert!(
        weft_core::error_chain(&outcome.failed[0].1).contains("crawl.git_protocols"),
        "{:?}",
        outcome.failed
    );
}
