//! # weft-conformance
//!
//! One suite of assertions for every implementation of the
//! [`VectorIndex`] and [`TextIndex`] ports: the embedded stores (qdrant-edge,
//! tantivy) run it in their tests, and the server-backed ones (Qdrant,
//! Meilisearch) run the same when `WEFT_TEST_QDRANT_URL` /
//! `WEFT_TEST_MEILI_URL` point at real servers. Each function expects an
//! **empty** index (of [`DIM`] dimensions for vectors) and panics, naming
//! the failed property, on any difference.

#![warn(missing_docs)]

use weft_chunking::{Chunker, ChunkingConfig};
use weft_core::ports::{PortResult, TextIndex, VectorIndex};
use weft_core::retrieval::SearchFilter;
use weft_core::{Chunk, ChunkId, ContentType, DocumentId};

/// The vector dimension the suite writes.
pub const DIM: usize = 16;

/// Chunks of three small files in two projects: a Java file of several
/// chunks, a markdown guide, a README.
pub fn chunks() -> Vec<Chunk> {
    let chunker = Chunker::new(ChunkingConfig::default()).expect("default config");
    let java = "package a;\n\n/** Keeps recently used values in memory, evicting the oldest when full. */\n\
class Cache {\n  private final java.util.LinkedHashMap<String, String> entries = new java.util.LinkedHashMap<>();\n\n  \
/** Number of entries currently held by the cache. */\n  int size() {\n    return entries.size();\n  }\n}\n\n\
/** Loads values from the backing store when the cache misses, with retries. */\n\
class Loader {\n  private int attempts = 3;\n\n  \
/** Reads the value for the key, retrying on transient failures. */\n  String loadValue(String key) {\n    \
for (int i = 0; i < attempts; i++) {\n      System.out.println(key);\n    }\n    return key;\n  }\n}\n";
    let md = "# Guide\n\nIntro text.\n\n## Install\n\nRun the installer from a terminal.\n\n## Use\n\nCall it with a configuration file.\n";
    let mut out = Vec::new();
    for (project, uri, text) in [
        ("one", "src/cache/Cache.java", java),
        ("one", "docs/guide.md", md),
        ("two", "README.md", md),
    ] {
        let doc = chunker
            .chunk_bytes(project, uri, text.as_bytes())
            .expect("fixture chunks");
        out.extend(doc.chunks);
    }
    assert!(out.len() >= 6, "fixture gives {} chunks", out.len());
    out
}

/// A distinct unit vector per position: position i points along axis i.
pub fn vectors(n: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|i| {
            let mut v = [0.01f32; DIM];
            v[i % DIM] = 1.0;
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / norm).collect()
        })
        .collect()
}

/// The [`weft_core::embedding_key`]s of `chunks`, as an embedder tagged
/// `conformance` would key their vectors.
pub fn keys(chunks: &[Chunk]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| weft_core::embedding_key("conformance", &c.embedding_text()))
        .collect()
}

fn java_doc() -> DocumentId {
    DocumentId::new("one", "src/cache/Cache.java")
}

fn sorted(mut chunks: Vec<Chunk>) -> Vec<Chunk> {
    chunks.sort_by_key(|c| c.id());
    chunks
}

