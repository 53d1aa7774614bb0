//! The shared port conformance suite against a real Qdrant server.
//!
//! Runs when `WEFT_TEST_QDRANT_URL` names a server's **gRPC** address
//! (e.g. `http://localhost:6334`), with `WEFT_TEST_QDRANT_API_KEY` if it
//! needs one. Each run uses a collection of its own and deletes it after.
//! Without the variable the live tests say they were skipped; the test of
//! an unreachable server always runs.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use weft_conformance::DIM;
use weft_vector_qdrant::{QdrantIndexError, QdrantVectorIndex};

fn live() -> Option<(String, Option<String>)> {
    match std::env::var("WEFT_TEST_QDRANT_URL") {
        Ok(url) if !url.is_empty() => Some((url, std::env::var("WEFT_TEST_QDRANT_API_KEY").ok())),
        _ => {
            eprintln!(
                "skipped: set WEFT_TEST_QDRANT_URL=http://HOST:6334 (Qdrant's gRPC port) to run this against a real Qdrant"
            );
            None
        }
    }
}

fn collection_name() -> String {
    format!("weft-test-{}", uuid::Uuid::new_v4())
}

#[tokio::test]
async fn the_vector_index_conformance_suite_passes_on_a_live_qdrant() {
    let Some((url, key)) = live() else { return };
    let name = collection_name();
    let index = QdrantVectorIndex::connect(&url, key.clone(), &name, DIM)
        .await
        .unwrap_or_else(|e| panic!("connect to Qdrant at {url}: {e}"));
    let outcome = AssertUnwindSafe(async {
        weft_conformance::vector_index(&index).await;

        // Opening the collection again checks its layout: the same
        // dimension is accepted, another is refused with a clear error.
        QdrantVectorIndex::connect(&url, key.clone(), &name, DIM)
            .await
            .expect("reopen with the same dimension");
        match QdrantVectorIndex::connect(&url, key.clone(), &name, DIM + 1).await {
            Err(QdrantIndexError::Layout { found, .. }) => {
                assert!(
                    found.contains(&DIM.to_string()),
                    "layout error says {found}"
                )
            }
            Err(other) => panic!("wrong dimension gave {other}"),
            Ok(_) => panic!("a collection of another dimension was accepted"),
        }
    })
    .catch_unwind()
    .await;
    let deleted = index.delete_collection().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    deleted.expect("delete the test collection");
}

#[tokio::test]
async fn an_unreachable_qdrant_is_a_clear_error() {
    let url = "http://127.0.0.1:9";
    let error = QdrantVectorIndex::connect(url, None, "weft-test", DIM)
        .await
        .err()
        .expect("nothing listens on port 9");
    let message = error.to_string();
    assert!(
        matches!(error, QdrantIndexError::Connect { .. }) && message.contains(url),
        "error names the server: {message}"
    );
}

/// With Qdrant's read-only key (what the query service holds): an index
/// opens for searching and searches; nothing can be created or written;
/// a collection that does not exist is `NotFound`, not created.
#[tokio::test]
async fn a_read_only_key_searches_and_creates_nothing_on_a_live_qdrant() {
    use weft_core::ports::{ErrorKind, VectorIndex};
    let Some((url, key)) = live() else { return };
    let Ok(read_key) = std::env::var("WEFT_TEST_QDRANT_READ_API_KEY") else {
        eprintln!("skipped: set WEFT_TEST_QDRANT_READ_API_KEY (Qdrant's read_only_api_key)");
        return;
    };
    let name = collection_name();
    let writer = QdrantVectorIndex::connect(&url, key.clone(), &name, DIM)
        .await
        .expect("the write key creates the collection");
    let outcome = AssertUnwindSafe(async {
        let chunks = weft_conformance::chunks();
        writer
            .upsert(
                &chunks,
                &weft_conformance::vectors(chunks.len()),
                &weft_conformance::keys(&chunks),
            )
            .await
            .expect("write");
        let reader = QdrantVectorIndex::open_for_search(&url, Some(read_key.clone()), &name, DIM)
            .await
            .expect("the read-only key opens it for searching");
        assert_eq!(reader.count().await.unwrap(), chunks.len() as u64);
        let error = reader
            .upsert(
                &chunks[..1],
                &weft_conformance::vectors(1),
                &weft_conformance::keys(&chunks[..1]),
            )
            .await
            .expect_err("the read-only key cannot write");
        assert_eq!(error.kind, ErrorKind::PermissionDenied, "{error}");
        let missing = format!("{name}-missing");
        let error = QdrantVectorIndex::open_for_search(&url, Some(read_key.clone()), &missing, DIM)
            .await
            .err()
            .expect("no such collection");
        assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
        let error = QdrantVectorIndex::connect(&url, Some(read_key.clone()), &missing, DIM)
            .await
            .err()
            .expect("the read-only key cannot create");
        assert_eq!(error.kind(), ErrorKind::PermissionDenied, "{error}");
    })
    .catch_unwind()
    .await;
    let deleted = writer.delete_collection().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    deleted.expect("delete the test collection");
}
