//! The embedded pipeline end to end with the real model and the real stores:
//! index a fixture tree, search it, expand neighbours, re-index incrementally.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use weft_core::query::{QueryEngine, SearchMode, SearchRequest};
use weft_core::retrieval::{RetrievalConfig, SearchFilter};
use weft_index::IndexOptions;
use weft_sources::SourceSpec;
use weft_wiring::Stores;

fn engine_over(stores: &Stores) -> QueryEngine {
    QueryEngine::new(
        stores.vectors.clone(),
        stores.text.clone(),
        Some(common::model()),
        None,
        RetrievalConfig::default(),
    )
}

/// Writes the fixture tree into `tree`: the source to index it from, as
/// project "fixture".
fn fixture_source(tree: &std::path::Path) -> (SourceSpec, IndexOptions) {
    common::write_fixture(tree);
    let options = IndexOptions {
        project: Some("fixture".into()),
        ..Default::default()
    };
    (SourceSpec::Dir(tree.to_owned()), options)
}

/// Asserts that the vector and the text index both hold `chunks` chunks.
async fn both_stores_hold(stores: &Stores, chunks: usize) {
    assert_eq!(stores.vectors.count().await.unwrap(), chunks as u64);
    assert_eq!(stores.text.count().await.unwrap(), chunks as u64);
}

