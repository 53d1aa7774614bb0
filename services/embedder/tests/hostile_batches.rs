//! Hostile chunk-batch messages against an embedder worker on a real
//! nats-server, with the real model and embedded stores: each goes to the
//! dead-letter stream with its reason, nothing of them is written, and the
//! worker goes on to index the good batch published after them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use prost::Message as _;
use weft_core::ports::Catalog as _;
use weft_core::{DocumentId, content_hash};
use weft_nats::testing::{NatsServer, dead_letters};
use weft_nats::{Jet, chunks_subject};
use weft_proto::v1;

const PROJECT: &str = "demo";
const GUIDE: &str = "# Guide\n\nHow to run it.\n\n## Install\n\nUnpack the archive into your home directory.\n\n## Logging\n\nLogs go to standard error.\n";

fn model_dir() -> PathBuf {
    std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(weft_config::default_model_dir)
}

/// The batch the chunker makes of `text` at `uri`.
fn batch_of(uri: &str, text: &str) -> v1::ChunkBatch {
    let chunker = weft_chunking::Chunker::new(Default::default()).unwrap();
    let chunked = chunker
        .chunk_document(PROJECT, uri, "", text.as_bytes())
        .unwrap();
    let total = chunked.chunks.len() as u32;
    v1::ChunkBatch {
        project: PROJECT.into(),
        document_id: DocumentId::new(PROJECT, uri).as_str().into(),
        uri: uri.into(),
        total_chunks: total,
        chunks: chunked.chunks.into_iter().map(Into::into).collect(),
        part: 1,
        parts: 1,
        content_hash: content_hash(text),
        version: 1,
        chunker: chunker.fingerprint().to_owned(),
        ..Default::default()
    }
}

/// `batch` with every chunk's identity changed to `uri` (and its id).
fn moved_to(mut batch: v1::ChunkBatch, uri: &str) -> v1::ChunkBatch {
    let id = DocumentId::new(PROJECT, uri).as_str().to_owned();
    batch.uri = uri.into();
    batch.document_id = id.clone();
    for c in &mut batch.chunks {
        c.uri = uri.into();
        c.document_id = id.clone();
    }
    batch
}

