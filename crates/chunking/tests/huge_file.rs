//! A 50 MB file neither panics nor blows memory. Its own test binary, so
//! that the peak memory it reads is this test's alone.

use weft_chunking::{Chunker, ChunkingConfig};

mod common;
use common::peak_rss_mib;

#[test]
fn fifty_megabytes_of_code_and_markdown() {
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    let method =
        "  /** Returns the sum. */\n  public int add(int a, int b) {\n    return a + b;\n  }\n\n";
    let mut java = String::from("class Big {\n");
    while java.len() < 50 * 1024 * 1024 {
        java.push_str(method);
    }
    java.push_str("}\n");
    let doc = chunker
        .chunk_bytes("huge", "Big.java", java.as_bytes())
        .unwrap();
    weft_core::invariants::check(&java, &doc.chunks).unwrap();
    assert!(
        doc.warnings.iter().any(|w| w.contains("max_parse_bytes")),
        "{:?}",
        doc.warnings
    );
    let chunks = doc.chunks.len();
    drop(doc);
    drop(java);

    let section = "## Section\n\nSome prose about the section, long enough to matter.\n\n```\ncode();\n```\n\n";
    let mut md = String::from("# Huge\n\n");
    while md.len() < 50 * 1024 * 1024 {
        md.push_str(section);
    }
    let doc = chunker
        .chunk_bytes("huge", "huge.md", md.as_bytes())
        .unwrap();
    weft_core::invariants::check(&md, &doc.chunks).unwrap();

    if let Some(peak) = peak_rss_mib() {
        eprintln!(
            "50 MB java: {chunks} chunks; 50 MB markdown: {} chunks; peak RSS {peak} MiB",
            doc.chunks.len()
        );
        // Text, chunks (a copy of the text plus overlap) and metadata: a few
        // times the file, never unbounded.
        assert!(peak < 1024, "peak RSS {peak} MiB");
    }
}