/// A named filter and the test of what it must return.
type FilterCase = (&'static str, SearchFilter, Box<dyn Fn(&Chunk) -> bool>);

/// The filters of the suite, with what each must return.
fn filter_cases() -> Vec<FilterCase> {
    vec![
        (
            "project",
            SearchFilter {
                projects: vec!["two".into()],
                ..Default::default()
            },
            Box::new(|c: &Chunk| c.project == "two"),
        ),
        (
            "content type",
            SearchFilter {
                content_types: vec![ContentType::Prose],
                ..Default::default()
            },
            Box::new(|c: &Chunk| c.content_type == ContentType::Prose),
        ),
        (
            "language",
            SearchFilter {
                languages: vec!["java".into()],
                ..Default::default()
            },
            Box::new(|c: &Chunk| c.language == "java"),
        ),
        (
            "path prefix (directory)",
            SearchFilter {
                path_prefix: Some("src/cache/".into()),
                ..Default::default()
            },
            Box::new(|c: &Chunk| c.uri == "src/cache/Cache.java"),
        ),
        (
            "path prefix (file)",
            SearchFilter {
                path_prefix: Some("docs/guide.md".into()),
                ..Default::default()
            },
            Box::new(|c: &Chunk| c.uri == "docs/guide.md"),
        ),
        (
            "two projects and a type",
            SearchFilter {
                projects: vec!["one".into(), "two".into()],
                content_types: vec![ContentType::Code],
                ..Default::default()
            },
            Box::new(|c: &Chunk| c.content_type == ContentType::Code),
        ),
    ]
}

/// Runs the vector-index suite on an empty `index` of [`DIM`] dimensions.
pub async fn vector_index(index: &dyn VectorIndex) {
    assert_eq!(index.dimension(), DIM, "dimension");
    assert_eq!(index.count().await.expect("count"), 0, "starts empty");
    let chunks = chunks();
    let vectors = vectors(chunks.len());
    let keys = keys(&chunks);
    index
        .upsert(&chunks, &vectors, &keys)
        .await
        .expect("upsert");
    index.commit().await.expect("commit");
    index.optimize().await.expect("optimize");
    assert_eq!(
        index.count().await.unwrap(),
        chunks.len() as u64,
        "count after upsert"
    );

    // Nearest first, chunks whole.
    let hits = index
        .search(&vectors[2], &SearchFilter::default(), 3)
        .await
        .expect("search");
    assert_eq!(hits.len(), 3, "limit");
    assert_eq!(hits[0].chunk, chunks[2], "nearest first, the chunk whole");
    assert!(hits[0].score > hits[1].score, "scores descend");

    // Every filter, alone and combined.
    for (name, filter, expect) in filter_cases() {
        let hits = index
            .search(&vectors[0], &filter, 50)
            .await
            .expect("search");
        let want = chunks.iter().filter(|c| expect(c)).count();
        assert_eq!(hits.len(), want, "filter {name}: hit count");
        assert!(hits.iter().all(|h| expect(&h.chunk)), "filter {name}");
    }
    let partial = SearchFilter {
        path_prefix: Some("src/cac".into()),
        ..Default::default()
    };
    assert!(
        index
            .search(&vectors[0], &partial, 50)
            .await
            .unwrap()
            .is_empty(),
        "a path prefix matches whole path segments only"
    );

    // Stored vectors come back by key, in one call; unknown keys are absent.
    let unknown = weft_core::embedding_key("another embedder", &chunks[0].embedding_text());
    let asked = vec![keys[0].clone(), keys[2].clone(), unknown.clone()];
    let found = index.vectors_by_key(&asked).await.expect("vectors by key");
    assert_eq!(
        found.len(),
        2,
        "two stored keys of three: {:?}",
        found.keys()
    );
    for i in [0, 2] {
        let got = &found[&keys[i]];
        let cosine: f32 = got.iter().zip(&vectors[i]).map(|(a, b)| a * b).sum();
        assert!(
            cosine > 0.999,
            "the vector stored under key {i}: cosine {cosine}"
        );
    }
    assert!(!found.contains_key(&unknown), "another embedder's key");
    assert!(index.vectors_by_key(&[]).await.expect("no keys").is_empty());
    // Many chunks may share a key: one vector for it.
    let shared: Vec<String> = vec![keys[1].clone(); chunks.len()];
    index
        .upsert(&chunks, &vectors, &shared)
        .await
        .expect("upsert");
    index.commit().await.expect("commit");
    let found = index
        .vectors_by_key(&shared[..1])
        .await
        .expect("shared key");
    assert_eq!(found.len(), 1, "one vector per key");
    index
        .upsert(&chunks, &vectors, &keys)
        .await
        .expect("upsert");
    index.commit().await.expect("commit");

    let again = index.upsert(&chunks, &vectors, &keys);
    stored_chunks(&Vectors(index), &chunks, again).await;

    // Mismatched input is refused.
    assert!(
        index.upsert(&chunks, &vectors[..1], &keys).await.is_err(),
        "chunks and vectors of different lengths"
    );
    assert!(
        index.upsert(&chunks, &vectors, &keys[..1]).await.is_err(),
        "chunks and keys of different lengths"
    );
}

/// Runs the text-index suite on an empty `index`.
pub async fn text_index(index: &dyn TextIndex) {
    assert_eq!(index.count().await.expect("count"), 0, "starts empty");
    let chunks = chunks();
    index.upsert(&chunks).await.expect("upsert");
    index.commit().await.expect("commit");
    assert_eq!(
        index.count().await.unwrap(),
        chunks.len() as u64,
        "count after upsert"
    );

    // Words find their chunk; identifiers are split into words.
    let hits = index
        .search("evicting the oldest", &SearchFilter::default(), 5)
        .await
        .expect("search");
    assert!(!hits.is_empty(), "a phrase of the content is found");
    assert_eq!(hits[0].chunk.uri, "src/cache/Cache.java", "best hit");
    assert!(
        hits[0].chunk.content.contains("evicting"),
        "the chunk whole"
    );
    let hits = index
        .search("load value retrying", &SearchFilter::default(), 5)
        .await
        .unwrap();
    assert!(
        hits.iter().any(|h| h.chunk.content.contains("loadValue")),
        "camelCase identifiers are found by their words"
    );
    assert!(
        index
            .search("zyzzyva", &SearchFilter::default(), 5)
            .await
            .unwrap()
            .is_empty(),
        "no match, no hits"
    );

    // Filters.
    for (name, filter, expect) in filter_cases() {
        let hits = index
            .search("installer cache entries value", &filter, 50)
            .await
            .unwrap();
        assert!(hits.iter().all(|h| expect(&h.chunk)), "filter {name}");
    }
    let readme = index
        .search(
            "installer",
            &SearchFilter {
                projects: vec!["two".into()],
                ..Default::default()
            },
            5,
        )
        .await
        .unwrap();
    assert!(
        !readme.is_empty() && readme.iter().all(|h| h.chunk.uri == "README.md"),
        "project filter with a match"
    );

    let again = index.upsert(&chunks);
    stored_chunks(&Texts(index), &chunks, again).await;
}

/// What both ports share: reading by id, counting and deleting.
#[async_trait::async_trait]
trait StoredChunks: Sync {
    async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>>;
    async fn count(&self) -> PortResult<u64>;
    async fn commit(&self) -> PortResult<()>;
    async fn delete_document_from(&self, document: &DocumentId, from: u32) -> PortResult<()>;
    async fn delete_project(&self, project: &str) -> PortResult<()>;
}

struct Vectors<'a>(&'a dyn VectorIndex);
struct Texts<'a>(&'a dyn TextIndex);

