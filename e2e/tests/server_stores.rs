//! The distributed pipeline writing to and reading from Qdrant and/or
//! Meilisearch servers (`[stores]`), with the real local model.
//!
//! Runs when `WEFT_TEST_QDRANT_URL` (Qdrant's gRPC address) and/or
//! `WEFT_TEST_MEILI_URL` are set, with `WEFT_TEST_QDRANT_API_KEY` /
//! `WEFT_TEST_MEILI_API_KEY` when the servers need keys; the store not
//! given stays embedded. The run uses a collection and an index of its
//! own and deletes them after.

use std::time::Duration;

use weft_core::ports::{Catalog, TextIndex, VectorIndex};
use weft_e2e::{Service, crawl, start_query, wait_for_documents, write_files};
use weft_nats::Jet;
use weft_nats::testing::NatsServer;
use weft_proto::v1;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_indexes_into_and_searches_server_stores() {
    let qdrant = var("WEFT_TEST_QDRANT_URL");
    let meili = var("WEFT_TEST_MEILI_URL");
    if qdrant.is_none() && meili.is_none() {
        eprintln!(
            "skipped: set WEFT_TEST_QDRANT_URL (gRPC, http://HOST:6334) and/or WEFT_TEST_MEILI_URL (http://HOST:7700) to run the pipeline against real servers"
        );
        return;
    }
    let name = format!("weft-e2e-{}", uuid::Uuid::new_v4());
    let nats = NatsServer::start();
    let tree = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    write_files(
        tree.path(),
        &[
            (
                "certificates.md",
                "# Certificates\n\nRenew the server's TLS certificate before it expires; the server reloads it without a restart.\n",
            ),
            (
                "RateLimiter.java",
                "package limits;\n\n/** Hands out permits at a fixed rate. */\nclass RateLimiter {\n  /** Blocks until a permit is available. */\n  void acquirePermit() {\n    sleepUntilNextPermit();\n  }\n}\n",
            ),
        ],
    );
    let mut env = vec![
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT_DATA_DIR", data.path().display().to_string()),
        (
            "WEFT_MODEL_DIR",
            weft_e2e::model_dir().display().to_string(),
        ),
    ];
    if let Some(url) = &qdrant {
        env.push(("WEFT__STORES__VECTOR", "qdrant".into()));
        env.push(("WEFT__STORES__QDRANT_URL", url.clone()));
        env.push(("WEFT__STORES__QDRANT_COLLECTION", name.clone()));
        if var("WEFT_TEST_QDRANT_API_KEY").is_some() {
            env.push((
                "WEFT__STORES__QDRANT_API_KEY_ENV",
                "WEFT_TEST_QDRANT_API_KEY".into(),
            ));
        }
    }
    if let Some(url) = &meili {
        env.push(("WEFT__STORES__TEXT", "meilisearch".into()));
        env.push(("WEFT__STORES__MEILI_URL", url.clone()));
        env.push(("WEFT__STORES__MEILI_INDEX", name.clone()));
        if var("WEFT_TEST_MEILI_API_KEY").is_some() {
            env.push((
                "WEFT__STORES__MEILI_API_KEY_ENV",
                "WEFT_TEST_MEILI_API_KEY".into(),
            ));
        }
    }

    let _chunker = Service::start("chunker", "weft-chunker", &[], &env, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let tree_arg = tree.path().display().to_string();
    let summary = crawl(&[&tree_arg, "--project", "docs"], &env);
    assert_eq!(summary["sources"][0]["documents_published"], 2, "{summary}");

    let jet = Jet::connect(&nats.config()).await.unwrap();
    let catalog = jet.catalog().await.unwrap();
    wait_for_documents(&catalog, "docs", 2, &mut embedder, Duration::from_secs(120)).await;
    let chunks: u64 = catalog
        .documents(Some("docs"))
        .await
        .unwrap()
        .iter()
        .map(|r| u64::from(r.chunk_count))
        .sum();
    embedder.stop();

    // The servers hold exactly the chunks the catalog records.
    let qdrant_index = match &qdrant {
        Some(url) => Some(
            weft_vector_qdrant::QdrantVectorIndex::connect(
                url,
                var("WEFT_TEST_QDRANT_API_KEY"),
                &name,
                384,
            )
            .await
            .expect("open the test collection"),
        ),
        None => None,
    };
    let meili_index = match &meili {
        Some(url) => Some(
            weft_text_meili::MeiliTextIndex::connect(url, var("WEFT_TEST_MEILI_API_KEY"), &name)
                .await
                .expect("open the test index"),
        ),
        None => None,
    };
    if let Some(index) = &qdrant_index {
        assert_eq!(index.count().await.unwrap(), chunks, "points in Qdrant");
    }
    if let Some(index) = &meili_index {
        assert_eq!(
            index.count().await.unwrap(),
            chunks,
            "documents in Meilisearch"
        );
    }

    let (mut query, mut client) = start_query(&env, logs.path()).await;
    for (query_text, mode, expected) in [
        (
            "how do I renew a TLS certificate",
            v1::SearchMode::Vector,
            "certificates.md",
        ),
        ("acquire permit", v1::SearchMode::Text, "RateLimiter.java"),
        (
            "rate limiter permits",
            v1::SearchMode::Hybrid,
            "RateLimiter.java",
        ),
    ] {
        let response = client
            .search(v1::SearchRequest {
                query: query_text.into(),
                mode: mode as i32,
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{query_text}: {e}\n{}", query.log()))
            .into_inner();
        assert_eq!(
            response.results.first().map(|r| r.uri.as_str()),
            Some(expected),
            "{query_text} ({mode:?}): {response:?}"
        );
    }
    query.stop();

    if let Some(index) = qdrant_index {
        index
            .delete_collection()
            .await
            .expect("delete the test collection");
    }
    if let Some(index) = meili_index {
        index.delete_index().await.expect("delete the test index");
    }
}
