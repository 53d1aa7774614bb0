//! The shared port conformance suite on the embedded tantivy index.

#[tokio::test]
async fn the_text_index_conformance_suite_passes() {
    let dir = tempfile::tempdir().unwrap();
    let index = weft_text_tantivy::TantivyTextIndex::open_or_create(dir.path()).unwrap();
    weft_conformance::text_index(&index).await;
}
