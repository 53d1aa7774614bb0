//! The shared port conformance suite against a real Meilisearch server.
//!
//! Runs when `WEFT_TEST_MEILI_URL` names a server (e.g.
//! `http://localhost:7700`), with `WEFT_TEST_MEILI_API_KEY` if it needs
//! one. Each run uses an index of its own and deletes it after. Without
//! the variable the live test says it was skipped; the test of an
//! unreachable server always runs.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use weft_text_meili::{MeiliIndexError, MeiliTextIndex};

#[tokio::test]
async fn the_text_index_conformance_suite_passes_on_a_live_meilisearch() {
    let url = match std::env::var("WEFT_TEST_MEILI_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            eprintln!(
                "skipped: set WEFT_TEST_MEILI_URL=http://HOST:7700 to run this against a real Meilisearch"
            );
            return;
        }
    };
    let key = std::env::var("WEFT_TEST_MEILI_API_KEY").ok();
    let uid = format!("weft-test-{}", uuid::Uuid::new_v4());
    let index = MeiliTextIndex::connect(&url, key.clone(), &uid)
        .await
        .unwrap_or_else(|e| panic!("connect to Meilisearch at {url}: {e}"));
    let outcome = AssertUnwindSafe(async {
        weft_conformance::text_index(&index).await;
        // Opening it again keeps the documents and settings.
        let again = MeiliTextIndex::connect(&url, key.clone(), &uid)
            .await
            .expect("reopen the index");
        use weft_core::ports::TextIndex;
        assert_eq!(
            again.count().await.expect("count"),
            index.count().await.expect("count"),
            "reopening keeps the documents"
        );
    })
    .catch_unwind()
    .await;
    let deleted = index.delete_index().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    deleted.expect("delete the test index");
}

#[tokio::test]
async fn an_unreachable_meilisearch_is_a_clear_error() {
    let url = "http://127.0.0.1:9";
    let error = MeiliTextIndex::connect(url, None, "weft-test")
        .await
        .err()
        .expect("nothing listens on port 9");
    let message = error.to_string();
    assert!(
        matches!(error, MeiliIndexError::Request { .. }) && message.contains(url),
        "error names the server: {message}"
    );
}
