//! The qdrant-edge vector index through the [`VectorIndex`] port: writes,
//! nearest-neighbour order, every filter, batched get, surplus and project
//! deletion, persistence, and the errors for a foreign or broken directory.

use weft_core::ports::VectorIndex;
use weft_core::retrieval::SearchFilter;
use weft_core::{Chunk, ChunkId, ContentType};
use weft_vector_edge::{EdgeVectorIndex, VectorIndexError};

// The fixture of the shared conformance suite (which this index also
// passes, tests/conformance.rs); these tests add what is edge-specific.
use weft_conformance::{DIM, chunks, keys, vectors};

async fn loaded(dir: &std::path::Path) -> (EdgeVectorIndex, Vec<Chunk>) {
    let index = EdgeVectorIndex::open_or_create(dir, DIM).expect("create");
    let chunks = chunks();
    index
        .upsert(&chunks, &vectors(chunks.len()), &keys(&chunks))
        .await
        .expect("upsert");
    index.commit().await.expect("commit");
    index.optimize().await.expect("optimize");
    (index, chunks)
}

#[tokio::test]
async fn searchable_after_commit_and_the_same_after_optimize() {
    let dir = tempfile::tempdir().unwrap();
    let index = EdgeVectorIndex::open_or_create(dir.path(), DIM).expect("create");
    let chunks = chunks();
    let vectors = vectors(chunks.len());
    index
        .upsert(&chunks, &vectors, &keys(&chunks))
        .await
        .expect("upsert");
    index.commit().await.expect("commit");
    let ids = |hits: Vec<weft_core::retrieval::ScoredChunk>| {
        hits.into_iter().map(|h| h.chunk.id()).collect::<Vec<_>>()
    };
    let before = ids(index
        .search(&vectors[1], &SearchFilter::default(), 4)
        .await
        .unwrap());
    assert_eq!(before.first(), Some(&chunks[1].id()));
    index.optimize().await.expect("optimize");
    let after = ids(index
        .search(&vectors[1], &SearchFilter::default(), 4)
        .await
        .unwrap());
    assert_eq!(before, after);
}

#[tokio::test]
async fn nearest_first_with_whole_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let (index, chunks) = loaded(dir.path()).await;
    assert_eq!(index.count().await.unwrap(), chunks.len() as u64);
    let query = &vectors(chunks.len())[2];
    let hits = index
        .search(query, &SearchFilter::default(), 3)
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0].chunk, chunks[2], "the chunk comes back whole");
    assert!(hits[0].score > 0.99 && hits[1].score < hits[0].score);
}

#[tokio::test]
async fn every_filter_applies() {
    let dir = tempfile::tempdir().unwrap();
    let (index, chunks) = loaded(dir.path()).await;
    let query = &vectors(chunks.len())[0];
    let search = |filter: SearchFilter| {
        let index = index.clone();
        let query = query.clone();
        async move { index.search(&query, &filter, 50).await.unwrap() }
    };
    let all = search(SearchFilter::default()).await;
    assert_eq!(all.len(), chunks.len());
    let two = search(SearchFilter {
        projects: vec!["two".into()],
        ..Default::default()
    })
    .await;
    assert!(!two.is_empty() && two.iter().all(|h| h.chunk.project == "two"));
    let prose = search(SearchFilter {
        content_types: vec![ContentType::Prose],
        ..Default::default()
    })
    .await;
    assert!(
        !prose.is_empty()
            && prose
                .iter()
                .all(|h| h.chunk.content_type == ContentType::Prose)
    );
    let java = search(SearchFilter {
        languages: vec!["java".into()],
        ..Default::default()
    })
    .await;
    assert!(!java.is_empty() && java.iter().all(|h| h.chunk.language == "java"));
    for scope in ["src", "src/cache/", "src/cache/Cache.java"] {
        let under = search(SearchFilter {
            path_prefix: Some(scope.into()),
            ..Default::default()
        })
        .await;
        assert!(
            !under.is_empty() && under.iter().all(|h| h.chunk.uri == "src/cache/Cache.java"),
            "scope {scope}"
        );
    }
    assert!(
        search(SearchFilter {
            path_prefix: Some("src/cac".into()),
            ..Default::default()
        })
        .await
        .is_empty()
    );
}

