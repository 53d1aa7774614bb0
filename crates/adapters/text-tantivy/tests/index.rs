//! The text index over real chunks of the chunker's fixtures.

use std::path::Path;

use weft_chunking::{Chunker, ChunkingConfig};
use weft_core::retrieval::SearchFilter;
use weft_core::{Chunk, ContentType, DocumentId};
use weft_text_tantivy::{TantivyTextIndex, TextIndexError};

fn chunks_of(project: &str, name: &str) -> Vec<Chunk> {
    let mut config = ChunkingConfig::default();
    config.code.max_chars = 600;
    config.code.min_chars = 120;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../chunking/tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Chunker::new(config)
        .unwrap()
        .chunk_text(project, &format!("src/{name}"), &text)
        .chunks
}

fn indexed(dir: &Path) -> TantivyTextIndex {
    let index = TantivyTextIndex::open_or_create(dir).unwrap();
    for (project, name) in [
        ("limits", "RateLimiter.java"),
        ("cache", "store.ts"),
        ("docs", "guide.md"),
        ("cache", "graph.py"),
    ] {
        index.upsert(&chunks_of(project, name)).unwrap();
    }
    index.commit().unwrap();
    index
}

fn sections(hits: &[weft_core::retrieval::ScoredChunk]) -> Vec<&str> {
    hits.iter().map(|h| h.chunk.section.as_str()).collect()
}

#[test]
fn finds_chunks_by_words_and_identifier_parts() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    let all = SearchFilter::default();

    let hits = index.search("refill permits", &all, 5).unwrap();
    assert_eq!(
        hits[0].chunk.section,
        "RateLimiter.refill",
        "{:?}",
        sections(&hits)
    );
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));

    // camelCase parts and the whole identifier both find `tryAcquire`.
    for query in ["acquire try", "tryacquire", "tryAcquire"] {
        let hits = index.search(query, &all, 3).unwrap();
        assert_eq!(
            hits[0].chunk.section,
            "RateLimiter.tryAcquire",
            "{query}: {:?}",
            sections(&hits)
        );
    }
    // Markdown headings are searchable through the section breadcrumb.
    let hits = index.search("troubleshooting", &all, 3).unwrap();
    assert_eq!(hits[0].chunk.section, "Deploying weft > Troubleshooting");
    // Stored chunks come back whole.
    let chunk = &index.search("refill", &all, 1).unwrap()[0].chunk;
    assert!(chunk.content.contains("private void refill(long nowNanos)"));
    assert_eq!(chunk.content_type, ContentType::Code);
}

#[test]
fn filters_by_project_type_language_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    // Every chunk's path starts with src/, and the path is searched text.
    let only = |f: SearchFilter| index.search("src", &f, 100).unwrap();
    assert_eq!(only(SearchFilter::default()).len(), index.len() as usize);
    assert!(
        index
            .search("the of a", &SearchFilter::default(), 10)
            .unwrap()
            .is_empty(),
        "a query of stop words matches nothing"
    );

    let hits = only(SearchFilter {
        projects: vec!["cache".into()],
        ..Default::default()
    });
    assert!(!hits.is_empty() && hits.iter().all(|h| h.chunk.project == "cache"));
    let hits = only(SearchFilter {
        content_types: vec![ContentType::Prose],
        ..Default::default()
    });
    assert!(!hits.is_empty() && hits.iter().all(|h| h.chunk.language == "markdown"));
    let hits = only(SearchFilter {
        languages: vec!["python".into()],
        ..Default::default()
    });
    assert!(!hits.is_empty() && hits.iter().all(|h| h.chunk.uri == "src/graph.py"));
    let hits = only(SearchFilter {
        path_prefix: Some("src/RateLimiter.java".into()),
        ..Default::default()
    });
    assert!(!hits.is_empty() && hits.iter().all(|h| h.chunk.uri == "src/RateLimiter.java"));
    let hits = only(SearchFilter {
        path_prefix: Some("src/".into()),
        ..Default::default()
    });
    assert!(!hits.is_empty() && hits.iter().all(|h| h.chunk.uri.starts_with("src/")));
    // A path scope is whole path segments: "src/Rate" is no directory.
    assert!(
        only(SearchFilter {
            path_prefix: Some("src/Rate".into()),
            ..Default::default()
        })
        .is_empty()
    );
    assert!(
        only(SearchFilter {
            projects: vec!["nope".into()],
            ..Default::default()
        })
        .is_empty()
    );
}