fn request(query: &str, expand: bool) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        filter: SearchFilter::default(),
        limit: 5,
        mode: SearchMode::Hybrid,
        expand,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_search_expand_and_reindex_incrementally() {
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (spec, options) = fixture_source(tree.path());

    // First run: everything is chunked and embedded; vendored and binary files are not.
    let first = {
        let indexer = common::indexer(data.path(), common::model());
        indexer.index(&spec, &options).await.expect("first run")
    };
    assert_eq!(first.documents_seen, 4, "{first:#?}");
    assert_eq!(first.documents_indexed, 3, "{first:#?}");
    assert_eq!(first.documents_skipped, 1, "the png: {first:#?}");
    assert!(first.skipped[0].uri == "logo.png", "{first:#?}");
    assert!(first.errors.is_empty(), "{first:#?}");
    assert!(first.chunks_written >= 8, "{first:#?}");

    let stores = common::stores(data.path());
    both_stores_hold(&stores, first.chunks_written).await;
    let engine = engine_over(&stores);

    // A question about a concept finds the right file, in every mode.
    for (query, uri) in [
        (
            "how do I throttle callers to a fixed number of requests per second",
            "RateLimiter.java",
        ),
        (
            "evict the least recently used entry when the cache is full",
            "lru-cache.ts",
        ),
        (
            "renew TLS certificates without restarting the server",
            "deploy.md",
        ),
    ] {
        for mode in [SearchMode::Hybrid, SearchMode::Vector, SearchMode::Text] {
            let response = engine
                .search(&SearchRequest {
                    mode,
                    ..request(query, true)
                })
                .await
                .unwrap();
            let top = &response.results[0];
            assert!(
                top.uri.ends_with(uri),
                "{mode:?} {query:?}: got {}",
                top.uri
            );
        }
    }

    // Expansion brings the neighbours of a hit; without it only hits come back.
    // One hit: with more, its neighbours may be hits themselves.
    let query = "acquire a permit, blocking until it is available";
    let one_hit = |expand| SearchRequest {
        limit: 1,
        ..request(query, expand)
    };
    let expanded = engine.search(&one_hit(true)).await.unwrap();
    let bare = engine.search(&one_hit(false)).await.unwrap();
    let count = |r: &weft_core::query::SearchResponse, matched: bool| {
        r.results
            .iter()
            .flat_map(|d| d.spans.iter().flat_map(|s| s.chunks.iter()))
            .filter(|c| c.matched == matched)
            .count()
    };
    assert!(count(&expanded, false) > 0, "expansion adds context chunks");
    assert_eq!(count(&bare, false), 0, "no context without expansion");
    assert_eq!(bare.neighbours_requested, 0);
    assert!(expanded.neighbours_requested > 0);
    let limiter = expanded
        .results
        .iter()
        .find(|d| d.uri.ends_with("RateLimiter.java"))
        .expect("RateLimiter.java is found");
    // Spans are contiguous runs in chunk order and never repeat a chunk.
    let mut all_ids = HashSet::new();
    for doc in &expanded.results {
        for span in &doc.spans {
            let indexes: Vec<u32> = span.chunks.iter().map(|c| c.chunk.chunk_index).collect();
            assert!(indexes.windows(2).all(|w| w[1] == w[0] + 1), "{indexes:?}");
            assert_eq!(span.start_line, span.chunks[0].chunk.start_line);
            for c in &span.chunks {
                assert!(
                    all_ids.insert(c.chunk.id()),
                    "chunk repeated: {}",
                    c.chunk.id()
                );
            }
        }
    }
    assert!(limiter.spans.iter().map(|s| s.chunks.len()).sum::<usize>() >= 2);
    // The second search embeds nothing: the query vector is cached.
    let again = engine.search(&one_hit(true)).await.unwrap();
    assert!(again.cached_embedding);
    // The cache is per key: what one key asked is not cached for another
    // (issue 33: `cached_embedding` and `embed_ms` told it), and each key's
    // own repeat is.
    let keyed = |key: &str| SearchRequest {
        cache_partition: Some(key.to_owned()),
        ..one_hit(true)
    };
    assert!(!engine.search(&keyed("b")).await.unwrap().cached_embedding);
    assert!(!engine.search(&keyed("a")).await.unwrap().cached_embedding);
    assert!(engine.search(&keyed("a")).await.unwrap().cached_embedding);

    // Adjacency costs one batched store call per query, however many hits.
    let counting = Arc::new(common::CountingVectors {
        inner: stores.vectors.clone(),
        gets: Default::default(),
        key_lookups: Default::default(),
    });
    let counted_engine = QueryEngine::new(
        counting.clone(),
        stores.text.clone(),
        Some(common::model()),
        None,
        RetrievalConfig::default(),
    );
    let mut most_hits = 0;
    for limit in [1, 3, 10, 30] {
        let before = counting.gets.load(Ordering::SeqCst);
        let response = counted_engine
            .search(&SearchRequest {
                limit,
                ..request("cache entries and rate limits", true)
            })
            .await
            .unwrap();
        let hits = response
            .results
            .iter()
            .flat_map(|d| d.spans.iter().flat_map(|s| s.chunks.iter()))
            .filter(|c| c.matched)
            .count();
        most_hits = most_hits.max(hits);
        let calls = counting.gets.load(Ordering::SeqCst) - before;
        let expected = usize::from(response.neighbours_requested > 0);
        assert_eq!(
            calls, expected,
            "limit {limit}: {hits} hits, {calls} get calls"
        );
    }
    assert!(most_hits >= 8, "the largest search had {most_hits} hits");
    drop(counted_engine);
    drop(counting);

    // Filters reach both retrievers.
    let only_docs = engine
        .search(&SearchRequest {
            filter: SearchFilter {
                path_prefix: Some("docs".into()),
                ..Default::default()
            },
            ..request("rate limiter permits", true)
        })
        .await
        .unwrap();
    assert!(only_docs.results.iter().all(|d| d.uri.starts_with("docs/")));
    drop(engine);
    drop(stores);

    // Second run over the unchanged tree: nothing embedded, the model never
    // loaded; the png is recorded as seen (no chunks) and not read again.
    let counted = common::counted_model();
    let second = common::indexer(data.path(), counted.embedder.clone())
        .index(&spec, &options)
        .await
        .unwrap();
    assert_eq!(second.documents_unchanged, 4, "{second:#?}");
    assert_eq!(second.documents_skipped, 0, "{second:#?}");
    assert_eq!((second.documents_indexed, second.chunks_written), (0, 0));
    assert_eq!(
        counted.loads.load(Ordering::SeqCst),
        0,
        "model loaded for nothing"
    );

    // Shrink the Java file, delete the TypeScript file: surplus and removed chunks go.
    let java = tree
        .path()
        .join("src/main/java/com/example/throttle/RateLimiter.java");
    let short = "package com.example.throttle;\n\n/** A stub. */\npublic final class RateLimiter {\n  public double acquire() { return 0.0; }\n}\n";
    std::fs::write(&java, short).unwrap();
    std::fs::remove_file(tree.path().join("web/src/lru-cache.ts")).unwrap();
    let counted = common::counted_model();
    let third = common::indexer(data.path(), counted.embedder.clone())
        .index(&spec, &options)
        .await
        .unwrap();
    assert_eq!(third.documents_indexed, 1, "{third:#?}");
    assert_eq!(
        third.documents_unchanged, 2,
        "the markdown and the png: {third:#?}"
    );
    assert_eq!(third.documents_deleted, 1, "{third:#?}");
    assert_eq!(counted.loads.load(Ordering::SeqCst), 1);
    let stores = common::stores(data.path());
    let stored = stores.vectors.count().await.unwrap();
    // The Java file's chunk 0 was replaced in place; the rest of it and the
    // whole TypeScript file were deleted.
    assert_eq!(
        stored as usize,
        first.chunks_written - third.chunks_deleted,
        "{third:#?}"
    );
    assert_eq!(stores.text.count().await.unwrap(), stored);
    let engine = engine_over(&stores);
    let response = engine
        .search(&request("least recently used cache eviction", true))
        .await
        .unwrap();
    assert!(
        response
            .results
            .iter()
            .all(|d| !d.uri.ends_with("lru-cache.ts")),
        "deleted file still found"
    );
    let records = stores.catalog.documents(Some("fixture")).await.unwrap();
    assert_eq!(records.len(), 3, "java, markdown and the png (no chunks)");
    let java_record = records.iter().find(|r| r.uri.ends_with(".java")).unwrap();
    assert_eq!(java_record.chunk_count, 1);
    drop(engine);
    drop(stores);

    // --reindex cuts and writes every document again; equal chunks keep
    // their vectors, nothing is sent to the model.
    let rebuilt = common::indexer(data.path(), common::model())
        .index(
            &spec,
            &IndexOptions {
                reindex: true,
                ..options.clone()
            },
        )
        .await
        .unwrap();
    assert_eq!(rebuilt.documents_indexed, 2, "{rebuilt:#?}");
    assert_eq!(rebuilt.documents_unchanged, 0);
    assert_eq!(rebuilt.chunks_written, 0, "{rebuilt:#?}");
    let stores = common::stores(data.path());
    assert_eq!(
        stores.vectors.count().await.unwrap() as usize,
        rebuilt.chunks_reused
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_are_separate_and_filterable() {
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    common::write_fixture(tree.path());
    let indexer = common::indexer(data.path(), common::model());
    let docs_only = tree.path().join("docs");
    for (project, path) in [("all", tree.path()), ("docs", docs_only.as_path())] {
        indexer
            .index(
                &SourceSpec::Dir(path.to_owned()),
                &IndexOptions {
                    project: Some(project.into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    drop(indexer);
    let stores = common::stores(data.path());
    let engine = engine_over(&stores);
    let response = engine
        .search(&SearchRequest {
            filter: SearchFilter {
                projects: vec!["docs".into()],
                ..Default::default()
            },
            ..request("TLS certificates", true)
        })
        .await
        .unwrap();
    assert!(!response.results.is_empty());
    for doc in &response.results {
        for span in &doc.spans {
            assert!(span.chunks.iter().all(|c| c.chunk.project == "docs"));
        }
    }
    let projects = stores.catalog.projects().await.unwrap();
    assert_eq!(projects.len(), 2);
    let _ = Arc::clone(&stores.vectors);
}

/// Changing a chunking setting re-cuts every document on the next run,
/// though no content changed, and leaves no chunk cut the old way behind;
/// changing where the model cuts texts re-embeds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_chunking_or_embedding_settings_reindex_unchanged_documents() {
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (spec, options) = fixture_source(tree.path());
    let run = |config: weft_config::WeftConfig| {
        let (spec, options, data) = (spec.clone(), options.clone(), data.path().to_owned());
        async move {
            let indexer = weft_index::Indexer::new(
                common::stores(&data),
                common::model(),
                &config,
                data.join("sources"),
            )
            .expect("indexer");
            indexer.index(&spec, &options).await.expect("index run")
        }
    };
    let first = run(weft_config::WeftConfig::default()).await;
    assert_eq!(first.documents_indexed, 3, "{first:#?}");

    let mut small = weft_config::WeftConfig::default();
    small.chunking.code.max_chars = 300;
    small.chunking.code.min_chars = 50;
    let recut = run(small.clone()).await;
    assert_eq!(recut.documents_unchanged, 0, "{recut:#?}");
    assert_eq!(recut.documents_indexed, 3, "{recut:#?}");
    assert!(
        recut.chunks_written > first.chunks_written,
        "smaller code chunks are more chunks: {} then {}",
        first.chunks_written,
        recut.chunks_written
    );
    // Chunks the new cut left equal keep their vectors.
    let recut_total = recut.chunks_written + recut.chunks_reused;
    both_stores_hold(&common::stores(data.path()), recut_total).await;

    let again = run(small.clone()).await;
    assert_eq!(again.documents_unchanged, 4, "{again:#?}");
    assert_eq!(again.chunks_written, 0, "{again:#?}");

    // Where the model cuts texts changes the vectors: everything is embedded again.
    let mut shorter = small;
    shorter.embedding.max_tokens = 128;
    let reembedded = run(shorter).await;
    assert_eq!(reembedded.documents_unchanged, 0, "{reembedded:#?}");
    assert_eq!(reembedded.chunks_written, recut_total, "{reembedded:#?}");
    assert_eq!(reembedded.chunks_reused, 0, "{reembedded:#?}");
}

/// A text index written by an older weft (another text format) is rebuilt
/// from the chunks in the vector index when the data directory is opened:
/// nothing is re-embedded, and an interrupted earlier rebuild is discarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_format_text_index_is_rebuilt_from_the_vectors() {
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (spec, options) = fixture_source(tree.path());
    let report = {
        let indexer = common::indexer(data.path(), common::model());
        indexer.index(&spec, &options).await.expect("index")
    };
    assert!(report.chunks_written >= 8, "{report:#?}");

    // Replace the text index with an empty one in format 1 (no marker),
    // and leave the debris of a rebuild that was cut short.
    let text = data.path().join("text");
    std::fs::remove_dir_all(&text).unwrap();
    {
        let empty = weft_text_tantivy::TantivyTextIndex::open_or_create(&text).unwrap();
        empty.commit().unwrap();
    }
    std::fs::remove_file(text.join("weft-text-format")).unwrap();
    std::fs::create_dir_all(data.path().join("text.rebuild")).unwrap();
    std::fs::write(data.path().join("text.rebuild/junk"), "cut short").unwrap();

    let stores = common::stores(data.path());
    assert_eq!(
        stores.text.count().await.unwrap(),
        report.chunks_written as u64,
        "every chunk is back in the text index"
    );
    assert_eq!(
        weft_text_tantivy::TantivyTextIndex::format_in(&text).unwrap(),
        Some(weft_text_tantivy::TEXT_FORMAT)
    );
    assert!(!data.path().join("text.rebuild").exists());
    assert!(!data.path().join("text.old").exists());
    let hits = stores
        .text
        .search("tryAcquire permits", &SearchFilter::default(), 3)
        .await
        .unwrap();
    assert!(
        hits.iter()
            .any(|h| h.chunk.uri.ends_with("RateLimiter.java")),
        "{:?}",
        hits.iter().map(|h| &h.chunk.uri).collect::<Vec<_>>()
    );
}

/// The real model, counting the texts it is asked to embed.
struct CountingModel {
    inner: Arc<dyn weft_core::ports::Embedder>,
    texts: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl weft_core::ports::Embedder for CountingModel {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String]) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts).await
    }
    async fn embed_queries(
        &self,
        queries: &[String],
    ) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        self.inner.embed_queries(queries).await
    }
}

