//! Hostile document messages against a chunker worker on a real
//! nats-server: each goes to the dead-letter stream with its reason, and the
//! worker goes on to chunk the good document published after them.

use std::time::Duration;

use async_nats::HeaderMap;
use futures::StreamExt;
use prost::Message as _;
use weft_core::{DocumentId, content_hash};
use weft_nats::testing::{NatsServer, dead_letters};
use weft_nats::{Jet, chunks_subject, docs_subject};
use weft_proto::v1;

const PROJECT: &str = "demo";
const GUIDE: &str = "# Guide\n\nHow to run it.\n\n## Install\n\nUnpack the archive.\n";

fn document(uri: &str, text: &str) -> v1::Document {
    v1::Document {
        project: PROJECT.into(),
        uri: uri.into(),
        document_id: DocumentId::new(PROJECT, uri).as_str().into(),
        content: Some(text.as_bytes().to_vec()),
        content_hash: content_hash(text),
        ..Default::default()
    }
}

/// A subject of its own for each hostile message (the documents stream
/// keeps one message per subject).
fn subject_of(i: usize) -> String {
    docs_subject(0, PROJECT, &format!("{i:016x}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_documents_are_dead_lettered_and_the_worker_goes_on() {
    let server = NatsServer::start();
    let jet = Jet::connect(&server.config()).await.unwrap();

    // What a crawler could never publish, and what a broken or hostile
    // publisher could, each with what its dead letter must say.
    let good = document("guide.md", GUIDE);
    let full = good.encode_to_vec();
    // Cut inside the content: no longer protobuf.
    let cut_in_content = full[..full.len() / 2].to_vec();
    // Cut after the content, before its hash: decodes, but the hash is gone.
    let without_hash = v1::Document {
        content_hash: String::new(),
        ..good.clone()
    }
    .encode_to_vec();
    assert!(full.starts_with(&without_hash));
    let traversal = document("../../etc/passwd", "root:x:0:0");
    let absolute = document("/etc/passwd", "root:x:0:0");
    let nul = v1::Document {
        uri: "a\0b.md".into(),
        ..document("a.md", GUIDE)
    };
    let newline_project = v1::Document {
        project: "demo\nforged log line".into(),
        ..document("b.md", GUIDE)
    };
    let wrong_id = v1::Document {
        document_id: "0123456789abcdef".into(),
        ..document("c.md", GUIDE)
    };
    let altered = v1::Document {
        content: Some(b"# Guide\n\nSomething else entirely.\n".to_vec()),
        ..document("d.md", GUIDE)
    };
    let elsewhere = document("e.md", GUIDE);
    let hostile: Vec<(String, Vec<u8>, &str)> = vec![
        (
            subject_of(1),
            b"\xff\xfe not protobuf at all".to_vec(),
            "not a weft.v1.Document",
        ),
        (subject_of(2), cut_in_content, "not a weft.v1.Document"),
        (subject_of(3), without_hash, "weft.v1.Document.content_hash"),
        (
            docs_subject(0, PROJECT, traversal.document_id.as_str()),
            traversal.encode_to_vec(),
            "weft.v1.Document.uri: \"../../etc/passwd\" has a \"..\" path component",
        ),
        (
            docs_subject(0, PROJECT, absolute.document_id.as_str()),
            absolute.encode_to_vec(),
            "weft.v1.Document.uri: \"/etc/passwd\" is an absolute path",
        ),
        (
            subject_of(4),
            nul.encode_to_vec(),
            "uri: holds a control character (U+0000)",
        ),
        (
            subject_of(5),
            newline_project.encode_to_vec(),
            "project: holds a control character (U+000A)",
        ),
        (
            subject_of(6),
            wrong_id.encode_to_vec(),
            "document_id: \"0123456789abcdef\" is not the id",
        ),
        (subject_of(7), altered.encode_to_vec(), "content_hash"),
        // A valid document on another document's subject.
        (
            subject_of(8),
            elsewhere.encode_to_vec(),
            "belong on weft.docs.g0.demo.",
        ),
    ];
    for (subject, payload, _) in &hostile {
        jet.publish(subject.clone(), HeaderMap::new(), payload.clone().into())
            .await
            .unwrap();
    }
    let good_subject = docs_subject(0, PROJECT, &good.document_id);
    jet.publish(good_subject.clone(), HeaderMap::new(), full.into())
        .await
        .unwrap();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let jet = jet.clone();
        tokio::spawn(async move {
            weft_chunker::run(jet, &weft_config::WeftConfig::default(), async {
                let _ = stopped.await;
            })
            .await
        })
    };

    // Every hostile message is dead-lettered with its reason, in order.
    let letters = dead_letters(&jet, hostile.len(), Duration::from_secs(60)).await;
    let described: Vec<String> = letters
        .iter()
        .map(|l| format!("{} <- {}: {}", l.subject, l.original_subject, l.error))
        .collect();
    assert_eq!(letters.len(), hostile.len(), "{described:#?}");
    for ((subject, payload, says), letter) in hostile.iter().zip(&letters) {
        assert_eq!(&letter.original_subject, subject, "{described:#?}");
        assert_eq!(letter.stage, "chunker");
        assert!(
            letter.subject.starts_with("weft.dead.chunker.docs."),
            "{}",
            letter.subject
        );
        assert!(
            letter.error.contains(says),
            "{subject}: {:?} should say {says:?}",
            letter.error
        );
        assert!(!letter.error.contains('\n'), "one line: {:?}", letter.error);
        assert_eq!(
            letter.payload.as_ref(),
            payload.as_slice(),
            "kept as it came"
        );
    }

    // The good document after them was chunked.
    let chunks = jet
        .jetstream()
        .get_stream(&jet.config().chunks_stream)
        .await
        .unwrap()
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            filter_subject: chunks_subject(0, PROJECT, &good.document_id),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut messages = chunks
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(30))
        .messages()
        .await
        .unwrap();
    let message = messages
        .next()
        .await
        .expect("the good document's chunks")
        .unwrap();
    let batch = v1::ChunkBatch::decode(message.payload.as_ref()).unwrap();
    let (id, chunks) = weft_proto::pipeline::check_chunk_batch(&batch).unwrap();
    assert_eq!(id.as_str(), good.document_id);
    assert!(!chunks.is_empty());
    assert!(
        chunks
            .iter()
            .any(|c| c.content.contains("Unpack the archive"))
    );

    stop.send(()).unwrap();
    let stats = worker.await.unwrap().unwrap();
    assert_eq!(stats.done, 1, "{stats}");
    assert_eq!(stats.dead_lettered, hostile.len() as u64, "{stats}");
    assert_eq!(stats.retried, 0, "{stats}");
}
