//! Index generations of the embedded data directory, through
//! [`weft_index::index_sources`] (what `weft index` runs) with the real
//! model: a run that changes something builds a new generation beside the
//! live one and switches; a run that changes nothing leaves everything as
//! it is; a generation that is read is kept until its reader lets go; an
//! interrupted run is continued; a model change needs a rebuild, which
//! indexes every project again from its source.

mod common;

use std::path::Path;

use weft_config::Locations;
use weft_core::generations::{GenerationState, Generations, now_secs};
use weft_index::{RunError, RunOptions, RunOutcome, RunSource, index_sources};
use weft_sources::SourceSpec;
use weft_wiring::DataDir;
use weft_wiring::QueryEmbedder;
use weft_wiring::generations::FileRegistry;

fn config() -> weft_config::WeftConfig {
    weft_config::WeftConfig::default()
}

fn locations(data: &Path) -> Locations {
    Locations {
        data_dir: data.to_owned(),
        model_dir: common::model_dir(),
    }
}

async fn run(
    data: &Path,
    sources: &[(&Path, &str)],
    rebuild: bool,
    config: &weft_config::WeftConfig,
) -> Result<RunOutcome, RunError> {
    let sources: Vec<(String, &str)> = sources
        .iter()
        .map(|(path, project)| (path.to_str().unwrap().to_owned(), *project))
        .collect();
    run_sources(data, &sources, rebuild, config, &locations(data)).await
}

async fn run_sources(
    data: &Path,
    sources: &[(String, &str)],
    rebuild: bool,
    config: &weft_config::WeftConfig,
    locations: &Locations,
) -> Result<RunOutcome, RunError> {
    assert_eq!(locations.data_dir, data);
    let sources = sources
        .iter()
        .map(|(source, project)| RunSource {
            spec: SourceSpec::parse(source).unwrap(),
            project: Some((*project).to_owned()),
        })
        .collect();
    index_sources(
        config,
        locations,
        sources,
        RunOptions {
            rebuild,
            ..Default::default()
        },
        &indicatif::ProgressBar::hidden,
        || {},
        &mut |_| {},
    )
    .await
}

/// The uris a text search over `stack` finds.
async fn text_hits(stack: &weft_wiring::QueryStack, query: &str) -> Vec<String> {
    stack
        .engine
        .search(&weft_core::query::SearchRequest {
            query: query.into(),
            limit: 5,
            mode: weft_core::query::SearchMode::Text,
            ..Default::default()
        })
        .await
        .expect("search")
        .results
        .into_iter()
        .map(|d| d.uri)
        .collect()
}