/// A vector is keyed by (embedder, embedded text): a copy of a project with
/// one file changed, indexed as another project, sends only that file's
/// changed chunks to the model; the copy's search results are its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_project_embeds_only_what_differs() {
    let original = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    common::write_fixture(original.path());
    common::write_fixture(copy.path());
    let changed = copy.path().join("docs/deploy.md");
    let mut text = std::fs::read_to_string(&changed).unwrap();
    text.push_str("\n## Rollback\n\nRedeploy the previous image tag with `weft deploy --tag`.\n");
    std::fs::write(&changed, text).unwrap();

    let model = Arc::new(CountingModel {
        inner: common::model(),
        texts: Default::default(),
    });
    let indexer = common::indexer(data.path(), model.clone());
    let index = |tree: &std::path::Path, project: &str| {
        let (spec, options) = (
            SourceSpec::Dir(tree.to_owned()),
            IndexOptions {
                project: Some(project.into()),
                ..Default::default()
            },
        );
        let indexer = &indexer;
        async move { indexer.index(&spec, &options).await }
    };
    let first = index(original.path(), "upstream").await.unwrap();
    let embedded_first = model.texts.load(Ordering::SeqCst);
    assert!(first.chunks_written >= 5, "{first:#?}");
    assert_eq!(embedded_first, first.chunks_written - first.vectors_reused);

    let fork = index(copy.path(), "fork").await.unwrap();
    let embedded_fork = model.texts.load(Ordering::SeqCst) - embedded_first;
    assert_eq!(fork.chunks_written, first.chunks_written + 1, "{fork:#?}");
    assert_eq!(
        fork.vectors_reused,
        fork.chunks_written - embedded_fork,
        "{fork:#?}"
    );
    assert!(
        (1..=2).contains(&embedded_fork),
        "only the new section (and the chunk it joined) is embedded: {embedded_fork} of {}",
        fork.chunks_written
    );

    // A forced re-index of the fork sends nothing to the model.
    let again = indexer
        .index(
            &SourceSpec::Dir(copy.path().to_owned()),
            &IndexOptions {
                project: Some("fork".into()),
                reindex: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(again.documents_unchanged, 0, "{again:#?}");
    assert_eq!(
        model.texts.load(Ordering::SeqCst),
        embedded_first + embedded_fork
    );
    drop(indexer);

    // Reused vectors serve the fork's own results.
    let stores = common::stores(data.path());
    let response = QueryEngine::new(
        stores.vectors.clone(),
        stores.text.clone(),
        Some(common::model()),
        None,
        RetrievalConfig::default(),
    )
    .search(&SearchRequest {
        filter: SearchFilter {
            projects: vec!["fork".into()],
            ..Default::default()
        },
        ..request("rate limiter permits per second", false)
    })
    .await
    .unwrap();
    assert!(!response.results.is_empty());
    let fork_docs: HashSet<String> = stores
        .catalog
        .documents(Some("fork"))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.document_id.to_string())
        .collect();
    assert!(
        response
            .results
            .iter()
            .all(|d| fork_docs.contains(&d.document_id.to_string())),
        "only the fork's documents"
    );
}