#[tokio::test]
async fn get_fetches_many_ids_in_one_call_and_skips_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (index, chunks) = loaded(dir.path()).await;
    let mut ids: Vec<ChunkId> = chunks.iter().map(Chunk::id).collect();
    ids.push(ChunkId::new(&chunks[0].document_id, 999));
    let mut got = index.get(&ids).await.unwrap();
    got.sort_by_key(|c| (c.uri.clone(), c.project.clone(), c.chunk_index));
    let mut want = chunks.clone();
    want.sort_by_key(|c| (c.uri.clone(), c.project.clone(), c.chunk_index));
    assert_eq!(got, want);
}

#[tokio::test]
async fn surplus_and_project_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let (index, chunks) = loaded(dir.path()).await;
    let doc = &chunks[0].document_id;
    let in_doc = chunks.iter().filter(|c| &c.document_id == doc).count();
    assert!(in_doc >= 2, "the Java file has several chunks");
    index.delete_document_from(doc, 1).await.unwrap();
    let left = index
        .get(&chunks.iter().map(Chunk::id).collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(left.len(), chunks.len() - (in_doc - 1));
    assert!(
        left.iter()
            .any(|c| &c.document_id == doc && c.chunk_index == 0)
    );
    assert!(
        !left
            .iter()
            .any(|c| &c.document_id == doc && c.chunk_index >= 1)
    );
    index.delete_project("one").await.unwrap();
    let left = index
        .get(&chunks.iter().map(Chunk::id).collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(!left.is_empty() && left.iter().all(|c| c.project == "two"));
    assert_eq!(index.count().await.unwrap(), left.len() as u64);
}

#[tokio::test]
async fn data_survives_reopening_and_dimension_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let n = {
        let (index, chunks) = loaded(dir.path()).await;
        drop(index);
        chunks.len()
    };
    let index = EdgeVectorIndex::open_or_create(dir.path(), DIM).unwrap();
    assert_eq!(index.count().await.unwrap(), n as u64);
    drop(index);
    let err = EdgeVectorIndex::open_or_create(dir.path(), DIM * 2).unwrap_err();
    assert!(
        matches!(err, VectorIndexError::DimensionMismatch { found: DIM, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("another model"), "{err}");
}

#[tokio::test]
async fn a_broken_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("edge_config.json"), b"{ not json").unwrap();
    let err = EdgeVectorIndex::open_or_create(dir.path(), DIM).unwrap_err();
    assert!(matches!(err, VectorIndexError::Unreadable { .. }), "{err}");
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn mismatched_vectors_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = EdgeVectorIndex::open_or_create(dir.path(), DIM).unwrap();
    let chunks = chunks();
    assert!(
        index
            .upsert(&chunks, &vectors(1), &keys(&chunks))
            .await
            .is_err()
    );
    assert!(
        index
            .upsert(&chunks[..1], &[vec![1.0; DIM + 1]], &keys(&chunks[..1]))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_second_writer_is_told_who_holds_the_shard_not_to_remove_it() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, chunks) = loaded(dir.path()).await;
    let Err(err) = EdgeVectorIndex::open_or_create(dir.path(), DIM) else {
        panic!("one writer at a time");
    };
    assert!(
        matches!(err, VectorIndexError::Locked { ref holder, .. } if holder.as_ref().is_some_and(|h| h.is_this_process())),
        "{err:?}"
    );
    assert_eq!(err.kind(), weft_core::ports::ErrorKind::Unavailable);
    let message = weft_core::error_chain(&err);
    assert!(
        message.contains("is being written by this process"),
        "{message}"
    );
    assert!(!message.contains("remove"), "{message}");
    // A reader needs no lock, and sees what the writer committed.
    let reader = EdgeVectorIndex::open_read_only(dir.path(), DIM).unwrap();
    assert_eq!(reader.count().await.unwrap(), chunks.len() as u64);
    drop(reader);
    drop(writer);
    EdgeVectorIndex::open_or_create(dir.path(), DIM).expect("the lock went with the writer");
}