macro_rules! stored_chunks_of {
    ($wrapper:ident) => {
        #[async_trait::async_trait]
        impl StoredChunks for $wrapper<'_> {
            async fn get(&self, ids: &[ChunkId]) -> PortResult<Vec<Chunk>> {
                self.0.get(ids).await
            }
            async fn count(&self) -> PortResult<u64> {
                self.0.count().await
            }
            async fn commit(&self) -> PortResult<()> {
                self.0.commit().await
            }
            async fn delete_document_from(
                &self,
                document: &DocumentId,
                from: u32,
            ) -> PortResult<()> {
                self.0.delete_document_from(document, from).await
            }
            async fn delete_project(&self, project: &str) -> PortResult<()> {
                self.0.delete_project(project).await
            }
        }
    };
}
stored_chunks_of!(Vectors);
stored_chunks_of!(Texts);

/// Get, idempotent writes, surplus and project deletion, on an index
/// holding `chunks`; `upsert_again` writes the same chunks once more.
async fn stored_chunks(
    index: &dyn StoredChunks,
    chunks: &[Chunk],
    upsert_again: impl std::future::Future<Output = PortResult<()>>,
) {
    // Many ids in one call; unknown ids skipped.
    let doc = java_doc();
    let mut ids: Vec<ChunkId> = chunks.iter().map(Chunk::id).collect();
    ids.push(ChunkId::new(&doc, 999));
    let got = index.get(&ids).await.expect("get");
    assert_eq!(
        sorted(got),
        sorted(chunks.to_vec()),
        "get returns every stored chunk once"
    );

    // Idempotent writes: the same chunks again change nothing.
    upsert_again.await.expect("upsert again");
    index.commit().await.unwrap();
    assert_eq!(
        index.count().await.unwrap(),
        chunks.len() as u64,
        "upsert is idempotent"
    );

    // Surplus deletion: chunks of the Java file from index 1 on.
    let in_doc = chunks.iter().filter(|c| c.document_id == doc).count();
    assert!(in_doc >= 2, "the Java file has several chunks");
    index
        .delete_document_from(&doc, 1)
        .await
        .expect("delete surplus");
    index.commit().await.unwrap();
    let left = index.get(&ids).await.unwrap();
    assert_eq!(left.len(), chunks.len() - (in_doc - 1), "surplus deleted");
    assert!(
        left.iter()
            .any(|c| c.document_id == doc && c.chunk_index == 0),
        "chunk 0 stays"
    );

    // Project deletion.
    index.delete_project("one").await.expect("delete project");
    index.commit().await.unwrap();
    let left = index.get(&ids).await.unwrap();
    assert!(
        !left.is_empty() && left.iter().all(|c| c.project == "two"),
        "project deleted"
    );
    assert_eq!(
        index.count().await.unwrap(),
        left.len() as u64,
        "count after deletions"
    );
}