/// The real model behind a slow door, as an API is: counts the calls in
/// flight at once and remembers every text's vector.
struct ApiLikeModel {
    inner: Arc<dyn weft_core::ports::Embedder>,
    in_flight: std::sync::atomic::AtomicUsize,
    most_in_flight: std::sync::atomic::AtomicUsize,
    made: std::sync::Mutex<Vec<(String, Vec<f32>)>>,
}

#[async_trait::async_trait]
impl weft_core::ports::Embedder for ApiLikeModel {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String]) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        let vectors = self.inner.embed(texts).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let vectors = vectors?;
        let mut made = self.made.lock().unwrap();
        made.extend(texts.iter().cloned().zip(vectors.iter().cloned()));
        Ok(vectors)
    }
    async fn embed_queries(
        &self,
        queries: &[String],
    ) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        self.inner.embed_queries(queries).await
    }
}

/// With an embedding API (`provider = "http"`) the write step keeps
/// `embedding.max_in_flight` calls going at once, and every vector is
/// stored under its own text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_gets_max_in_flight_calls_at_once() {
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (spec, options) = fixture_source(tree.path());
    let mut config = weft_config::WeftConfig::default();
    config.embedding.provider = weft_config::EmbeddingProvider::Http;
    config.embedding.max_in_flight = 3;
    config.embedding.batch_size = 1;
    let model = Arc::new(ApiLikeModel {
        inner: common::model(),
        in_flight: Default::default(),
        most_in_flight: Default::default(),
        made: Default::default(),
    });
    let indexer = common::indexer_with(data.path(), model.clone(), config.clone());
    let summary = indexer.index(&spec, &options).await.unwrap();
    drop(indexer);
    assert!(summary.chunks_written >= 5, "{summary:#?}");
    assert_eq!(model.most_in_flight.load(Ordering::SeqCst), 3);

    let stores = common::stores(data.path());
    let tag = weft_wiring::embedder_tag(
        &config.embedding,
        weft_core::ports::Embedder::model_id(model.as_ref()),
    );
    let made = model.made.lock().unwrap().clone();
    assert_eq!(made.len(), summary.chunks_written - summary.vectors_reused);
    let keys: Vec<String> = made
        .iter()
        .map(|(text, _)| weft_core::embedding_key(&tag, text))
        .collect();
    let stored = stores.vectors.vectors_by_key(&keys).await.unwrap();
    for ((text, vector), key) in made.iter().zip(&keys) {
        let got = stored
            .get(key)
            .unwrap_or_else(|| panic!("no vector for {text:?}"));
        let dot: f32 = got.iter().zip(vector).map(|(a, b)| a * b).sum();
        assert!(
            dot > 0.9999,
            "{text:?} stored with another text's vector ({dot})"
        );
    }
}