fn subject(batch: &v1::ChunkBatch) -> String {
    chunks_subject(0, PROJECT, &batch.document_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_batches_are_dead_lettered_and_the_worker_goes_on() {
    let server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();
    let data = tempfile::tempdir().unwrap();

    let good = batch_of("guide.md", GUIDE);
    assert!(good.chunks.len() >= 2, "{good:?}");
    let full = good.encode_to_vec();

    let traversal = moved_to(batch_of("a.md", GUIDE), "docs/../../../etc/cron.d/x");
    let mut foreign = batch_of("b.md", GUIDE);
    foreign.chunks[1].document_id = DocumentId::new(PROJECT, "other.md").as_str().into();
    let mut past_total = batch_of("c.md", GUIDE);
    past_total.chunks[0].chunk_index = past_total.total_chunks;
    let mut bad_range = batch_of("d.md", GUIDE);
    bad_range.chunks[0].end_byte += 1000;
    let mut bad_hash = batch_of("e.md", GUIDE);
    bad_hash.chunks[1].content_hash = content_hash("not this");
    let bad_part = v1::ChunkBatch {
        part: 3,
        parts: 2,
        ..batch_of("f.md", GUIDE)
    };
    let mut reordered = batch_of("g.md", GUIDE);
    reordered.chunks.swap(0, 1);
    let deleted_with_chunks = v1::ChunkBatch {
        deleted: true,
        ..batch_of("h.md", GUIDE)
    };
    let mut control = moved_to(batch_of("i.md", GUIDE), "i.md");
    control.chunks[0].language = "markdown\u{1b}]0;pwned\u{7}".into();
    let elsewhere = batch_of("j.md", GUIDE);

    let hostile: Vec<(String, Vec<u8>, &str)> = vec![
        (
            chunks_subject(0, PROJECT, "00000000000000c1"),
            vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
            "not a weft.v1.ChunkBatch",
        ),
        (
            subject(&good),
            full[..full.len() - 7].to_vec(),
            "not a weft.v1.ChunkBatch",
        ),
        (
            subject(&traversal),
            traversal.encode_to_vec(),
            "weft.v1.ChunkBatch.uri: \"docs/../../../etc/cron.d/x\" has a \"..\" path component",
        ),
        (
            subject(&foreign),
            foreign.encode_to_vec(),
            "weft.v1.Chunk.document_id: chunk 1",
        ),
        (
            subject(&past_total),
            past_total.encode_to_vec(),
            "weft.v1.Chunk.chunk_index",
        ),
        (
            subject(&bad_range),
            bad_range.encode_to_vec(),
            "weft.v1.Chunk.end_byte",
        ),
        (
            subject(&bad_hash),
            bad_hash.encode_to_vec(),
            "weft.v1.Chunk.content_hash: chunk 1",
        ),
        (
            subject(&bad_part),
            bad_part.encode_to_vec(),
            "weft.v1.ChunkBatch.part: part 3 of 2",
        ),
        (
            subject(&reordered),
            reordered.encode_to_vec(),
            "weft.v1.Chunk.chunk_index: chunk 0: comes after chunk 1",
        ),
        (
            subject(&deleted_with_chunks),
            deleted_with_chunks.encode_to_vec(),
            "a deleted document has no chunks",
        ),
        (
            subject(&control),
            control.encode_to_vec(),
            "weft.v1.Chunk.language: chunk 0: holds a control character (U+001B)",
        ),
        (
            chunks_subject(0, PROJECT, "00000000000000c2"),
            elsewhere.encode_to_vec(),
            "belong on weft.chunks.g0.demo.",
        ),
    ];
    for (subject, payload, _) in &hostile {
        jet.publish(subject.clone(), HeaderMap::new(), payload.clone().into())
            .await
            .unwrap();
    }
    jet.publish(subject(&good), HeaderMap::new(), full.into())
        .await
        .unwrap();

    let config = weft_config::WeftConfig::default();
    let locations =
        weft_config::Locations::resolve(&config, Some(data.path().to_owned()), Some(model_dir()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let jet = jet.clone();
        tokio::spawn(async move {
            weft_embedder::run(jet, &config, &locations, async {
                let _ = stopped.await;
            })
            .await
        })
    };

    let letters = dead_letters(&jet, hostile.len(), Duration::from_secs(120)).await;
    let described: Vec<String> = letters
        .iter()
        .map(|l| format!("{} <- {}: {}", l.subject, l.original_subject, l.error))
        .collect();
    assert_eq!(letters.len(), hostile.len(), "{described:#?}");
    for ((subject, payload, says), letter) in hostile.iter().zip(&letters) {
        assert_eq!(&letter.original_subject, subject, "{described:#?}");
        assert_eq!(letter.stage, "embedder");
        assert!(
            letter.error.contains(says),
            "{subject}: {:?} should say {says:?}",
            letter.error
        );
        assert_eq!(letter.payload.as_ref(), payload.as_slice());
        // Invalid input: dead-lettered at its first delivery, not retried.
        assert_eq!(letter.kind, "invalid", "{subject}");
        assert_eq!(letter.deliveries, "1", "{subject}");
    }

    // The good batch after them is indexed; nothing of theirs is.
    let catalog = jet.catalog().await.unwrap();
    let good_id = DocumentId::parse(&good.document_id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let record = loop {
        if let Some(r) = catalog.document(&good_id).await.unwrap() {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "the good batch was not indexed after the hostile ones"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(record.chunk_count, good.total_chunks);
    assert_eq!(record.uri, "guide.md");
    let recorded: Vec<String> = catalog
        .documents(None)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert_eq!(recorded, vec!["guide.md".to_owned()]);

    stop.send(()).unwrap();
    let stats = worker.await.unwrap().unwrap();
    assert_eq!(stats.done, 1, "{stats}");
    assert_eq!(stats.dead_lettered, hostile.len() as u64, "{stats}");
    assert_eq!(stats.retried, 0, "{stats}");

    // What was written is searchable in the stores the worker wrote.
    let stores = weft_wiring::DataDir::new(data.path())
        .open_existing()
        .unwrap();
    assert_eq!(
        weft_core::ports::VectorIndex::count(&*stores.vectors)
            .await
            .unwrap(),
        u64::from(good.total_chunks)
    );
}