/// A filter every chunk passes is left out of the query (tantivy then
/// skips blocks that cannot reach the top): the hits must be exactly those
/// of no filter, also once replaced chunks leave deleted ones behind, and a
/// filter that leaves any chunk out must still apply.
#[test]
fn a_filter_every_chunk_passes_changes_nothing_and_one_that_does_not_still_filters() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    // Replaced chunks stay in the segments as deleted documents.
    index.upsert(&chunks_of("cache", "store.ts")).unwrap();
    index.commit().unwrap();
    let ranked = |hits: Vec<weft_core::retrieval::ScoredChunk>| {
        hits.into_iter()
            .map(|h| (h.chunk.id().to_string(), h.score))
            .collect::<Vec<_>>()
    };
    for query in [
        "refill permits",
        "src",
        "cache store graph",
        "deploying weft",
    ] {
        let unfiltered = ranked(index.search(query, &SearchFilter::default(), 20).unwrap());
        assert!(!unfiltered.is_empty(), "{query}");
        for filter in [
            SearchFilter {
                projects: vec![
                    "limits".into(),
                    "cache".into(),
                    "docs".into(),
                    "cache".into(),
                ],
                ..Default::default()
            },
            SearchFilter {
                content_types: vec![ContentType::Code, ContentType::Prose],
                ..Default::default()
            },
        ] {
            let filtered = ranked(index.search(query, &filter, 20).unwrap());
            let ids = |r: &[(String, f32)]| r.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&filtered), ids(&unfiltered), "{query} {filter:?}");
        }
        let two = SearchFilter {
            projects: vec!["limits".into(), "docs".into()],
            ..Default::default()
        };
        let hits = index.search(query, &two, 20).unwrap();
        assert!(hits.iter().all(|h| h.chunk.project != "cache"), "{query}");
    }
    // Every chunk of a project deleted: its deleted documents still count
    // as chunks the filter would have to leave out, so it stays.
    index.delete_project("docs").unwrap();
    index.commit().unwrap();
    let live = SearchFilter {
        projects: vec!["limits".into(), "cache".into()],
        ..Default::default()
    };
    let hits = index.search("src", &live, 100).unwrap();
    assert_eq!(hits.len(), index.len() as usize);
}

#[test]
fn gets_neighbours_by_id_in_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    let chunks = chunks_of("limits", "RateLimiter.java");
    let wanted: Vec<_> = chunks[1..4].iter().map(Chunk::id).collect();
    let mut got = index.get(&wanted).unwrap();
    got.sort_by_key(|c| c.chunk_index);
    assert_eq!(got, chunks[1..4].to_vec());
    let missing = weft_core::ChunkId::new(&DocumentId::new("limits", "nope"), 0);
    assert_eq!(index.get(&[missing]).unwrap(), Vec::new());
}

#[test]
fn upserts_replace_and_surplus_chunks_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    let before = index.len();
    // Re-indexing the same chunks replaces them: no duplicates.
    index
        .upsert(&chunks_of("limits", "RateLimiter.java"))
        .unwrap();
    index.commit().unwrap();
    assert_eq!(index.len(), before);

    let chunks = chunks_of("limits", "RateLimiter.java");
    let doc = chunks[0].document_id.clone();
    index.delete_document_from(&doc, 2).unwrap();
    index.commit().unwrap();
    assert_eq!(index.len(), before - (chunks.len() as u64 - 2));
    let ids: Vec<_> = chunks.iter().map(Chunk::id).collect();
    assert_eq!(index.get(&ids).unwrap().len(), 2);

    index.delete_document_from(&doc, 0).unwrap();
    index.commit().unwrap();
    assert!(index.get(&ids).unwrap().is_empty());
}

#[test]
fn the_index_persists_and_a_corrupt_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let count = indexed(dir.path()).len();
    let reopened = TantivyTextIndex::open_or_create(dir.path()).unwrap();
    assert_eq!(reopened.len(), count);
    assert!(count > 10);
    drop(reopened);

    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("meta.json"), "{ this is not tantivy").unwrap();
    let format = weft_text_tantivy::TEXT_FORMAT.to_string();
    std::fs::write(bad.path().join("weft-text-format"), format).unwrap();
    let err = TantivyTextIndex::open_or_create(bad.path())
        .err()
        .expect("a corrupt index is refused");
    assert!(matches!(err, TextIndexError::Unreadable { .. }));
    assert!(
        err.to_string().contains(&bad.path().display().to_string()),
        "{err}"
    );
}

#[test]
fn queries_are_words_not_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    let hits = index
        .search("refill( AND \"unclosed", &SearchFilter::default(), 3)
        .unwrap();
    assert!(hits.iter().any(|h| h.chunk.section == "RateLimiter.refill"));
    assert!(
        index
            .search("  ?! ", &SearchFilter::default(), 3)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn words_match_their_inflections_and_identifier_parts() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    let all = SearchFilter::default();
    // The fixture's method is `refill`; "refilling" and "refills" stem to it.
    for query in ["refilling permits", "refills"] {
        let hits = index.search(query, &all, 3).unwrap();
        assert_eq!(
            hits.first().map(|h| h.chunk.section.as_str()),
            Some("RateLimiter.refill"),
            "{query}: {:?}",
            sections(&hits)
        );
    }
    // `tryAcquire` is found by "acquiring".
    let hits = index.search("trying acquiring", &all, 3).unwrap();
    assert_eq!(
        hits.first().map(|h| h.chunk.section.as_str()),
        Some("RateLimiter.tryAcquire"),
        "{:?}",
        sections(&hits)
    );
}

