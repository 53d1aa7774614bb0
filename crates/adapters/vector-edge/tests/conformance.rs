//! The shared port conformance suite on the embedded qdrant-edge index.

#[tokio::test]
async fn the_vector_index_conformance_suite_passes() {
    let dir = tempfile::tempdir().unwrap();
    let index =
        weft_vector_edge::EdgeVectorIndex::open_or_create(dir.path(), weft_conformance::DIM)
            .unwrap();
    weft_conformance::vector_index(&index).await;
}