fn live(data: &Path) -> u32 {
    DataDir::new(data)
        .generations()
        .unwrap()
        .live_number()
        .expect("a live generation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_is_a_new_generation_and_an_unchanged_run_writes_nothing() {
    let tree = tempfile::tempdir().unwrap();
    common::write_fixture(tree.path());
    let data = tempfile::tempdir().unwrap();
    let config = config();

    let first = run(data.path(), &[(tree.path(), "demo")], false, &config)
        .await
        .unwrap();
    assert_eq!(first.generation.live, Some(1));
    assert!(first.generation.switched);
    let counts = first.generation.counts.unwrap();
    assert!(counts.agree() && counts.vector_chunks > 0, "{counts:?}");
    assert!(data.path().join("generations/g1/vectors").is_dir());

    // Nothing changed: no generation is made, the live one stays.
    let again = run(data.path(), &[(tree.path(), "demo")], false, &config)
        .await
        .unwrap();
    assert_eq!(again.generation.written, None);
    assert!(!again.generation.switched);
    assert_eq!(live(data.path()), 1);
    assert!(!data.path().join("generations/g2").exists());
    assert_eq!(again.summaries[0].documents_indexed, 0);
    assert!(again.summaries[0].documents_unchanged >= 3);

    // A reader holds generation 1 while a change makes generation 2.
    let reader =
        weft_wiring::open_query(&config, &locations(data.path()), QueryEmbedder::NotNeeded)
            .await
            .unwrap();
    assert_eq!(reader.generation, 1);
    std::fs::write(
        tree.path().join("docs/deploy.md"),
        "# Deploy\n\nShip the quokka build to the wombat cluster.\n",
    )
    .unwrap();
    let second = run(data.path(), &[(tree.path(), "demo")], false, &config)
        .await
        .unwrap();
    // (The unchanged run's number was taken and given up: numbers are
    // never reused.)
    let second_number = second.generation.live.expect("switched");
    assert!(second_number > 1, "{:?}", second.generation);
    assert_eq!(second.generation.previous, Some(1));
    assert!(second.generation.copied_bytes > 0);
    assert_eq!(second.generation.collected.still_read, vec![1]);
    assert_eq!(second.summaries[0].documents_indexed, 1);
    // The reader still reads generation 1, whole.
    assert_eq!(reader.vectors.count().await.unwrap(), counts.vector_chunks);
    let new = weft_wiring::open_query(&config, &locations(data.path()), QueryEmbedder::NotNeeded)
        .await
        .unwrap();
    assert_eq!(new.generation, second_number);
    let hits = text_hits(&new, "quokka wombat").await;
    assert!(
        hits.iter().any(|uri| uri == "docs/deploy.md"),
        "the change is in the new generation: {hits:?}"
    );
    drop(reader);
    let collected = weft_wiring::generations::collect_garbage(&DataDir::new(data.path())).unwrap();
    assert_eq!(collected.removed, vec![1]);
    assert!(!data.path().join("generations/g1").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_is_continued_and_a_failed_rebuild_leaves_the_live_one() {
    let tree = tempfile::tempdir().unwrap();
    common::write_fixture(tree.path());
    let data = tempfile::tempdir().unwrap();
    let dir = DataDir::new(data.path());
    let config = config();
    let model = common::model();
    // A first index killed after it began generation 1: continued.
    FileRegistry::new(dir.clone())
        .update_blocking(&|g: &mut Generations| {
            let n = g.begin(now_secs(), None)?;
            g.record_model(n, model.model_id(), model.dimension())
        })
        .unwrap();
    std::fs::create_dir_all(data.path().join("generations/g1")).unwrap();
    let first = run(data.path(), &[(tree.path(), "demo")], false, &config)
        .await
        .unwrap();
    assert_eq!(first.generation.written, Some(1), "continued, not a second");
    assert_eq!(live(data.path()), 1);
    // A run killed after it began generation 2 beside 1 (its copy perhaps
    // cut short): begun again, never continued.
    FileRegistry::new(dir.clone())
        .update_blocking(&|g: &mut Generations| {
            let n = g.begin(now_secs(), Some(1))?;
            g.record_model(n, model.model_id(), model.dimension())
        })
        .unwrap();
    std::fs::create_dir_all(data.path().join("generations/g2")).unwrap();
    std::fs::write(tree.path().join("docs/deploy.md"), "# Deploy\n\nChanged.\n").unwrap();
    let next = run(data.path(), &[(tree.path(), "demo")], false, &config)
        .await
        .unwrap();
    assert_eq!(next.generation.written, Some(3), "begun again");
    assert_eq!(live(data.path()), 3);
    assert!(!data.path().join("generations/g2").exists());
    // Every document is there: the other files came with the copy.
    assert_eq!(next.generation.counts.unwrap().documents, 4);

    // A rebuild whose source cannot be read: generation 4 is aborted, 3 stays.
    let failed = run_sources(
        data.path(),
        &[("https://127.0.0.1:9/gone.git".to_owned(), "demo")],
        true,
        &config,
        &locations(data.path()),
    )
    .await;
    match failed {
        Ok(outcome) => {
            assert!(!outcome.failed.is_empty(), "the source is gone");
            assert!(!outcome.generation.switched);
        }
        Err(e) => eprintln!("refused: {e}"),
    }
    assert_eq!(live(data.path()), 3);
    let record = dir.generations().unwrap();
    assert!(
        record
            .generations
            .iter()
            .all(|g| g.state != GenerationState::Building),
        "{record:?}"
    );
    assert!(!data.path().join("generations/g4").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_model_needs_a_rebuild_which_indexes_every_project_again() {
    let Some(mpnet) = std::env::var_os("WEFT_MPNET_MODEL_DIR").map(std::path::PathBuf::from) else {
        panic!(
            "this test needs all-mpnet-base-v2 (tools/fetch-model.sh all-mpnet-base-v2; WEFT_MPNET_MODEL_DIR)"
        );
    };
    let tree = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("a.md"), "# Alpha\n\nThe alpha guide.\n").unwrap();
    std::fs::write(other.path().join("b.md"), "# Beta\n\nThe beta guide.\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let config = config();
    run(
        data.path(),
        &[(tree.path(), "alpha"), (other.path(), "beta")],
        false,
        &config,
    )
    .await
    .unwrap();
    let mut mpnet_config = config.clone();
    mpnet_config.embedding.model_dir = Some(mpnet.clone());
    let mpnet_locations = Locations {
        data_dir: data.path().to_owned(),
        model_dir: mpnet,
    };
    let alpha = vec![(tree.path().to_str().unwrap().to_owned(), "alpha")];
    let refused = run_sources(data.path(), &alpha, false, &mpnet_config, &mpnet_locations).await;
    let message = match refused {
        Ok(_) => panic!("another model without --reindex was indexed"),
        Err(e) => e.to_string(),
    };
    assert!(message.contains("--reindex"), "{message}");
    assert_eq!(live(data.path()), 1);

    // The rebuild names only alpha; beta comes again from its recorded source.
    let rebuilt = run_sources(data.path(), &alpha, true, &mpnet_config, &mpnet_locations)
        .await
        .unwrap();
    assert!(rebuilt.generation.switched, "{:?}", rebuilt.failed);
    let projects: Vec<&str> = rebuilt
        .summaries
        .iter()
        .map(|s| s.project.as_str())
        .collect();
    assert_eq!(projects, ["alpha", "beta"]);
    let meta = DataDir::new(data.path()).meta().unwrap().unwrap();
    assert_eq!(meta.model, "all-mpnet-base-v2");
    assert_eq!(meta.dimension, 768);
    assert_eq!(rebuilt.generation.counts.unwrap().documents, 2);
}