#[test]
fn an_index_records_its_format_and_another_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(TantivyTextIndex::format_in(dir.path()).unwrap(), None);
    drop(indexed(dir.path()));
    assert_eq!(
        TantivyTextIndex::format_in(dir.path()).unwrap(),
        Some(weft_text_tantivy::TEXT_FORMAT)
    );

    // An index from before formats were recorded has no marker: format 1.
    std::fs::remove_file(dir.path().join("weft-text-format")).unwrap();
    assert_eq!(TantivyTextIndex::format_in(dir.path()).unwrap(), Some(1));
    let err = TantivyTextIndex::open_or_create(dir.path())
        .err()
        .expect("an index in another format is refused");
    assert!(
        matches!(err, TextIndexError::OtherFormat { found: 1, .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("rebuilt"), "{message}");

    // A marker that is not a number is named.
    std::fs::write(dir.path().join("weft-text-format"), "two\n").unwrap();
    let err = TantivyTextIndex::format_in(dir.path()).unwrap_err();
    assert!(err.to_string().contains("weft-text-format"), "{err}");
}

/// A one-chunk document with the given section, type and text.
fn single_chunk(uri: &str, section: &str, content_type: ContentType, content: &str) -> Chunk {
    let code = content_type == ContentType::Code;
    Chunk {
        document_id: DocumentId::new("pool", uri),
        chunk_index: 0,
        total_chunks: 1,
        project: "pool".into(),
        uri: uri.into(),
        title: uri.into(),
        section: section.into(),
        content_type,
        language: if code { "java" } else { "markdown" }.into(),
        node_type: if code {
            "method_declaration"
        } else {
            "section"
        }
        .into(),
        node_name: code.then(|| "drain".into()),
        start_line: 1,
        end_line: content.lines().count() as u32,
        start_byte: 0,
        end_byte: content.len() as u64,
        content: content.into(),
        content_hash: weft_core::content_hash(content),
        is_index_doc: false,
        embedding_format: weft_core::EMBEDDING_FORMAT.into(),
        overlap_bytes: 0,
        outline: None,
    }
}

#[test]
fn words_of_a_code_symbol_and_its_declaration_count_more() {
    let dir = tempfile::tempdir().unwrap();
    let index = TantivyTextIndex::open_or_create(dir.path()).unwrap();
    // The same searched text (path, section, content) in both: only the
    // code chunk's section is a symbol path and its first line a declaration.
    let text = "void drain(Duration timeout) {\n    queue.clear();\n}";
    index
        .upsert(&[
            single_chunk("src/a.java", "Pool.drain", ContentType::Code, text),
            single_chunk("src/b.md", "Pool.drain", ContentType::Prose, text),
        ])
        .unwrap();
    index.commit().unwrap();
    let all = SearchFilter::default();
    // "drains": the symbol path; "timeouts": the declaration line.
    for query in ["drains", "timeouts"] {
        let hits = index.search(query, &all, 2).unwrap();
        let uris: Vec<&str> = hits.iter().map(|h| h.chunk.uri.as_str()).collect();
        assert_eq!(uris, ["src/a.java", "src/b.md"], "{query}");
        assert!(
            hits[0].score > hits[1].score * 1.1,
            "{query}: the symbol field adds SYMBOL_BOOST's share: {} vs {}",
            hits[0].score,
            hits[1].score
        );
    }
    // A word only in the body gets no symbol weight: both score alike.
    let hits = index.search("queue", &all, 2).unwrap();
    assert_eq!(hits.len(), 2);
    assert!((hits[0].score - hits[1].score).abs() < 1e-4, "{hits:?}");
}

#[test]
fn html_comments_in_markdown_are_not_searched_but_are_returned() {
    let dir = tempfile::tempdir().unwrap();
    let index = TantivyTextIndex::open_or_create(dir.path()).unwrap();
    let text = "## Pool\n\n<!-- YAML\nadded: v0.1.90\n-->\n\nEmpties the queue.\n";
    index
        .upsert(&[single_chunk(
            "docs/pool.md",
            "Pool",
            ContentType::Prose,
            text,
        )])
        .unwrap();
    index.commit().unwrap();
    let all = SearchFilter::default();
    assert!(index.search("yaml added", &all, 5).unwrap().is_empty());
    let hits = index.search("empties queue", &all, 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].chunk.content, text, "the content comes back whole");
}

#[test]
fn a_second_writer_is_told_who_holds_the_lock_not_to_remove_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let writer = indexed(dir.path());
    let err = TantivyTextIndex::open_or_create(dir.path())
        .err()
        .expect("one writer at a time");
    assert!(
        matches!(err, TextIndexError::Locked { ref holder, .. } if holder.as_ref().is_some_and(|h| h.is_this_process())),
        "{err:?}"
    );
    assert_eq!(err.kind(), weft_core::ports::ErrorKind::Unavailable);
    let message = weft_core::error_chain(&err);
    assert!(
        message.contains("is being written by this process"),
        "{message}"
    );
    assert!(!message.contains("remove"), "{message}");
    // A reader needs no lock, and the writer's index is intact.
    let reader = TantivyTextIndex::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.len(), writer.len());
    drop(writer);
    TantivyTextIndex::open_or_create(dir.path()).expect("the lock went with the writer");
}
