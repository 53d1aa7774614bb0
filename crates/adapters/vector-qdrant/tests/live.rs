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
